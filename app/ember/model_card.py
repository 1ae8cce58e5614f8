"""What the app says about a model file: its one display name, the card's facts from the
header, a RAM estimate for a context length, and what a failed load means for the user."""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from .chat import detect_builtin_format
from .engine import EmberError, EngineMemoryError, FileReadError, Model, ModelFormatError, UnsupportedModelError
from .metadata import meta_int, meta_ints, per_layer_summary

@dataclass(frozen=True)
class LoadFailure:
    """What the app says when a model does not load: a heading, a sentence on what it
    means and what to do, and the engine's own words (shown under "Details")."""
    title: str
    advice: str = ""
    details: str = ""


_ADVICE_MEMORY = ("Close other programs, or choose a smaller model (fewer parameters or a "
                  "smaller quantization).")
# the engine's words for a file that ends before its header or tensors do (native gguf.cpp)
_TRUNCATED = ("file is truncated", "larger than the file", "past the end of the file",
              "too small to be a GGUF file")


def _looks_like_text(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError:
        return False
    if not head or b"\0" in head:
        return False
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as e:
        return e.start > len(head) - 4  # only a character cut at the end of the sample
    return True


def _file_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return -1


def explain_load_failure(error: BaseException, path: str | Path | None = None) -> LoadFailure:
    """The user's sentence for a failed load, by the kind of failure and, for a file the
    engine could not parse, by what the file turns out to be."""
    raw = (error.message or str(error)) if isinstance(error, EmberError) else str(error)
    p = Path(path) if path is not None else None
    if isinstance(error, (MemoryError, EngineMemoryError)):
        return LoadFailure("Not enough memory to load this model", _ADVICE_MEMORY, raw)
    if isinstance(error, FileReadError) or (p is not None and not p.is_file()):
        if p is not None and not p.exists():
            return LoadFailure("The file could not be read",
                               "It is not there any more: was it moved or deleted?",
                               f"{p} does not exist or is not a file.")
        return LoadFailure("The file could not be read",
                           "Check that its disk is connected and that you may read it.", raw)
    if isinstance(error, UnsupportedModelError):
        arch = re.search(r"architecture '([^']*)' is not supported", raw)
        if arch:
            known = re.search(r"\(supported: ([^)]*)\)", raw)
            runs = f" Ember runs {known.group(1)}." if known else ""
            return LoadFailure("Ember can't run this model",
                               f"It was made for a model family Ember does not run yet: "
                               f"{arch.group(1)}.{runs}", raw)
        return LoadFailure("Ember can't run this model",
                           "It needs something this version of Ember does not support "
                           "(see Details).", raw)
    if isinstance(error, ModelFormatError):
        if p is not None and _file_size(p) == 0:
            return LoadFailure("This file is empty", "Nothing was saved in it: download it "
                               "again.", raw)
        if "not a GGUF file" in raw:
            if p is not None and _looks_like_text(p):
                return LoadFailure("This is a text file, not a model",
                                   "Ember opens GGUF model files (.gguf); this one holds "
                                   "text.", raw)
            return LoadFailure("This is not a model file",
                               "Ember opens GGUF model files (.gguf); this file is "
                               "something else.", raw)
        if any(words in raw for words in _TRUNCATED):
            return LoadFailure("This file is incomplete",
                               "It ends before the model in it does, as when a download is "
                               "cut short: download it again.", raw)
        return LoadFailure("This model file is damaged",
                           "Its contents do not hold together (a corrupted copy, or a tool "
                           "that wrote it wrongly): download it again or get it elsewhere.",
                           raw)
    return LoadFailure("The model could not be loaded", "", raw)


def error_title(error: BaseException, path: str | Path | None = None) -> str:
    """A heading for a failed load."""
    return explain_load_failure(error, path).title


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
    # no n_ctx-long scores buffer: the engine's attention is an online softmax over blocks
    # of keys (native/src/cpu/ops.cpp), so only the KV cache grows with the context
    act = n_batch * max(info["n_embd"] * 4, info["n_ff"]) * 4 * 4
    logits = info["n_vocab"] * 4 * 2
    return int(info["file_size"] + kv + act + logits + 48 * 2**20)


def effective_n_ctx(requested: int, n_ctx_train: int) -> int:
    return min(requested, n_ctx_train) if n_ctx_train > 0 else requested
