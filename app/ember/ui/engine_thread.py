"""The app's one engine thread: a long-lived QObject moved to a QThread (as gpt4all-chat
keeps its model on one worker). Loads and replies are requests queued to it in order,
each with a cancel token of its own, and answered with signals that carry the request's
id, so a late answer to a request the window has moved on from is recognised and dropped.

The window never calls into a model while the engine thread may use it; the one call
that crosses is a token's cancel(), which only sets flags."""
from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from pathlib import Path

from PySide6.QtCore import QCoreApplication, QObject, QThread, Signal, Slot

from ..chat import CancelToken, ChatTemplate, ContextFull, GenRequest, build_prompt, stream_reply
from ..engine import CancelledError, EmberError, GenerationStats, Model, Session, backend_devices
from ..model_card import LoadFailure, describe_model, effective_n_ctx, explain_load_failure
from ..placement import resolve

_ids = itertools.count(1)


@dataclass
class LoadJob:
    path: str
    n_ctx: int
    n_threads: int
    backend: str = "auto"  # Settings' Run on
    gpu_layers: int = -1
    id: int = field(default_factory=lambda: next(_ids))
    token: CancelToken = field(default_factory=CancelToken)  # loads poll it between steps

    def cancel(self) -> None:
        self.token.cancel()


@dataclass
class RemoteJob:
    """Opening an OpenAI-compatible endpoint's model in place of a file."""

    url: str
    model_id: str
    api_key: str | None
    id: int = field(default_factory=lambda: next(_ids))
    token: CancelToken = field(default_factory=CancelToken)

    @property
    def path(self) -> str:
        return self.url

    def cancel(self) -> None:
        self.token.cancel()


@dataclass
class GenJob:
    model: object  # an engine Model, or a remote_chat.RemoteModel
    session: Session | None  # None for an endpoint
    template: ChatTemplate | None
    req: GenRequest
    id: int = field(default_factory=lambda: next(_ids))
    token: CancelToken = None  # type: ignore[assignment]

    def __post_init__(self):
        if self.token is None:
            # an endpoint's reply attaches its stream once it has one
            self.token = CancelToken(self.session.context if self.session is not None else None)

    def cancel(self) -> None:
        self.token.cancel()


def placement_info(model: Model, why: str) -> dict:
    """Where the model's context runs, read on the engine thread right after the load."""
    ctx = model.context
    return {"summary": ctx.backend, "note": "; ".join(n for n in (why, ctx.backend_note) if n),
            "backend": ctx.backend_name, "n_gpu_layers": ctx.n_gpu_layers}


