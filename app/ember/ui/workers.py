"""Background work for the app: loading a model and generating a reply, each on a
QThread, reporting back through queued signals. The UI thread never calls into the
engine while a worker owns the model (it only calls Model.cancel(), which is safe)."""
from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from PySide6.QtCore import QThread, Signal

from .. import native
from ..chat import (
    ChatTemplate,
    StopScanner,
    detect_builtin_format,
    prompt_opens_thinking,
    raw_prompt,
    strip_thoughts_from_history,
)
from ..chat.reasoning import THINK_OPEN
from ..engine import EmberError, GenerationStats, Model, SamplingParams, Session
from ..metadata import meta_int, meta_ints, per_layer_summary

# ---- model description ------------------------------------------------------------------

_STATUS_TITLES = {
    native.ERR_IO: "The file could not be read",
    native.ERR_FORMAT: "This is not a valid GGUF model file",
    native.ERR_UNSUPPORTED: "Ember can't run this model",
    native.ERR_OUT_OF_MEMORY: "Not enough memory to load this model",
}


def error_title(status: int) -> str:
    return _STATUS_TITLES.get(status, "The model could not be loaded")


# a quantization tag at the end of a file name: ".Q4_1", "-q4_k_m", "-IQ3_XXS", ".F16", "-bf16"
_QUANT_SUFFIX = re.compile(r"[.\-_](?:i?q\d+(?:_[0-9a-z]+)*|f16|f32|bf16|fp16|fp32)$",
                           re.IGNORECASE)


def display_name(path: str | Path) -> str:
    """The one name the app gives a model (card, message headers, window title): its file
    name without the extension and the quantization tag ("SmolLM2-135M-Instruct" for
    SmolLM2-135M-Instruct.Q4_1.gguf). The file name is what the user chose and will
    recognise, and it is known before the model loads."""
    stem = Path(str(path)).name
    if stem.lower().endswith(".gguf"):
        stem = stem[:-5]
    short = _QUANT_SUFFIX.sub("", stem)
    return short or stem or "Model"


