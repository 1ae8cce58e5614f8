#!/usr/bin/env python3
"""Write small synthetic GGUF models, one per architecture family, deterministically.

These files exist to check Ember's forward pass for several architecture
families against llama.cpp (tests/golden/arch_<family>.npz, made by
tools/make_arch_golden.py) and against the float64 oracle (tools/oracle.py).
The weights are random, but everything else is real: the tokenizer (every
``tokenizer.*`` key is copied from a real vocabulary file) and the
hyper-parameter keys, tensor names, shapes and types (matrices F16, norms,
biases and rope factor tables F32) follow what llama.cpp's converters write for
the real models of each family.

Families (``FAMILIES`` below)::

    llama3     llama,  Llama-3 BPE vocab (128256), n_embd 256, 2 layers, 4/2 heads, n_ff 512,
               rope base 500000, ctx 131072, tied, rope_freqs.weight with Llama 3.1's rule
               (factor 32, low/high freq factor 1/4, original ctx 8192) -- evaluate on > 1000
               tokens, its effect grows with position
    tinyllama  llama,  Llama SPM vocab (32000), TinyLlama-1.1B's widths (n_embd 2048, 32/4 heads,
               n_ff 5632, rope base 10000, ctx 2048, untied) but only 2 of its 22 layers
    qwen2      qwen2,  Qwen2 BPE vocab (151936), n_embd 256, 2 layers, 4/2 heads, n_ff 512,
               rope base 1e6, q/k/v biases, tied
    qwen3      qwen3,  Qwen2 BPE vocab, n_embd 256, 2 layers, 4/2 heads of head_dim 128
               (n_head*head_dim = 512 != n_embd), n_ff 512, rope base 1e6, per-head q/k RMSNorm,
               no biases, untied
    gemma3     gemma3, the real gemma-3-270m vocab (262144), n_embd 256, 6 layers (0-4 sliding
               window 128, 5 global), 4/1 heads of 64, n_ff 512, rope base 1e6 (local layers 10000),
               rms eps 1e-6, q/k norms, post-attention / post-FFN norms, tied
    gemma2     gemma2, the real gemma-3-270m vocab, n_embd 256, 4 layers (0, 2 sliding window 64,
               1, 3 global), 4/2 heads of 64, n_ff 512, rope base 10000 (local layers too),
               ctx 8192, rms eps 1e-6, no q/k norms, post-attention / post-FFN norms, tied,
               attention logit soft-cap 50 and final logit soft-cap 30, both active: attn_q/attn_k
               std 1.5/sqrt(n_embd) (scaled scores rms 2.3, up to ~11) and logit std 6 (top logits
               ~25 before the cap, ~20 after)
    gemma4     gemma4, the real gemma-4 vocab (262144), n_embd 256, 6 layers alternating sliding
               (window 64, heads of 32, 2 KV heads, rope base 10000, own attn_v) and full (heads
               of 64, 1 KV head, rope base 1e6 with proportional rope_freqs, no attn_v: V = K),
               4/.. heads, layers 4-5 reading the KV of 2-3 (no attn_k/v there), n_ff 512
               (1024 on the shared layers), per-layer embeddings of 16, layer_output_scale,
               q/k norms of mean 0.5 (attention scale 1), final soft-cap 30, tied
    qwen35     qwen35, the real Qwen3.5 vocab (qwen35 pre-tokenizer, 151936), n_embd 256, 8 layers:
               gated delta-net blocks 0-2 and 4-6 (2 key heads, 4 value heads of 64, conv kernel 4),
               gated full attention at 3 and 7 (4/2 heads of 64, 16 rotated dims, M-RoPE sections
               3/3/2), n_ff 512, tied
    qwen35moe  qwen35moe, as qwen35 but each block's feed-forward is 16 experts of width 128, 4 used
               (softmax router, renormalised) plus a shared expert of width 256 gated by
               sigmoid(ffn_gate_inp_shexp . x) (Qwen3.5-35B-A3B's 256 / 8 / 512 + 512 in small)
    gemma4moe  gemma4, Gemma 4 26B-A4B's block in small: 6 layers alternating sliding (window 64,
               heads of 32, 2 KV heads) and full (heads of 64, 1 KV head, V = K), no per-layer
               embeddings, no shared KV; each block a dense GELU MLP of 192 beside 16 experts of
               width 64, 4 used, in one gate|up tensor per block (ffn_gate_up_exps), the router
               reading RMS-normed x / sqrt(n_embd) times ffn_gate_inp.scale, a factor per expert
               on its output (ffn_down_exps.scale), and the norms around both halves
    lfm2       lfm2, Llama 3 BPE vocab (no LFM2 vocabulary ships with llama.cpp; its pre-tokenizer is
               llama 3's), n_embd 256, 6 layers: short-convolution blocks 0, 1, 3, 5 (l_cache 3),
               attention 2 and 4 (4/2 heads of 64, q/k norms), n_ff 512, rope base 1e6, tied,
               final norm token_embd_norm (LFM2-1.2B's 10 conv / 6 attention blocks in small)
    lfm2moe    lfm2moe, as lfm2 but blocks 2-5 (after leading_dense_block_count 2) a mixture of 16
               experts of width 128, 4 used, sigmoid gates with a selection bias (exp_probs_b),
               the chosen renormalised (LFM2-8B-A1B's 32 / 4 / 1792 after 2 dense blocks, in small)
    qwen3moe   qwen3moe, as qwen3 but each block's feed-forward is 32 experts of width 128, 8 used
               per token (Qwen3-30B-A3B's 128 / 8 / 768 in small); F32 softmax router of std
               3/sqrt(n_embd), the chosen weights renormalised
    mistral3   mistral3, Llama 3 BPE vocab (no tekken vocabulary ships with llama.cpp), n_embd 256,
               2 layers, 4/2 heads of 64, YaRN (factor 16, original ctx 128, log multiplier 1),
               query temperature 0.1 over blocks of 128 positions, untied
    smollm3    smollm3, Llama 3 BPE vocab, n_embd 256, 4 layers (the fourth without rope), 4/2 heads,
               n_ff 512, rope base 5e6, tied
    gpt-oss    gpt-oss, Llama 3 BPE vocab (no o200k vocabulary ships with llama.cpp), n_embd 256,
               2 layers (0 sliding window 128, 1 global), 4/2 heads of 64, q/k/v/o biases,
               attention sinks, YaRN (factor 32, original ctx 4096, base 150000), 16 experts
               of width 256, 4 used, router and expert biases, clamped SwiGLU
    phi3       phi3,   Phi-3 SPM vocab (32064), n_embd 256, 2 layers, 4/4 heads, n_ff 512, fused
               attn_qkv and gate|up, LongRoPE factor tables (long/short), attn_factor 1.19,
               original ctx 1024 (so n_ctx 2048 selects the long factors), ctx 131072, untied

Determinism: every tensor comes from ``numpy.random.PCG64(seed).random_raw(n)``
(a bit-generator stream numpy keeps stable), with the seed taken from the
sha256 of "<family>/<tensor name>", turned into uniform floats with integer and
IEEE float arithmetic only (u = (raw >> 11) * 2**-53, w = (u - 0.5) * 2 sqrt(3) std),
rounded float64 -> float32 (-> float16 for matrices).  The files are therefore
byte-identical on any machine and numpy version (with gguf==0.19.0's writer);
tests/golden/meta.json["arch"][family]["sha256"] records them.

Scales: matrices std 1/sqrt(fan_in) (every projection keeps unit variance);
token_embd std 0.02.  Untied: output.weight std LOGIT_STD/sqrt(n_embd).  Tied:
output_norm.weight is scaled to mean LOGIT_STD/(0.02 sqrt(n_embd)) (~14 for
n_embd 256) instead of 1, so the logits have a real spread (top-1/top-2 gaps
>= 0.5 at most positions) while the residual stream is not dominated by the
input token's own embedding (a large tied embedding would make "repeat the
current token" the top-1 everywhere).  Other norm weights (Gemma's included:
its GGUF norms already carry the +1) are 1 + uniform noise of std 0.1 (the
noise of output_norm scales with its mean).  Family overrides: ``logit_std``
(LOGIT_STD elsewhere) and ``qk_gain`` (attn_q/attn_k std qk_gain/sqrt(n_embd)),
both used by gemma2 only, to make its soft-caps bite; a larger qk_gain makes
attention peakier and the logits more sensitive to f16 rounding (gain 2.5 put the
oracle 9e-5 from llama.cpp, 1.5 puts it at 5e-6).

Python API::

    from tools.make_arch_models import build, FAMILIES
    path = build("qwen3")                      # <asset cache>/synthetic/ember-synth-qwen3.gguf

CLI: ``python tools/make_arch_models.py [families...] [--out DIR] [--force]`` prints
path and sha256 per file.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tools import fetch_assets  # noqa: E402
from tools.make_variants import copy_kv  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
META = REPO / "tests" / "golden" / "meta.json"

LOGIT_STD = 4.5      # std of a logit for a unit-RMS final hidden state
EMBD_STD = 0.02      # token_embd std
NORM_STD = 0.1       # norm weights: 1 + noise of this std
BIAS_STD = 0.3       # qwen2 q/k/v biases
GEMMA2_LOGIT_STD = 6.0   # gemma2: top logits ~25-30 before the final soft-cap (30), ~20 after
GEMMA2_QK_GAIN = 1.5     # gemma2: attention scores rms 2.3, up to ~11: the soft-cap (50) bends them


def _vocab(name: str) -> Callable[[], Path]:
    return lambda: fetch_assets.vocab_dir() / f"ggml-vocab-{name}.gguf"


@dataclass(frozen=True)
class Gemma4Layout:
    """What a gemma4 file has beyond Gemma 3 (llama.cpp's conversion/gemma.py Gemma4Model):
    per-layer sliding-window flags, the sliding layers' own head size, KV heads and rotated
    dims, the last `n_kv_shared` layers reading earlier layers' caches (no attn_k/attn_v/
    attn_k_norm there), FFN width per layer (double on the shared layers, as
    use_double_wide_mlp writes it), full layers without attn_v (V = K), per-layer token
    embeddings of n_embd_per_layer, a layer_output_scale per block, proportional rope on the
    full layers (rope_freqs: factor 1 on the first rope_partial of the pairs, 1e30 after)."""
    swa: tuple                            # per layer: sliding window or full
    head_dim_swa: int
    n_head_kv_swa: int
    n_kv_shared: int
    n_ff_shared: int
    n_embd_per_layer: int
    rope_partial: float = 0.25            # full layers' rotated share (the release's value)
    qk_norm_mean: float = 0.5             # q/k norm weights: attention scale is 1, so the
                                          # norms set the scores' size (std ~2 over 64 dims)
    per_layer_std: float = 0.25           # per_layer_token_embd (times sqrt(n_embd_per_layer): rms 1)
    out_scale_mean: float = 0.9

    def has_kv(self, il: int) -> bool:
        return il < len(self.swa) - self.n_kv_shared


@dataclass(frozen=True)
class Qwen35Layout:
    """What a qwen35 file has beyond a llama-like block (llama.cpp's conversion/qwen.py
    Qwen3_5TextModel / Qwen3NextModel and llama_model_qwen35::load_arch_tensors): gated
    delta-net blocks (every full_attention_interval-th block, counting from 1, attends),
    their ssm.* shapes, the attention's partial rotation and M-RoPE sections."""
    interval: int = 4
    d_state: int = 64          # head size of the delta rule (ssm.state_size)
    n_k_heads: int = 2         # ssm.group_count
    n_v_heads: int = 4         # ssm.time_step_rank
    d_conv: int = 4            # ssm.conv_kernel
    n_rot: int = 16            # rope.dimension_count (partial_rotary_factor 0.25 of 64)
    sections: tuple = (3, 3, 2, 0)

    def recurrent(self, il: int) -> bool:
        return (il + 1) % self.interval != 0


