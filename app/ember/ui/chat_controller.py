"""The app's chat logic, apart from its views: the model (loading, replacing, settings that
need a reload), the reply being written (a dataclass, its flush timer and every store write
it makes) and the queue of chats waiting for their turn. The window shows what the signals
say and calls the methods; it never writes a reply to the store itself."""
from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path

from PySide6.QtCore import QObject, QTimer, Signal

from ..chat import GenRequest
from ..chat.reasoning import normalize_reply
from ..engine import Session, SpeculativeParams
from ..storage.settings import Settings
from ..storage.store import ImportResult, Store, StoreError
from .engine_thread import EngineThread, GenJob, LoadJob

log = logging.getLogger("ember.ui")

FLUSH_MS = 40  # streamed text reaches the screen and the database at most this often
# A prompt speed needs a batch to time: with fewer new tokens (Regenerate and Continue
# find the prompt in the KV cache) the time is one decode step, not prompt processing.
MIN_PROMPT_SPEED_TOKENS = 16


@dataclass
class ActiveReply:
    """The reply being written: what is stored, what waits for the next flush, timings."""

    conv_id: int
    msg_id: int
    text: str = ""  # stored and shown
    pending: str = ""  # arrived since the last flush
    base_tokens: int = 0  # tokens the reply had before a Continue
    continued: bool = False  # more of an existing message, not a new one
    t0: float = field(default_factory=time.perf_counter)
    first: float | None = None  # seconds to the first piece
    notice: str | None = None
    error: str | None = None
    job_id: int = 0
    live: dict | None = None  # the engine's counts and times so far, while it streams
    preset: str | None = None  # the name of the chat's preset it was written with
    sources: list = field(default_factory=list)  # documents.grounding.Citation given the model


def reply_meta(reply: ActiveReply, stats: dict, model_info: dict | None,
               same_chat: bool = False) -> dict:
    """What a finished reply records beside its text (speeds, counts, why it stopped).
    same_chat: the KV cache held this chat's own earlier prompt, so the part it reused is
    this chat's (a new chat after another shares no more than the template's opening)."""
    pe = stats.get("prompt_evaluated", stats["prompt_tokens"])
    pp = (pe / stats["prompt_seconds"]
          if stats["prompt_seconds"] > 0 and pe >= MIN_PROMPT_SPEED_TOKENS else None)
    tg = (stats["generated_tokens"] / stats["generation_seconds"]
          if stats["generation_seconds"] > 0 else 0.0)
    meta = {"prompt_tokens": stats["prompt_tokens"], "prompt_evaluated": pe,
            # a continued reply counts all its tokens, not only this run's
            "generated_tokens": reply.base_tokens + stats["generated_tokens"],
            "prompt_tps": round(pp, 2) if pp is not None else None,
            "gen_tps": round(tg, 2), "n_past": stats["n_past"],
            "prompt_cached": same_chat and pe < stats["prompt_tokens"],
            "stop_reason": stats["stop_reason"],
            "first_token_s": round(reply.first, 3) if reply.first is not None else None,
            "model": model_info["name"] if model_info else None,
            "model_file": model_info["file_name"] if model_info else None}
    if reply.notice:
        meta["notice"] = reply.notice
    if reply.preset:
        meta["preset"] = reply.preset
    if reply.sources:
        from ..documents.grounding import cited
        meta["sources"] = [c.as_meta() for c in reply.sources]
        meta["cited"] = [c.n for c in cited(reply.text, reply.sources)]
    return meta


