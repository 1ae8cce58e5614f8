#!/usr/bin/env python3
"""Independent float64 reference forward pass for GGUF decoder models.

Pure numpy, no llama.cpp: weights come from gguf-py (``gguf.GGUFReader`` +
``gguf.quants.dequantize``) and every activation is float64.  This is the
"exact math" yardstick for Ember's engine: llama.cpp runs in mixed precision
(f16/q8 activations in matmuls, f16 KV cache), so the oracle and llama.cpp are
expected to agree closely but not bit-exactly (see tests/engine/test_oracle.py and
tests/engine/test_architectures.py for the bounds).  It computes what llama.cpp
computes *mathematically* for each supported ``general.architecture``:

==========  ======  ============================================================
arch        rope    block
==========  ======  ============================================================
llama       normal  pre-norm; optional rope_freqs (Llama 3.x) / biases
qwen2       neox    pre-norm; q/k/v biases
qwen3       neox    pre-norm; per-head q/k RMSNorm before rope; head_dim may differ
                    from n_embd/n_head
qwen3moe    neox    as qwen3, the feed-forward a mixture of experts: router logits
                    h @ Wgate_inp^T, softmax over all experts, the top k
                    (expert_used_count) by probability, their probabilities renormalised
                    to sum 1; out = sum_j p_j Wdown_j (silu(Wgate_j h) * (Wup_j h))
mistral3    normal  as llama, YaRN with yarn_log_multiplier, and each query times
                    log(floor(pos / original ctx) + 1) * attention.temperature_scale + 1
smollm3     normal  as llama, but blocks 3, 7, 11, ... ((il + 1) % 4 == 0) skip rope (NoPE)
gpt-oss     neox    pre-norm (the FFN norm stored as post_attention_norm); q/k/v/o biases;
                    a sink logit per head joins each softmax's denominator; layers
                    il % 2 == 0 use the sliding window; YaRN; experts: router logits
                    (+ bias), top k on the logits, softmax over those k; each expert
                    Wdown (swiglu_oai(Wgate h + bg, Wup h + bu)) + bd, with
                    swiglu_oai(g, u) = min(g, 7) sigmoid(1.702 min(g, 7)) (clip(u, -7, 7) + 1)
phi3        neox    pre-norm; fused attn_qkv (q|k|v rows) and ffn_up (gate|up rows);
                    LongRoPE factor tables (long when n_ctx > original ctx, else
                    short) and attn_factor on cos/sin
gemma3      neox    "sandwich": embeddings * sqrt(n_embd); per-head q/k RMSNorm;
                    q * 1/sqrt(head_dim) (1/sqrt(n_embd/n_head) for 62 layers);
                    post_attention_norm / post_ffw_norm on the branch outputs before
                    the residual adds; GELU(tanh) GLU; local layers (il % 6 < 5 by
                    default) use a sliding window and rope base 10000 / scale 1;
                    optional final logit soft-capping
gemma4      neox    as gemma3 with attention scale 1; V RMS-normed without weight (V = K's
                    projection where attn_v is absent); sliding/full layers with their own
                    head size, KV heads and n_rot (key_length_swa, head_count_kv array,
                    rope.dimension_count_swa); rope_freqs on the full layers only; layers from
                    n_layer - shared_kv_layers on reuse layer n_layer_kv - 2 (sliding) or
                    n_layer_kv - 1 (full)'s K/V; per-layer inputs P = (rmsnorm(x0 Wp^T /
                    sqrt(n_embd)) * pn + E_pl[tok] sqrt(n_pl)) / sqrt(2) (x0 the scaled
                    embeddings); after each FFN residual x += rmsnorm(Wproj (gelu(Wg x) *
                    P[il])) * post_norm; then x *= layer_output_scale
gemma2      neox    as gemma3 without q/k norms; q * 1/sqrt(head_dim) (1/sqrt(n_embd/n_head)
                    for 46 layers); attention soft-cap on the scaled scores before the
                    mask (s = c tanh(s/c), c = attn_logit_softcapping, default 50); final
                    soft-cap (default 30) always on; local layers il % 2 < 1 (window
                    default 4096) keep the global rope base and scale unless
                    rope.freq_base_swa is present
==========  ======  ============================================================

Generic pre-norm block (``x`` is the residual stream)::

    h = rmsnorm(x) * attn_norm
    q, k, v = h @ Wq^T (+bq), h @ Wk^T (+bk), h @ Wv^T (+bv)      # or split(h @ Wqkv^T)
    q, k = rmsnorm_per_head(q) * q_norm, ... (if present)
    q, k = rope(q), rope(k)
    attn = softmax(q k^T * scale + mask) v   # GQA: head h uses kv head h // (n_head/n_head_kv)
    x = x + attn @ Wo^T
    h = rmsnorm(x) * ffn_norm
    x = x + Wdown (act(Wgate h) * (Wup h))           # act = silu (gelu_tanh for gemma3)
    logits = (rmsnorm(x) * output_norm) @ W_out^T   # W_out = token_embd if no output.weight

RoPE follows ggml's ``rope_yarn`` exactly (in float64): for pair i of n_rot dims
(normal mode: dims 2i, 2i+1; neox: dims i, i + n_rot/2)::

    theta_extrap = pos * base^(-2i/n_rot) / freq_factor[i]
    theta_interp = freq_scale * theta_extrap          # freq_scale = 1/rope.scaling.factor
    YaRN (scaling type "yarn"): ramp between the two over ggml's correction dims
        (beta_fast 32, beta_slow 1, original ctx), mscale *= 1 + 0.1 ln(1/freq_scale)
    cos, sin = cos(theta) * mscale, sin(theta) * mscale   # mscale = attn_factor

Usage::

    from tools.oracle import Oracle
    orc = Oracle(path)                 # dequantizes all weights once (float64)
    orc = Oracle(path, n_ctx=4096)     # n_ctx only matters for LongRoPE (phi3)
    logits = orc.logits(token_ids)     # [n_tokens, n_vocab] float64
    ids, gaps = orc.greedy(prompt_ids, 32)   # greedy continuation (KV-cached)

CLI: ``python tools/oracle.py MODEL.gguf 1 2 3 ...`` prints top-5 at the last position.
"""
from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

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
    rope_scale: float                  # freq_scale (1 / rope.scaling.factor)
    eps: float
    arch: str = "llama"
    head_dim_v: int = 0
    rope_type: str = "norm"            # "norm" (adjacent pairs) | "neox" (halves)
    ext_factor: float = 0.0            # YaRN mix (1 for scaling type "yarn")
    attn_factor: float = 1.0           # mscale on cos/sin (llama.cpp's cparams.yarn_attn_factor)
    beta_fast: float = 32.0
    beta_slow: float = 1.0
    n_ctx_orig: int = 0                # rope.scaling.original_context_length (else n_ctx_train)
    n_ctx: int = 2048                  # the context size llama.cpp would run with
    attn_scale: float = 0.0            # multiplies q.k (0 = 1/sqrt(head_dim))
    embd_scale: float = 1.0            # token embeddings are multiplied by this
    final_softcap: float = 0.0         # logits = c * tanh(logits / c) when > 0
    attn_softcap: float = 0.0          # scaled scores s = c * tanh(s / c) before mask/softmax when > 0
    n_swa: int = 0                     # sliding window: key p0 visible from p1 iff p1 - p0 < n_swa
    swa_layers: list = field(default_factory=list)   # per layer: local (sliding window) or not
    rope_base_swa: float = 10000.0
    rope_scale_swa: float = 1.0
    ffn_norm: str = "ffn_norm"         # the pre-FFN norm's name (gpt-oss: post_attention_norm)
    no_rope_step: int = 0              # blocks il with (il + 1) % step == 0 skip rope (smollm3: 4)
    attn_temp_scale: float = 0.0       # mistral3: q *= log(floor(pos / n_ctx_orig) + 1) * this + 1
    # gemma4: per-layer KV heads, head sizes and rotated dims (empty: the scalars above)
    n_head_kv_l: list = field(default_factory=list)
    head_dim_l: list = field(default_factory=list)
    n_rot_l: list = field(default_factory=list)
    n_layer_kv: int = 0                # gemma4: layers from here on read an earlier layer's KV
    n_embd_per_layer: int = 0          # gemma4: per-layer token embeddings' width
    v_norm: bool = False               # gemma4: V RMS-normed without a weight
    freq_factors_full_only: bool = False   # gemma4: rope_freqs on the full layers only
    ssm: dict = field(default_factory=dict)        # qwen35: the ssm.* shapes
    recurrent: list = field(default_factory=list)  # qwen35: per layer, a gated delta-net block

    def kv_layer(self, il: int) -> int:
        """llama.cpp's `reuse` for gemma4: the layer whose cache layer il reads."""
        if not self.n_layer_kv or il < self.n_layer_kv:
            return il
        return self.n_layer_kv - (2 if self.swa_layers[il] else 1)


