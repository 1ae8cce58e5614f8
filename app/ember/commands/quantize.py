"""`ember quantize`: rewrite a GGUF model in another element type, choosing each tensor's
type by llama.cpp's rules for the named mixes (Q4_K_M keeps attn_v and some ffn_down in
Q6_K, ...) and writing the file in llama-quantize's layout, so that the bytes match."""
from __future__ import annotations

import mmap
import os
import struct
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from .. import engine
from ..gguf_file import GGUFLayout, TensorInfo, encode_kv_u32, encode_tensor_info, read_layout

if TYPE_CHECKING:
    import numpy as np

__all__ = ["FTYPES", "CancelledError", "Choice", "QuantizePlan", "RequantizeError",
           "estimate_choices", "estimate_sizes", "plan", "quantize_file"]

# GGUF element type ids
F32, F16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 = 0, 1, 2, 3, 6, 7, 8
Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, BF16 = 10, 11, 12, 13, 14, 30
IQ4_NL, IQ4_XS, MXFP4 = 20, 23, 39
TYPE_NAMES = {F32: "F32", F16: "F16", Q4_0: "Q4_0", Q4_1: "Q4_1", Q5_0: "Q5_0", Q5_1: "Q5_1",
              Q8_0: "Q8_0", Q2_K: "Q2_K", Q3_K: "Q3_K", Q4_K: "Q4_K", Q5_K: "Q5_K",
              Q6_K: "Q6_K", BF16: "BF16", IQ4_NL: "IQ4_NL", IQ4_XS: "IQ4_XS", MXFP4: "MXFP4"}
QUANTIZED = {Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, MXFP4}

# llama.cpp's file types (general.file_type): name -> (ftype id, default tensor type).
# Q3_K, Q4_K and Q5_K are llama-quantize's aliases for the _M mixes.
FTYPES: dict[str, tuple[int, int]] = {
    "F32": (0, F32), "F16": (1, F16), "BF16": (32, BF16),
    "Q4_0": (2, Q4_0), "Q4_1": (3, Q4_1), "Q5_0": (8, Q5_0), "Q5_1": (9, Q5_1), "Q8_0": (7, Q8_0),
    "Q2_K": (10, Q2_K), "Q3_K_S": (11, Q3_K), "Q3_K_M": (12, Q3_K), "Q3_K_L": (13, Q3_K),
    "Q4_K_S": (14, Q4_K), "Q4_K_M": (15, Q4_K), "Q5_K_S": (16, Q5_K), "Q5_K_M": (17, Q5_K),
    "Q6_K": (18, Q6_K), "IQ4_NL": (25, IQ4_NL), "IQ4_XS": (30, IQ4_XS),
    # gpt-oss's type: the experts (3-D tensors) MXFP4, every other weight Q8_0
    "MXFP4_MOE": (38, MXFP4),
}
ALIASES = {"Q3_K": "Q3_K_M", "Q4_K": "Q4_K_M", "Q5_K": "Q5_K_M"}
QUANTIZATION_VERSION = 2  # ggml's GGML_QNT_VERSION: bumped when a block format changes
# the K-quants' fallback when a row is not a whole number of 256-element blocks
_FALLBACK = {Q2_K: Q4_0, Q3_K: Q4_0, Q4_K: Q5_0, Q5_K: Q5_1, Q6_K: Q8_0, IQ4_XS: IQ4_NL}
_NOT_QUANTIZED = ("_norm.weight", "ffn_gate_inp.weight", "ffn_gate_tid2eid.weight", "altup",
                  "laurel", "per_layer_model_proj", "ssm_conv1d", "shortconv.conv.weight",
                  "indexer.k_proj.weight", "indexer.q_proj.weight", "time_mix_first.weight",
                  "time_mix_w0.weight", "time_mix_w1.weight", "time_mix_w2.weight",
                  "time_mix_v0.weight", "time_mix_v1.weight", "time_mix_v2.weight",
                  "time_mix_a0.weight", "time_mix_a1.weight", "time_mix_a2.weight",
                  "time_mix_g1.weight", "time_mix_g2.weight", "time_mix_decay_w1.weight",
                  "time_mix_decay_w2.weight", "time_mix_lerp_fused.weight", "attn_rel_b.weight",
                  ".position_embd", "sam.pos_embd", "sam.neck.", "sam.net_", ".rel_pos",
                  ".patch_embd", ".patch_merger", "a.rvq.codebook", "mm.a.code_embd")


class CancelledError(Exception):
    pass