@dataclass(frozen=True)
class Lfm2Layout:
    """What an lfm2 file has beyond a llama-like block (llama.cpp's conversion/lfm2.py
    LFM2Model and llama_model_lfm2::load_arch_tensors): per block, attention or a short
    convolution (0 KV heads in head_count_kv), the convolution's width, the final norm named
    token_embd_norm."""
    conv: tuple                 # per block: a short-convolution block
    l_cache: int = 3            # shortconv.l_cache (the release's value)
    dense_lead: int = 0         # lfm2moe: the first blocks keep a dense feed-forward


@dataclass(frozen=True)
class Family:
    arch: str
    vocab: Callable[[], Path]
    n_vocab: int
    n_embd: int
    n_layer: int
    n_head: int
    n_head_kv: int
    n_ff: int
    rope_base: float
    n_ctx_train: int
    eps: float
    tied: bool
    head_dim: int | None = None           # key/value length when it differs from n_embd/n_head
    write_head_dim: bool = False          # write key_length/value_length even when equal
    qkv_bias: bool = False                # qwen2
    qk_norm: bool = False                 # qwen3, gemma3
    post_norms: bool = False              # gemma2, gemma3: post_attention_norm, post_ffw_norm
    fused: bool = False                   # phi3: attn_qkv, ffn_up = gate|up
    llama3_rope: bool = False             # rope_freqs.weight (Llama 3.1 rule)
    longrope: bool = False                # phi3 rope_factors_long/short + attn_factor
    n_expert: int = 0                     # mixture of experts: experts per block (0: dense)
    n_expert_used: int = 0                # experts each token runs
    n_ff_exp: int = 0                     # an expert's width
    router_gain: float = 1.0              # ffn_gate_inp std = router_gain / sqrt(n_embd)
    n_ff_shexp: int = 0                   # qwen35moe: the shared expert's width (0: none)
    gpt_oss: bool = False                 # q/k/v/o and router/expert biases, attn_sinks, the
                                          # pre-FFN norm named post_attention_norm
    extra_kv: dict = field(default_factory=dict)   # key suffix -> (value, "u32"/"f32")
    logit_std: float = LOGIT_STD          # std of a logit for a unit-RMS final hidden state
    qk_gain: float = 1.0                  # attn_q / attn_k std = qk_gain / sqrt(n_embd)
    gemma4: Gemma4Layout | None = None    # gemma4: the per-layer layout (see Gemma4Layout)
    qwen35: Qwen35Layout | None = None    # qwen35: the delta-net layout (see Qwen35Layout)
    lfm2: Lfm2Layout | None = None        # lfm2: the convolution blocks (see Lfm2Layout)
    note: str = ""

    @property
    def hd(self) -> int:
        return self.head_dim or self.n_embd // self.n_head


