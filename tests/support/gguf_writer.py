"""A small GGUF serializer for tests: builds valid files from a spec, and lets a test
break any field on purpose (counts, lengths, types, dims, offsets, alignment)."""
from __future__ import annotations

import struct
from dataclasses import dataclass, field

import numpy as np

# GGUF metadata value types
U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
_SCALAR_FMT = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f",
               BOOL: "<?", U64: "<Q", I64: "<q", F64: "<d"}


def gguf_string(s: str | bytes) -> bytes:
    b = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


def encode_value(vtype: int, value) -> bytes:
    if vtype == STRING:
        return gguf_string(value)
    if vtype == ARRAY:
        etype, items = value
        out = struct.pack("<IQ", etype, len(items))
        return out + b"".join(encode_value(etype, v) for v in items)
    return struct.pack(_SCALAR_FMT[vtype], value)


@dataclass
class TensorSpec:
    name: str
    ne: list[int]           # ne[0] first (contiguous)
    ggml_type: int
    data: bytes
    offset: int | None = None  # None: placed automatically, aligned


@dataclass
class GGUFSpec:
    kv: list[tuple[str, int, object]] = field(default_factory=list)
    tensors: list[TensorSpec] = field(default_factory=list)
    version: int = 3
    magic: bytes = b"GGUF"
    alignment: int = 32

    def add(self, key: str, vtype: int, value) -> GGUFSpec:
        self.kv.append((key, vtype, value))
        return self

    def to_bytes(self, n_tensors: int | None = None, n_kv: int | None = None) -> bytes:
        out = bytearray(self.magic)
        out += struct.pack("<I", self.version)
        out += struct.pack("<Q", len(self.tensors) if n_tensors is None else n_tensors)
        out += struct.pack("<Q", len(self.kv) if n_kv is None else n_kv)
        for key, vtype, value in self.kv:
            out += gguf_string(key) + struct.pack("<I", vtype) + encode_value(vtype, value)
        # place tensor data
        offsets, cursor = [], 0
        for t in self.tensors:
            if t.offset is None:
                cursor = (cursor + self.alignment - 1) // self.alignment * self.alignment
                offsets.append(cursor)
                cursor += len(t.data)
            else:
                offsets.append(t.offset)
        for t, off in zip(self.tensors, offsets):
            out += gguf_string(t.name) + struct.pack("<I", len(t.ne))
            out += b"".join(struct.pack("<Q", d) for d in t.ne)
            out += struct.pack("<IQ", t.ggml_type, off)
        pad = (-len(out)) % self.alignment
        out += b"\0" * pad
        data_start = len(out)
        # explicitly placed tensors (tests of bad offsets) do not stretch the file
        end = max([off + len(t.data) for t, off in zip(self.tensors, offsets)
                   if t.offset is None] + [0])
        blob = bytearray(end)
        for t, off in zip(self.tensors, offsets):
            if off + len(t.data) <= end:
                blob[off:off + len(t.data)] = t.data
        out += blob
        assert len(out) >= data_start
        return bytes(out)


def f32_tensor(name: str, arr: np.ndarray) -> TensorSpec:
    arr = np.ascontiguousarray(arr, dtype=np.float32)
    return TensorSpec(name, list(reversed(arr.shape)), 0, arr.tobytes())


def f16_tensor(name: str, arr: np.ndarray) -> TensorSpec:
    arr = np.ascontiguousarray(arr, dtype=np.float16)
    return TensorSpec(name, list(reversed(arr.shape)), 1, arr.tobytes())