class RequantizeError(ValueError):
    """The source's tensors are already quantized and the caller did not allow converting
    them again (each conversion loses precision)."""

    def __init__(self, tensor: str, type_name: str):
        self.tensor = tensor
        self.type_name = type_name
        super().__init__(f"{tensor} is already {type_name}: requantizing loses precision "
                         "(pass --allow-requantize to do it anyway)")


def canonical_name(name: str) -> str:
    n = name.strip().upper()
    n = ALIASES.get(n, n)
    if n not in FTYPES:
        raise ValueError(f"unknown type {name!r}; choose one of: "
                         + ", ".join(list(FTYPES) + list(ALIASES)))
    return n


def type_bytes(type_id: int, n_elements: int, row: int) -> int:
    bs, bb = engine.type_block(type_id)
    return n_elements // row * (row // bs * bb)


def _layer_of(name: str) -> int:
    if name.startswith("blk."):
        digits = name[4:].split(".", 1)[0]
        if digits.isdigit() or (digits[:1] == "-" and digits[1:].isdigit()):
            return int(digits)
    return -1


def tensor_order(tensors: list[TensorInfo]) -> list[TensorInfo]:
    """llama.cpp's loader keeps tensors sorted by layer (non-layer tensors first), then by name
    (byte order); llama-quantize writes them in that order."""
    return sorted(tensors, key=lambda t: (_layer_of(t.name), t.name.encode()))


def _category(name: str) -> str:
    if name == "output.weight":
        return "output"
    if name in ("token_embd.weight", "per_layer_token_embd.weight"):
        return "token_embd"
    for key, cat in (("attn_qkv.weight", "attn_qkv"), ("attn_kv_b.weight", "attn_kv_b"),
                     ("attn_v.weight", "attn_v"), ("attn_k.weight", "attn_k"),
                     ("attn_q.weight", "attn_q"), ("attn_output.weight", "attn_output"),
                     ("ffn_up", "ffn_up"), ("ffn_gate", "ffn_gate"), ("ffn_down", "ffn_down")):
        if key in name:
            return cat
    return "other"


def allows_quantization(t: TensorInfo) -> bool:
    """Which tensors a mix may change: 2-D and larger weights, not norms, embeddings of
    positions or token types, routers, or the small special tensors of some families."""
    if t.n_dims < 2:
        return False
    name = t.name
    if name.rfind("weight") != len(name) - 6:
        return False
    if any(s in name for s in _NOT_QUANTIZED):
        return False
    return name not in ("position_embd.weight", "token_types.weight")


@dataclass
class _Hparams:
    arch: str
    n_layer: int
    n_gqa: int
    n_expert: int
    is_70b: bool


def _hparams(layout: GGUFLayout) -> _Hparams:
    v = layout.values
    arch = str(v.get("general.architecture", ""))

    def num(key, default=0):
        x = v.get(f"{arch}.{key}", default)
        return x if isinstance(x, int) and not isinstance(x, bool) else default
    n_layer = num("block_count")
    n_head = num("attention.head_count")
    n_head_kv = num("attention.head_count_kv", n_head) or n_head
    n_gqa = n_head // n_head_kv if n_head and n_head_kv else 0
    is_70b = arch == "llama" and n_layer == 80 and n_head != n_head_kv
    return _Hparams(arch, n_layer, n_gqa, num("expert_count"), is_70b)


def _use_more_bits(i: int, n: int) -> bool:
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


