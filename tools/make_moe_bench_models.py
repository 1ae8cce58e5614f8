#!/usr/bin/env python3
"""Mixture-of-experts models of the real sizes, for speed comparisons with llama.cpp (on
demand, never in CI: the files are 12-18 GB).

A 30B-parameter F16 file (61 GB) fits neither this disk nor memory, so these files are
written quantized from the start, tensor by tensor: each matrix is random blocks of its
type (random quant bytes, block scales fixed so the weights have about the spread of
N(0, 1/fan_in)), each norm and the router F32. The speed of a product does not depend on
the values in its blocks, and both engines read the very same bytes. Which type each tensor
gets follows llama.cpp's llama-quant.cpp for the file type (read there, October 2026 tree):

    qwen3-30b-a3b  Q4_K_M: Qwen3-30B-A3B's shape (48 layers, n_embd 2048, 32/4 heads of 128,
                   128 experts top-8 of width 768, vocab 151936 (the real Qwen2 BPE
                   vocabulary), untied). attn_q/k/output Q4_K; attn_v and ffn_down_exps Q6_K
                   in llama.cpp's "more bits" layers (i < n/8, i >= 7n/8, (i - n/8) % 3 == 2),
                   else Q4_K; ffn_gate/up_exps Q4_K; token_embd Q4_K; output Q6_K; router F32.
    gpt-oss-20b    MXFP4_MOE: gpt-oss-20b's shape (24 layers, n_embd 2880, 64/8 heads of 64,
                   32 experts top-4 of width 2880, sliding window 128 on even layers, YaRN x32
                   over 4096). Expert matrices (3-D) MXFP4, every other matrix Q8_0, biases,
                   sinks, norms F32. The o200k vocabulary is not available offline: the Llama 3
                   BPE vocabulary is padded with unused tokens to gpt-oss's 201088 rows, so the
                   embedding and output matrices have their real size.

    python tools/make_moe_bench_models.py qwen3-30b-a3b --out /tmp/bench
    python benchmarks/compare_llamacpp.py --llama-bench .../llama-bench -m /tmp/bench/qwen3-30b-a3b-Q4_K_M.gguf
"""
from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tools import fetch_assets  # noqa: E402
from tools.make_variants import copy_kv  # noqa: E402


@dataclass(frozen=True)
class Shape:
    arch: str
    vocab: str            # ggml-vocab-<name>.gguf in llama.cpp's models/
    n_vocab: int
    n_embd: int
    n_layer: int
    n_head: int
    n_head_kv: int
    head_dim: int
    n_expert: int
    n_expert_used: int
    n_ff_exp: int
    rope_base: float
    n_ctx_train: int
    ftype: str            # llama.cpp's file type the plan follows
    ftype_id: int


SHAPES = {
    "qwen3-30b-a3b": Shape("qwen3moe", "qwen2", 151936, 2048, 48, 32, 4, 128, 128, 8, 768, 1e6, 40960,
                           "Q4_K_M", 15),
    "gpt-oss-20b": Shape("gpt-oss", "llama-bpe", 201088, 2880, 24, 64, 8, 64, 32, 4, 2880, 150000.0, 131072,
                         "MXFP4_MOE", 38),
}

# GGML type ids and block geometry, and where each block's scale sits
TYPES = {  # name: (id, elements per block, bytes per block)
    "F32": (0, 1, 4), "Q8_0": (8, 32, 34), "Q4_K": (12, 256, 144), "Q6_K": (14, 256, 210),
    "MXFP4": (39, 32, 17),
}


def more_bits(i: int, n: int) -> bool:
    """llama-quant.cpp's use_more_bits."""
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def f16_bits(x: float) -> np.ndarray:
    return np.array([x], dtype=np.float16).view(np.uint8)