def tiny_llama(vocab_tokens: list[str], merges: list[str], token_types: list[int] | None = None,
               n_embd: int = 32, n_layer: int = 2, n_head: int = 4, n_head_kv: int = 2,
               n_ff: int = 64, seed: int = 0, tied: bool = True, pre: str = "smollm") -> GGUFSpec:
    """A small random llama model (F16 matrices, F32 norms) with a real BPE vocabulary."""
    rng = np.random.default_rng(seed)
    n_vocab = len(vocab_tokens)
    head_dim = n_embd // n_head
    s = GGUFSpec()
    s.add("general.architecture", STRING, "llama")
    s.add("general.name", STRING, "tiny-test")
    s.add("llama.context_length", U32, 256)
    s.add("llama.embedding_length", U32, n_embd)
    s.add("llama.block_count", U32, n_layer)
    s.add("llama.feed_forward_length", U32, n_ff)
    s.add("llama.attention.head_count", U32, n_head)
    s.add("llama.attention.head_count_kv", U32, n_head_kv)
    s.add("llama.attention.layer_norm_rms_epsilon", F32, 1e-5)
    s.add("llama.rope.freq_base", F32, 10000.0)
    s.add("llama.rope.dimension_count", U32, head_dim)
    s.add("tokenizer.ggml.model", STRING, "gpt2")
    s.add("tokenizer.ggml.pre", STRING, pre)
    s.add("tokenizer.ggml.tokens", ARRAY, (STRING, vocab_tokens))
    s.add("tokenizer.ggml.token_type", ARRAY, (I32, token_types or [1] * n_vocab))
    s.add("tokenizer.ggml.merges", ARRAY, (STRING, merges))
    s.add("tokenizer.ggml.bos_token_id", U32, 1)
    s.add("tokenizer.ggml.eos_token_id", U32, 2)

    def w(*shape, scale=0.2):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    s.tensors.append(f16_tensor("token_embd.weight", w(n_vocab, n_embd)))
    s.tensors.append(f32_tensor("output_norm.weight", 1.0 + w(n_embd, scale=0.05)))
    if not tied:
        s.tensors.append(f16_tensor("output.weight", w(n_vocab, n_embd)))
    for i in range(n_layer):
        p = f"blk.{i}."
        s.tensors.append(f32_tensor(p + "attn_norm.weight", 1.0 + w(n_embd, scale=0.05)))
        s.tensors.append(f16_tensor(p + "attn_q.weight", w(n_embd, n_embd)))
        s.tensors.append(f16_tensor(p + "attn_k.weight", w(head_dim * n_head_kv, n_embd)))
        s.tensors.append(f16_tensor(p + "attn_v.weight", w(head_dim * n_head_kv, n_embd)))
        s.tensors.append(f16_tensor(p + "attn_output.weight", w(n_embd, n_embd)))
        s.tensors.append(f32_tensor(p + "ffn_norm.weight", 1.0 + w(n_embd, scale=0.05)))
        s.tensors.append(f16_tensor(p + "ffn_gate.weight", w(n_ff, n_embd)))
        s.tensors.append(f16_tensor(p + "ffn_up.weight", w(n_ff, n_embd)))
        s.tensors.append(f16_tensor(p + "ffn_down.weight", w(n_embd, n_ff)))
    return s