class ChatController(QObject):
    load_started = Signal(str)  # path
    model_header = Signal(dict)  # the card's facts, before the weights load
    load_progress = Signal(float)
    model_ready = Signal(dict)  # info of the model now loaded
    model_closing = Signal()  # the model is about to be closed (replaced, or at quit)
    load_failed = Signal(str, str, str, str)  # path, title, advice, details
    load_cancelled = Signal(str)  # path
    message_added = Signal(int, int)  # conv id, the user's message id
    reply_started = Signal(object)  # ActiveReply
    reply_prepared = Signal(object, dict)  # reply, n_prompt / dropped / notice / think_open
    reply_text = Signal(object)  # reply: its text is stored now
    reply_failed = Signal(object, str)
    reply_finished = Signal(object, dict, dict)  # reply, meta (stored; {} if deleted), stats
    queue_changed = Signal()
    store_failed = Signal(str)  # a write to the history failed; the text is kept in memory

    def __init__(self, store: Store, settings: Settings, settings_path: Path, parent=None):
        super().__init__(parent)
        self.store = store
        self.settings = settings
        self.settings_path = Path(settings_path)
        self.engine = EngineThread(self)
        self.model = None
        self.template = None
        self.session: Session | None = None
        self.model_info: dict | None = None
        self.load_job: LoadJob | None = None
        self.gen_job: GenJob | None = None
        self.reply: ActiveReply | None = None
        self.cache_conv: int | None = None  # the chat whose prompt the KV cache holds
        self.queue: list[int] = []  # chats whose last message waits for a reply, in order
        # conv id -> (library, embedder, scope) or None: the document library a chat answers
        # from, opened when such a chat first needs it (set by the window)
        self.documents_opener = None
        self.closing = False
        # reply writes that failed (full disk, read-only or locked file), by message id:
        # retried, newest values winning, with every later write
        self.unsaved: dict[int, dict] = {}
        self._store_failing = False
        self.flush_timer = QTimer(self)
        self.flush_timer.setSingleShot(True)
        self.flush_timer.setInterval(FLUSH_MS)
        self.flush_timer.timeout.connect(self.flush)
        ew = self.engine.worker
        ew.header.connect(self._on_header)
        ew.load_progress.connect(self._on_load_progress)
        ew.loaded.connect(self._on_loaded)
        ew.load_failed.connect(self._on_load_failed)
        ew.load_cancelled.connect(self._on_load_cancelled)
        ew.prepared.connect(self._on_prepared)
        ew.chunk.connect(self._on_chunk)
        ew.progress.connect(self._on_progress)
        ew.reply_failed.connect(self._on_reply_failed)
        ew.reply_finished.connect(self._on_reply_finished)

    # ---- state ---------------------------------------------------------------------------
    @property
    def generating(self) -> bool:
        return self.gen_job is not None

    @property
    def loading(self) -> bool:
        return self.load_job is not None

    def replying_in(self, conv_id: int | None) -> bool:
        return self.reply is not None and self.reply.conv_id == conv_id

    def raw_mode(self, info: dict | None = None) -> bool:
        """Raw completion: chosen in Settings, or (auto) for a model with neither a chat
        template nor a built-in format its vocabulary points to (a base model)."""
        info = info or self.model_info
        mode = self.settings.prompt_mode
        return mode == "raw" or (mode == "auto" and info is not None and not info["has_template"]
                                 and not info.get("builtin_format"))

    def prompt_format(self, info: dict) -> str:
        if self.raw_mode(info):
            return "raw completion"
        if not info["has_template"]:
            return f"{info.get('builtin_format_label') or 'ChatML'} (built-in)"
        return "chat template"

    # ---- the model -------------------------------------------------------------------------
    def open_model(self, path: str) -> None:
        path = str(path)
        if self.load_job is not None:
            self.load_job.cancel()  # its late answers carry its id and are dropped
            self.load_job = None
        if self.gen_job is not None:
            # one engine thread: the load would wait for the whole reply, so stop it
            self.stop()
        s = self.settings
        self.load_job = self.engine.load(path, s.n_ctx, s.n_threads, s.backend, s.gpu_layers)
        log.info("loading %s", path)
        self.load_started.emit(path)

    def open_remote(self, url: str, model_id: str = "", api_key: str | None = None) -> None:
        """An OpenAI-compatible endpoint's model in place of a file (replies stream from
        it; the Models page lists the endpoints added)."""
        if self.load_job is not None:
            self.load_job.cancel()
        if self.gen_job is not None:
            self.stop()
        self.load_job = self.engine.open_remote(url, model_id, api_key)
        log.info("opening endpoint %s (%s)", url, model_id or "its first model")
        self.load_started.emit(url)

    @property
    def remote(self) -> bool:
        return bool(self.model_info and self.model_info.get("remote"))

    @property
    def can_continue(self) -> bool:
        """Continue extends a reply from its text: a local model can, an endpoint cannot
        (the chat API has no way to resume an assistant message)."""
        return self.model is not None and not self.remote

    def cancel_load(self) -> None:
        if self.load_job is not None:
            self.load_job.cancel()

    def _current_load(self, job_id: int) -> bool:
        return self.load_job is not None and self.load_job.id == job_id

    def _on_header(self, job_id: int, info: dict) -> None:
        if self._current_load(job_id):
            self.model_header.emit(info)

    def _on_load_progress(self, job_id: int, f: float) -> None:
        if self._current_load(job_id):
            self.load_progress.emit(f)

    def _on_loaded(self, job_id: int, model, template, info: dict) -> None:
        if not self._current_load(job_id):
            model.close()  # superseded by a later Open: the engine thread is done with it
            return
        self.load_job = None
        old = self.model
        self.model, self.template, self.model_info = model, template, info
        self.session = None if info.get("remote") else Session(model, speculative=self._speculative())
        self.cache_conv = None
        if old is not None:
            self.model_closing.emit()  # whoever borrowed it (the local server) lets go
            old.close()
        if info.get("remote"):
            self.settings.remember_endpoint(info["url"], info["name"],
                                            getattr(model, "api_key", None))
        else:
            self.settings.remember_model(info["path"])
        self.save_settings()
        log.info("loaded %s (%s, %s, n_ctx %s)", info["path"], info["arch"], info["ftype"],
                 info["n_ctx"])
        self.model_ready.emit(info)
        self.start_next_queued()

    def _on_load_failed(self, job_id: int, path: str, title: str, advice: str,
                        details: str) -> None:
        if self._current_load(job_id):
            self.load_job = None
            self.load_failed.emit(path, title, advice, details)

    def _on_load_cancelled(self, job_id: int, path: str) -> None:
        if self._current_load(job_id):
            self.load_job = None
            self.load_cancelled.emit(path)

    # ---- settings --------------------------------------------------------------------------
    def apply_settings(self, new: Settings) -> None:
        """Saves new settings; a context length, thread count or Run on / GPU layers change
        reloads the model (stopping a running reply first)."""
        old = self.settings
        reload = (new.n_ctx != old.n_ctx or new.n_threads != old.n_threads
                  or new.backend != old.backend
                  or (new.gpu_layers != old.gpu_layers and new.backend != "cpu"))
        self.settings = new.validate()
        self.save_settings()
        if self.session is not None:
            self.session.speculative = self._speculative()  # the next reply drafts, or not
        if reload and self.model_info is not None and not self.loading and not self.remote:
            self.open_model(self.model_info["path"])

    def _speculative(self) -> SpeculativeParams | None:
        """The replies' speculative decoding: prompt-lookup drafts when the setting is on."""
        return SpeculativeParams(lookup=True) if self.settings.prompt_lookup else None

    def save_settings(self) -> None:
        try:
            self.settings.save(self.settings_path)
        except OSError as e:
            log.warning("could not save settings: %s", e)

    # ---- conversations -------------------------------------------------------------------
    def new_conversation(self, system_prompt: str | None = None) -> int:
        """A new chat with system_prompt, or the default one from Settings."""
        return self.store.create_conversation(
            system_prompt=self.settings.system_prompt if system_prompt is None
            else system_prompt,
            model_path=self.model_info["path"] if self.model_info else None)

    def rename(self, conv_id: int, title: str) -> str:
        title = title.strip() or "Untitled"
        self.store.rename_conversation(conv_id, title)
        return title

    def set_pinned(self, conv_id: int, pinned: bool) -> None:
        self.store.set_pinned(conv_id, pinned)

    def delete(self, conv_id: int) -> None:
        """Soft delete (undo brings it back): its reply stops, it leaves the queue."""
        if self.replying_in(conv_id):
            self.stop()
        self.unqueue(conv_id)
        self.store.delete_conversation(conv_id)

    def restore(self, conv_id: int) -> None:
        self.store.restore_conversation(conv_id)

    def purge_deleted(self) -> None:
        self.store.purge_deleted()

    def set_system_prompt(self, conv_id: int, text: str) -> None:
        self.store.update_conversation(conv_id, system_prompt=text.strip())

    # ---- presets ---------------------------------------------------------------------------
    def set_preset(self, conv_id: int, preset_id: int | None) -> str:
        """The chat's replies use preset_id's sampling from now on (None: Settings'); a
        preset with a system prompt also becomes the chat's. Returns the chat's system
        prompt."""
        self.store.set_conversation_preset(conv_id, preset_id)
        preset = self.store.preset(preset_id)
        if preset is not None and preset.system_prompt:
            self.store.update_conversation(conv_id, system_prompt=preset.system_prompt)
        conv = self.store.conversation(conv_id)
        return conv.system_prompt if conv else ""

    def save_preset(self, name: str, system_prompt: str, params: dict,
                    preset_id: int | None = None) -> int:
        return self.store.save_preset(name, system_prompt.strip(), params, preset_id)

    def delete_preset(self, preset_id: int) -> None:
        self.store.delete_preset(preset_id)

    def reply_settings(self, conv_id: int) -> tuple[Settings, str | None]:
        """The settings a reply in conv_id is written with (its preset's sampling over
        Settings'), and the preset's name."""
        conv = self.store.conversation(conv_id)
        preset = self.store.preset(conv.preset_id) if conv is not None else None
        if preset is None:
            return self.settings, None
        return self.settings.with_preset(preset.params), preset.name

    def select_version(self, msg_id: int) -> None:
        self.store.select_version(msg_id)

    def export(self, path: str | Path, fmt: str, conv_id: int | None) -> None:
        """fmt "md" or "json" for one chat, anything else for all of them (JSON)."""
        if fmt == "md":
            text = self.store.export_markdown(conv_id)
        else:
            text = json.dumps(self.store.export_json([conv_id] if fmt == "json" else None),
                              indent=2, ensure_ascii=False)
        Path(path).write_text(text, encoding="utf-8")

    def import_file(self, path: str | Path) -> ImportResult:
        """The chats of an Ember export that are not here yet, added (raises OSError,
        UnicodeDecodeError or StoreError, adding nothing)."""
        return self.store.import_export(Path(path).read_text(encoding="utf-8"))

    # ---- messages --------------------------------------------------------------------------
    def history(self, conv_id: int, upto: int | None = None) -> list[dict]:
        conv = self.store.conversation(conv_id)
        msgs = [{"role": "system", "content": conv.system_prompt}] if conv.system_prompt else []
        for m in self.store.messages(conv_id):
            if upto is not None and m.id == upto:
                break
            if m.content or m.role == "user":
                msgs.append(m.as_chat())
        return msgs

    def send(self, conv_id: int, text: str, title: str | None = None) -> int:
        """Stores the user's message and starts its reply, or queues it behind the reply
        being written in another chat. title: the chat's new title, if it had none."""
        conv = self.store.conversation(conv_id)
        if title and conv.title == "New chat":
            self.store.rename_conversation(conv_id, title)
        if self.model_info and conv.model_path != self.model_info["path"]:
            # the chat remembers the model it goes on with, offered when it is opened again
            self.store.update_conversation(conv_id, model_path=self.model_info["path"])
        mid = self.store.add_message(conv_id, "user", text)
        self.message_added.emit(conv_id, mid)
        if self.generating:
            # one engine, one reply at a time; messages sent meanwhile join the same turn
            if conv_id not in self.queue:
                self.queue.append(conv_id)
            log.info("chat %d queued (%d in line)", conv_id, self.queue.index(conv_id) + 1)
            self.queue_changed.emit()
        else:
            self.start_reply(conv_id)
        return mid

    def edit(self, conv_id: int, msg_id: int, text: str) -> bool:
        """The edited text is a new version of the message, answered anew; the earlier
        version and the conversation that followed it stay."""
        msg = self.store.message(msg_id)
        if msg is None or self.generating or self.model is None:
            return False
        self.store.add_message(conv_id, "user", text, parent_id=msg.parent_id)
        self.start_reply(conv_id)
        return True

    def regenerate(self, conv_id: int, msg_id: int) -> bool:
        """A new version of the reply beside it; the earlier one stays."""
        msg = self.store.message(msg_id)
        if msg is None or self.generating or self.model is None:
            return False
        self.start_reply(conv_id, parent_id=msg.parent_id)
        return True

    def continue_reply(self, conv_id: int, msg_id: int) -> bool:
        if self.generating or not self.can_continue or self.store.message(msg_id) is None:
            return False
        self.start_reply(conv_id, continue_id=msg_id)
        return True

    def unqueue(self, conv_id: int | None) -> None:
        """Takes a chat out of the queue; its message stays, unanswered."""
        if conv_id in self.queue:
            self.queue.remove(conv_id)
            self.queue_changed.emit()

    def start_next_queued(self) -> None:
        started = False
        while self.queue and not self.generating and self.model is not None \
                and not self.loading and not self.closing:
            cid = self.queue.pop(0)
            started = True
            msgs = self.store.messages(cid) if self.store.conversation(cid) else []
            if msgs and msgs[-1].role == "user":  # still waiting for its answer
                self.start_reply(cid)
        if started:
            self.queue_changed.emit()

    # ---- the reply ---------------------------------------------------------------------------
    def start_reply(self, conv_id: int, continue_id: int | None = None,
                    parent_id: int | None = None) -> ActiveReply:
        """A reply after the chat's last message, or after parent_id (a new version beside
        the replies already there), or more of continue_id's text."""
        s, preset = self.reply_settings(conv_id)
        if continue_id is not None:
            msg = self.store.message(continue_id)
            history = self.history(conv_id, upto=continue_id)
            prefix = msg.content
            mid = continue_id
            base_tokens = msg.meta.get("generated_tokens")
            if not isinstance(base_tokens, int):  # interrupted before it was counted
                base_tokens = (len(self.model.tokenize(prefix, add_special=False))
                               if prefix and not self.remote else 0)
            self.store.update_message(mid, complete=False)
        else:
            prefix, base_tokens = "", 0
            kw = {"parent_id": parent_id} if parent_id is not None else {}
            mid = self.store.add_message(conv_id, "assistant", "", complete=False, **kw)
            history = self.history(conv_id, upto=mid)
        sources = []
        if continue_id is None:
            history, sources = self._ground(conv_id, history, s.n_ctx)
        reply = ActiveReply(conv_id, mid, text=prefix, base_tokens=base_tokens,
                            continued=continue_id is not None, preset=preset, sources=sources)
        req = GenRequest(conv_id, mid, history, prefix=prefix, max_new_tokens=s.max_new_tokens,
                         params=s.sampling_params(), raw=self.raw_mode(),
                         policy=s.context_policy)
        self.reply = reply

        def announce(job: GenJob) -> None:
            self.gen_job = job
            reply.job_id = job.id
            self.reply_started.emit(reply)

        self.engine.generate(self.model, self.session, self.template, req, before_start=announce)
        return reply

    # ---- documents ----------------------------------------------------------------------------
    def attach_documents(self, conv_id: int, library, embedder=None, scope=None) -> None:
        """The chat's questions are answered from `library` (a documents.Library; scope: its
        files and folders to search, None for all), kept in the library so it lasts."""
        library.attach(conv_id, scope)
        if self.documents_opener is None:  # no window: this library answers
            def opener(cid):
                attached, sc = library.attachment(cid)
                return (library, embedder, sc) if attached else None
            self.documents_opener = opener

    def detach_documents(self, conv_id: int, library) -> None:
        library.detach(conv_id)

    def documents_for(self, conv_id: int):
        """(library, embedder, scope) where the chat answers from documents, else None."""
        return self.documents_opener(conv_id) if self.documents_opener is not None else None

    def _ground(self, conv_id: int, history: list[dict], n_ctx: int):
        """The history with the passages found for its last question in front of it; the
        prompt policy then fits the whole as for any chat."""
        from ..documents.grounding import ground
        from ..documents.retrieval import search
        found = self.documents_for(conv_id)
        if found is None:
            return history, []
        library, embedder, scope = found
        question = next((m["content"] for m in reversed(history) if m["role"] == "user"), "")
        if not question.strip():
            return history, []
        try:
            hits = search(library, question, embedder, k=5,
                          mode="hybrid" if embedder is not None else "words", scope=scope)
        except Exception:  # a library locked or damaged since: the chat still answers
            log.warning("searching the document library failed", exc_info=True)
            return history, []
        # about 3 characters a token; the sources take at most a third of the context
        return ground(history, hits, budget_chars=n_ctx)

    def stop(self) -> None:
        """Cancels the running reply (its token: the request, and the engine mid-token)."""
        if self.gen_job is not None:
            self.gen_job.cancel()

    def _current_reply(self, job_id: int) -> bool:
        return self.reply is not None and self.reply.job_id == job_id

    def _on_prepared(self, job_id: int, info: dict) -> None:
        if not self._current_reply(job_id):
            return
        r = self.reply
        if info.get("think_open"):
            # the template opened the reasoning block: the stored reply says so itself
            r.text = normalize_reply(r.text, True)
        if info.get("notice"):
            r.notice = info["notice"]
        self.reply_prepared.emit(r, info)

    def _on_chunk(self, job_id: int, text: str) -> None:
        if not self._current_reply(job_id):
            return
        r = self.reply
        if r.first is None:
            r.first = time.perf_counter() - r.t0
        r.pending += text
        if not self.flush_timer.isActive():
            self.flush_timer.start()

    def _on_progress(self, job_id: int, stats: dict) -> None:
        if self._current_reply(job_id):
            self.reply.live = stats

    def live_meta(self, reply: ActiveReply) -> dict | None:
        """The running reply's speeds and counts so far, as its meta will say them."""
        if reply.live is None:
            return None
        return reply_meta(reply, reply.live, self.model_info,
                          same_chat=self.cache_conv == reply.conv_id)

    def flush(self) -> None:
        r = self.reply
        if r is None or not r.pending:
            return
        r.text += r.pending
        r.pending = ""
        self.save_reply(r.msg_id, content=r.text)
        self.reply_text.emit(r)

    def save_reply(self, msg_id: int, **fields) -> bool:
        """Writes a reply's fields, and any earlier write that failed; on a failure keeps
        them to retry and says so once (store_failed) until writing works again."""
        self.unsaved.setdefault(msg_id, {}).update(fields)
        failing = self._store_failing
        try:
            while self.unsaved:
                mid, pending = next(iter(self.unsaved.items()))
                self.store.update_message(mid, **pending)
                del self.unsaved[mid]
        except StoreError as e:
            if not failing:
                self.store_failed.emit(str(e))
            self._store_failing = True
            return False
        self._store_failing = False
        return True

    def _on_reply_failed(self, job_id: int, message: str) -> None:
        if self._current_reply(job_id):
            self.reply.error = message
            self.reply_failed.emit(self.reply, message)

    def _on_reply_finished(self, job_id: int, stats: dict) -> None:
        if self.gen_job is None or self.gen_job.id != job_id:
            return
        self.flush_timer.stop()
        self.flush()
        r, self.reply = self.reply, None
        self.gen_job = None
        if r is None:
            self.start_next_queued()
            return
        if not r.text and stats["stop_reason"] in ("error", "context_full"):
            self.store.delete_message(r.msg_id)  # the version before it is shown again
            meta = {}
        else:
            meta = reply_meta(r, stats, self.model_info,
                              same_chat=self.cache_conv == r.conv_id)
            self.save_reply(r.msg_id, content=r.text, complete=True, meta=meta)
        if self.session is not None:
            self.cache_conv = r.conv_id
        log.info("reply: %s", json.dumps(meta))
        self.reply_finished.emit(r, meta, stats)
        self.start_next_queued()

    # ---- quitting ----------------------------------------------------------------------------
    def shutdown(self, deliver) -> None:
        """Cancels the reply and any load, ends the engine thread, lets deliver() (the
        event loop) hand over their last signals, stores what is left, frees the model."""
        self.closing = True
        self.queue.clear()
        self.engine.shutdown()
        deliver()
        if self.reply is not None:  # no event loop: store what arrived by hand
            self.flush()
        self.flush_timer.stop()
        if self.model is not None:
            self.model_closing.emit()
            self.model.close()
            self.model = None
            self.session = None