class EngineWorker(QObject):
    """Lives on the engine thread: every slot runs there, one request at a time."""

    header = Signal(int, dict)  # job id, the card's facts (before the weights load)
    load_progress = Signal(int, float)
    loaded = Signal(int, object, object, dict)  # job id, model, ChatTemplate, info
    load_failed = Signal(int, str, str, str, str)  # job id, path, title, advice, details
    load_cancelled = Signal(int, str)  # job id, path
    prepared = Signal(int, dict)  # job id, n_prompt / dropped / notice / think_open
    chunk = Signal(int, str)
    progress = Signal(int, dict)  # job id, the counts and times so far (after each chunk)
    reply_failed = Signal(int, str)
    reply_finished = Signal(int, dict)  # job id, stats

    PROGRESS_EVERY_S = 0.03

    @Slot(object)
    def load(self, job: LoadJob) -> None:
        last = [0.0]

        def on_progress(fraction: float) -> bool:
            now = time.monotonic()
            if now - last[0] > self.PROGRESS_EVERY_S or fraction >= 1.0:
                last[0] = now
                self.load_progress.emit(job.id, fraction)
            return not job.token.cancelled

        path = job.path
        try:
            if job.token.cancelled:
                self.load_cancelled.emit(job.id, path)
                return
            if not Path(path).is_file():
                self._fail(job.id, path, explain_load_failure(FileNotFoundError(path), path))
                return
            head = Model(path, metadata_only=True)
            try:
                info = describe_model(head, path)
            finally:
                head.close()
            self.header.emit(job.id, info)
            if job.token.cancelled:
                self.load_cancelled.emit(job.id, path)
                return
            backend, why = resolve(job.backend, backend_devices())
            model = Model(path, n_ctx=effective_n_ctx(job.n_ctx, info["n_ctx_train"]),
                          n_threads=job.n_threads or None, progress=on_progress,
                          cancel=job.token.event, backend=backend, gpu_layers=job.gpu_layers)
            if job.token.cancelled:
                model.close()
                self.load_cancelled.emit(job.id, path)
                return
            info["n_ctx"] = model.n_ctx  # creates the context (KV cache) now, not on first send
            info["placement"] = placement_info(model, why)
            template = ChatTemplate.from_metadata(model.metadata, token_text=model.token_text)
            self.loaded.emit(job.id, model, template, info)
        except CancelledError:
            self.load_cancelled.emit(job.id, path)
        except (EmberError, MemoryError) as e:
            self._fail(job.id, path, explain_load_failure(e, path))
        except Exception as e:  # a bug: report it, keep the app alive
            self._fail(job.id, path, LoadFailure("The model could not be loaded",
                                                 details=f"{type(e).__name__}: {e}"))

    def _fail(self, job_id: int, path: str, failure: LoadFailure) -> None:
        self.load_failed.emit(job_id, path, failure.title, failure.advice, failure.details)

    @Slot(object)
    def open_remote(self, job: RemoteJob) -> None:
        # the HTTP client is imported when an endpoint is used, not at start-up
        from ..remote import RemoteError
        from ..remote_chat import open_endpoint
        try:
            model = open_endpoint(job.url, job.model_id, job.api_key)
        except (RemoteError, ValueError) as e:
            self.load_failed.emit(job.id, job.url, "The endpoint could not be used", str(e), "")
            return
        if job.token.cancelled:
            self.load_cancelled.emit(job.id, job.url)
            return
        info = model.info()
        self.header.emit(job.id, info)
        self.loaded.emit(job.id, model, None, info)

    def _generate_remote(self, job: GenJob) -> None:
        from ..remote import RemoteError
        from ..remote_chat import stream_remote_reply
        stats: dict = {}
        try:
            self.prepared.emit(job.id, {"n_prompt": 0, "dropped": 0, "notice": None,
                                        "think_open": False})
            for text in stream_remote_reply(job.model, job.req, job.token, stats):
                self.chunk.emit(job.id, text)
        except RemoteError as e:
            self.reply_failed.emit(job.id, f"The endpoint answered with an error: {e}")
            stats["stop_reason"] = "error"
        except Exception as e:
            self.reply_failed.emit(job.id, f"Generation failed: {type(e).__name__}: {e}")
            stats["stop_reason"] = "error"
        for k, v in (("prompt_tokens", 0), ("generated_tokens", 0), ("prompt_evaluated", 0),
                     ("prompt_seconds", 0.0), ("generation_seconds", 0.0), ("n_past", 0)):
            stats.setdefault(k, v)
        self.reply_finished.emit(job.id, stats)

    @Slot(object)
    def generate(self, job: GenJob) -> None:
        if job.session is None:  # an endpoint's model
            self._generate_remote(job)
            return
        stats = GenerationStats()
        n_prompt = 0
        model = job.model
        try:
            built = build_prompt(model, model.n_ctx, job.template, job.req)
            n_prompt = built.n_tokens
            self.prepared.emit(job.id, {"n_prompt": built.n_tokens, "dropped": built.dropped,
                                        "notice": built.notice,
                                        "think_open": built.think_open})
            t0 = time.perf_counter()
            for text in stream_reply(job.session, built, job.req.params, stats, job.token):
                self.chunk.emit(job.id, text)
                self.progress.emit(job.id, {
                    "prompt_tokens": stats.prompt_tokens or n_prompt,
                    "prompt_evaluated": stats.prompt_evaluated,
                    "prompt_seconds": stats.prompt_seconds,
                    "generated_tokens": stats.generated_tokens,
                    "generation_seconds": time.perf_counter() - t0 - stats.prompt_seconds,
                    # as the context will count it: the newest token is not decoded yet
                    "n_past": (stats.prompt_tokens or n_prompt)
                    + max(stats.generated_tokens - 1, 0),
                    "stop_reason": ""})
        except ContextFull as e:
            self.reply_failed.emit(job.id, str(e))
            stats.stop_reason = "context_full"
        except EmberError as e:
            self.reply_failed.emit(job.id, f"Generation failed: {e.message or e}")
            stats.stop_reason = "error"
        except Exception as e:
            self.reply_failed.emit(job.id, f"Generation failed: {type(e).__name__}: {e}")
            stats.stop_reason = "error"
        try:
            # the tokens the cache holds for this chat: after speculative decoding the context
            # may also hold rejected drafts past them, which the next reply decodes over
            n_past = len(job.session.cached)
        except Exception:
            n_past = n_prompt + stats.generated_tokens
        self.reply_finished.emit(job.id, {
            "prompt_tokens": stats.prompt_tokens or n_prompt,
            "generated_tokens": stats.generated_tokens,
            "prompt_evaluated": stats.prompt_evaluated,
            "prompt_seconds": stats.prompt_seconds,
            "generation_seconds": stats.generation_seconds,
            "stop_reason": stats.stop_reason,
            "n_past": n_past,
        })