def tiny_gemma4(vocab_tokens: list[str], merges: list[str], token_types: list[int] | None = None,
                seed: int = 0, pre: str = "smollm") -> GGUFSpec:
    """A small random gemma4 model with every Gemma 4 feature on (F16 matrices, F32 norms):
    4 blocks [sliding, full, sliding, full], the last 2 sharing the KV of blocks 0 and 1;
    heads of 8 (sliding, 2 KV heads) and 16 (full, 1 KV head, proportional rope_freqs, no
    attn_v); FFN widths 64, 64, 128, 128; per-layer embeddings of 4; layer_output_scale."""
    rng = np.random.default_rng(seed)
    n_vocab, n_embd, n_layer, n_head, n_pl = len(vocab_tokens), 32, 4, 2, 4
    swa = [True, False, True, False]
    hd = [8 if s else 16 for s in swa]
    kv = [2 if s else 1 for s in swa]
    ff = [64, 64, 128, 128]
    a = "gemma4."
    s = GGUFSpec()
    s.add("general.architecture", STRING, "gemma4")
    s.add("general.name", STRING, "tiny-gemma4")
    s.add(a + "context_length", U32, 256)
    s.add(a + "embedding_length", U32, n_embd)
    s.add(a + "block_count", U32, n_layer)
    s.add(a + "feed_forward_length", ARRAY, (I32, ff))
    s.add(a + "attention.head_count", U32, n_head)
    s.add(a + "attention.head_count_kv", ARRAY, (I32, kv))
    s.add(a + "attention.key_length", U32, 16)
    s.add(a + "attention.value_length", U32, 16)
    s.add(a + "attention.key_length_swa", U32, 8)
    s.add(a + "attention.value_length_swa", U32, 8)
    s.add(a + "attention.layer_norm_rms_epsilon", F32, 1e-6)
    s.add(a + "attention.sliding_window", U32, 8)
    s.add(a + "attention.sliding_window_pattern", ARRAY, (BOOL, swa))
    s.add(a + "attention.shared_kv_layers", U32, 2)
    s.add(a + "embedding_length_per_layer_input", U32, n_pl)
    s.add(a + "rope.freq_base", F32, 1000000.0)
    s.add(a + "rope.freq_base_swa", F32, 10000.0)
    s.add(a + "rope.dimension_count", U32, 16)
    s.add(a + "rope.dimension_count_swa", U32, 8)
    s.add(a + "final_logit_softcapping", F32, 30.0)
    s.add("tokenizer.ggml.model", STRING, "gpt2")
    s.add("tokenizer.ggml.pre", STRING, pre)
    s.add("tokenizer.ggml.tokens", ARRAY, (STRING, vocab_tokens))
    s.add("tokenizer.ggml.token_type", ARRAY, (I32, token_types or [1] * n_vocab))
    s.add("tokenizer.ggml.merges", ARRAY, (STRING, merges))
    s.add("tokenizer.ggml.bos_token_id", U32, 1)
    s.add("tokenizer.ggml.eos_token_id", U32, 2)

    def w(*shape, scale=None):
        scale = scale if scale is not None else 1.0 / np.sqrt(shape[-1])
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    def norm(name, n, mean=1.0):
        s.tensors.append(f32_tensor(name, mean + w(n, scale=0.1 * mean)))

    s.tensors.append(f16_tensor("token_embd.weight", w(n_vocab, n_embd, scale=0.05)))
    s.tensors.append(f32_tensor("rope_freqs.weight", np.array([1.0, 1.0] + [1e30] * 6, dtype=np.float32)))
    s.tensors.append(f16_tensor("per_layer_token_embd.weight", w(n_vocab, n_pl * n_layer, scale=0.5)))
    s.tensors.append(f16_tensor("per_layer_model_proj.weight", w(n_pl * n_layer, n_embd)))
    norm("per_layer_proj_norm.weight", n_pl)
    norm("output_norm.weight", n_embd, 20.0)
    for i in range(n_layer):
        p = f"blk.{i}."
        norm(p + "attn_norm.weight", n_embd)
        s.tensors.append(f16_tensor(p + "attn_q.weight", w(n_head * hd[i], n_embd)))
        if i < 2:
            s.tensors.append(f16_tensor(p + "attn_k.weight", w(kv[i] * hd[i], n_embd)))
            if swa[i]:
                s.tensors.append(f16_tensor(p + "attn_v.weight", w(kv[i] * hd[i], n_embd)))
            norm(p + "attn_k_norm.weight", hd[i], 0.7)
        norm(p + "attn_q_norm.weight", hd[i], 0.7)
        s.tensors.append(f16_tensor(p + "attn_output.weight", w(n_embd, n_head * hd[i])))
        norm(p + "post_attention_norm.weight", n_embd)
        norm(p + "ffn_norm.weight", n_embd)
        s.tensors.append(f16_tensor(p + "ffn_gate.weight", w(ff[i], n_embd)))
        s.tensors.append(f16_tensor(p + "ffn_up.weight", w(ff[i], n_embd)))
        s.tensors.append(f16_tensor(p + "ffn_down.weight", w(n_embd, ff[i])))
        norm(p + "post_ffw_norm.weight", n_embd)
        s.tensors.append(f16_tensor(p + "inp_gate.weight", w(n_pl, n_embd)))
        s.tensors.append(f16_tensor(p + "proj.weight", w(n_embd, n_pl)))
        norm(p + "post_norm.weight", n_embd)
        s.tensors.append(f32_tensor(p + "layer_output_scale.weight", np.array([0.8 + 0.1 * i], dtype=np.float32)))
    return s