def _first(v):
    """A per-layer array's first value (llama.cpp's n_head() etc.), or the scalar."""
    return v[0] if isinstance(v, list) else v


def _field(r, key, default=None):
    f = r.fields.get(key)
    if f is None:
        return default
    return f.contents()


# ---------------------------------------------------------------------------
# family table: arch -> rope mode, FFN activation, extra hparams, block function
# ---------------------------------------------------------------------------

def _read_gemma3(get, hp: HParams, a: str) -> None:
    hp.embd_scale = math.sqrt(hp.n_embd)
    hp.final_softcap = float(get(f"{a}.final_logit_softcapping", 0.0) or 0.0)
    # llama.cpp: 27B (62 layers) scales q by 1/sqrt(n_embd/n_head), others by 1/sqrt(head_dim)
    hp.attn_scale = 1.0 / math.sqrt(hp.n_embd / hp.n_head if hp.n_layer == 62 else hp.head_dim)
    n_swa = int(get(f"{a}.attention.sliding_window", 0) or 0)
    if n_swa > 0:
        hp.n_swa = n_swa
        pattern = get(f"{a}.attention.sliding_window_pattern", 6)
        if isinstance(pattern, list):                      # one flag per layer
            hp.swa_layers = [bool(x) for x in pattern]
        else:
            n = int(pattern)
            hp.swa_layers = [n == 0 or il % n < n - 1 for il in range(hp.n_layer)]
        hp.rope_base_swa = float(get(f"{a}.rope.freq_base_swa", 10000.0))
        hp.rope_scale_swa = 1.0


