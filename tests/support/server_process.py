"""Starts `ember serve` as a real process on a loopback port the system picks, for the
server tests; stops it by its pid."""
from __future__ import annotations

import http.client
import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

APP = str(Path(__file__).resolve().parents[2] / "app")
START_TIMEOUT = 180.0  # functional: a loaded 2-core machine, not a speed requirement


class ServerProcess:
    def __init__(self, model_path, *args: str, env: dict | None = None):
        cmd = [sys.executable, "-m", "ember", "serve", "-m", str(model_path), "--port", "0",
               *args]
        full_env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            [APP, os.environ.get("PYTHONPATH", "")]), **(env or {}))
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, env=full_env)
        self.lines: list[str] = []
        self.port = self._wait_for_port()
        threading.Thread(target=self._drain, daemon=True).start()
        self.host = "127.0.0.1"
        self.url = f"http://{self.host}:{self.port}"
        self.wait_healthy()

    def _wait_for_port(self) -> int:
        for line in self.proc.stdout:
            self.lines.append(line)
            m = re.search(r"listening on http://[^:]+:(\d+)", line)
            if m:
                return int(m.group(1))
        err = self.proc.stderr.read()
        raise RuntimeError(f"ember serve exited ({self.proc.wait()}): {''.join(self.lines)}{err}")

    def _drain(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line)

    def request(self, method: str, path: str, body=None, headers: dict | None = None,
                timeout: float = 120.0) -> tuple[int, dict, bytes]:
        conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        try:
            if isinstance(body, (dict, list)):
                body = json.dumps(body).encode()
                headers = {"Content-Type": "application/json", **(headers or {})}
            conn.request(method, path, body=body, headers=headers or {})
            r = conn.getresponse()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
        finally:
            conn.close()

    def health(self) -> tuple[int, dict]:
        status, _, body = self.request("GET", "/health")
        return status, json.loads(body)

    def wait_healthy(self, timeout: float = START_TIMEOUT) -> dict:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise RuntimeError(f"ember serve exited: {self.proc.stderr.read()}")
            try:
                status, body = self.health()
                if status == 200:
                    return body
            except OSError:
                pass
            time.sleep(0.1)
        raise TimeoutError("ember serve did not become healthy")

    def wait_for(self, predicate, timeout: float = START_TIMEOUT) -> dict:
        """Polls /health until predicate(body) holds (a functional timeout, not a limit)."""
        end = time.monotonic() + timeout
        body = {}
        while time.monotonic() < end:
            status, body = self.health()
            if status == 200 and predicate(body):
                return body
            time.sleep(0.05)
        raise TimeoutError(f"/health never satisfied the condition: {body}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()  # SIGTERM to our own child, by pid
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for f in (self.proc.stdout, self.proc.stderr):
            if f:
                f.close()