FAMILIES: dict[str, Family] = {
    "llama3": Family("llama", _vocab("llama-bpe"), 128256, 256, 2, 4, 2, 512, 500000.0, 131072,
                     1e-5, tied=True, llama3_rope=True,
                     note="Llama 3.1 rope_freqs; evaluate on > 1000 tokens"),
    "tinyllama": Family("llama", _vocab("llama-spm"), 32000, 2048, 2, 32, 4, 5632, 10000.0, 2048,
                        1e-5, tied=False, note="TinyLlama-1.1B widths, 2 of its 22 layers"),
    "qwen2": Family("qwen2", _vocab("qwen2"), 151936, 256, 2, 4, 2, 512, 1000000.0, 32768,
                    1e-6, tied=True, qkv_bias=True),
    "qwen3": Family("qwen3", _vocab("qwen2"), 151936, 256, 2, 4, 2, 512, 1000000.0, 40960,
                    1e-6, tied=False, head_dim=128, qk_norm=True),
    "gemma3": Family("gemma3", fetch_assets.gemma_model, 262144, 256, 6, 4, 1, 512, 1000000.0,
                     32768, 1e-6, tied=True, head_dim=64, write_head_dim=True, qk_norm=True,
                     post_norms=True, extra_kv={"attention.sliding_window": (128, "u32")},
                     note="layers 0-4 sliding window 128 (rope base 10000), layer 5 global"),
    "gemma2": Family("gemma2", fetch_assets.gemma_model, 262144, 256, 4, 4, 2, 512, 10000.0,
                     8192, 1e-6, tied=True, head_dim=64, write_head_dim=True, post_norms=True,
                     extra_kv={"attention.sliding_window": (64, "u32"),
                               "attn_logit_softcapping": (50.0, "f32"),
                               "final_logit_softcapping": (30.0, "f32")},
                     logit_std=GEMMA2_LOGIT_STD, qk_gain=GEMMA2_QK_GAIN,
                     note="layers 0, 2 sliding window 64, layers 1, 3 global; attention soft-cap 50 "
                          "and final soft-cap 30 both active"),
    "phi3": Family("phi3", _vocab("phi-3"), 32064, 256, 2, 4, 4, 512, 10000.0, 131072,
                   1e-5, tied=False, fused=True, longrope=True,
                   extra_kv={"rope.scaling.attn_factor": (1.19, "f32"),
                             "rope.scaling.original_context_length": (1024, "u32")}),
    # Qwen3-30B-A3B's block in small: per-head q/k norms, 32 experts of width 128, 8 used per
    # token, a softmax router (F32, as converters keep it) whose chosen weights are
    # renormalised; router std 3/sqrt(n_embd) so the chosen sets vary from token to token
    # with clear gaps between the 8th and 9th expert
    "qwen3moe": Family("qwen3moe", _vocab("qwen2"), 151936, 256, 2, 4, 2, 512, 1000000.0, 40960,
                       1e-6, tied=False, head_dim=128, qk_norm=True, n_expert=32, n_expert_used=8,
                       n_ff_exp=128, router_gain=3.0,
                       note="32 experts top-8, width 128; softmax router, renormalised"),
    # Ministral 3 as converted in 2026 (no tekken vocabulary ships with llama.cpp: Llama 3's
    # BPE one stands in): YaRN with its log multiplier 1 and the Llama 4 query temperature
    # 0.1, over an original context of 128 so that both bite within the text (the release:
    # 16384)
    "mistral3": Family("mistral3", _vocab("llama-bpe"), 128256, 256, 2, 4, 2, 512, 1000000.0, 262144,
                       1e-5, tied=False, head_dim=64, write_head_dim=True,
                       extra_kv={"rope.scaling.type": ("yarn", "str"),
                                 "rope.scaling.factor": (16.0, "f32"),
                                 "rope.scaling.original_context_length": (128, "u32"),
                                 "rope.scaling.yarn_log_multiplier": (1.0, "f32"),
                                 "rope.scaling.yarn_beta_fast": (32.0, "f32"),
                                 "rope.scaling.yarn_beta_slow": (1.0, "f32"),
                                 "attention.temperature_scale": (0.1, "f32")},
                       note="YaRN x16 over 128 with log multiplier 1; query temperature 0.1"),
    # SmolLM3-3B's layout in small (Llama 3 BPE vocab, tied, rope base 5e6): 4 blocks, so that
    # block 3 is one of the NoPE ones (every fourth)
    "smollm3": Family("smollm3", _vocab("llama-bpe"), 128256, 256, 4, 4, 2, 512, 5000000.0, 65536,
                      1e-6, tied=True, note="blocks 0-2 rope, block 3 NoPE"),
    # gpt-oss-20b's block in small: 4/2 heads of 64, biases everywhere, a sink per head,
    # layers 0 (window 128) and 1 (global), YaRN factor 32 over 4096 as the release has it,
    # 16 experts of width 256 (= n_embd, as in the release), 4 used, router with a bias.
    # No gpt-oss (o200k) vocabulary ships with llama.cpp's models/: the Llama 3 BPE one
    # stands in (the graph does not depend on it).
    "gpt-oss": Family("gpt-oss", _vocab("llama-bpe"), 128256, 256, 2, 4, 2, 256, 150000.0, 131072,
                      1e-5, tied=False, head_dim=64, write_head_dim=True, qkv_bias=True,
                      n_expert=16, n_expert_used=4, n_ff_exp=256, router_gain=3.0, gpt_oss=True,
                      extra_kv={"attention.sliding_window": (128, "u32"),
                                "rope.scaling.type": ("yarn", "str"),
                                "rope.scaling.factor": (32.0, "f32"),
                                "rope.scaling.original_context_length": (4096, "u32")},
                      note="layer 0 sliding window 128, layer 1 global; attention sinks; 16 experts "
                           "top-4, softmax over the chosen; clamped SwiGLU; YaRN x32"),
    # Gemma 4 E2B's layout in small: 6 blocks alternating sliding (window 64, heads of 32, 2
    # KV heads, rope base 10000) and full (heads of 64, 1 KV head, rope base 1e6 with
    # proportional rope_freqs, no attn_v: V = K); blocks 4 (sliding) and 5 (full) share the
    # caches of blocks 2 and 3, with double-wide FFNs; per-layer embeddings of 16; a
    # layer_output_scale per block; final soft-cap 30 (active: logit std 6)
    "gemma4": Family("gemma4", _vocab("gemma-4"), 262144, 256, 6, 4, 1, 512, 1000000.0, 131072,
                     1e-6, tied=True, head_dim=64, write_head_dim=True, qk_norm=True, post_norms=True,
                     extra_kv={"attention.sliding_window": (64, "u32"),
                               "rope.freq_base_swa": (10000.0, "f32"),
                               "final_logit_softcapping": (30.0, "f32")},
                     logit_std=GEMMA2_LOGIT_STD,
                     gemma4=Gemma4Layout(swa=(True, False, True, False, True, False), head_dim_swa=32,
                                         n_head_kv_swa=2, n_kv_shared=2, n_ff_shared=1024,
                                         n_embd_per_layer=16),
                     note="blocks 0, 2, 4 sliding window 64 (heads of 32), 1, 3, 5 full (heads of 64, "
                          "proportional rope, V = K); blocks 4-5 share the KV of 2-3; per-layer "
                          "embeddings of 16; layer_output_scale; final soft-cap 30"),
    # Qwen3.5-0.8B's block pattern in small: three gated delta-net blocks, then gated full
    # attention, twice; the real vocabulary (qwen35 pre-tokenizer)
    "qwen35": Family("qwen35", _vocab("qwen35"), 151936, 256, 8, 4, 2, 512, 10000000.0, 262144,
                     1e-6, tied=True, head_dim=64, write_head_dim=True, qk_norm=True,
                     qwen35=Qwen35Layout(),
                     note="blocks 0-2, 4-6 gated delta-net (2/4 heads of 64, conv 4), 3 and 7 gated "
                          "attention (16 rotated dims)"),
    # Qwen3.5-35B-A3B's block in small: qwen35's layout with every feed-forward a mixture
    # of 16 experts of width 128, 4 used, and a shared expert of 256 behind a sigmoid gate
    "qwen35moe": Family("qwen35moe", _vocab("qwen35"), 151936, 256, 8, 4, 2, 512, 10000000.0, 262144,
                        1e-6, tied=True, head_dim=64, write_head_dim=True, qk_norm=True,
                        qwen35=Qwen35Layout(), n_expert=16, n_expert_used=4, n_ff_exp=128,
                        router_gain=3.0, n_ff_shexp=256,
                        note="qwen35 with 16 experts top-4 of width 128 and a gated shared expert "
                             "of 256"),
    # Gemma 4 26B-A4B's block in small: no per-layer embeddings or shared KV; a dense MLP
    # (192) beside 16 experts (64 wide, 4 used) in every block
    "gemma4moe": Family("gemma4", _vocab("gemma-4"), 262144, 256, 6, 4, 1, 192, 1000000.0, 262144,
                        1e-6, tied=True, head_dim=64, write_head_dim=True, qk_norm=True, post_norms=True,
                        extra_kv={"attention.sliding_window": (64, "u32"),
                                  "rope.freq_base_swa": (10000.0, "f32"),
                                  "final_logit_softcapping": (30.0, "f32")},
                        logit_std=GEMMA2_LOGIT_STD, n_expert=16, n_expert_used=4, n_ff_exp=64,
                        router_gain=3.0,
                        gemma4=Gemma4Layout(swa=(True, False, True, False, True, False), head_dim_swa=32,
                                            n_head_kv_swa=2, n_kv_shared=0, n_ff_shared=192,
                                            n_embd_per_layer=0),
                        note="blocks 0, 2, 4 sliding window 64, 1, 3, 5 full (V = K); a dense MLP of "
                             "192 beside 16 experts top-4 of width 64 (gate|up in one tensor, a "
                             "scale per expert)"),
    # LFM2-1.2B's block kinds in small: convolution blocks around two attention blocks, the
    # last block a convolution (so the last-row narrowing runs after one)
    "lfm2": Family("lfm2", _vocab("llama-bpe"), 128256, 256, 6, 4, 2, 512, 1000000.0, 128000,
                   1e-5, tied=True, head_dim=64, qk_norm=True,
                   lfm2=Lfm2Layout(conv=(True, True, False, True, False, True)),
                   note="blocks 0, 1, 3, 5 short convolutions (l_cache 3), 2 and 4 attention"),
    # LFM2-8B-A1B's layout in small: two dense blocks, then experts behind sigmoid gates
    "lfm2moe": Family("lfm2moe", _vocab("llama-bpe"), 128256, 256, 6, 4, 2, 512, 1000000.0, 128000,
                      1e-5, tied=True, head_dim=64, qk_norm=True, n_expert=16, n_expert_used=4,
                      n_ff_exp=128, router_gain=3.0,
                      extra_kv={"leading_dense_block_count": (2, "u32"), "expert_gating_func": (2, "u32")},
                      lfm2=Lfm2Layout(conv=(True, True, False, True, False, True), dense_lead=2),
                      note="lfm2 with blocks 2-5 a mixture of 16 experts top-4 (width 128), sigmoid "
                           "gates and a selection bias"),
    # YaRN context extension as Qwen2.5 files carry it: factor 4 over a 256-token original
    # context, so the ramp between interpolated and original rotations is live
    "yarn": Family("qwen2", _vocab("qwen2"), 151936, 256, 2, 4, 2, 512, 1000000.0, 1024,
                   1e-6, tied=True, extra_kv={"rope.scaling.type": ("yarn", "str"),
                                              "rope.scaling.factor": (4.0, "f32"),
                                              "rope.scaling.original_context_length": (256, "u32")},
                   note="qwen2 with YaRN (factor 4, original context 256)"),
}