class _Rules:
    """llama.cpp's per-tensor choice for a mix (llama_tensor_get_type): the K-quant, legacy,
    IQ4_NL / IQ4_XS (without an importance matrix) and MXFP4_MOE mixes; counters advance in
    the order tensors are visited, as there."""

    def __init__(self, hp: _Hparams, ftype: str, tied: bool, n_attn_v: int):
        self.hp, self.ftype, self.tied = hp, ftype, tied
        self.n_attn_v, self.i_attn_v, self.i_ffn_down = n_attn_v, 0, 0

    def choose(self, t: TensorInfo, new: int) -> int:
        hp, f, cat = self.hp, self.ftype, _category(t.name)
        falcon = hp.arch == "falcon"
        iq4 = f in ("IQ4_NL", "IQ4_XS")
        if cat == "output" or (self.tied and cat == "token_embd"):
            bs, _ = engine.type_block(new)
            if f == "MXFP4_MOE" or falcon or t.shape[0] % bs:
                new = Q8_0
            elif new != Q8_0:
                new = Q6_K
        elif f == "MXFP4_MOE":
            new = MXFP4 if len(t.shape) > 2 and t.shape[2] > 1 else Q8_0
        elif cat == "token_embd":
            pass
        elif cat in ("attn_v", "attn_qkv", "attn_kv_b"):
            if f == "Q2_K":
                new = Q4_K if hp.n_gqa >= 4 else Q3_K
            elif f == "Q3_K_M":
                new = Q5_K if self.i_attn_v < 2 else Q4_K
            elif f == "Q3_K_L":
                new = Q5_K
            elif iq4 and hp.n_gqa >= 4:
                new = Q5_K
            elif f in ("Q4_K_M", "Q5_K_M") and _use_more_bits(self.i_attn_v, self.n_attn_v):
                new = Q6_K
            elif f == "Q4_K_S" and self.i_attn_v < 4:
                new = Q5_K
            if hp.is_70b and new in (Q3_K, Q4_K):
                new = Q5_K
            if hp.n_expert == 8:
                new = Q8_0
            self.i_attn_v += 1
        elif cat == "attn_k":
            if hp.n_expert == 8:
                new = Q8_0
        elif cat == "ffn_down":
            i, n = self._layer(t.name, self.i_ffn_down)
            if f == "Q2_K":
                new = Q3_K
            elif f == "Q3_K_M":
                new = Q5_K if i < n // 16 else \
                    Q4_K if not falcon or _use_more_bits(i, n) else Q3_K
            elif f == "Q3_K_L":
                new = Q4_K if falcon else Q5_K
            elif f == "Q4_K_M":
                if falcon:
                    new = Q6_K if i < n // 16 else Q5_K if _use_more_bits(i, n) else Q4_K
                elif _use_more_bits(i, n):
                    new = Q6_K
            elif iq4 and i < n // 8:  # no importance matrix
                new = Q5_K
            elif f == "Q5_K_M" and _use_more_bits(i, n):
                new = Q6_K
            elif f == "Q4_K_S" and not falcon and i < n // 8:
                new = Q5_K
            self.i_ffn_down += 1
        elif cat == "attn_output":
            if not falcon:
                if hp.n_expert == 8:
                    if f in ("Q2_K", "Q3_K_S", "Q3_K_M", "Q4_K_S", "Q4_K_M", "IQ4_NL", "IQ4_XS"):
                        new = Q5_K
                else:
                    new = {"Q2_K": Q3_K, "Q3_K_M": Q4_K, "Q3_K_L": Q5_K}.get(f, new)
            elif f == "Q3_K_L":
                new = Q4_K
        return new

    def _layer(self, name: str, counter: int) -> tuple[int, int]:
        n = self.hp.n_layer
        if self.hp.n_expert > 1:
            i = _layer_of(name)
            if not 0 <= i < n:
                raise ValueError(f"cannot tell the layer of tensor {name}")
            return i, n
        return counter, n


def _fallback(t: TensorInfo, new: int) -> int:
    bs, _ = engine.type_block(new)
    if t.shape[0] % bs == 0:
        return new
    out = _FALLBACK.get(new, new)
    if t.shape[0] % engine.type_block(out)[0]:
        out = F16
    return out


@dataclass
class TensorPlan:
    info: TensorInfo
    new_type: int
    nbytes_in: int
    nbytes_out: int


@dataclass
class QuantizePlan:
    layout: GGUFLayout
    ftype_name: str
    ftype: int
    tensors: list[TensorPlan] = field(default_factory=list)

    def requantized(self) -> list[TensorPlan]:
        """The tensors, already quantized in the source, that this plan converts again."""
        return [tp for tp in self.tensors
                if tp.new_type != tp.info.type and tp.info.type in QUANTIZED]

    @property
    def size_out(self) -> int:
        meta = len(_metadata(self, {p.info.name: 0 for p in self.tensors}))
        return meta + sum(_pad(p.nbytes_out, self.layout.alignment) for p in self.tensors)


def _pad(n: int, a: int) -> int:
    return (n + a - 1) // a * a