def _read_gemma2(get, hp: HParams, a: str) -> None:
    """llama.cpp's llama_model_gemma2::load_arch_hparams: both soft-caps are always on
    (defaults 50 / 30 when the keys are missing), window 4096 by default on layers
    il % 2 < 1, and local layers keep the global rope base / scale unless
    rope.freq_base_swa is present."""
    hp.embd_scale = math.sqrt(hp.n_embd)
    hp.attn_softcap = float(get(f"{a}.attn_logit_softcapping", 50.0))
    hp.final_softcap = float(get(f"{a}.final_logit_softcapping", 30.0))
    # 27B (46 layers): 1/sqrt(n_embd/n_head) (integer division in llama.cpp), else 1/sqrt(head_dim)
    hp.attn_scale = 1.0 / math.sqrt(hp.n_embd // hp.n_head if hp.n_layer == 46 else hp.head_dim)
    hp.n_swa = int(get(f"{a}.attention.sliding_window", 4096))
    pattern = get(f"{a}.attention.sliding_window_pattern", 2)
    if isinstance(pattern, list):
        hp.swa_layers = [bool(x) for x in pattern]
    else:
        n = int(pattern)
        hp.swa_layers = [n == 0 or il % n < n - 1 for il in range(hp.n_layer)]
    hp.rope_base_swa = float(get(f"{a}.rope.freq_base_swa", hp.rope_base))
    hp.rope_scale_swa = hp.rope_scale


def _read_gemma4(get, hp: HParams, a: str) -> None:
    """llama.cpp's llama_model_gemma4::load_arch_hparams and the per-layer keys it reads."""
    hp.embd_scale = math.sqrt(hp.n_embd)
    hp.final_softcap = float(get(f"{a}.final_logit_softcapping", 0.0) or 0.0)
    hp.attn_scale = 1.0
    hp.n_swa = int(get(f"{a}.attention.sliding_window"))
    hp.swa_layers = [bool(x) for x in get(f"{a}.attention.sliding_window_pattern")]
    hp.rope_base_swa = float(get(f"{a}.rope.freq_base_swa", 10000.0))
    hp.rope_scale_swa = 1.0
    hd_swa = int(get(f"{a}.attention.key_length_swa"))
    n_rot_swa = int(get(f"{a}.rope.dimension_count_swa", hp.n_rot))
    kv = get(f"{a}.attention.head_count_kv", hp.n_head)
    kv = list(kv) if isinstance(kv, list) else [int(kv)] * hp.n_layer
    hp.n_head_kv_l = [int(x) for x in kv]
    hp.head_dim_l = [hd_swa if s else hp.head_dim for s in hp.swa_layers]
    hp.n_rot_l = [n_rot_swa if s else hp.n_rot for s in hp.swa_layers]
    hp.n_layer_kv = hp.n_layer - int(get(f"{a}.attention.shared_kv_layers", 0) or 0)
    hp.n_embd_per_layer = int(get(f"{a}.embedding_length_per_layer_input", 0) or 0)
    hp.v_norm = True
    hp.freq_factors_full_only = True


def _read_qwen35(get, hp: HParams, a: str) -> None:
    """llama.cpp's llama_model_qwen35::load_arch_hparams: the ssm.* shapes and which blocks
    are recurrent (attention.recurrent_layers, else every full_attention_interval-th block
    attends); the MTP blocks after the trunk (nextn_predict_layers) are not run."""
    hp.n_layer -= int(get(f"{a}.nextn_predict_layers", 0) or 0)
    hp.ssm = {k: int(get(f"{a}.ssm.{k}")) for k in
              ("conv_kernel", "inner_size", "state_size", "time_step_rank", "group_count")}
    flags = get(f"{a}.attention.recurrent_layers")
    if flags is not None:
        hp.recurrent = [bool(x) for x in flags][: hp.n_layer]
    else:
        n = int(get(f"{a}.full_attention_interval", 4))
        hp.recurrent = [(il + 1) % n != 0 for il in range(hp.n_layer)]


def _read_lfm2(get, hp: HParams, a: str) -> None:
    """llama.cpp's llama_model_lfm2::load_arch_hparams: the blocks with 0 KV heads are
    short-convolution blocks (shortconv.l_cache wide)."""
    kv = get(f"{a}.attention.head_count_kv")
    kv = [int(x) for x in kv] if isinstance(kv, list) else [int(kv)] * hp.n_layer
    hp.recurrent = [x == 0 for x in kv]
    hp.n_head_kv = max(kv)
    hp.ssm = {"conv_kernel": int(get(f"{a}.shortconv.l_cache"))}


def _read_mistral3(get, hp: HParams, a: str) -> None:
    hp.attn_temp_scale = float(get(f"{a}.attention.temperature_scale", 0.0) or 0.0)


def _read_smollm3(get, hp: HParams, a: str) -> None:
    hp.no_rope_step = 4


def _read_gpt_oss(get, hp: HParams, a: str) -> None:
    hp.n_swa = int(get(f"{a}.attention.sliding_window"))
    pattern = int(get(f"{a}.attention.sliding_window_pattern", 2))
    hp.swa_layers = [pattern == 0 or il % pattern < pattern - 1 for il in range(hp.n_layer)]
    hp.rope_base_swa = float(get(f"{a}.rope.freq_base_swa", hp.rope_base))
    hp.rope_scale_swa = hp.rope_scale
    hp.ffn_norm = "post_attention_norm"


@dataclass(frozen=True)
class Family:
    rope_type: str                                  # "norm" | "neox"
    ffn_act: str                                    # "silu" | "gelu_tanh"
    block: str                                      # "prenorm" | "sandwich"
    read: Callable | None = None                    # extra hparams: read(get, hp, arch)


FAMILIES: dict[str, Family] = {
    "llama": Family("norm", "silu", "prenorm"),
    "qwen2": Family("neox", "silu", "prenorm"),
    "qwen3": Family("neox", "silu", "prenorm"),
    "qwen3moe": Family("neox", "silu", "prenorm"),
    "smollm3": Family("norm", "silu", "prenorm", _read_smollm3),
    "mistral3": Family("norm", "silu", "prenorm", _read_mistral3),
    "gpt-oss": Family("neox", "swiglu_oai", "prenorm", _read_gpt_oss),
    "phi3": Family("neox", "silu", "prenorm"),
    "gemma2": Family("neox", "gelu_tanh", "sandwich", _read_gemma2),
    "gemma3": Family("neox", "gelu_tanh", "sandwich", _read_gemma3),
    "gemma4": Family("neox", "gelu_tanh", "gemma4", _read_gemma4),
    "qwen35": Family("neox", "silu", "qwen35", _read_qwen35),
    "qwen35moe": Family("neox", "silu", "qwen35", _read_qwen35),
    "lfm2": Family("neox", "silu", "lfm2", _read_lfm2),
    "lfm2moe": Family("neox", "silu", "lfm2", _read_lfm2),
}


def _silu(g):
    return g / (1.0 + np.exp(-g))


def _gelu_tanh(g):
    return 0.5 * g * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * g * (1.0 + 0.044715 * g * g)))


def _swiglu_oai(g, u, alpha=1.702, limit=7.0):
    """gpt-oss's clamped SwiGLU: the gate clamped above, the linear part both ways, + 1."""
    x = np.minimum(g, limit)
    return x / (1.0 + np.exp(-alpha * x)) * (np.clip(u, -limit, limit) + 1.0)