def random_blocks(kind: str, n_blocks: int, fan_in: int, rng: np.random.Generator) -> np.ndarray:
    """n_blocks random blocks of a quant type, bytes [n_blocks, block_bytes], scales set so a
    weight's spread is about 1/sqrt(fan_in)."""
    _, _, nbytes = TYPES[kind]
    b = rng.integers(0, 256, size=(n_blocks, nbytes), dtype=np.uint8)
    std = 1.0 / math.sqrt(fan_in)
    if kind == "Q8_0":            # d (f16), 32 int8: std(q) ~ 74
        b[:, 0:2] = f16_bits(std / 74.0)
    elif kind == "Q4_K":          # d, dmin (f16), 12 bytes of 6-bit scales/mins, 128 of nibbles
        b[:, 0:2] = f16_bits(std / 180.0)
        b[:, 2:4] = f16_bits(7.5 * std / 180.0)
    elif kind == "Q6_K":          # ql 128, qh 64, 16 int8 scales, d (f16) at 208
        b[:, 208:210] = f16_bits(std / 1370.0)
    elif kind == "MXFP4":         # E8M0 exponent, 16 bytes of E2M1 pairs (|value| <= 12 halves)
        e = 128 + int(round(math.log2(std / 6.0)))
        b[:, 0] = e
    else:
        raise ValueError(kind)
    return b


def plan(s: Shape) -> list[tuple[str, tuple[int, ...], str]]:
    """(name, ggml ne, type) for every tensor, in file order."""
    E, hd = s.n_embd, s.head_dim
    nq, nkv = s.n_head * hd, s.n_head_kv * hd
    X, F = s.n_expert, s.n_ff_exp
    oai = s.arch == "gpt-oss"
    mat = "Q8_0" if oai else "Q4_K"
    out = [("token_embd.weight", (E, s.n_vocab), "Q8_0" if oai else "Q4_K"),
           ("output_norm.weight", (E,), "F32"),
           ("output.weight", (E, s.n_vocab), "Q8_0" if oai else "Q6_K")]
    for il in range(s.n_layer):
        p = f"blk.{il}."
        v_type = "Q8_0" if oai else ("Q6_K" if more_bits(il, s.n_layer) else "Q4_K")
        down_type = "MXFP4" if oai else ("Q6_K" if more_bits(il, s.n_layer) else "Q4_K")
        exp_type = "MXFP4" if oai else "Q4_K"
        out += [(p + "attn_norm.weight", (E,), "F32"),
                (p + "attn_q.weight", (E, nq), mat), (p + "attn_k.weight", (E, nkv), mat),
                (p + "attn_v.weight", (E, nkv), v_type), (p + "attn_output.weight", (nq, E), mat)]
        if oai:
            out += [(p + "attn_q.bias", (nq,), "F32"), (p + "attn_k.bias", (nkv,), "F32"),
                    (p + "attn_v.bias", (nkv,), "F32"), (p + "attn_output.bias", (E,), "F32"),
                    (p + "attn_sinks.weight", (s.n_head,), "F32"),
                    (p + "post_attention_norm.weight", (E,), "F32"),
                    (p + "ffn_gate_inp.bias", (X,), "F32")]
        else:
            out += [(p + "attn_q_norm.weight", (hd,), "F32"), (p + "attn_k_norm.weight", (hd,), "F32"),
                    (p + "ffn_norm.weight", (E,), "F32")]
        out += [(p + "ffn_gate_inp.weight", (E, X), "F32"),
                (p + "ffn_gate_exps.weight", (E, F, X), exp_type),
                (p + "ffn_up_exps.weight", (E, F, X), exp_type),
                (p + "ffn_down_exps.weight", (F, E, X), down_type)]
        if oai:
            out += [(p + f"ffn_{t}_exps.bias", (n, X), "F32") for t, n in (("gate", F), ("up", F), ("down", E))]
    return out


def tensor_bytes(ne: tuple[int, ...], kind: str) -> int:
    _, blk, nb = TYPES[kind]
    n = int(np.prod(ne))
    return n // blk * nb