def plan(layout: GGUFLayout, ftype_name: str, pure: bool = False) -> QuantizePlan:
    """Each tensor's output type for a mix, without reading any weights."""
    name = canonical_name(ftype_name)
    ftype, default = FTYPES[name]
    order = tensor_order(layout.tensors)
    hp = _hparams(layout)
    tied = not any(t.name == "output.weight" for t in order)
    n_attn_v = sum(_category(t.name) in ("attn_v", "attn_qkv", "attn_kv_b") for t in order)
    rules = _Rules(hp, name, tied, n_attn_v)
    out = QuantizePlan(layout, name, ftype)
    for t in order:
        new = t.type
        if allows_quantization(t):
            new = default
            if default in QUANTIZED:
                if not pure:
                    new = rules.choose(t, new)
                new = _fallback(t, new)
        bs, _ = engine.type_block(t.type)
        if bs == 0:
            raise ValueError(f"tensor {t.name} has type {t.type}, which Ember does not know")
        row = t.shape[0] if t.shape else 1
        out.tensors.append(TensorPlan(t, new, type_bytes(t.type, t.n_elements, row),
                                      type_bytes(new, t.n_elements, row)))
    return out


def estimate_sizes(path: str | Path, names: list[str] | None = None) -> dict[str, int]:
    """The output file size for each type name (the model card shows these)."""
    return {n: c.size for n, c in estimate_choices(path, names).items()}


@dataclass(frozen=True)
class Choice:
    """What a copy of a file in one type would be: its size, and the source's quantized
    types it would convert again (empty: made from float weights only, or kept as they are)."""
    size: int
    requantizes: tuple[str, ...]


def estimate_choices(path: str | Path, names: list[str] | None = None) -> dict[str, Choice]:
    """Each type name's Choice for the file at path, from its header alone."""
    layout = read_layout(path)
    out = {}
    for n in names or list(FTYPES):
        p = plan(layout, n)
        types = sorted({TYPE_NAMES[tp.info.type] for tp in p.requantized()})
        out[n] = Choice(p.size_out, tuple(types))
    return out


def _metadata(p: QuantizePlan, offsets: dict[str, int]) -> bytes:
    drop = {"general.quantization_version", "general.file_type", "split.no", "split.count",
            "split.tensors.count"}
    kv = [raw for key, raw in p.layout.kv_raw if key not in drop]
    kv.append(encode_kv_u32("general.quantization_version", QUANTIZATION_VERSION))
    kv.append(encode_kv_u32("general.file_type", p.ftype))
    head = b"GGUF" + struct.pack("<IQQ", 3, len(p.tensors), len(kv))
    infos = [encode_tensor_info(tp.info.name, tp.info.shape, tp.info.n_dims, tp.new_type,
                                offsets[tp.info.name]) for tp in p.tensors]
    meta = head + b"".join(kv) + b"".join(infos)
    return meta + bytes(_pad(len(meta), p.layout.alignment) - len(meta))


def _to_f32(type_id: int, raw: memoryview, n: int) -> np.ndarray:
    import numpy as np  # here, not at import: every `ember` command builds this parser
    if type_id == F32:
        return np.frombuffer(raw, dtype=np.float32, count=n)
    if type_id == F16:
        return np.frombuffer(raw, dtype=np.float16, count=n).astype(np.float32)
    if type_id == BF16:
        return (np.frombuffer(raw, dtype=np.uint16, count=n).astype(np.uint32) << 16).view(np.float32)
    return engine.dequantize(type_id, np.frombuffer(raw, dtype=np.uint8), n)


def quantize_file(src: str | Path, dst: str | Path, ftype_name: str, *, threads: int | None = None,
                  pure: bool = False, allow_requantize: bool = False,
                  progress: Callable[[int, int, TensorPlan], None] | None = None,
                  cancel: threading.Event | None = None) -> QuantizePlan:
    """Writes dst; progress(done_bytes, total_bytes, tensor) after each slice. On cancel (or
    any error) the partial output is removed."""
    threads = max(1, threads or os.cpu_count() or 1)
    with open(src, "rb") as f:
        buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    try:
        layout = read_layout(src, buf)
        p = plan(layout, ftype_name, pure=pure)
        again = p.requantized()
        if again and not allow_requantize:
            raise RequantizeError(again[0].info.name, TYPE_NAMES[again[0].info.type])
        offsets, pos = {}, 0
        for tp in p.tensors:
            offsets[tp.info.name] = pos
            pos += _pad(tp.nbytes_out, layout.alignment)
        meta = _metadata(p, offsets)
        total = sum(tp.nbytes_in for tp in p.tensors)
        tmp = Path(str(dst) + ".part")
        done = 0
        try:
            with open(tmp, "wb") as out, ThreadPoolExecutor(threads) as pool:
                out.write(meta)
                for tp in p.tensors:
                    out.writelines(_convert(layout, buf, tp, pool, threads, cancel))
                    out.write(bytes(_pad(tp.nbytes_out, layout.alignment) - tp.nbytes_out))
                    done += tp.nbytes_in
                    if progress:
                        progress(done, total, tp)
            os.replace(tmp, dst)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        return p
    finally:
        try:
            buf.close()
        except BufferError:  # a view is still alive: the mapping goes with it
            pass