def file_name(family: str) -> str:
    return f"ember-synth-{family}.gguf"


# ---------------------------------------------------------------------------
# deterministic numbers
# ---------------------------------------------------------------------------

def _seed(family: str, name: str) -> int:
    return int.from_bytes(hashlib.sha256(f"{family}/{name}".encode()).digest()[:8], "little")


def uniform(family: str, name: str, n: int, std: float, mean: float = 0.0) -> np.ndarray:
    """n float64 values, uniform with the given mean and std, from PCG64 raw output."""
    gen = np.random.PCG64(_seed(family, name))
    half_width = 2.0 * math.sqrt(3.0) * std
    out = np.empty(n, dtype=np.float64)
    chunk = 1 << 23
    for i in range(0, n, chunk):
        m = min(chunk, n - i)
        raw = gen.random_raw(m)
        u = (raw >> np.uint64(11)).astype(np.float64) * (2.0 ** -53)
        out[i:i + m] = (u - 0.5) * half_width + mean
    return out


def matrix(family: str, name: str, rows: int, cols: int, std: float) -> np.ndarray:
    """[rows (out), cols (in)] F16 matrix: ggml ne = [cols, rows]."""
    w = uniform(family, name, rows * cols, std).astype(np.float32).astype(np.float16)
    return w.reshape(rows, cols)


