#!/usr/bin/env python3
"""Independent float64 reference forward pass for llama-architecture GGUF files.

Pure numpy, no llama.cpp: weights come from gguf-py (``gguf.GGUFReader`` +
``gguf.quants.dequantize``) and every activation is float64.  This is the
"exact math" yardstick for Ember's engine: llama.cpp runs in mixed precision
(f16/q8 activations in matmuls), so the oracle and llama.cpp are expected to
agree closely but not bit-exactly (see tests/test_oracle.py for the bounds).

Architecture (``general.architecture == "llama"``)::

    x = token_embd[tokens]
    for each block:
        h = rmsnorm(x) * attn_norm
        q, k, v = h @ Wq^T, h @ Wk^T, h @ Wv^T
        rope(q, k)          # "normal" mode: rotate adjacent pairs (x[2i], x[2i+1]),
                            # theta_i = pos * base^(-2i/n_rot); GGUF q/k are pre-permuted
        attn = softmax(q k^T / sqrt(head_dim) + causal mask) v   # GQA: head h uses kv h // (n_head/n_head_kv)
        x = x + attn @ Wo^T
        h = rmsnorm(x) * ffn_norm
        x = x + Wdown (silu(Wgate h) * (Wup h))
    logits = (rmsnorm(x) * output_norm) @ W_out^T   # W_out = token_embd when output.weight is absent

Usage::

    from tools.oracle import Oracle
    orc = Oracle(path)                 # dequantizes all weights once (float64, ~1.1 GB for 135M)
    logits = orc.logits(token_ids)     # [n_tokens, n_vocab] float64
    ids, gaps = orc.greedy(prompt_ids, 32)   # greedy continuation (KV-cached)

CLI: ``python tools/oracle.py MODEL.gguf 1 2 3 ...`` prints top-5 at the last position.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass
class HParams:
    n_layer: int
    n_embd: int
    n_head: int
    n_head_kv: int
    n_ff: int
    n_vocab: int
    n_rot: int
    head_dim: int
    rope_base: float
    rope_scale: float
    eps: float


def _field(r, key, default=None):
    f = r.fields.get(key)
    if f is None:
        return default
    v = f.contents()
    return v


class Oracle:
    def __init__(self, path: str | Path, dtype=np.float64):
        import gguf

        self.path = Path(path)
        self.dtype = dtype
        r = gguf.GGUFReader(self.path)
        arch = _field(r, "general.architecture")
        if arch != "llama":
            raise NotImplementedError(f"oracle supports llama architecture only, got {arch!r}")
        a = arch
        n_embd = int(_field(r, f"{a}.embedding_length"))
        n_head = int(_field(r, f"{a}.attention.head_count"))
        head_dim = int(_field(r, f"{a}.attention.key_length", n_embd // n_head))
        scaling = _field(r, f"{a}.rope.scaling.type", "none")
        if scaling not in ("none", None):
            raise NotImplementedError(f"rope scaling {scaling!r} not supported")
        self.hp = HParams(
            n_layer=int(_field(r, f"{a}.block_count")),
            n_embd=n_embd,
            n_head=n_head,
            n_head_kv=int(_field(r, f"{a}.attention.head_count_kv", n_head)),
            n_ff=int(_field(r, f"{a}.feed_forward_length")),
            n_vocab=0,
            n_rot=int(_field(r, f"{a}.rope.dimension_count", head_dim)),
            head_dim=head_dim,
            rope_base=float(_field(r, f"{a}.rope.freq_base", 10000.0)),
            rope_scale=1.0,
            eps=float(_field(r, f"{a}.attention.layer_norm_rms_epsilon", 1e-5)),
        )
        self.w: dict[str, np.ndarray] = {}
        for t in r.tensors:
            x = gguf.quants.dequantize(t.data, t.tensor_type)
            # numpy shape is (ne[n-1], ..., ne[0]) == (out_features, in_features) for matrices
            self.w[t.name] = np.ascontiguousarray(x, dtype=dtype)
        self.out_w = self.w.get("output.weight", self.w["token_embd.weight"])
        self.hp.n_vocab = self.out_w.shape[0]
        del r

    # -- building blocks ---------------------------------------------------
    def _rmsnorm(self, x, w):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.hp.eps) * w

    def _rope(self, x, pos):
        """x: [n_tok, n_heads, head_dim]; rotate adjacent pairs in the first n_rot dims."""
        hp = self.hp
        n_rot = hp.n_rot
        i = np.arange(n_rot // 2, dtype=np.float64)
        inv_freq = hp.rope_base ** (-2.0 * i / n_rot)
        theta = (pos.astype(np.float64) / hp.rope_scale)[:, None] * inv_freq[None, :]  # [n, n_rot/2]
        c = np.cos(theta)[:, None, :]
        s = np.sin(theta)[:, None, :]
        out = x.copy()
        x0 = x[..., 0:n_rot:2]
        x1 = x[..., 1:n_rot:2]
        out[..., 0:n_rot:2] = x0 * c - x1 * s
        out[..., 1:n_rot:2] = x0 * s + x1 * c
        return out

    # -- forward -------------------------------------------------------------
    def new_cache(self) -> list:
        """Empty KV cache: per layer [K (n, n_head_kv, head_dim), V (same)]."""
        hd, nkv = self.hp.head_dim, self.hp.n_head_kv
        z = np.zeros((0, nkv, hd), dtype=self.dtype)
        return [[z, z] for _ in range(self.hp.n_layer)]

    def hidden(self, tokens, cache: list | None = None) -> np.ndarray:
        """Final normed hidden states [n_tokens, n_embd] for `tokens`.

        With `cache` (from new_cache()), tokens continue the cached sequence and
        the cache is extended in place; without, they start at position 0.
        """
        hp, w = self.hp, self.w
        tokens = np.asarray(tokens, dtype=np.int64)
        n = len(tokens)
        n_past = 0 if cache is None else cache[0][0].shape[0]
        pos = np.arange(n_past, n_past + n)
        x = w["token_embd.weight"][tokens].astype(self.dtype)
        hd, nh, nkv = hp.head_dim, hp.n_head, hp.n_head_kv
        group = nh // nkv
        # query i (absolute n_past+i) sees keys 0..n_past+i
        mask = np.triu(np.full((n, n_past + n), -np.inf), k=n_past + 1)
        scale = 1.0 / np.sqrt(hd)
        for il in range(hp.n_layer):
            p = f"blk.{il}."
            h = self._rmsnorm(x, w[p + "attn_norm.weight"])
            q = (h @ w[p + "attn_q.weight"].T).reshape(n, nh, hd)
            k = (h @ w[p + "attn_k.weight"].T).reshape(n, nkv, hd)
            v = (h @ w[p + "attn_v.weight"].T).reshape(n, nkv, hd)
            q = self._rope(q, pos)
            k = self._rope(k, pos)
            if cache is not None:
                k = np.concatenate([cache[il][0], k], axis=0)
                v = np.concatenate([cache[il][1], v], axis=0)
                cache[il][0], cache[il][1] = k, v
            att = np.empty((n, nh, hd), dtype=self.dtype)
            for hh in range(nh):
                kh = hh // group
                s = (q[:, hh, :] @ k[:, kh, :].T) * scale + mask
                s = s - s.max(axis=-1, keepdims=True)
                e = np.exp(s)
                e /= e.sum(axis=-1, keepdims=True)
                att[:, hh, :] = e @ v[:, kh, :]
            x = x + att.reshape(n, nh * hd) @ w[p + "attn_output.weight"].T
            h = self._rmsnorm(x, w[p + "ffn_norm.weight"])
            g = h @ w[p + "ffn_gate.weight"].T
            u = h @ w[p + "ffn_up.weight"].T
            x = x + ((g / (1.0 + np.exp(-g))) * u) @ w[p + "ffn_down.weight"].T
        return self._rmsnorm(x, w["output_norm.weight"])

    def logits(self, tokens, cache: list | None = None) -> np.ndarray:
        """Per-position logits [n_tokens, n_vocab] (float64)."""
        return self.hidden(tokens, cache) @ self.out_w.T

    def greedy(self, prompt, n_predict: int, stop=()) -> tuple[list[int], list[float]]:
        """Greedy continuation with a KV cache: batched prompt, then one token per step.

        Returns (token ids, top1-top2 logit gap at each step).  Stops after a
        token in `stop` (which is included).  Ties go to the lowest id.
        """
        cache = self.new_cache()
        lg = self.logits(prompt, cache)[-1]
        out: list[int] = []
        gaps: list[float] = []
        for _ in range(n_predict):
            top2 = np.argpartition(-lg, 1)[:2]
            nxt = int(np.argmax(lg))
            gaps.append(float(abs(lg[top2[0]] - lg[top2[1]])))
            out.append(nxt)
            if nxt in stop or len(out) == n_predict:
                break
            lg = self.logits([nxt], cache)[-1]
        return out, gaps


def log_softmax(logits: np.ndarray) -> np.ndarray:
    m = logits.max(axis=-1, keepdims=True)
    return logits - m - np.log(np.exp(logits - m).sum(axis=-1, keepdims=True))


def nll(logits: np.ndarray, tokens) -> np.ndarray:
    """Per-position negative log-likelihood of tokens[1:] given logits[:-1]."""
    tokens = np.asarray(tokens)
    lp = log_softmax(logits[:-1])
    return -lp[np.arange(len(tokens) - 1), tokens[1:]]


if __name__ == "__main__":
    orc = Oracle(sys.argv[1])
    ids = [int(t) for t in sys.argv[2:]] or [1]
    lg = orc.logits(ids)[-1]
    top = np.argsort(-lg)[:5]
    print([(int(t), float(lg[t])) for t in top])