# gated activations act(gate, up)
_ACT = {"silu": lambda g, u: _silu(g) * u, "gelu_tanh": lambda g, u: _gelu_tanh(g) * u,
        "swiglu_oai": _swiglu_oai}


class Oracle:
    def __init__(self, path: str | Path, dtype=np.float64, n_ctx: int = 2048):
        import gguf

        self.path = Path(path)
        self.dtype = dtype
        r = gguf.GGUFReader(self.path)
        get = lambda k, d=None: _field(r, k, d)  # noqa: E731
        arch = get("general.architecture")
        if arch not in FAMILIES:
            raise NotImplementedError(f"oracle supports {sorted(FAMILIES)}, got {arch!r}")
        self.family = FAMILIES[arch]
        a = arch
        n_embd = int(get(f"{a}.embedding_length"))
        n_head = get(f"{a}.attention.head_count")
        n_head = int(n_head[0] if isinstance(n_head, list) else n_head)
        head_dim = int(get(f"{a}.attention.key_length", n_embd // n_head))
        n_ctx_train = int(get(f"{a}.context_length", 0) or 0)
        hp = HParams(
            arch=a,
            n_layer=int(get(f"{a}.block_count")),
            n_embd=n_embd,
            n_head=n_head,
            n_head_kv=int(_first(get(f"{a}.attention.head_count_kv", n_head))),
            n_ff=int(_first(get(f"{a}.feed_forward_length", 0)) or 0),
            n_vocab=0,
            n_rot=int(get(f"{a}.rope.dimension_count", head_dim)),
            head_dim=head_dim,
            head_dim_v=int(get(f"{a}.attention.value_length", n_embd // n_head)),
            rope_base=float(get(f"{a}.rope.freq_base", 10000.0)),
            rope_scale=1.0,
            eps=float(get(f"{a}.attention.layer_norm_rms_epsilon", 1e-5)),
            rope_type=self.family.rope_type,
            n_ctx_orig=int(get(f"{a}.rope.scaling.original_context_length", 0) or n_ctx_train),
            n_ctx=n_ctx,
        )
        # rope scaling, as llama.cpp's hparams + llama_context derive it
        scaling = get(f"{a}.rope.scaling.type", "linear") or "linear"
        if scaling not in ("none", "linear", "yarn", "longrope"):
            raise NotImplementedError(f"rope scaling {scaling!r} not supported")
        factor = float(get(f"{a}.rope.scaling.factor", 0.0)
                       or get(f"{a}.rope.scale_linear", 0.0) or 0.0)
        hp.rope_scale = 1.0 if (factor == 0.0 or scaling == "none") else 1.0 / factor
        hp.ext_factor = 1.0 if scaling == "yarn" else 0.0
        attn_factor = 1.0
        if hp.ext_factor != 0.0:
            f = 1.0 / hp.rope_scale

            def mscale(scale, m):
                return 1.0 + 0.1 * m * math.log(scale) if scale > 1.0 else 1.0
            log_mul = float(get(f"{a}.rope.scaling.yarn_log_multiplier", 0.0) or 0.0)
            attn_factor = mscale(f, 1.0) / mscale(f, log_mul) if log_mul else mscale(f, 1.0)
            attn_factor *= 1.0 / (1.0 + 0.1 * math.log(f))
        hp.attn_factor = attn_factor * float(get(f"{a}.rope.scaling.attn_factor", 1.0))
        self.n_expert_used = int(get(f"{a}.expert_used_count", 0) or 0)
        self.gating = int(get(f"{a}.expert_gating_func", 1) or 1)
        self.route_counts: dict[int, set] = {}   # block -> the distinct expert sets chosen
        if self.family.read is not None:
            self.family.read(get, hp, a)
        if not hp.swa_layers:
            hp.swa_layers = [False] * hp.n_layer
        self.hp = hp

        self.w: dict[str, np.ndarray] = {}
        for t in r.tensors:
            x = gguf.quants.dequantize(t.data, t.tensor_type)
            if t.name == "per_layer_token_embd.weight":   # rows gathered per token: keep it f32
                self.w[t.name] = np.ascontiguousarray(x, dtype=np.float32)
                continue
            # numpy shape is (ne[n-1], ..., ne[0]) == (out_features, in_features) for matrices
            self.w[t.name] = np.ascontiguousarray(x, dtype=dtype)
        self.out_w = self.w.get("output.weight", self.w["token_embd.weight"])
        hp.n_vocab = self.out_w.shape[0]
        del r
        # rope frequency divisors: Llama 3 rope_freqs, else LongRoPE long/short by context size
        if "rope_freqs.weight" in self.w:
            self.freq_factors = self.w["rope_freqs.weight"]
        elif "rope_factors_long.weight" in self.w:
            self.freq_factors = self.w["rope_factors_long.weight" if n_ctx > hp.n_ctx_orig
                                       else "rope_factors_short.weight"]
        else:
            self.freq_factors = None
        self._rope_cache: dict = {}

    # -- building blocks ---------------------------------------------------
    def _rmsnorm(self, x, w):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.hp.eps) * w

    def _lin(self, x, name):
        """x @ W^T (+ bias when the file has one)."""
        y = x @ self.w[name + ".weight"].T
        b = self.w.get(name + ".bias")
        return y if b is None else y + b

    def _n_rot(self, il):
        return self.hp.n_rot_l[il] if self.hp.n_rot_l else self.hp.n_rot

    def _cos_sin(self, pos, il):
        """cos/sin [n, n_rot/2] for layer il (ggml rope_yarn semantics, float64)."""
        hp = self.hp
        local = hp.swa_layers[il]
        base = hp.rope_base_swa if local else hp.rope_base
        freq_scale = hp.rope_scale_swa if local else hp.rope_scale
        n_rot = self._n_rot(il)
        i = np.arange(n_rot // 2, dtype=np.float64)
        inv = base ** (-2.0 * i / n_rot)
        if self.freq_factors is not None and not (hp.freq_factors_full_only and local):
            inv = inv / self.freq_factors[: n_rot // 2]
        theta_extrap = pos.astype(np.float64)[:, None] * inv[None, :]
        theta = freq_scale * theta_extrap
        mscale = hp.attn_factor
        if hp.ext_factor != 0.0:
            def corr_dim(n_rot_beta):
                ratio = hp.n_ctx_orig / (n_rot_beta * 2 * math.pi)
                return n_rot * math.log(ratio) / (2 * math.log(base))
            low = max(0.0, math.floor(corr_dim(hp.beta_fast)))
            high = min(n_rot - 1.0, math.ceil(corr_dim(hp.beta_slow)))
            y = (i - low) / max(0.001, high - low)
            ramp = (1.0 - np.clip(y, 0.0, 1.0)) * hp.ext_factor
            theta = theta * (1.0 - ramp) + theta_extrap * ramp
            mscale *= 1.0 + 0.1 * math.log(1.0 / freq_scale)
        return np.cos(theta) * mscale, np.sin(theta) * mscale

    def _rope(self, x, cs):
        """x: [n_tok, n_heads, head_dim]; rotate the first n_rot dims (normal or neox pairs)."""
        c, s = cs[0][:, None, :], cs[1][:, None, :]
        n_rot = 2 * cs[0].shape[1]
        out = x.copy()
        if self.hp.rope_type == "neox":
            x0, x1 = x[..., : n_rot // 2], x[..., n_rot // 2: n_rot]
            out[..., : n_rot // 2] = x0 * c - x1 * s
            out[..., n_rot // 2: n_rot] = x0 * s + x1 * c
        else:
            x0, x1 = x[..., 0:n_rot:2], x[..., 1:n_rot:2]
            out[..., 0:n_rot:2] = x0 * c - x1 * s
            out[..., 1:n_rot:2] = x0 * s + x1 * c
        return out

    def _attention(self, il, h, pos, cache):
        """Self-attention sub-block output [n, n_embd] (before any post-norm / residual)."""
        hp, w, p = self.hp, self.w, f"blk.{il}."
        n = h.shape[0]
        hd, hdv, nh, nkv = hp.head_dim, hp.head_dim_v, hp.n_head, hp.n_head_kv
        if hp.head_dim_l:                               # gemma4: per-layer shapes, shared KV
            return self._attention_gemma4(il, h, pos, cache)
        if p + "attn_qkv.weight" in w:
            qkv = self._lin(h, p + "attn_qkv")
            q = qkv[:, : nh * hd]
            k = qkv[:, nh * hd: nh * hd + nkv * hd]
            v = qkv[:, nh * hd + nkv * hd:]
        else:
            q, k, v = (self._lin(h, p + f"attn_{t}") for t in "qkv")
        q, k, v = q.reshape(n, nh, hd), k.reshape(n, nkv, hd), v.reshape(n, nkv, hdv)
        if p + "attn_q_norm.weight" in w:
            q = self._rmsnorm(q, w[p + "attn_q_norm.weight"])
            k = self._rmsnorm(k, w[p + "attn_k_norm.weight"])
        if not (hp.no_rope_step and (il + 1) % hp.no_rope_step == 0):   # NoPE blocks (smollm3)
            cs = self._cos_sin(pos, il)
            q, k = self._rope(q, cs), self._rope(k, cs)
        if hp.attn_temp_scale:                                  # mistral3's query temperature
            q = q * (np.log(np.floor(pos / hp.n_ctx_orig) + 1.0) * hp.attn_temp_scale + 1.0)[:, None, None]
        if cache is not None:
            k = np.concatenate([cache[il][0], k], axis=0)
            v = np.concatenate([cache[il][1], v], axis=0)
            cache[il][0], cache[il][1] = k, v
        kpos = np.arange(k.shape[0])
        d = pos[:, None] - kpos[None, :]               # query pos - key pos
        visible = d >= 0
        if hp.swa_layers[il]:
            visible &= d < hp.n_swa
        mask = np.where(visible, 0.0, -np.inf)
        scale = hp.attn_scale or 1.0 / math.sqrt(hd)
        group = nh // nkv
        att = np.empty((n, nh, hdv), dtype=self.dtype)
        for hh in range(nh):
            kh = hh // group
            s = (q[:, hh, :] @ k[:, kh, :].T) * scale
            if hp.attn_softcap > 0:
                s = hp.attn_softcap * np.tanh(s / hp.attn_softcap)
            s = s + mask
            sink = w.get(p + "attn_sinks.weight")
            if sink is None:
                s = s - s.max(axis=-1, keepdims=True)
                e = np.exp(s)
                e /= e.sum(axis=-1, keepdims=True)
            else:                                      # one more logit in the denominator
                m = np.maximum(s.max(axis=-1, keepdims=True), sink[hh])
                e = np.exp(s - m)
                e /= e.sum(axis=-1, keepdims=True) + np.exp(sink[hh] - m)
            att[:, hh, :] = e @ v[:, kh, :]
        return self._lin(att.reshape(n, nh * hdv), p + "attn_output")

    def _softmax_attend(self, q, k, v, pos, il, scale):
        """softmax(q k^T * scale + mask) v per head; q [n, nh, hd], k/v [m, nkv, hd]."""
        hp = self.hp
        n, nh = q.shape[0], q.shape[1]
        kpos = np.arange(k.shape[0])
        d = pos[:, None] - kpos[None, :]
        visible = d >= 0
        if hp.swa_layers[il]:
            visible &= d < hp.n_swa
        mask = np.where(visible, 0.0, -np.inf)
        group = nh // k.shape[1]
        att = np.empty((n, nh, v.shape[2]), dtype=self.dtype)
        for hh in range(nh):
            kh = hh // group
            s = (q[:, hh, :] @ k[:, kh, :].T) * scale + mask
            s = s - s.max(axis=-1, keepdims=True)
            e = np.exp(s)
            e /= e.sum(axis=-1, keepdims=True)
            att[:, hh, :] = e @ v[:, kh, :]
        return att.reshape(n, -1)

    def _attention_gemma4(self, il, h, pos, cache):
        """llama.cpp's gemma4 attention: Q norm + rope; on layers with a cache K (K norm,
        rope) and V (attn_v's, else K's projection; RMS-normed without weight); layers past
        n_layer_kv attend over layer kv_layer(il)'s keys and values; scale 1."""
        hp, w, p = self.hp, self.w, f"blk.{il}."
        n, nh, hd = h.shape[0], hp.n_head, hp.head_dim_l[il]
        cs = self._cos_sin(pos, il)
        q = self._rope(self._rmsnorm(self._lin(h, p + "attn_q").reshape(n, nh, hd),
                                     w[p + "attn_q_norm.weight"]), cs)
        src = hp.kv_layer(il)
        if src == il:
            nkv = hp.n_head_kv_l[il]
            k = self._lin(h, p + "attn_k").reshape(n, nkv, hd)
            v = self._lin(h, p + "attn_v").reshape(n, nkv, hd) if p + "attn_v.weight" in w else k
            k = self._rope(self._rmsnorm(k, w[p + "attn_k_norm.weight"]), cs)
            v = v / np.sqrt(np.mean(v * v, axis=-1, keepdims=True) + hp.eps)
            if cache is not None:
                k = np.concatenate([cache[il][0], k], axis=0)
                v = np.concatenate([cache[il][1], v], axis=0)
                cache[il][0], cache[il][1] = k, v
            self._kv_now[il] = (k, v)
        k, v = self._kv_now[src]
        att = self._softmax_attend(q, k, v, pos, il, hp.attn_scale)
        return self._lin(att, p + "attn_output")

    def _per_layer_inputs(self, tokens, x):
        """gemma4's per-layer inputs [n, n_layer, n_embd_per_layer] from the token ids and
        the scaled input embeddings x (llama.cpp's build_inp_per_layer +
        project_per_layer_inputs)."""
        hp, w = self.hp, self.w
        n, n_pl = len(tokens), hp.n_embd_per_layer
        tok = w["per_layer_token_embd.weight"][tokens].astype(self.dtype).reshape(n, hp.n_layer, n_pl)
        tok = tok * math.sqrt(n_pl)
        proj = (x @ w["per_layer_model_proj.weight"].T) / math.sqrt(hp.n_embd)
        proj = self._rmsnorm(proj.reshape(n, hp.n_layer, n_pl), w["per_layer_proj_norm.weight"])
        return (proj + tok) / math.sqrt(2.0)

    def _block_gemma4(self, il, x, pos, cache):
        w, p = self.w, f"blk.{il}."
        a = self._attention(il, self._rmsnorm(x, w[p + "attn_norm.weight"]), pos, cache)
        x = x + self._rmsnorm(a, w[p + "post_attention_norm.weight"])
        if p + "ffn_gate_inp.weight" in w:
            # 26B-A4B: a dense MLP and the experts side by side, each normed before and after;
            # the router reads x RMS-normed, / sqrt(n_embd), times ffn_gate_inp.scale
            mlp = self._rmsnorm(self._dense_ffn(il, self._rmsnorm(x, w[p + "ffn_norm.weight"])),
                                w[p + "post_ffw_norm_1.weight"])
            router_in = (x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.hp.eps)
                         / math.sqrt(self.hp.n_embd) * w[p + "ffn_gate_inp.scale"])
            moe = self._moe(il, self._rmsnorm(x, w[p + "pre_ffw_norm_2.weight"]), router_in)
            f = mlp + self._rmsnorm(moe, w[p + "post_ffw_norm_2.weight"])
        else:
            f = self._ffn(il, self._rmsnorm(x, w[p + "ffn_norm.weight"]))
        x = x + self._rmsnorm(f, w[p + "post_ffw_norm.weight"])
        if self._per_layer is not None:
            g = _gelu_tanh(self._lin(x, p + "inp_gate")) * self._per_layer[:, il, :]
            x = x + self._rmsnorm(self._lin(g, p + "proj"), w[p + "post_norm.weight"])
        s = w.get(p + "layer_output_scale.weight")
        return x if s is None else x * s[0]

    def _attention_qwen35(self, il, h, pos, cache):
        """llama.cpp's qwen35 full attention: Q projected with a gate per head ([q | gate]),
        Q/K norms, rope on the first n_rot dims (M-RoPE with one position in every section:
        NeoX), softmax attention, times sigmoid(gate), output projection."""
        hp, w, p = self.hp, self.w, f"blk.{il}."
        n, hd, nh, nkv = h.shape[0], hp.head_dim, hp.n_head, hp.n_head_kv
        qg = self._lin(h, p + "attn_q").reshape(n, nh, 2 * hd)
        q, gate = qg[..., :hd], qg[..., hd:]
        k = self._lin(h, p + "attn_k").reshape(n, nkv, hd)
        v = self._lin(h, p + "attn_v").reshape(n, nkv, hd)
        q = self._rmsnorm(q, w[p + "attn_q_norm.weight"])
        k = self._rmsnorm(k, w[p + "attn_k_norm.weight"])
        cs = self._cos_sin(pos, il)
        q, k = self._rope(q, cs), self._rope(k, cs)
        if cache is not None:
            k = np.concatenate([cache[il][0], k], axis=0)
            v = np.concatenate([cache[il][1], v], axis=0)
            cache[il][0], cache[il][1] = k, v
        att = self._softmax_attend(q, k, v, pos, il, 1.0 / math.sqrt(hd))
        att = att * (1.0 / (1.0 + np.exp(-gate.reshape(n, nh * hd))))
        return self._lin(att, p + "attn_output")

    def _delta_net(self, il, h, cache):
        """llama.cpp's qwen35 gated delta-net mixer, token by token in float64: Q|K|V through
        the causal convolution (from the cached last conv_kernel - 1 inputs) and SiLU; Q, K
        L2-normed; per value head hv (key head hv % key heads) the state S [S_k, S_v] decays
        by exp(softplus(alpha + dt) * A), takes the delta rule's step beta = sigmoid(.) toward
        v, and answers S^T q / sqrt(S_k); RMS-norm per head times silu(z); output projection."""
        hp, w, p = self.hp, self.w, f"blk.{il}."
        n = h.shape[0]
        K, Sd = hp.ssm["conv_kernel"], hp.ssm["state_size"]
        Hv, Hk = hp.ssm["time_step_rank"], hp.ssm["group_count"]
        qkv = self._lin(h, p + "attn_qkv")                      # [n, C]
        z = self._lin(h, p + "attn_gate").reshape(n, Hv, Sd)
        beta = 1.0 / (1.0 + np.exp(-self._lin(h, p + "ssm_beta")))
        x = self._lin(h, p + "ssm_alpha") + w[p + "ssm_dt.bias"]
        g = np.where(x > 20.0, x, np.log1p(np.exp(np.minimum(x, 20.0)))) * w[p + "ssm_a"]
        C = qkv.shape[1]
        if cache is not None and cache[il][1] is not None:
            conv_prev, S = cache[il][1], cache[il][2]
        else:
            conv_prev = np.zeros((K - 1, C), dtype=self.dtype)
            S = np.zeros((Hv, Sd, Sd), dtype=self.dtype)
        xs = np.concatenate([conv_prev, qkv], axis=0)            # [K - 1 + n, C]
        kern = w[p + "ssm_conv1d.weight"]                         # [C, K]
        conv = np.stack([(xs[t:t + K] * kern.T).sum(axis=0) for t in range(n)])
        conv = _silu(conv)
        q = conv[:, : Sd * Hk].reshape(n, Hk, Sd)
        k = conv[:, Sd * Hk: 2 * Sd * Hk].reshape(n, Hk, Sd)
        v = conv[:, 2 * Sd * Hk:].reshape(n, Hv, Sd)
        l2 = lambda t: t / np.sqrt((t * t).sum(axis=-1, keepdims=True) + hp.eps)  # noqa: E731
        q, k = l2(q), l2(k)
        out = np.empty((n, Hv, Sd), dtype=self.dtype)
        for t in range(n):
            for hv in range(Hv):
                hk = hv % Hk
                St = S[hv] * math.exp(g[t, hv])
                d = beta[t, hv] * (v[t, hv] - St.T @ k[t, hk])
                St = St + np.outer(k[t, hk], d)
                S[hv] = St
                out[t, hv] = (St.T @ q[t, hk]) / math.sqrt(Sd)
        if cache is not None:
            cache[il][0] = np.zeros((cache[il][0].shape[0] + n, 0))
            cache[il][1], cache[il][2] = xs[-(K - 1):].copy(), S
        o = self._rmsnorm(out, w[p + "ssm_norm.weight"]) * _silu(z)
        return self._lin(o.reshape(n, Hv * Sd), p + "ssm_out")

    def _shortconv(self, il, h, cache):
        """llama.cpp's lfm2 short convolution: B|C|X from one product, B * X through the
        causal depthwise convolution (from the cached last l_cache - 1 inputs, no
        activation), times C, output projection."""
        w, p = self.w, f"blk.{il}."
        n = h.shape[0]
        K = self.hp.ssm["conv_kernel"]
        bcx = self._lin(h, p + "shortconv.in_proj")
        E = bcx.shape[1] // 3
        b, c, x = bcx[:, :E], bcx[:, E:2 * E], bcx[:, 2 * E:]
        bx = b * x
        if cache is not None and cache[il][1] is not None:
            prev = cache[il][1]
        else:
            prev = np.zeros((K - 1, E), dtype=self.dtype)
        xs = np.concatenate([prev, bx], axis=0)
        kern = w[p + "shortconv.conv.weight"]                      # [E, K]
        conv = np.stack([(xs[t:t + K] * kern.T).sum(axis=0) for t in range(n)])
        if cache is not None:
            cache[il][0] = np.zeros((cache[il][0].shape[0] + n, 0))
            cache[il][1] = xs[-(K - 1):].copy()
        return self._lin(c * conv, p + "shortconv.out_proj")

    def _block_lfm2(self, il, x, pos, cache):
        w, p = self.w, f"blk.{il}."
        h = self._rmsnorm(x, w[p + "attn_norm.weight"])
        x = x + (self._shortconv(il, h, cache) if self.hp.recurrent[il] else self._attention(il, h, pos, cache))
        return x + self._ffn(il, self._rmsnorm(x, w[p + "ffn_norm.weight"]))

    def _block_qwen35(self, il, x, pos, cache):
        w, p = self.w, f"blk.{il}."
        h = self._rmsnorm(x, w[p + "attn_norm.weight"])
        x = x + (self._delta_net(il, h, cache) if self.hp.recurrent[il]
                 else self._attention_qwen35(il, h, pos, cache))
        return x + self._ffn(il, self._rmsnorm(x, w[p + "post_attention_norm.weight"]))

    def _moe(self, il, h, router_in=None):
        """llama.cpp's build_moe_ffn: qwen3moe / qwen35moe (softmax router, the chosen
        renormalised; qwen35moe's shared expert times sigmoid(ffn_gate_inp_shexp . h)),
        gpt-oss (router bias, top k on the logits, softmax over the chosen; expert biases;
        clamped SwiGLU) or gemma4 (the router reads router_in; gate and up rows of each
        expert in one tensor; a factor per expert on its output)."""
        w, p, k = self.w, f"blk.{il}.", self.n_expert_used
        oai = self.hp.arch == "gpt-oss"
        act = _ACT[self.family.ffn_act]
        logits = self._lin(h if router_in is None else router_in, p + "ffn_gate_inp")   # [n, n_expert]
        if oai:
            probs = logits
        elif self.gating == 2:                                     # sigmoid (lfm2moe)
            probs = 1.0 / (1.0 + np.exp(-logits))
        else:
            e = np.exp(logits - logits.max(axis=-1, keepdims=True))
            probs = e / e.sum(axis=-1, keepdims=True)
        # top k, ties to the lower index (a stable sort of -p); a selection bias moves the
        # choice, not the weights
        sel_b = w.get(p + "exp_probs_b.bias")
        top = np.argsort(-(probs if sel_b is None else probs + sel_b), axis=-1, kind="stable")[:, :k]
        out = np.zeros_like(h)
        down = w[p + "ffn_down_exps.weight"]
        if p + "ffn_gate_up_exps.weight" in w:                      # [n_expert, 2 F, E]
            gu = w[p + "ffn_gate_up_exps.weight"]
            gate, up = gu[:, : gu.shape[1] // 2], gu[:, gu.shape[1] // 2:]
        else:
            gate, up = w[p + "ffn_gate_exps.weight"], w[p + "ffn_up_exps.weight"]
        scale = w.get(p + "ffn_down_exps.scale")
        bias = {t: w.get(p + f"ffn_{t}_exps.bias") for t in ("gate", "up", "down")}
        zero = {"gate": 0.0, "up": 0.0, "down": 0.0}
        seen = self.route_counts.setdefault(il, set())
        for i in range(h.shape[0]):
            sel = top[i]
            seen.add(tuple(sorted(int(x) for x in sel)))
            wt = probs[i, sel]
            if oai:
                wt = np.exp(wt - wt.max())
            wt = wt / wt.sum()
            for j, ex in enumerate(sel):
                b = {t: (zero[t] if bias[t] is None else bias[t][ex]) for t in bias}
                g, u = gate[ex] @ h[i] + b["gate"], up[ex] @ h[i] + b["up"]
                y = down[ex] @ act(g, u) + b["down"]
                if scale is not None:
                    y = y * scale[ex]
                out[i] += wt[j] * y
        if p + "ffn_up_shexp.weight" in w:
            y = self._lin(act(self._lin(h, p + "ffn_gate_shexp"), self._lin(h, p + "ffn_up_shexp")),
                          p + "ffn_down_shexp")
            if p + "ffn_gate_inp_shexp.weight" in w:
                y = y / (1.0 + np.exp(-self._lin(h, p + "ffn_gate_inp_shexp")))
            out = out + y
        return out

    def _ffn(self, il, h):
        if f"blk.{il}.ffn_gate_inp.weight" in self.w:
            return self._moe(il, h)
        return self._dense_ffn(il, h)

    def _dense_ffn(self, il, h):
        w, p = self.w, f"blk.{il}."
        act = _ACT[self.family.ffn_act]
        if p + "ffn_gate.weight" in w:
            g, u = self._lin(h, p + "ffn_gate"), self._lin(h, p + "ffn_up")
        else:                                           # fused: rows gate then up
            gu = self._lin(h, p + "ffn_up")
            g, u = gu[:, : gu.shape[1] // 2], gu[:, gu.shape[1] // 2:]
        return self._lin(act(g, u), p + "ffn_down")

    def _block_prenorm(self, il, x, pos, cache):
        w, p = self.w, f"blk.{il}."
        x = x + self._attention(il, self._rmsnorm(x, w[p + "attn_norm.weight"]), pos, cache)
        return x + self._ffn(il, self._rmsnorm(x, w[p + self.hp.ffn_norm + ".weight"]))

    def _block_sandwich(self, il, x, pos, cache):
        w, p = self.w, f"blk.{il}."
        a = self._attention(il, self._rmsnorm(x, w[p + "attn_norm.weight"]), pos, cache)
        x = x + self._rmsnorm(a, w[p + "post_attention_norm.weight"])
        f = self._ffn(il, self._rmsnorm(x, w[p + "ffn_norm.weight"]))
        return x + self._rmsnorm(f, w[p + "post_ffw_norm.weight"])

    # -- forward -------------------------------------------------------------
    def new_cache(self) -> list:
        """Empty KV cache: per layer [K (n, n_head_kv, head_dim), V (n, n_head_kv, head_dim_v)]."""
        hp = self.hp
        if hp.head_dim_l:                                # gemma4: per-layer shapes
            return [[np.zeros((0, hp.n_head_kv_l[il], hp.head_dim_l[il]), dtype=self.dtype)
                     for _ in range(2)] for il in range(hp.n_layer)]
        zk = np.zeros((0, hp.n_head_kv, hp.head_dim), dtype=self.dtype)
        zv = np.zeros((0, hp.n_head_kv, hp.head_dim_v), dtype=self.dtype)
        if hp.recurrent:                                 # qwen35: [positions seen, conv, state]
            return [[np.zeros((0, 0)), None, None] if r else [zk, zv] for r in hp.recurrent]
        return [[zk, zv] for _ in range(hp.n_layer)]

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
        if hp.embd_scale != 1.0:
            x = x * hp.embd_scale
        self._kv_now: dict = {}
        self._per_layer = (self._per_layer_inputs(tokens, x) if "per_layer_token_embd.weight" in w
                           else None)
        block = {"sandwich": self._block_sandwich, "gemma4": self._block_gemma4,
                 "qwen35": self._block_qwen35, "lfm2": self._block_lfm2}.get(
            self.family.block, self._block_prenorm)
        for il in range(hp.n_layer):
            x = block(il, x, pos, cache)
        return self._rmsnorm(x, w["output_norm.weight"] if "output_norm.weight" in w else w["token_embd_norm.weight"])

    def logits(self, tokens, cache: list | None = None) -> np.ndarray:
        """Per-position logits [n_tokens, n_vocab] (float64)."""
        lg = self.hidden(tokens, cache) @ self.out_w.T
        b = self.w.get("output.bias")
        if b is not None:
            lg += b
        c = self.hp.final_softcap
        if c > 0:
            lg = c * np.tanh(lg / c)
        return lg

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