def vector(family: str, name: str, n: int, std: float, mean: float = 0.0) -> np.ndarray:
    return uniform(family, name, n, std, mean).astype(np.float32)


def llama3_rope_freqs(n_rot: int, base: float, factor: float = 32.0, low_freq_factor: float = 1.0,
                      high_freq_factor: float = 4.0, orig_ctx: int = 8192) -> np.ndarray:
    """Llama 3.1's per-pair frequency divisors (llama.cpp divides theta_i by these)."""
    low_wavelen = orig_ctx / low_freq_factor
    high_wavelen = orig_ctx / high_freq_factor
    out = []
    for i in range(n_rot // 2):
        freq = base ** (-2.0 * i / n_rot)
        wavelen = 2.0 * math.pi / freq
        if wavelen < high_wavelen:
            out.append(1.0)
        elif wavelen > low_wavelen:
            out.append(factor)
        else:
            smooth = (orig_ctx / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
            out.append(1.0 / ((1.0 - smooth) / factor + smooth))
    return np.array(out, dtype=np.float32)


def longrope_factors(n: int, top: float) -> np.ndarray:
    """Increasing factors 1 .. top (quadratic ramp), like Phi-3's long/short tables."""
    i = np.arange(n, dtype=np.float64)
    return (1.0 + (top - 1.0) * (i / (n - 1)) ** 2).astype(np.float32)


# ---------------------------------------------------------------------------
# tensors
# ---------------------------------------------------------------------------

def routed_experts(family: str, p: str) -> list[tuple[str, np.ndarray]]:
    """Block p's router (F32, std router_gain / sqrt(n_embd), as converters keep it) and its
    experts' gate, up and down matrices ([n_expert, out, in] F16, merged per block)."""
    f = FAMILIES[family]
    E, X, F = f.n_embd, f.n_expert, f.n_ff_exp
    name = p + "ffn_gate_inp.weight"
    out = [(name, uniform(family, name, X * E, f.router_gain / math.sqrt(E)).astype(np.float32).reshape(X, E))]
    for t, rows, cols in (("gate", F, E), ("up", F, E), ("down", E, F)):
        name = p + f"ffn_{t}_exps.weight"
        w = uniform(family, name, X * rows * cols, 1.0 / math.sqrt(cols))
        out.append((name, w.astype(np.float32).astype(np.float16).reshape(X, rows, cols)))
    return out


def gemma4_tensors(family: str) -> list[tuple[str, np.ndarray]]:
    """The tensors of a gemma4 file (llama.cpp's llama_model_gemma4::load_arch_tensors)."""
    f = FAMILIES[family]
    G = f.gemma4
    E, n_pl, L = f.n_embd, G.n_embd_per_layer, f.n_layer
    out: list[tuple[str, np.ndarray]] = []

    def mat(name, rows, cols, std=None):
        out.append((name, matrix(family, name, rows, cols, std if std is not None else 1.0 / math.sqrt(cols))))

    def norm(name, n, mean=1.0):
        out.append((name, vector(family, name, n, NORM_STD * mean, mean)))

    mat("token_embd.weight", f.n_vocab, E, EMBD_STD)
    n_rot_pairs = int(f.hd * G.rope_partial / 2)
    out.append(("rope_freqs.weight", np.array([1.0] * n_rot_pairs + [1e30] * (f.hd // 2 - n_rot_pairs),
                                              dtype=np.float32)))
    if n_pl:
        mat("per_layer_token_embd.weight", f.n_vocab, n_pl * L, G.per_layer_std)
        mat("per_layer_model_proj.weight", n_pl * L, E)
        norm("per_layer_proj_norm.weight", n_pl)
    norm("output_norm.weight", E, f.logit_std / (EMBD_STD * math.sqrt(E)))
    for il in range(L):
        p = f"blk.{il}."
        swa = G.swa[il]
        hd = G.head_dim_swa if swa else f.hd
        nkv = G.n_head_kv_swa if swa else f.n_head_kv
        n_ff = f.n_ff if G.has_kv(il) else G.n_ff_shared
        norm(p + "attn_norm.weight", E)
        mat(p + "attn_q.weight", f.n_head * hd, E)
        if G.has_kv(il):
            mat(p + "attn_k.weight", nkv * hd, E)
            if swa:
                mat(p + "attn_v.weight", nkv * hd, E)
            norm(p + "attn_k_norm.weight", hd, G.qk_norm_mean)
        norm(p + "attn_q_norm.weight", hd, G.qk_norm_mean)
        mat(p + "attn_output.weight", E, f.n_head * hd)
        norm(p + "post_attention_norm.weight", E)
        norm(p + "ffn_norm.weight", E)
        mat(p + "ffn_gate.weight", n_ff, E)
        mat(p + "ffn_up.weight", n_ff, E)
        mat(p + "ffn_down.weight", E, n_ff)
        norm(p + "post_ffw_norm.weight", E)
        if f.n_expert:
            # 26B-A4B's experts beside the dense MLP (llama.cpp's gemma4 tensors; the
            # converter keeps the router F32 and writes gate|up as one tensor per block)
            X, F = f.n_expert, f.n_ff_exp
            norm(p + "post_ffw_norm_1.weight", E)
            norm(p + "pre_ffw_norm_2.weight", E)
            norm(p + "post_ffw_norm_2.weight", E)
            # the router's input is unit-RMS x / sqrt(n_embd) (norm 1): weights of std
            # router_gain give logits of std router_gain
            name = p + "ffn_gate_inp.weight"
            out.append((name, uniform(family, name, X * E, f.router_gain).astype(np.float32).reshape(X, E)))
            norm(p + "ffn_gate_inp.scale", E)
            name = p + "ffn_gate_up_exps.weight"
            w = uniform(family, name, X * 2 * F * E, 1.0 / math.sqrt(E))
            out.append((name, w.astype(np.float32).astype(np.float16).reshape(X, 2 * F, E)))
            name = p + "ffn_down_exps.weight"
            w = uniform(family, name, X * E * F, 1.0 / math.sqrt(F))
            out.append((name, w.astype(np.float32).astype(np.float16).reshape(X, E, F)))
            name = p + "ffn_down_exps.scale"
            out.append((name, vector(family, name, X, 0.5 / math.sqrt(3.0), 1.0)))   # 0.5 .. 1.5
        if n_pl:
            mat(p + "inp_gate.weight", n_pl, E)
            mat(p + "proj.weight", E, n_pl)
            norm(p + "post_norm.weight", E)
        name = p + "layer_output_scale.weight"
        out.append((name, vector(family, name, 1, NORM_STD, G.out_scale_mean)))
    return out


def qwen35_tensors(family: str) -> list[tuple[str, np.ndarray]]:
    """The tensors of a qwen35 file (llama.cpp's llama_model_qwen35::load_arch_tensors), with
    the converter's transforms in their values: ssm_a = -exp(A_log) (A in 1..16, as the
    release initialises A_log), dt_bias such that softplus(dt_bias) is 0.001..0.1, norms
    with the +1 the converter adds (the delta-net's own norm without it), conv1d F32."""
    f = FAMILIES[family]
    Q = f.qwen35
    E, hd = f.n_embd, f.hd
    S, Hk, Hv = Q.d_state, Q.n_k_heads, Q.n_v_heads
    conv_dim = 2 * S * Hk + S * Hv
    out: list[tuple[str, np.ndarray]] = []

    def mat(name, rows, cols, std=None):
        out.append((name, matrix(family, name, rows, cols, std if std is not None else 1.0 / math.sqrt(cols))))

    def norm(name, n, mean=1.0):
        out.append((name, vector(family, name, n, NORM_STD * mean, mean)))

    mat("token_embd.weight", f.n_vocab, E, EMBD_STD)
    norm("output_norm.weight", E, f.logit_std / (EMBD_STD * math.sqrt(E)))
    for il in range(f.n_layer):
        p = f"blk.{il}."
        norm(p + "attn_norm.weight", E)
        if Q.recurrent(il):
            mat(p + "attn_qkv.weight", conv_dim, E)
            mat(p + "attn_gate.weight", S * Hv, E)
            name = p + "ssm_conv1d.weight"
            out.append((name, vector(family, name, conv_dim * Q.d_conv, 1.0 / math.sqrt(Q.d_conv))
                        .reshape(conv_dim, Q.d_conv)))
            name = p + "ssm_a"
            a = uniform(family, name, Hv, 15.0 / math.sqrt(12.0), 8.5)          # A in 1..16
            out.append((name, (-a).astype(np.float32)))
            name = p + "ssm_dt.bias"
            dt = np.exp(uniform(family, name, Hv, math.log(100.0) / math.sqrt(12.0), math.log(0.01)))
            out.append((name, np.log(np.expm1(dt)).astype(np.float32)))      # softplus^-1
            mat(p + "ssm_beta.weight", Hv, E)
            mat(p + "ssm_alpha.weight", Hv, E)
            norm(p + "ssm_norm.weight", S)
            mat(p + "ssm_out.weight", E, S * Hv)
        else:
            mat(p + "attn_q.weight", 2 * f.n_head * hd, E)      # per head [q | gate]
            mat(p + "attn_k.weight", f.n_head_kv * hd, E)
            mat(p + "attn_v.weight", f.n_head_kv * hd, E)
            norm(p + "attn_q_norm.weight", hd)
            norm(p + "attn_k_norm.weight", hd)
            mat(p + "attn_output.weight", E, f.n_head * hd)
        norm(p + "post_attention_norm.weight", E)
        if f.n_expert:
            # routed experts as the converter splits them (Qwen2MoeModel: gate and up apart;
            # router and shared-expert gate F32), then the shared expert
            out += routed_experts(family, p)
            name = p + "ffn_gate_inp_shexp.weight"
            out.append((name, vector(family, name, E, 1.0 / math.sqrt(E)).reshape(1, E)))
            mat(p + "ffn_gate_shexp.weight", f.n_ff_shexp, E)
            mat(p + "ffn_up_shexp.weight", f.n_ff_shexp, E)
            mat(p + "ffn_down_shexp.weight", E, f.n_ff_shexp)
        else:
            mat(p + "ffn_gate.weight", f.n_ff, E)
            mat(p + "ffn_up.weight", f.n_ff, E)
            mat(p + "ffn_down.weight", E, f.n_ff)
    return out


def lfm2_tensors(family: str) -> list[tuple[str, np.ndarray]]:
    """The tensors of an lfm2 file (llama.cpp's llama_model_lfm2::load_arch_tensors; the
    converter keeps shortconv.conv F32, squeezed to [n_embd, l_cache])."""
    f = FAMILIES[family]
    Lz = f.lfm2
    E, hd = f.n_embd, f.hd
    out: list[tuple[str, np.ndarray]] = []

    def mat(name, rows, cols, std=None):
        out.append((name, matrix(family, name, rows, cols, std if std is not None else 1.0 / math.sqrt(cols))))

    def norm(name, n, mean=1.0):
        out.append((name, vector(family, name, n, NORM_STD * mean, mean)))

    mat("token_embd.weight", f.n_vocab, E, EMBD_STD)
    norm("token_embd_norm.weight", E, f.logit_std / (EMBD_STD * math.sqrt(E)))
    for il in range(f.n_layer):
        p = f"blk.{il}."
        norm(p + "attn_norm.weight", E)
        if Lz.conv[il]:
            mat(p + "shortconv.in_proj.weight", 3 * E, E)
            name = p + "shortconv.conv.weight"
            out.append((name, vector(family, name, E * Lz.l_cache, 1.0 / math.sqrt(Lz.l_cache))
                        .reshape(E, Lz.l_cache)))
            mat(p + "shortconv.out_proj.weight", E, E)
        else:
            mat(p + "attn_q.weight", f.n_head * hd, E)
            mat(p + "attn_k.weight", f.n_head_kv * hd, E)
            mat(p + "attn_v.weight", f.n_head_kv * hd, E)
            norm(p + "attn_q_norm.weight", hd)
            norm(p + "attn_k_norm.weight", hd)
            mat(p + "attn_output.weight", E, f.n_head * hd)
        norm(p + "ffn_norm.weight", E)
        if f.n_expert and il >= Lz.dense_lead:
            # as LFM2MoeModel writes them: the router F32, the experts merged per block, the
            # selection bias (expert_bias) F32
            out += routed_experts(family, p)
            name = p + "exp_probs_b.bias"
            out.append((name, vector(family, name, f.n_expert, 0.05)))
        else:
            mat(p + "ffn_gate.weight", f.n_ff, E)
            mat(p + "ffn_up.weight", f.n_ff, E)
            mat(p + "ffn_down.weight", E, f.n_ff)
    return out


def tensors(family: str) -> list[tuple[str, np.ndarray]]:
    f = FAMILIES[family]
    if f.lfm2 is not None:
        return lfm2_tensors(family)
    if f.gemma4 is not None:
        return gemma4_tensors(family)
    if f.qwen35 is not None:
        return qwen35_tensors(family)
    E, hd = f.n_embd, f.hd
    nq, nkv = f.n_head * hd, f.n_head_kv * hd
    out: list[tuple[str, np.ndarray]] = []

    def mat(name, rows, cols, std=None, gain=1.0):
        std = std if std is not None else gain / math.sqrt(cols)
        out.append((name, matrix(family, name, rows, cols, std)))

    def norm(name, n, mean=1.0):
        out.append((name, vector(family, name, n, NORM_STD * mean, mean)))

    mat("token_embd.weight", f.n_vocab, E, EMBD_STD)
    if f.llama3_rope:
        out.append(("rope_freqs.weight", llama3_rope_freqs(hd, f.rope_base)))
    if f.longrope:
        out.append(("rope_factors_long.weight", longrope_factors(hd // 2, 40.0)))
        out.append(("rope_factors_short.weight", longrope_factors(hd // 2, 3.0)))
    # tied: the logit spread comes from the final norm's gain (see the module docstring)
    norm("output_norm.weight", E, f.logit_std / (EMBD_STD * math.sqrt(E)) if f.tied else 1.0)
    if not f.tied:
        mat("output.weight", f.n_vocab, E, f.logit_std / math.sqrt(E))
    for il in range(f.n_layer):
        p = f"blk.{il}."
        norm(p + "attn_norm.weight", E)
        if f.fused:
            mat(p + "attn_qkv.weight", nq + 2 * nkv, E)
        else:
            mat(p + "attn_q.weight", nq, E, gain=f.qk_gain)
            mat(p + "attn_k.weight", nkv, E, gain=f.qk_gain)
            mat(p + "attn_v.weight", nkv, E)
        if f.qkv_bias:
            for t, n in (("q", nq), ("k", nkv), ("v", nkv)):
                name = p + f"attn_{t}.bias"
                out.append((name, vector(family, name, n, BIAS_STD)))
        if f.qk_norm:
            norm(p + "attn_q_norm.weight", hd)
            norm(p + "attn_k_norm.weight", hd)
        mat(p + "attn_output.weight", E, nq)
        if f.gpt_oss:
            # the size of the embeddings' own spread: a larger bias would be most of the
            # residual stream after block 0, and every token would route alike
            name = p + "attn_output.bias"
            out.append((name, vector(family, name, E, EMBD_STD)))
            name = p + "attn_sinks.weight"
            out.append((name, vector(family, name, f.n_head, 1.0)))
        if f.post_norms:
            norm(p + "post_attention_norm.weight", E)
        norm(p + ("post_attention_norm.weight" if f.gpt_oss else "ffn_norm.weight"), E)
        if f.n_expert:
            name = p + "ffn_gate_inp.weight"
            router = uniform(family, name, f.n_expert * E, f.router_gain / math.sqrt(E))
            out.append((name, router.astype(np.float32).reshape(f.n_expert, E)))
            if f.gpt_oss:
                name = p + "ffn_gate_inp.bias"
                out.append((name, vector(family, name, f.n_expert, BIAS_STD)))
            X, F = f.n_expert, f.n_ff_exp
            for t, rows, cols in (("gate", F, E), ("up", F, E), ("down", E, F)):
                name = p + f"ffn_{t}_exps.weight"
                w = uniform(family, name, X * rows * cols, 1.0 / math.sqrt(cols))
                out.append((name, w.astype(np.float32).astype(np.float16).reshape(X, rows, cols)))
                if f.gpt_oss:
                    name = p + f"ffn_{t}_exps.bias"
                    out.append((name, vector(family, name, X * rows, BIAS_STD).reshape(X, rows)))
        elif f.fused:
            mat(p + "ffn_up.weight", 2 * f.n_ff, E)      # rows: gate then up
        else:
            mat(p + "ffn_gate.weight", f.n_ff, E)
            mat(p + "ffn_up.weight", f.n_ff, E)
        if not f.n_expert:
            mat(p + "ffn_down.weight", E, f.n_ff)
        if f.post_norms:
            norm(p + "post_ffw_norm.weight", E)
    return out


# ---------------------------------------------------------------------------
# writing
# ---------------------------------------------------------------------------

def _copy_tokenizer(w, src: Path) -> int:
    """Copy every tokenizer.* key of `src` (raw bytes, original value types); returns n_vocab."""
    import gguf
    r = gguf.GGUFReader(src)
    n_vocab = 0
    for key, fld in r.fields.items():
        if not key.startswith("tokenizer."):
            continue
        val = copy_kv(w, key, fld)
        if key == "tokenizer.ggml.tokens":
            n_vocab = len(val)
    del r
    return n_vocab


def write(family: str, dst: Path) -> Path:
    import gguf
    from gguf import GGUFValueType as VT
    f = FAMILIES[family]
    a = f.arch
    dst.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=dst.name + ".", suffix=".tmp", dir=dst.parent)
    os.close(fd)
    try:
        w = gguf.GGUFWriter(tmp, a)
        w.add_key_value("general.name", f"ember-synthetic-{family}", VT.STRING)
        u32 = lambda k, v: w.add_key_value(f"{a}.{k}", int(v), VT.UINT32)  # noqa: E731
        f32 = lambda k, v: w.add_key_value(f"{a}.{k}", float(v), VT.FLOAT32)  # noqa: E731
        u32("context_length", f.n_ctx_train)
        u32("embedding_length", f.n_embd)
        u32("block_count", f.n_layer)
        G = f.gemma4
        if G is None:
            u32("feed_forward_length", f.n_ff)
        else:   # per-layer arrays, as Gemma4Model.set_gguf_parameters writes them
            w.add_array(f"{a}.feed_forward_length",
                        [f.n_ff if G.has_kv(il) else G.n_ff_shared for il in range(f.n_layer)])
        u32("attention.head_count", f.n_head)
        if f.lfm2 is not None:   # as LFM2Model.set_gguf_parameters writes them
            w.add_array(f"{a}.attention.head_count_kv", [0 if c else f.n_head_kv for c in f.lfm2.conv])
            u32("shortconv.l_cache", f.lfm2.l_cache)
            u32("vocab_size", f.n_vocab)
        elif G is None:
            u32("attention.head_count_kv", f.n_head_kv)
        else:
            w.add_array(f"{a}.attention.head_count_kv",
                        [G.n_head_kv_swa if s else f.n_head_kv for s in G.swa])
            w.add_array(f"{a}.attention.sliding_window_pattern", [bool(s) for s in G.swa])
            u32("attention.shared_kv_layers", G.n_kv_shared)
            u32("embedding_length_per_layer_input", G.n_embd_per_layer)
            u32("attention.key_length_swa", G.head_dim_swa)
            u32("attention.value_length_swa", G.head_dim_swa)
            u32("rope.dimension_count_swa", G.head_dim_swa)
        if f.head_dim is not None and (f.write_head_dim or f.head_dim != f.n_embd // f.n_head):
            u32("attention.key_length", f.hd)
            u32("attention.value_length", f.hd)
        f32("attention.layer_norm_rms_epsilon", f.eps)
        f32("rope.freq_base", f.rope_base)
        Q = f.qwen35
        u32("rope.dimension_count", f.hd if Q is None else Q.n_rot)
        if Q is not None:   # as Qwen3NextModel / Qwen3_5TextModel.set_gguf_parameters write them
            u32("ssm.conv_kernel", Q.d_conv)
            u32("ssm.state_size", Q.d_state)
            u32("ssm.group_count", Q.n_k_heads)
            u32("ssm.time_step_rank", Q.n_v_heads)
            u32("ssm.inner_size", Q.d_state * Q.n_v_heads)
            u32("full_attention_interval", Q.interval)
            w.add_array(f"{a}.rope.dimension_sections", list(Q.sections))
        if f.n_expert:
            u32("expert_count", f.n_expert)
            u32("expert_used_count", f.n_expert_used)
            u32("expert_feed_forward_length", f.n_ff_exp)
            if f.n_ff_shexp:
                u32("expert_shared_feed_forward_length", f.n_ff_shexp)
        for k, (v, ty) in f.extra_kv.items():
            if ty == "str":
                w.add_key_value(f"{a}.{k}", str(v), VT.STRING)
            else:
                (u32 if ty == "u32" else f32)(k, v)
        w.add_key_value("general.file_type", 1, VT.UINT32)
        n_vocab = _copy_tokenizer(w, f.vocab())
        if n_vocab != f.n_vocab:
            raise RuntimeError(f"{family}: vocabulary has {n_vocab} tokens, expected {f.n_vocab}")
        for name, data in tensors(family):
            w.add_tensor(name, data)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        os.chmod(tmp, 0o644)
        os.replace(tmp, dst)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return dst


def recorded_sha256(family: str) -> str | None:
    try:
        return json.loads(META.read_text())["arch"]["families"][family]["sha256"]
    except (OSError, KeyError, ValueError):
        return None


def default_dir() -> Path:
    return fetch_assets.asset_dir() / "synthetic"


def build(family: str, out_dir: Path | None = None, force: bool = False) -> Path:
    """Path of the synthetic file for `family`, writing it if needed.

    An existing file is kept when its sha256 equals the one recorded in
    tests/golden/meta.json (or when nothing is recorded yet); otherwise it is
    rewritten.  The caller checks the sha256 against the record (a mismatch
    after a rebuild means this generator changed, not the cache).
    """
    from tools.make_variants import file_sha256_cached
    if family not in FAMILIES:
        raise KeyError(f"unknown family {family!r} (known: {', '.join(FAMILIES)})")
    out_dir = Path(out_dir) if out_dir else default_dir()
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / file_name(family)
    with fetch_assets._lock("synthetic"):
        if path.is_file() and not force:
            want = recorded_sha256(family)
            if want is None or file_sha256_cached(path) == want:
                return path
        write(family, path)
    return path


def quantized(family: str, ftype: str, out_dir: Path | None = None) -> Path:
    """The synthetic file of `family` quantized to `ftype` by Ember's quantizer (the same
    bytes as llama-quantize's: tests/engine/test_architectures.py checks the sha256 that
    tools/make_arch_golden.py --quant recorded from llama-quantize's file)."""
    from ember.commands.quantize import quantize_file
    src = build(family, out_dir)
    dst = src.with_name(f"ember-synth-{family}-{ftype}.gguf")
    with fetch_assets._lock("synthetic"):
        if not dst.is_file() or dst.stat().st_mtime < src.stat().st_mtime:
            tmp = dst.with_suffix(".tmp")
            quantize_file(src, tmp, ftype)
            os.replace(tmp, dst)
    return dst


def main(argv: list[str] | None = None) -> int:
    import argparse
    from tools.make_variants import file_sha256_cached
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("families", nargs="*", default=None, help=f"subset of {', '.join(FAMILIES)}")
    ap.add_argument("--out", type=Path, default=None,
                    help="output dir (default <asset cache>/synthetic)")
    ap.add_argument("--force", action="store_true", help="rewrite even if a matching file exists")
    a = ap.parse_args(argv)
    for fam in a.families or list(FAMILIES):
        p = build(fam, a.out, force=a.force)
        print(f"{fam:10s} {p}  sha256={file_sha256_cached(p)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
