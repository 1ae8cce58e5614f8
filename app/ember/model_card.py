"""What the app says about a model file: its one display name, the card's facts from the
header, a RAM estimate for a context length, and what a failed load means for the user."""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from .chat import detect_builtin_format
from .engine import EmberError, EngineMemoryError, FileReadError, Model, ModelFormatError, UnsupportedModelError
from .experts import expert_split
from .metadata import count_text, meta_int, meta_ints, per_layer_summary

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


def _moe_memory_advice(split) -> str:
    """A mixture of experts refused by the engine's memory check, which counts the whole
    file against the RAM (native/src/model/footprint.cpp) where a token reads only its
    working set."""
    gb = _gb
    return (f"This is a mixture-of-experts model: each token reads only "
            f"{gb(split.working_set_bytes)} of its {gb(split.file_size)}, but Ember's memory "
            f"check counts the whole file. Start Ember with EMBER_NO_MEMORY_CHECK=1 to load "
            f"it anyway (replies are slower while the experts in use are read from disk), "
            f"or choose a smaller quantization.")


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
        split = expert_split(p) if p is not None and p.is_file() else None
        if split is not None and "RLIMIT_AS" not in raw:
            return LoadFailure("Not enough memory to load this model", _moe_memory_advice(split),
                               raw)
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
    recurrent = _recurrent_layers(meta, arch, n_layer)
    # the KV cache holds every attention layer's own heads: sum them where they differ per
    # layer (recurrent layers keep a state instead)
    if len(kv_values) > 1:
        kv_heads_total = sum(v or n_head for i, v in enumerate(kv_values[:n_layer]) if i not in recurrent)
    else:
        kv_heads_total = n_head_kv * max(n_layer - len(recurrent), 1)
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
        "n_recurrent_layers": len(recurrent),
        "recurrent_state_bytes": _recurrent_state_bytes(meta, arch, len(recurrent)),
        "heads_text": _heads_text(head_values, kv_values),
        # a MoE layer's widest intermediates: its chosen experts' side by side
        "n_ff": max(meta_int(meta.get(f"{arch}.feed_forward_length")) or 4 * n_embd,
                    meta_int(meta.get(f"{arch}.expert_used_count"))
                    * meta_int(meta.get(f"{arch}.expert_feed_forward_length"))),
        "n_vocab": meta_int(meta.get(f"{arch}.vocab_size"))
        or (len(tokens) if isinstance(tokens, list) else 0) or 32000,
        "has_template": isinstance(template, str) and bool(template.strip()),
        "builtin_format": builtin.name if builtin else None,
        "builtin_format_label": builtin.label if builtin else None,
        "size_label": meta.get("general.size_label"),
        **_experts_info(path),
        "ram_free": system_memory_free(),
    }


def _recurrent_layers(meta: dict, arch: str, n_layer: int) -> set[int]:
    """The blocks that keep a recurrent state instead of a KV cache (Qwen3.5's gated
    delta-net blocks, LFM2's short convolutions), read as the engine reads them
    (native/src/model/qwen35.cpp, lfm2.cpp): a flag per block, else all but every
    full_attention_interval-th; LFM2's blocks with 0 KV heads."""
    if f"{arch}.shortconv.l_cache" in meta:
        kv = meta.get(f"{arch}.attention.head_count_kv")
        return {i for i, v in enumerate(kv[:n_layer]) if not v} if isinstance(kv, list) else set()
    if f"{arch}.ssm.state_size" not in meta:
        return set()
    flags = meta.get(f"{arch}.attention.recurrent_layers")
    if isinstance(flags, list):
        return {i for i, f in enumerate(flags[:n_layer]) if f}
    interval = meta_int(meta.get(f"{arch}.full_attention_interval")) or 4
    nextn = meta_int(meta.get(f"{arch}.nextn_predict_layers"))
    return {i for i in range(max(n_layer - nextn, 0)) if (i + 1) % interval}


def _recurrent_state_bytes(meta: dict, arch: str, n_recurrent: int) -> int:
    """One copy of the recurrent layers' state: per layer the convolution's last
    d_conv - 1 inputs per channel and the delta rule's S x S matrix per value head, F32."""
    if not n_recurrent:
        return 0
    if f"{arch}.shortconv.l_cache" in meta:   # LFM2: the convolution's inputs only
        width = meta_int(meta.get(f"{arch}.shortconv.l_cache"))
        return n_recurrent * 4 * max(width - 1, 0) * meta_int(meta.get(f"{arch}.embedding_length"))
    d_conv = meta_int(meta.get(f"{arch}.ssm.conv_kernel"))
    S = meta_int(meta.get(f"{arch}.ssm.state_size"))
    heads = meta_int(meta.get(f"{arch}.ssm.time_step_rank"))
    groups = meta_int(meta.get(f"{arch}.ssm.group_count"))
    inner = meta_int(meta.get(f"{arch}.ssm.inner_size"))
    channels = 2 * S * groups + inner
    return n_recurrent * 4 * (max(d_conv - 1, 0) * channels + S * S * heads)


# the live state and the engine's snapshot slots (model/recurrent_state.h)
RECURRENT_STATE_COPIES = 1 + 4


def _experts_info(path: str | Path) -> dict:
    """The card's mixture-of-experts facts ({} for a dense model)."""
    split = expert_split(path)
    if split is None:
        return {}
    return {"n_expert": split.n_expert, "n_expert_used": split.n_expert_used,
            "n_params_active": split.active_params,
            "working_set_bytes": split.working_set_bytes}