class EngineThread(QObject):
    """The window's side: starts the thread, hands it requests, and stops it at quit."""

    _load = Signal(object)
    _open_remote = Signal(object)
    _generate = Signal(object)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.thread = QThread()
        self.thread.setObjectName("ember-engine")
        self.worker = EngineWorker()
        self.worker.moveToThread(self.thread)
        # queued connections: the slots run on the engine thread, in the order sent
        self._load.connect(self.worker.load)
        self._open_remote.connect(self.worker.open_remote)
        self._generate.connect(self.worker.generate)
        self.thread.start()
        app = QCoreApplication.instance()
        if app is not None:
            # an app that quits without closing the window must not destroy a running thread
            app.aboutToQuit.connect(self.shutdown)
        self._pending: dict[int, object] = {}
        self.worker.loaded.connect(self._done)
        self.worker.load_failed.connect(self._done)
        self.worker.load_cancelled.connect(self._done)
        self.worker.reply_finished.connect(self._done)

    def load(self, path: str, n_ctx: int, n_threads: int, backend: str = "auto",
             gpu_layers: int = -1) -> LoadJob:
        job = LoadJob(str(path), n_ctx, n_threads, backend, gpu_layers)
        self._pending[job.id] = job
        self._load.emit(job)
        return job

    def open_remote(self, url: str, model_id: str, api_key: str | None) -> RemoteJob:
        job = RemoteJob(url, model_id, api_key)
        self._pending[job.id] = job
        self._open_remote.emit(job)
        return job

    def generate(self, model, session: Session | None, template: ChatTemplate | None,
                 req: GenRequest, before_start=None) -> GenJob:
        """before_start(job) runs before the engine thread can answer: the window puts the
        reply's widget up first, so no text arrives for a widget not yet there."""
        job = GenJob(model, session, template, req)
        self._pending[job.id] = job
        if before_start is not None:
            before_start(job)
        self._generate.emit(job)
        return job

    def _done(self, job_id: int, *_) -> None:
        self._pending.pop(job_id, None)

    @property
    def busy(self) -> bool:
        """A request is running or waiting on the engine thread."""
        return bool(self._pending)

    def shutdown(self, timeout_ms: int = 10000) -> None:
        """Cancels every request, lets the running one return and ends the thread
        (requests still waiting are dropped: the window is closing)."""
        for job in list(self._pending.values()):
            job.cancel()
        self.thread.quit()
        self.thread.wait(timeout_ms)
