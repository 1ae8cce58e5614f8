"""A Hugging Face hub on this machine for the catalog tests (no tests here): the API's
search and file-tree JSON and the resolve/main downloads with HTTP ranges, served over
loopback by the standard library's server, so the app runs its real HTTP code."""
from __future__ import annotations

import hashlib
import http.server
import json
import re
import threading
import urllib.parse
from pathlib import Path

FIRST_PART = 1 << 20


class FakeHub:
    def __init__(self):
        self.repos: dict[str, dict[str, Path]] = {}  # repo id -> file path in it -> file
        self.sha: dict[Path, str] = {}
        self.downloads: dict[str, int] = {}
        self.requests: list[tuple[str, str | None]] = []  # (path, Range header)
        self.corrupt: set[str] = set()  # file names served with a byte changed
        # closed: a download stops after FIRST_PART bytes of its answer until the gate
        # opens, so a test can act (Cancel) while it is under way, whatever the speed
        self.gate = threading.Event()
        self.gate.set()
        hub = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):
                hub.requests.append((self.path, self.headers.get("Range")))
                url = urllib.parse.urlsplit(self.path)
                path = urllib.parse.unquote(url.path)
                if path == "/api/models":
                    return self._json(hub._search(urllib.parse.parse_qs(url.query)))
                m = re.fullmatch(r"/api/models/(.+)/tree/main", path)
                if m:
                    if m.group(1) not in hub.repos:
                        return self._status(404)
                    return self._json(hub._tree(m.group(1)))
                m = re.fullmatch(r"/(.+?/.+?)/resolve/main/(.+)", path)
                if m and m.group(2) in hub.repos.get(m.group(1), {}):
                    return self._file(hub.repos[m.group(1)][m.group(2)])
                return self._status(404)

            def _status(self, code):
                self.send_response(code)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def _json(self, data):
                body = json.dumps(data).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _file(self, file: Path):
                size = file.stat().st_size
                start, end = 0, size - 1
                m = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range") or "")
                if m:
                    start = int(m.group(1))
                    end = min(int(m.group(2)), size - 1) if m.group(2) else size - 1
                    if start >= size:
                        self.send_response(416)
                        self.send_header("Content-Range", f"bytes */{size}")
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return
                self.send_response(206 if m else 200)
                if m:
                    self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
                self.send_header("Content-Length", str(end - start + 1))
                self.end_headers()
                sent = 0
                try:
                    with open(file, "rb") as f:
                        f.seek(start)
                        left = end - start + 1
                        while left:
                            chunk = f.read(min(1 << 18, left))
                            if not chunk:
                                break
                            if file.name in hub.corrupt and start + sent <= 1000 < start + \
                                    sent + len(chunk):
                                i = 1000 - start - sent
                                chunk = chunk[:i] + bytes([chunk[i] ^ 1]) + chunk[i + 1:]
                            self.wfile.write(chunk)
                            sent += len(chunk)
                            left -= len(chunk)
                            if sent >= FIRST_PART and not hub.gate.is_set():
                                self.wfile.flush()
                                hub.gate.wait(120)  # a safety net for a broken test
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client cancelled

            def log_message(self, *a):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def add(self, repo_id: str, file: Path, name: str | None = None, downloads: int = 0,
            sha256: str | None = None) -> None:
        """Lists file in repo_id (as name); sha256: its known hash (else computed)."""
        self.repos.setdefault(repo_id, {})[name or file.name] = file
        self.downloads[repo_id] = downloads
        if file not in self.sha:
            self.sha[file] = sha256 or hashlib.sha256(file.read_bytes()).hexdigest()

    def _search(self, query: dict) -> list[dict]:
        q = (query.get("search") or [""])[0].lower()
        hits = [r for r in self.repos if q in r.lower()]
        hits.sort(key=lambda r: -self.downloads[r])
        return [{"id": r, "downloads": self.downloads[r], "likes": 0, "tags": ["gguf"]}
                for r in hits[:int((query.get("limit") or ["30"])[0])]]

    def _tree(self, repo_id: str) -> list[dict]:
        out = [{"type": "file", "path": "README.md", "size": 12, "oid": "0" * 40}]
        for name, file in self.repos[repo_id].items():
            size = file.stat().st_size
            out.append({"type": "file", "path": name, "size": size, "oid": "1" * 40,
                        "lfs": {"oid": self.sha[file], "size": size, "pointerSize": 134}})
        return out

    def file_requests(self) -> list[tuple[str, str | None]]:
        return [(p, r) for p, r in self.requests if "/resolve/" in p]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