def _convert(layout, buf, tp: TensorPlan, pool, threads, cancel):
    import numpy as np
    """The output bytes of one tensor, in slices of whole rows (bounded memory)."""
    t = tp.info
    raw = layout.data(buf, t, tp.nbytes_in)
    if tp.new_type == t.type:
        yield raw
        return
    row = t.shape[0]
    n_rows = t.n_elements // row
    in_row, out_row = tp.nbytes_in // n_rows, tp.nbytes_out // n_rows
    # slices of about 64 MiB of f32, cut in pieces for the threads
    slab = max(1, (16 << 20) // row)
    for r0 in range(0, n_rows, slab):
        if cancel is not None and cancel.is_set():
            raise CancelledError("quantization cancelled")
        r1 = min(n_rows, r0 + slab)
        dst = np.empty((r1 - r0) * out_row, dtype=np.uint8)
        piece = max(1, -(-(r1 - r0) // (threads * 4)))

        def work(a: int, b: int, r0: int = r0, dst: np.ndarray = dst) -> None:
            x = _to_f32(t.type, raw[(r0 + a) * in_row:(r0 + b) * in_row], (b - a) * row)
            engine.quantize_into(tp.new_type, np.ascontiguousarray(x),
                                 dst[a * out_row:b * out_row])
        futures = [pool.submit(work, a, min(r1 - r0, a + piece)) for a in range(0, r1 - r0, piece)]
        for fut in futures:
            fut.result()
        yield memoryview(dst)


# ---- command line ---------------------------------------------------------------------

def add_arguments(p) -> None:
    p.add_argument("input", metavar="IN.gguf", help="model to quantize (F32, F16 or BF16 weights)")
    p.add_argument("output", metavar="OUT.gguf", help="file to write")
    p.add_argument("type", metavar="TYPE", help="element type or mix: " + ", ".join(FTYPES)
                   + " (Q3_K, Q4_K, Q5_K mean the _M mixes)")
    p.add_argument("-t", "--threads", type=int, default=None, metavar="N",
                   help="threads (default: all cores)")
    p.add_argument("--pure", action="store_true",
                   help="every quantizable tensor in TYPE, no higher-precision exceptions")
    p.add_argument("--allow-requantize", action="store_true",
                   help="allow already-quantized input tensors (loses precision)")
    p.add_argument("--dry-run", action="store_true", help="print the plan and sizes, write nothing")


def run(args) -> int:
    try:
        name = canonical_name(args.type)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    tty = sys.stderr.isatty()
    if args.dry_run:
        p = plan(read_layout(args.input), name, pure=args.pure)
        for tp in p.tensors:
            print(f"{tp.info.name:40s} {TYPE_NAMES.get(tp.info.type, tp.info.type):>5} -> "
                  f"{TYPE_NAMES.get(tp.new_type, tp.new_type):<5} {tp.nbytes_out / 2**20:9.2f} MiB")
        print(f"output size: {p.size_out / 2**20:.2f} MiB")
        return 0
    start = time.perf_counter()

    def show(done: int, total: int, tp: TensorPlan) -> None:
        frac = done / total if total else 1.0
        bar = "#" * int(frac * 30)
        line = (f"[{bar:<30}] {frac * 100:5.1f}%  {tp.info.name:36s} "
                f"{TYPE_NAMES.get(tp.info.type, '?')} -> {TYPE_NAMES.get(tp.new_type, '?')}")
        print(("\r" + line + "\x1b[K") if tty else line, end="" if tty else "\n",
              file=sys.stderr, flush=True)
    try:
        p = quantize_file(args.input, args.output, name, threads=args.threads, pure=args.pure,
                          allow_requantize=args.allow_requantize, progress=show)
    except (ValueError, OSError, engine.EmberError) as e:
        print(f"\nerror: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\ncancelled", file=sys.stderr)
        return 130
    if tty:
        print(file=sys.stderr)
    size_in = os.path.getsize(args.input)
    print(f"{args.output}: {name}, {size_in / 2**20:.2f} MiB -> {p.size_out / 2**20:.2f} MiB "
          f"in {time.perf_counter() - start:.2f} s", file=sys.stderr)
    return 0
