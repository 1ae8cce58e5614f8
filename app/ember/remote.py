"""A small client for OpenAI-compatible endpoints (`ember serve`, llama-server, vLLM...):
list models, stream a chat or a completion, with errors a person can read (refused,
unauthorized, timeout). Standard library only; it talks to the address it is given and
nowhere else."""
from __future__ import annotations

import http.client
import json
import socket
import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from urllib.parse import urlsplit

__all__ = ["RemoteEndpoint", "RemoteError", "RemoteStream"]


class RemoteError(Exception):
    """kind: "refused" (nothing answers, or no such host), "unauthorized" (401/403),
    "timeout", "http" (another error status), "protocol" (an answer that is not the API)."""

    def __init__(self, kind: str, message: str, status: int | None = None):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.status = status


@dataclass
class RemoteStream:
    """Text pieces as they arrive; finish_reason and usage once the stream is over.
    cancel() (from any thread) drops the connection, which makes the server stop."""

    _conn: http.client.HTTPConnection
    _response: http.client.HTTPResponse
    _chat: bool
    finish_reason: str | None = None
    usage: dict | None = None
    _cancelled: threading.Event = field(default_factory=threading.Event)

    def __iter__(self) -> Iterator[str]:
        try:
            for data in _sse_data(self._response):
                if data == "[DONE]":
                    return
                try:
                    event = json.loads(data)
                except ValueError:
                    raise RemoteError("protocol", f"the server sent something that is not "
                                                  f"JSON in its stream: {data[:80]!r}") from None
                if "error" in event:
                    raise RemoteError("http", _message(event, "the server reported an error"))
                if event.get("usage"):
                    self.usage = event["usage"]
                for choice in event.get("choices") or []:
                    text = (choice.get("delta") or {}).get("content") if self._chat \
                        else choice.get("text")
                    if choice.get("finish_reason"):
                        self.finish_reason = choice["finish_reason"]
                    if text:
                        yield text
        except (OSError, http.client.HTTPException) as e:
            if self._cancelled.is_set():
                return
            raise _transport_error(e, "the connection broke while the reply streamed") from None
        finally:
            self.close()

    def cancel(self) -> None:
        self._cancelled.set()
        sock = self._conn.sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self) -> None:
        self._conn.close()


def _sse_data(response) -> Iterator[str]:
    """The data of each server-sent event (multi-line data joined, comments skipped)."""
    lines: list[str] = []
    while True:
        raw = response.readline()
        if not raw:
            if lines:
                yield "\n".join(lines)
            return
        line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
        if not line:
            if lines:
                yield "\n".join(lines)
                lines = []
        elif line.startswith("data:"):
            lines.append(line[5:].lstrip(" ") if line.startswith("data: ") else line[5:])


def _message(body, fallback: str) -> str:
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            return err["message"]
        if isinstance(err, str):
            return err
    return fallback


def _transport_error(e: BaseException, doing: str) -> RemoteError:
    if isinstance(e, (socket.timeout, TimeoutError)):
        return RemoteError("timeout", f"The endpoint did not answer in time ({doing}).")
    if isinstance(e, ConnectionRefusedError):
        return RemoteError("refused", "Nothing answers at that address (connection refused).")
    if isinstance(e, socket.gaierror):
        return RemoteError("refused", f"The host name could not be resolved ({e.strerror}).")
    if isinstance(e, ssl.SSLError):
        return RemoteError("refused", f"The secure connection failed: {e.reason or e}.")
    return RemoteError("refused", f"The connection failed ({doing}): {e}.")


class RemoteEndpoint:
    """An OpenAI-compatible server at base_url ("http://127.0.0.1:8080" or ".../v1")."""

    def __init__(self, base_url: str, api_key: str | None = None, timeout: float = 30.0):
        parts = urlsplit(base_url.strip())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{base_url!r} is not an http:// or https:// address")
        self.base_url = base_url
        self.scheme = parts.scheme
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        path = parts.path.rstrip("/")
        self.prefix = path if path else "/v1"  # a bare address means the usual /v1
        self.api_key = api_key
        self.timeout = timeout

    def _connect(self) -> http.client.HTTPConnection:
        if self.scheme == "https":
            return http.client.HTTPSConnection(self.host, self.port, timeout=self.timeout,
                                               context=ssl.create_default_context())
        return http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)

    def _send(self, method: str, path: str, body: dict | None = None):
        conn = self._connect()
        headers = {"Accept": "application/json, text/event-stream"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        try:
            conn.request(method, self.prefix + path, body=data, headers=headers)
            response = conn.getresponse()
        except (OSError, http.client.HTTPException) as e:
            conn.close()
            raise _transport_error(e, f"{method} {self.prefix}{path}") from None
        if response.status >= 400:
            try:
                raw = response.read()
            except (OSError, http.client.HTTPException):
                raw = b""
            conn.close()
            try:
                message = _message(json.loads(raw), "")
            except ValueError:
                message = ""
            message = message or f"{response.status} {response.reason}"
            kind = "unauthorized" if response.status in (401, 403) else "http"
            raise RemoteError(kind, message, response.status)
        return conn, response

    def _json(self, method: str, path: str, body: dict | None = None) -> dict:
        conn, response = self._send(method, path, body)
        try:
            raw = response.read()
        except (OSError, http.client.HTTPException) as e:
            raise _transport_error(e, "reading the answer") from None
        finally:
            conn.close()
        try:
            data = json.loads(raw)
        except ValueError:
            raise RemoteError("protocol", "The answer is not JSON: is this an OpenAI-compatible "
                                          "endpoint?") from None
        if not isinstance(data, dict):
            raise RemoteError("protocol", "The answer is not a JSON object.")
        return data

    def models(self) -> list[str]:
        """The model ids the endpoint serves (GET /models)."""
        data = self._json("GET", "/models").get("data")
        if not isinstance(data, list):
            raise RemoteError("protocol", "The model list has no 'data' array.")
        return [m["id"] for m in data if isinstance(m, dict) and isinstance(m.get("id"), str)]

    def chat(self, model: str, messages: list[dict], **options) -> RemoteStream:
        """Streams a chat reply; options are the API's (max_tokens, temperature, stop...)."""
        return self._stream("/chat/completions", {"model": model, "messages": messages,
                                                  **options}, chat=True)

    def complete(self, model: str, prompt: str, **options) -> RemoteStream:
        return self._stream("/completions", {"model": model, "prompt": prompt, **options},
                            chat=False)

    def _stream(self, path: str, body: dict, chat: bool) -> RemoteStream:
        body = {**body, "stream": True, "stream_options": {"include_usage": True}}
        conn, response = self._send("POST", path, body)
        return RemoteStream(conn, response, chat)