def system_memory_free() -> int:
    """Bytes of RAM this process may still use (the engine's CPU row: MemAvailable or a
    cgroup's limit); 0 where it does not say."""
    from .engine.system import backend_devices
    try:
        return next((d.memory_free for d in backend_devices() if d.backend == "cpu"), 0)
    except EmberError:
        return 0


def parameters_text(info: dict) -> str:
    """ "134.5M parameters", or for a mixture of experts "30.5B parameters, 3.3B active,
    128 experts (8 used)": the count, what one token runs through, and the experts."""
    text = f"{count_text(info['n_params'])} parameters"
    if info.get("n_expert"):
        text += (f", {count_text(info['n_params_active'])} active, {info['n_expert']} experts "
                 f"({info['n_expert_used']} used)")
    return text


def _heads_text(heads: list[int], kv: list[int]) -> str:
    """ "9, KV 3": query heads and key/value heads; a per-layer array as its most
    common value and range ("16, KV 8 (per layer: 2-8)")."""
    if not heads:
        return "—"
    text = per_layer_summary(heads)
    if kv and kv != heads:
        text += f", KV {per_layer_summary(kv)}"
    return text


@dataclass(frozen=True)
class RamEstimate:
    """What a model and a context take in memory, in bytes, in the two kinds the OS treats
    differently (native/src/core/memory.h judges them the same way)."""
    mapped: int       # the file, mapped: page cache the OS may drop and read again
    working_set: int  # the part of the mapping one decoded token reads (all of a dense model)
    allocated: int    # KV cache, activations, logits, runtime: resident for as long as it runs

    @property
    def total(self) -> int:
        """Everything resident at once when the whole file stays in the page cache."""
        return self.mapped + self.allocated

    @property
    def decode(self) -> int:
        """What must stay resident for decode not to read the disk for every token."""
        return self.working_set + self.allocated

    @property
    def sparse(self) -> bool:
        return self.working_set < self.mapped


def estimate_memory(info: dict, n_ctx: int, n_batch: int = 512) -> RamEstimate:
    """The file mapped, the working set a decoded token reads (non-expert tensors plus
    n_expert_used / n_expert of the expert tensors for a mixture of experts), and the F16 KV
    cache + recurrent state (live and snapshots) + activations and logits + runtime allocated
    for a context of n_ctx tokens."""
    kv_heads = info.get("kv_heads_total") or info["n_layer"] * info["n_head_kv"]
    kv = 2 * n_ctx * info["head_dim"] * kv_heads * 2
    # no n_ctx-long scores buffer: the engine's attention is an online softmax over blocks
    # of keys (native/src/cpu/ops.cpp), so only the KV cache grows with the context
    act = n_batch * max(info["n_embd"] * 4, info["n_ff"]) * 4 * 4
    logits = info["n_vocab"] * 4 * 2
    state = info.get("recurrent_state_bytes", 0) * RECURRENT_STATE_COPIES
    mapped = int(info["file_size"])
    working = int(info.get("working_set_bytes") or mapped)
    return RamEstimate(mapped, min(working, mapped), int(kv + state + act + logits + 48 * 2**20))


def estimate_ram(info: dict, n_ctx: int, n_batch: int = 512) -> int:
    """Bytes: mapped weights + F16 KV cache + activations and logits + runtime."""
    return estimate_memory(info, n_ctx, n_batch).total


@dataclass(frozen=True)
class MemoryFit:
    """Whether a model and context fit the free RAM, and the sentence that says so."""
    fits: bool
    text: str     # short, for the card: "fits in 12.3 GB free"
    detail: str   # the tooltip: what is counted and why


def memory_fit(est: RamEstimate, free: int) -> MemoryFit:
    """Judges an estimate against the free RAM (0: unknown). A mixture-of-experts file
    larger than what is free still fits when its working set does: the mapping's pages
    are the OS's to drop and read again, and a token reads only the experts it chose."""
    gb = _gb
    counted = (f"File {gb(est.mapped)} mapped; one token reads {gb(est.working_set)} of it; "
               f"KV cache and buffers {gb(est.allocated)}.") if est.sparse else (
              f"Weights {gb(est.mapped)} mapped; KV cache and buffers {gb(est.allocated)}.")
    if free <= 0:
        return MemoryFit(True, "", counted)
    if est.total <= free:
        return MemoryFit(True, f"fits in {gb(free)} free", counted)
    if est.sparse and est.decode <= free:
        return MemoryFit(True, f"working set {gb(est.decode)} fits in {gb(free)} free",
                         counted + " The whole file does not fit in the free memory, but "
                         "the experts a token uses do: the system keeps the ones in use "
                         "and reads others from disk when the text needs them, so the "
                         "first replies can be slower.")
    need = est.decode if est.sparse else est.total
    return MemoryFit(False, f"needs {gb(need)}, {gb(free)} free",
                     counted + " That is more than the free memory: close other programs, "
                     "choose a smaller context, or a smaller model.")


def _gb(n: int) -> str:
    return f"{n / 2**30:.1f} GB"


def effective_n_ctx(requested: int, n_ctx_train: int) -> int:
    return min(requested, n_ctx_train) if n_ctx_train > 0 else requested
