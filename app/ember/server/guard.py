"""Who may talk to the server: the Host header must name the server (a DNS-rebinding page
sends its own domain there), a browser page from another origin gets nothing unless
--cors allows it, and with --api-key every request but /health needs the key (as a bearer
token or an X-Api-Key header)."""
from __future__ import annotations

import hmac
import ipaddress
import json
import socket
from urllib.parse import urlsplit

from .errors import error_body

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
OPEN_PATHS = frozenset({"/health", "/v1/health"})


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        return False


def split_host(value: str) -> tuple[str, int | None]:
    """"Example.com:8080" -> ("example.com", 8080); "[::1]:80" -> ("::1", 80)."""
    value = value.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        name, rest = (value[1:end], value[end + 1:]) if end != -1 else (value, "")
    elif value.count(":") == 1:
        name, _, rest = value.partition(":")
        rest = ":" + rest
    else:
        name, rest = value, ""
    port = None
    if rest.startswith(":") and rest[1:].isdigit():
        port = int(rest[1:])
    return name.rstrip("."), port


class HostPolicy:
    """The names a request's Host header may carry.

    Bound to loopback: the loopback names. Bound to every interface (0.0.0.0, ::): those,
    any IP address (a rebinding attack always comes under a DNS name) and this machine's
    names. Bound to one address or name: that too. --allow-host adds names (a reverse
    proxy's)."""

    def __init__(self, bound_host: str, extra: tuple[str, ...] = ()):
        bound = split_host(bound_host)[0] if bound_host else ""
        self.wildcard = bound in ("", "0.0.0.0", "::")
        names = set(LOOPBACK_NAMES) | {split_host(h)[0] for h in extra}
        if not self.wildcard:
            names.add(bound)
        else:
            for n in (socket.gethostname(), socket.getfqdn()):
                if n:
                    names.add(n.lower())
        self.names = frozenset(names)

    def allows(self, host_header: str | None) -> bool:
        if host_header is None:
            return True  # no browser sends a request without Host: not a rebinding vector
        name, _ = split_host(host_header)
        if name in self.names:
            return True
        if _is_ip(name):
            return self.wildcard or ipaddress.ip_address(name).is_loopback
        return False


def _headers(scope) -> dict[str, str]:
    out: dict[str, str] = {}
    for k, v in scope.get("headers", []):
        out.setdefault(k.decode("latin-1").lower(), v.decode("latin-1"))
    return out


def presented_key(headers: dict[str, str]) -> str | None:
    """The key a request carries: 'Authorization: Bearer KEY' (OpenAI's clients), else
    'X-Api-Key: KEY' (Anthropic's clients, llama-server's). None when neither is there
    in that shape."""
    auth = headers.get("authorization")
    if auth is not None:
        scheme, _, token = auth.partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            return token.strip()
    key = headers.get("x-api-key")
    if key is not None and key.strip():
        return key.strip()
    return None


async def send_error(send, status: int, message: str, type: str, code: str,
                     extra_headers: list | None = None) -> None:
    body = json.dumps(error_body(message, type, None, code)).encode()
    headers = [(b"content-type", b"application/json"),
               (b"content-length", str(len(body)).encode())] + (extra_headers or [])
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class Guard:
    """ASGI middleware in front of everything (CORS answers sit inside it)."""

    def __init__(self, app, hosts: HostPolicy, api_key: str | None, cors: str | None):
        self.app = app
        self.hosts = hosts
        self.api_key = api_key
        self.cors = cors

    def _origin_allowed(self, origin: str, host: str | None) -> bool:
        if self.cors == "*" or origin == self.cors:
            return True
        # the server's own pages (same origin) are fine; another site's are not
        parts = urlsplit(origin)
        return host is not None and parts.netloc.lower() == host.strip().lower()

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = _headers(scope)
        host = headers.get("host")
        if not self.hosts.allows(host):
            return await send_error(
                send, 403, f"The Host header '{host}' does not name this server; start it with "
                           f"--allow-host NAME to accept that name.", "invalid_request_error",
                "host_not_allowed")
        origin = headers.get("origin")
        if origin is not None and origin != "null" and not self._origin_allowed(origin, host):
            return await send_error(
                send, 403, f"Requests from the web page origin '{origin}' are refused; start "
                           f"the server with --cors {origin} to allow them.",
                "invalid_request_error", "origin_not_allowed")
        if origin == "null" and self.cors != "*":
            return await send_error(send, 403, "Requests from an opaque origin are refused.",
                                    "invalid_request_error", "origin_not_allowed")
        if (self.api_key is not None and scope["path"] not in OPEN_PATHS
                and scope["method"] != "OPTIONS"):
            given = presented_key(headers)
            if given is None or not hmac.compare_digest(given.encode(), self.api_key.encode()):
                given_any = "authorization" in headers or "x-api-key" in headers
                what = "The API key is not valid" if given_any else "No API key was given"
                return await send_error(
                    send, 401, f"{what}: send it as 'Authorization: Bearer KEY' or "
                               f"'X-Api-Key: KEY'.",
                    "invalid_request_error", "invalid_api_key",
                    [(b"www-authenticate", b"Bearer")])
        return await self.app(scope, receive, send)
