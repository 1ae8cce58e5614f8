"""The Settings switch "Serve the loaded model on http://127.0.0.1:8080": `ember serve`'s
app (Starlette on uvicorn) run inside the desktop app on a thread of its own, for the model
the app has loaded (its slot is a new context on the same weights), on loopback only.
The app stops it before it closes or replaces that model."""
from __future__ import annotations

import logging
import socket
import threading
from pathlib import Path

from PySide6.QtCore import QObject, Signal

log = logging.getLogger("ember.ui")
HOST = "127.0.0.1"  # never beyond this machine from a switch in Settings


class LocalServer(QObject):
    started = Signal(str)  # the address, once the model is loaded and requests are answered
    failed = Signal(str)
    stopped = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        self._server = None
        self._thread: threading.Thread | None = None
        self.url: str | None = None
        self.path: str | None = None

    @property
    def running(self) -> bool:
        return self._thread is not None

    def start(self, model, model_path: str, port: int) -> bool:
        """Binds now (a port in use is said at once), then serves model on a thread."""
        self.stop()
        try:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((HOST, port))
            sock.listen(128)
        except OSError as e:
            self.failed.emit(f"Ember could not listen on {HOST}:{port} ({e.strerror or e}). "
                             "Another program may be using the port.")
            return False
        self.url = f"http://{HOST}:{sock.getsockname()[1]}"
        self.path = str(model_path)
        from ..server.app import ServerState, build_app
        from ..server.run import uvicorn_server
        state = ServerState(self.path)
        server = uvicorn_server(build_app(state, host=HOST))
        self._server = server
        url = self.url

        def run() -> None:
            from ..server.engine_state import LoadedModel
            try:
                state.loaded = LoadedModel(Path(self.path), n_slots=1, n_ctx=None,
                                           n_threads=None, model=model)
            except Exception as e:  # noqa: BLE001 (EmberError, OSError: told in the app)
                state.error = str(e) or type(e).__name__
                sock.close()
                self.failed.emit(f"The model could not be served: {state.error}")
                return
            self.started.emit(url)
            try:
                server.run(sockets=[sock])
            finally:
                state.loaded.close()  # its contexts; the app's model stays open
                sock.close()

        self._thread = threading.Thread(target=run, daemon=True, name="ember-serve")
        self._thread.start()
        log.info("serving %s on %s", self.path, self.url)
        return True

    def stop(self) -> None:
        if self._thread is None:
            return
        if self._server is not None:
            self._server.should_exit = True
        self._thread.join(30)
        self._thread = None
        self._server = None
        self.url = None
        self.stopped.emit()