def tensor_data(name: str, ne: tuple[int, ...], kind: str, rng: np.random.Generator) -> np.ndarray:
    n = int(np.prod(ne))
    if kind == "F32":
        if name.endswith("norm.weight"):
            return (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32)
        if name.endswith("ffn_gate_inp.weight"):
            return (3.0 / math.sqrt(ne[0]) * rng.standard_normal(n)).astype(np.float32)
        return (0.02 * rng.standard_normal(n)).astype(np.float32)  # biases, sinks
    _, blk, _ = TYPES[kind]
    return random_blocks(kind, n // blk, ne[0], rng).reshape(-1)


def write(shape_name: str, out_dir: Path) -> Path:
    import gguf
    from gguf import GGUFValueType as VT
    s = SHAPES[shape_name]
    a = s.arch
    dst = out_dir / f"{shape_name}-{s.ftype}.gguf"
    out_dir.mkdir(parents=True, exist_ok=True)
    w = gguf.GGUFWriter(str(dst), a)
    w.add_key_value("general.name", f"ember-synthetic-{shape_name}", VT.STRING)
    w.add_key_value("general.file_type", s.ftype_id, VT.UINT32)
    u32 = lambda k, v: w.add_key_value(f"{a}.{k}", int(v), VT.UINT32)  # noqa: E731
    f32 = lambda k, v: w.add_key_value(f"{a}.{k}", float(v), VT.FLOAT32)  # noqa: E731
    u32("context_length", s.n_ctx_train)
    u32("embedding_length", s.n_embd)
    u32("block_count", s.n_layer)
    u32("feed_forward_length", s.n_ff_exp * (1 if a == "gpt-oss" else 8))
    u32("attention.head_count", s.n_head)
    u32("attention.head_count_kv", s.n_head_kv)
    u32("attention.key_length", s.head_dim)
    u32("attention.value_length", s.head_dim)
    f32("attention.layer_norm_rms_epsilon", 1e-6 if a == "qwen3moe" else 1e-5)
    f32("rope.freq_base", s.rope_base)
    u32("rope.dimension_count", s.head_dim)
    u32("expert_count", s.n_expert)
    u32("expert_used_count", s.n_expert_used)
    u32("expert_feed_forward_length", s.n_ff_exp)
    if a == "gpt-oss":
        u32("attention.sliding_window", 128)
        w.add_key_value(f"{a}.rope.scaling.type", "yarn", VT.STRING)
        f32("rope.scaling.factor", 32.0)
        u32("rope.scaling.original_context_length", 4096)
    # the tokenizer: every tokenizer.* key of the vocabulary file, the tokens padded to n_vocab
    r = gguf.GGUFReader(fetch_assets.vocab_dir() / f"ggml-vocab-{s.vocab}.gguf")
    for key, fld in r.fields.items():
        if not key.startswith("tokenizer."):
            continue
        if key in ("tokenizer.ggml.tokens", "tokenizer.ggml.token_type", "tokenizer.ggml.scores"):
            vals = list(fld.contents())
            pad = s.n_vocab - len(vals)
            if pad < 0:
                raise RuntimeError(f"{s.vocab} has more tokens than {s.n_vocab}")
            if key == "tokenizer.ggml.tokens":
                vals += [f"<|ember_unused_{i}|>" for i in range(pad)]
                w.add_array(key, vals)
            elif key == "tokenizer.ggml.token_type":
                w.add_array(key, vals + [5] * pad)  # UNUSED
            else:
                w.add_array(key, vals + [0.0] * pad)
            continue
        copy_kv(w, key, fld)
    del r
    tensors = plan(s)
    for name, ne, kind in tensors:
        tid = TYPES[kind][0]
        np_shape = tuple(reversed(ne))
        nbytes = tensor_bytes(ne, kind)
        if kind == "F32":
            w.add_tensor_info(name, np_shape, np.dtype(np.float32), nbytes)
        else:
            _, blk, nb = TYPES[kind]
            byte_shape = np_shape[:-1] + (ne[0] // blk * nb,)  # a quantized row as its bytes
            w.add_tensor_info(name, byte_shape, np.dtype(np.uint8), nbytes, raw_dtype=gguf.GGMLQuantizationType(tid))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    rng = np.random.default_rng(20261206)
    total = 0
    for name, ne, kind in tensors:
        data = tensor_data(name, ne, kind, rng)
        total += data.nbytes
        w.write_tensor_data(data)
    w.close()
    print(f"{dst}  {total / 1e9:.2f} GB of tensors", flush=True)
    return dst


def main(argv: list[str] | None = None) -> int:
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("shapes", nargs="+", choices=sorted(SHAPES))
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args(argv)
    for name in a.shapes:
        write(name, a.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