def describe_model(model: Model, path: str | Path) -> dict:
    """What the model card shows (from a header-only or fully loaded model).

    Never raises on odd metadata: per-layer arrays (gemma4 stores e.g. the KV head
    count once per layer), strings or junk all go through ``ember.metadata``."""
    meta = model.metadata
    arch = model.arch
    n_layer = model.n_layer
    head_values = meta_ints(meta.get(f"{arch}.attention.head_count"))
    kv_values = meta_ints(meta.get(f"{arch}.attention.head_count_kv"))
    n_head = max(head_values, default=0) or 1
    n_head_kv = max(kv_values, default=0) or n_head
    # the KV cache holds every layer's own heads: sum them where they differ per layer
    if len(kv_values) > 1:
        kv_heads_total = sum(v or n_head for v in kv_values)
    else:
        kv_heads_total = n_head_kv * max(n_layer, 1)
    n_embd = model.n_embd
    head_dim = meta_int(meta.get(f"{arch}.attention.key_length")) or max(n_embd // n_head, 1)
    general_name = meta.get("general.name")
    template = meta.get("tokenizer.chat_template")
    builtin = detect_builtin_format(meta)
    tokens = meta.get("tokenizer.ggml.tokens")
    return {
        "path": str(path), "file_name": Path(path).name, "name": display_name(path),
        "general_name": str(general_name) if general_name else "", "arch": arch,
        "n_params": model.n_params, "ftype": model.ftype, "file_size": model.file_size,
        "n_ctx_train": model.n_ctx_train, "n_layer": n_layer, "n_embd": n_embd,
        "n_head": n_head, "n_head_kv": n_head_kv, "kv_heads_total": kv_heads_total,
        "head_dim": head_dim,
        "heads_text": _heads_text(head_values, kv_values),
        "n_ff": meta_int(meta.get(f"{arch}.feed_forward_length")) or 4 * n_embd,
        "n_vocab": meta_int(meta.get(f"{arch}.vocab_size"))
        or (len(tokens) if isinstance(tokens, list) else 0) or 32000,
        "has_template": isinstance(template, str) and bool(template.strip()),
        "builtin_format": builtin.name if builtin else None,
        "builtin_format_label": builtin.label if builtin else None,
        "size_label": meta.get("general.size_label"),
    }


def _heads_text(heads: list[int], kv: list[int]) -> str:
    """ "9, KV 3": query heads and key/value heads; a per-layer array as its most
    common value and range ("16, KV 8 (per layer: 2-8)")."""
    if not heads:
        return "—"
    text = per_layer_summary(heads)
    if kv and kv != heads:
        text += f", KV {per_layer_summary(kv)}"
    return text


def estimate_ram(info: dict, n_ctx: int, n_batch: int = 512) -> int:
    """Bytes: mapped weights + F16 KV cache + activations and logits + runtime."""
    kv_heads = info.get("kv_heads_total") or info["n_layer"] * info["n_head_kv"]
    kv = 2 * n_ctx * info["head_dim"] * kv_heads * 2
    act = n_batch * max(info["n_embd"] * 4, info["n_ff"]) * 4 * 4
    act += n_batch * info["n_head"] * n_ctx * 4  # attention scores for one batch
    logits = info["n_vocab"] * 4 * 2
    return int(info["file_size"] + kv + act + logits + 48 * 2**20)


def effective_n_ctx(requested: int, n_ctx_train: int) -> int:
    return min(requested, n_ctx_train) if n_ctx_train > 0 else requested


def human_count(n: float) -> str:
    for unit in ("", "K", "M", "B", "T"):
        if abs(n) < 1000:
            return f"{n:.0f}" if not unit else f"{n:.1f}".rstrip("0").rstrip(".") + unit
        n /= 1000
    return f"{n:.1f}P"


def human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1024 or unit == "TB":
            return f"{n:.0f} {unit}" if unit in ("B", "KB") else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TB"


# ---- loading -------------------------------------------------------------------------------

class LoadWorker(QThread):
    """Reads the header (for the card), then loads the weights with progress; Cancel works
    in both steps. The model is handed over only when everything succeeded."""

    header = Signal(dict)
    progress = Signal(float)
    loaded = Signal(object, object, dict)  # model, ChatTemplate, info
    failed = Signal(str, str, str)  # path, title, detail
    cancelled = Signal(str)

    def __init__(self, path: str, n_ctx: int, n_threads: int, parent=None):
        super().__init__(parent)
        self.path = str(path)
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self.cancel_event = threading.Event()
        self._last_emit = 0.0

    def cancel(self) -> None:
        self.cancel_event.set()

    def _on_progress(self, fraction: float) -> bool:
        now = time.monotonic()
        if now - self._last_emit > 0.03 or fraction >= 1.0:
            self._last_emit = now
            self.progress.emit(fraction)
        return not self.cancel_event.is_set()

    def run(self) -> None:
        from ..engine import CancelledError
        try:
            if not Path(self.path).is_file():
                self.failed.emit(self.path, "The file could not be read",
                                 f"{self.path} does not exist or is not a file.")
                return
            head = Model(self.path, metadata_only=True)
            info = describe_model(head, self.path)
            head.close()
            self.header.emit(info)
            if self.cancel_event.is_set():
                self.cancelled.emit(self.path)
                return
            n_ctx = effective_n_ctx(self.n_ctx, info["n_ctx_train"])
            model = Model(self.path, n_ctx=n_ctx, n_threads=self.n_threads or None,
                          progress=self._on_progress, cancel=self.cancel_event)
            if self.cancel_event.is_set():
                model.close()
                self.cancelled.emit(self.path)
                return
            info["n_ctx"] = model.n_ctx  # creates the context (KV cache) now, not on first send
            template = ChatTemplate.from_metadata(model.metadata, token_text=model.token_text)
            self.loaded.emit(model, template, info)
        except CancelledError:
            self.cancelled.emit(self.path)
        except EmberError as e:
            self.failed.emit(self.path, error_title(e.status), e.message or str(e))
        except MemoryError:
            self.failed.emit(self.path, error_title(native.ERR_OUT_OF_MEMORY), "")
        except Exception as e:  # a bug: report it, keep the app alive
            self.failed.emit(self.path, "The model could not be loaded",
                             f"{type(e).__name__}: {e}")


# ---- generation ---------------------------------------------------------------------------

class ContextFull(Exception):
    pass


@dataclass
class GenRequest:
    conv_id: int
    msg_id: int
    messages: list[dict]  # the chat so far (system first, if any), without the reply
    prefix: str = ""  # reply text already there (continue)
    max_new_tokens: int = 512
    params: SamplingParams = field(default_factory=SamplingParams)
    raw: bool = False
    policy: str = "drop_oldest"  # or "stop"


@dataclass
class BuiltPrompt:
    text: str
    stop_strings: tuple[str, ...]
    n_tokens: int
    dropped: int = 0
    notice: str | None = None
    max_tokens: int = 0
    think_open: bool = False  # the prompt ends inside <think>: the reply starts in thoughts


def _render(template: ChatTemplate, messages: list[dict], prefix: str, raw: bool):
    """The prompt, the text to feed (prompt + the reply so far, when continuing) and
    whether the prompt opened a reasoning block that the reply starts inside."""
    if raw:
        messages = strip_thoughts_from_history(messages)
        text = "".join(m["content"] + ("\n\n" if m["role"] == "system" else "")
                       for m in messages) + prefix
        return raw_prompt(text, [template.eos_token]), text, False
    p = template.prompt(messages)
    opened = prompt_opens_thinking(p.text)
    if opened and prefix.lstrip().startswith(THINK_OPEN):
        # the stored reply carries the tag the template already wrote: not twice
        prefix = prefix.lstrip()[len(THINK_OPEN):]
    return p, p.text + prefix, opened


def build_prompt(model: Model, template: ChatTemplate, req: GenRequest) -> BuiltPrompt:
    """Renders the chat and fits it into the context window by the request's policy:
    drop_oldest removes the oldest turns after the system prompt; stop refuses."""
    n_ctx = model.n_ctx
    reserve = min(req.max_new_tokens, max(n_ctx // 4, 16))
    msgs = list(req.messages)
    dropped = 0
    while True:
        p, text, opened = _render(template, msgs, req.prefix, req.raw)
        n = len(model.tokenize(text, add_special=True, parse_special=not req.raw))
        if n + reserve <= n_ctx:
            break
        if req.policy == "stop":
            raise ContextFull(
                f"The conversation fills the context window ({n} of {n_ctx} tokens, and "
                f"{reserve} more are needed for the reply). Start a new chat, raise the "
                f"context length, or choose \"Drop oldest messages\" in Settings.")
        first = next((i for i, m in enumerate(msgs) if m["role"] != "system"), None)
        if first is None or first >= len(msgs) - 1:
            raise ContextFull(f"The message is too long for the context window ({n} of "
                              f"{n_ctx} tokens). Shorten it or raise the context length in "
                              f"Settings.")
        del msgs[first]
        dropped += 1
        while first < len(msgs) - 1 and msgs[first]["role"] == "assistant":
            del msgs[first]
            dropped += 1
    notice = None
    if dropped:
        notice = (f"{dropped} earlier message{'s' if dropped != 1 else ''} did not fit in the "
                  f"{n_ctx}-token context and {'were' if dropped != 1 else 'was'} left out.")
    return BuiltPrompt(text, tuple(p.stop_strings), n, dropped, notice,
                       max(1, min(req.max_new_tokens, n_ctx - n)), opened)


class GenerateWorker(QThread):
    prepared = Signal(dict)  # n_prompt, dropped, notice, think_open
    chunk = Signal(str)
    finished_gen = Signal(dict)  # stats
    failed = Signal(str)

    def __init__(self, model: Model, session: Session, template: ChatTemplate, req: GenRequest,
                 parent=None):
        super().__init__(parent)
        self.model = model
        self.session = session
        self.template = template
        self.req = req
        self._stop = threading.Event()

    def stop(self) -> None:
        self._stop.set()
        self.model.cancel()

    def run(self) -> None:
        stats = GenerationStats()
        n_prompt = 0
        try:
            built = build_prompt(self.model, self.template, self.req)
            n_prompt = built.n_tokens
            self.prepared.emit({"n_prompt": built.n_tokens, "dropped": built.dropped,
                                "notice": built.notice, "think_open": built.think_open})
            if self._stop.is_set():
                stats.stop_reason = "cancelled"
            else:
                scanner = StopScanner(built.stop_strings)
                gen = self.session.generate(built.text, built.max_tokens, self.req.params,
                                            stats=stats)
                try:
                    if self._stop.is_set():  # Stop raced with the start: cancel() was reset
                        self.model.cancel()
                    for piece in gen:
                        text, stopped = scanner.feed(piece)
                        if text:
                            self.chunk.emit(text)
                        if stopped:
                            stats.stop_reason = "stop_string"
                            break
                        if self._stop.is_set():
                            self.model.cancel()
                    else:
                        tail = scanner.flush()
                        if tail:
                            self.chunk.emit(tail)
                finally:
                    gen.close()
                if self._stop.is_set() and stats.stop_reason not in ("eog", "stop_string"):
                    stats.stop_reason = "cancelled"
        except ContextFull as e:
            self.failed.emit(str(e))
            stats.stop_reason = "context_full"
        except EmberError as e:
            self.failed.emit(f"Generation failed: {e.message or e}")
            stats.stop_reason = "error"
        except Exception as e:
            self.failed.emit(f"Generation failed: {type(e).__name__}: {e}")
            stats.stop_reason = "error"
        try:
            n_past = self.model.n_past
        except Exception:
            n_past = n_prompt + stats.generated_tokens
        self.finished_gen.emit({
            "prompt_tokens": stats.prompt_tokens or n_prompt,
            "generated_tokens": stats.generated_tokens,
            "prompt_evaluated": stats.prompt_evaluated,
            "prompt_seconds": stats.prompt_seconds,
            "generation_seconds": stats.generation_seconds,
            "stop_reason": stats.stop_reason,
            "n_past": n_past,
        })
