"""A package index on this machine for the starter-download tests (no tests here): a
PEP 503 simple page per project and the wheels beside it, served over loopback HTTP by
the standard library's server, so the download runs the app's real HTTP code."""
from __future__ import annotations

import hashlib
import http.server
import os
import threading
import zipfile
from pathlib import Path

from ember.starter import Source

FIRST_PART = 1 << 20


class LocalIndex:
    def __init__(self, root: Path):
        self.root = Path(root)
        (self.root / "files").mkdir(parents=True, exist_ok=True)
        self.requests: list[str] = []
        # closed: a file stops after its first FIRST_PART bytes until the gate opens, so a
        # test can act (Cancel) while a download is under way, whatever the machine's speed
        self.gate = threading.Event()
        self.gate.set()
        index = self

        class Handler(http.server.SimpleHTTPRequestHandler):
            def __init__(self, *a, **kw):
                super().__init__(*a, directory=str(index.root), **kw)

            def do_GET(self):
                index.requests.append(self.path)
                super().do_GET()

            def copyfile(self, source, outputfile):
                outputfile.write(source.read(FIRST_PART))
                outputfile.flush()
                index.gate.wait(120)  # a safety net for a broken test, not a time limit
                try:
                    super().copyfile(source, outputfile)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client cancelled

            def log_message(self, *a):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/simple/"

    def add_wheel(self, project: str, wheel: Path) -> None:
        """Lists wheel on the project's page (linked, not copied, when it is large)."""
        target = self.root / "files" / wheel.name
        if not target.exists():
            os.symlink(wheel.resolve(), target)
        page = self.root / "simple" / project
        page.mkdir(parents=True, exist_ok=True)
        links = "".join(f'<a href="../../files/{p.name}">{p.name}</a><br>\n'
                        for p in sorted((self.root / "files").iterdir()))
        (page / "index.html").write_text(f"<html><body>\n{links}</body></html>\n")

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def fixture_wheel(tmp: Path, payload: bytes, name: str = "fixture_model-1.0-py3-none-any.whl",
                  member: str = "fixture_model/tiny.gguf") -> tuple[Path, Source]:
    """A small wheel holding payload as member, and the Source that describes it."""
    wheel = Path(tmp) / name
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(member, payload)
        z.writestr("fixture_model-1.0.dist-info/METADATA", "Name: fixture-model\n")
    src = Source(project="fixture-model", wheel=name,
                 wheel_sha256=hashlib.sha256(wheel.read_bytes()).hexdigest(),
                 member=member, sha256=hashlib.sha256(payload).hexdigest(), size=len(payload))
    return wheel, src
