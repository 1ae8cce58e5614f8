"""`ember perplexity`: perplexity and KL divergence computed the way llama-perplexity does.

Method (llama.cpp tools/perplexity, default mode):

* the whole text is tokenized once, with the special tokens the model adds (BOS where the
  vocab asks for it), without parsing special-token text;
* the tokens are cut into ``len(tokens) // n_ctx`` whole chunks of ``n_ctx`` tokens (the
  tail is dropped; at least ``2 * n_ctx`` tokens are required, as llama.cpp does);
* each chunk is evaluated from an empty cache, its first token replaced by BOS when the
  vocab adds BOS;
* only the second half is scored: the logits at positions ``first = n_ctx // 2`` ..
  ``n_ctx - 2`` predict tokens ``first + 1 .. n_ctx - 1`` (``n_ctx - 1 - first`` tokens a
  chunk), so every scored token has at least half a window of context;
* PPL = exp(mean NLL) after each chunk ("[1]45.1234,[2]..."), and the final estimate's
  error is ``PPL * sqrt((mean(NLL^2) - mean(NLL)^2) / (count - 1))``.

KL divergence (``--kl-divergence-base FILE`` with the reference model, then
``--kl-divergence --kl-divergence-base FILE`` with the model to compare) uses the same
chunks and scored positions; the statistics and their printout follow llama-perplexity's.

KL-divergence base file (Ember's own format, little-endian)::

    b"EMBERKLD"                   magic
    u32 header_len, header        JSON: format, version, n_ctx, n_vocab, n_chunk, first,
                                  n_scored (rows a chunk), add_bos, bos_id, lp_floor,
                                  lp_scale, model, text
    i32 tokens[n_chunk * n_ctx]   the evaluated tokens (before the BOS replacement), so the
                                  comparison run needs neither the text nor the tokenizer
    then per chunk (R = n_scored rows, E = entries in the chunk):
    u64 E
    f32 target_logprob[R]         exact log-prob of the actual next token
    i32 top_id[R]                 the base model's most likely token
    u32 count[R]                  entries of each row
    u32 ids[E]                    token ids with log-prob > lp_floor (-16), row after row
    u16 q[E]                      their log-probs: lp = lp_floor + q * lp_scale (16/65535)

Why this and not llama.cpp's dense rows: llama.cpp stores every vocab entry of every
scored position as uint16 (2 bytes x n_vocab) but its KL sum skips every entry whose base
log-prob is <= -16 (p < 1.1e-7). Ember stores exactly the entries that sum uses, at the
same resolution (16/65535 = 2.4e-4 in log-prob, the finest llama.cpp's per-row scale can
be), plus the target's log-prob unquantized and the base top-1 id. On SmolLM2 (49k vocab)
about 9k entries a row pass the cut (6 bytes each: about half of llama.cpp's file); on
larger models, whose distributions are sharper and vocabularies larger, the saving grows.
"""
from __future__ import annotations

import json
import math
import struct
import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, BinaryIO, Callable

if TYPE_CHECKING:
    import numpy as np

KLD_MAGIC = b"EMBERKLD"
KLD_VERSION = 1
LP_FLOOR = -16.0
LP_SCALE = 16.0 / 65535.0
_ROW_BLOCK = 64  # rows of logits turned into float64 log-probs at a time


class PerplexityError(ValueError):
    pass


# ---- scoring ------------------------------------------------------------------------------

def tokenize_text(model, text: str) -> list[int]:
    """As llama-perplexity: add the model's special tokens, do not parse special-token text."""
    return model.tokenize(text, add_special=True, parse_special=False)


def count_chunks(n_tokens: int, n_ctx: int, max_chunks: int = -1) -> int:
    if n_ctx < 4:
        raise PerplexityError(f"the context must be at least 4 tokens, got {n_ctx}")
    if n_tokens < 2 * n_ctx:
        raise PerplexityError(
            f"you need at least {2 * n_ctx} tokens to evaluate perplexity with a context of "
            f"{n_ctx}; the text tokenizes to only {n_tokens} tokens")
    n = n_tokens // n_ctx
    return n if max_chunks < 0 else min(max_chunks, n)


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """float64 log-softmax of each row."""
    import numpy as np
    x = logits.astype(np.float64)
    x -= x.max(axis=1, keepdims=True)
    x -= np.log(np.exp(x).sum(axis=1, keepdims=True))
    return x


def chunk_logits(model, tokens: list[int], chunk: int, n_ctx: int,
                 add_bos: bool) -> tuple[np.ndarray, np.ndarray]:
    """Logits of one chunk's scored positions (float32 [n_ctx-1-first, n_vocab]) and the
    tokens they predict."""
    import numpy as np
    first = n_ctx // 2
    ids = list(tokens[chunk * n_ctx:(chunk + 1) * n_ctx])
    if add_bos:
        ids[0] = model.bos_id
    logits = model.eval_logits(ids, first)[: n_ctx - 1 - first]
    targets = np.asarray(tokens[chunk * n_ctx + first + 1:(chunk + 1) * n_ctx], dtype=np.int64)
    return logits, targets


def _blocks(n: int):
    for a in range(0, n, _ROW_BLOCK):
        yield a, min(n, a + _ROW_BLOCK)


@dataclass
class PerplexityResult:
    ppl: float
    ppl_err: float
    running: list[float]
    n_chunks: int
    n_tokens: int     # tokens of the text
    count: int        # tokens scored


class _BaseWriter:
    """Writes the KL-divergence base file (format in the module docstring)."""

    def __init__(self, path, header: dict, tokens: list[int]):
        import numpy as np
        self.f: BinaryIO = open(path, "wb")
        head = json.dumps(header).encode()
        self.f.write(KLD_MAGIC + struct.pack("<I", len(head)) + head)
        self.f.write(np.asarray(tokens, dtype="<i4").tobytes())

    def write_chunk(self, target_lp, top, counts, ids, q) -> None:
        import numpy as np
        ids = np.concatenate(ids) if ids else np.zeros(0, "<u4")
        q = np.concatenate(q) if q else np.zeros(0, "<u2")
        self.f.write(struct.pack("<Q", len(ids)))
        for a, dt in ((target_lp, "<f4"), (top, "<i4"), (counts, "<u4"), (ids, "<u4"), (q, "<u2")):
            self.f.write(np.asarray(a, dtype=dt).tobytes())

    def close(self) -> None:
        self.f.close()


def perplexity(model, tokens: list[int], n_ctx: int, *, max_chunks: int = -1,
               on_chunk: Callable[[int, int, float], None] | None = None,
               kld_base: str | None = None, header_extra: dict | None = None) -> PerplexityResult:
    """llama-perplexity's PPL over tokens; with kld_base, also writes the KL base file."""
    import numpy as np
    n_chunks = count_chunks(len(tokens), n_ctx, max_chunks)
    first = n_ctx // 2
    n_scored = n_ctx - 1 - first
    add_bos = model.add_bos
    writer = None
    if kld_base:
        header = {"format": "ember-kld-base", "version": KLD_VERSION, "n_ctx": n_ctx,
                  "n_vocab": model.n_vocab, "n_chunk": n_chunks, "first": first,
                  "n_scored": n_scored, "add_bos": add_bos, "bos_id": model.bos_id,
                  "lp_floor": LP_FLOOR, "lp_scale": LP_SCALE, **(header_extra or {})}
        writer = _BaseWriter(kld_base, header, tokens[: n_chunks * n_ctx])
    nll, nll2, count, running = 0.0, 0.0, 0, []
    try:
        for c in range(n_chunks):
            logits, targets = chunk_logits(model, tokens, c, n_ctx, add_bos)
            rec = ([], [], [], [], []) if writer else None
            for a, b in _blocks(n_scored):
                lp = log_softmax(logits[a:b])
                tl = lp[np.arange(b - a), targets[a:b]]
                nll -= float(tl.sum())
                nll2 += float((tl * tl).sum())
                if rec:
                    mask = lp > LP_FLOOR
                    rec[0].append(tl.astype(np.float32))
                    rec[1].append(lp.argmax(axis=1))
                    rec[2].append(mask.sum(axis=1))
                    rec[3].append(np.nonzero(mask)[1].astype("<u4"))
                    q = np.rint((lp[mask] - LP_FLOOR) / LP_SCALE)
                    rec[4].append(np.clip(q, 0, 65535).astype("<u2"))
            if writer:
                writer.write_chunk(np.concatenate(rec[0]), np.concatenate(rec[1]),
                                   np.concatenate(rec[2]), rec[3], rec[4])
            count += n_scored
            running.append(math.exp(nll / count))
            if on_chunk:
                on_chunk(c + 1, n_chunks, running[-1])
    finally:
        if writer:
            writer.close()
    mean = nll / count
    var = nll2 / count - mean * mean
    ppl = math.exp(mean)
    err = ppl * math.sqrt(var / (count - 1)) if var > 0 and count > 1 else 0.0
    return PerplexityResult(ppl, err, running, n_chunks, len(tokens), count)


# ---- KL divergence --------------------------------------------------------------------------

class KLDBase:
    """Reads a KL-divergence base file chunk by chunk."""

    def __init__(self, path):
        self.path = path
        self.f: BinaryIO = open(path, "rb")
        if self.f.read(8) != KLD_MAGIC:
            self.f.close()
            raise PerplexityError(f"{path} is not an Ember KL-divergence base file "
                                  "(make one with `ember perplexity --kl-divergence-base FILE`)")
        (n,) = struct.unpack("<I", self.f.read(4))
        self.header = json.loads(self.f.read(n))
        if self.header.get("version") != KLD_VERSION:
            self.f.close()
            raise PerplexityError(f"{path}: unsupported version {self.header.get('version')}")
        h = self.header
        self.n_ctx, self.n_vocab, self.n_chunk = h["n_ctx"], h["n_vocab"], h["n_chunk"]
        self.first, self.n_scored = h["first"], h["n_scored"]
        self.tokens = self._read("<i4", self.n_ctx * self.n_chunk).tolist()

    def _read(self, dt: str, n: int) -> np.ndarray:
        import numpy as np
        size = np.dtype(dt).itemsize * n
        data = self.f.read(size)
        if len(data) != size:
            raise PerplexityError(f"{self.path}: truncated file")
        return np.frombuffer(data, dtype=dt)

    def read_chunk(self):
        """(target_logprob f32[R], top_id i32[R], counts u32[R], ids u32[E], lp f64[E])."""
        import numpy as np
        (e,) = struct.unpack("<Q", self._read("<u8", 1).tobytes())
        r = self.n_scored
        tl, top, counts = self._read("<f4", r), self._read("<i4", r), self._read("<u4", r)
        ids, q = self._read("<u4", e), self._read("<u2", e)
        if int(counts.sum()) != e:
            raise PerplexityError(f"{self.path}: corrupt chunk")
        lp = q.astype(np.float64) * self.header["lp_scale"] + self.header["lp_floor"]
        return tl, top, counts, ids, lp

    def close(self) -> None:
        self.f.close()


def _mean_and_uncertainty(s: float, s2: float, n: int) -> tuple[float, float]:
    if n < 1:
        return 0.0, 0.0
    f = s / n
    df = s2 / n - f * f
    df = math.sqrt(df / (n - 1)) if df > 0 and n > 10 else 0.0
    return f, df


def _covariance(sa: float, sb: float, sab: float, n: int) -> float:
    if n < 10:
        return 0.0
    return (sab / n - (sa / n) * (sb / n)) / (n - 1)


def _percentile(v: np.ndarray, fraction: float) -> float:
    """llama-perplexity's linear interpolation on the sorted values."""
    if fraction <= 0:
        return float(v[0])
    if fraction >= 1:
        return float(v[-1])
    p = fraction * (len(v) - 1)
    ip = int(p)
    p -= ip
    return float((1 - p) * v[ip] + p * v[min(ip + 1, len(v) - 1)])


def _median(v: np.ndarray) -> float:
    n = len(v)
    return float(0.5 * (v[n // 2] + v[n // 2 - 1]) if n % 2 == 0 else v[n // 2])


@dataclass
class KLDStats:
    """Running sums as llama-perplexity keeps them, plus the per-token values."""

    sum_nll: float = 0.0
    sum_nll2: float = 0.0
    sum_nll_base: float = 0.0
    sum_nll_base2: float = 0.0
    sum_nll_nll_base: float = 0.0
    sum_kld: float = 0.0
    sum_kld2: float = 0.0
    sum_p_diff: float = 0.0
    sum_p_diff2: float = 0.0
    sum_p_diff4: float = 0.0
    n_same_top: int = 0
    count: int = 0
    kld_values: list = field(default_factory=list)
    p_diff_values: list = field(default_factory=list)

    def add(self, nll, nll_base, kld, p_diff, same_top) -> None:
        self.sum_nll += float(nll.sum())
        self.sum_nll2 += float((nll * nll).sum())
        self.sum_nll_base += float(nll_base.sum())
        self.sum_nll_base2 += float((nll_base * nll_base).sum())
        self.sum_nll_nll_base += float((nll * nll_base).sum())
        self.sum_kld += float(kld.sum())
        self.sum_kld2 += float((kld * kld).sum())
        self.sum_p_diff += float(p_diff.sum())
        pd2 = p_diff * p_diff
        self.sum_p_diff2 += float(pd2.sum())
        self.sum_p_diff4 += float((pd2 * pd2).sum())
        self.n_same_top += int(same_top.sum())
        self.count += len(nll)
        self.kld_values.append(kld)
        self.p_diff_values.append(p_diff)

    # the quantities llama-perplexity prints
    def ppl(self):
        m, u = _mean_and_uncertainty(self.sum_nll, self.sum_nll2, self.count)
        return math.exp(m), math.exp(m) * u

    def ppl_base(self):
        m, u = _mean_and_uncertainty(self.sum_nll_base, self.sum_nll_base2, self.count)
        return math.exp(m), math.exp(m) * u

    def _logs(self):
        lq = _mean_and_uncertainty(self.sum_nll, self.sum_nll2, self.count)
        lb = _mean_and_uncertainty(self.sum_nll_base, self.sum_nll_base2, self.count)
        cov = _covariance(self.sum_nll, self.sum_nll_base, self.sum_nll_nll_base, self.count)
        return lq, lb, cov

    def log_ppl_ratio(self):
        lq, lb, cov = self._logs()
        return lq[0] - lb[0], math.sqrt(max(lq[1] ** 2 + lb[1] ** 2 - 2 * cov, 0.0))

    def kld(self):
        return _mean_and_uncertainty(self.sum_kld, self.sum_kld2, self.count)

    def p_diff(self):
        return _mean_and_uncertainty(self.sum_p_diff, self.sum_p_diff2, self.count)

    def rms_p_diff(self):
        m, u = _mean_and_uncertainty(self.sum_p_diff2, self.sum_p_diff4, self.count)
        r = math.sqrt(m)
        return r, (0.5 / r * u if r > 0 else 0.0)

    def same_top(self):
        p = self.n_same_top / self.count
        return p, math.sqrt(p * (1 - p) / (self.count - 1)) if self.count > 1 else 0.0

    def summary(self) -> dict:
        """Every final number of llama-perplexity's KL report, by name."""
        import numpy as np
        lq, lb, cov = self._logs()
        ppl, ppl_u = self.ppl()
        ppl_b, ppl_b_u = self.ppl_base()
        ratio, ratio_u = self.log_ppl_ratio()
        kv = np.sort(np.concatenate(self.kld_values)) if self.kld_values else np.zeros(0)
        pv = np.sort(np.concatenate(self.p_diff_values)) if self.p_diff_values else np.zeros(0)
        out = {
            "count": self.count,
            "ppl_q": ppl, "ppl_q_err": ppl_u, "ppl_base": ppl_b, "ppl_base_err": ppl_b_u,
            "cor_ln_ppl": 100.0 * cov / (lq[1] * lb[1]) if lq[1] * lb[1] > 0 else 0.0,
            "ln_ppl_ratio": ratio, "ln_ppl_ratio_err": ratio_u,
            "ppl_ratio": math.exp(ratio), "ppl_ratio_err": math.exp(ratio) * ratio_u,
            "ppl_diff": ppl - ppl_b,
            "ppl_diff_err": math.sqrt(max(ppl_u ** 2 + ppl_b_u ** 2 - 2 * ppl * ppl_b * cov, 0.0)),
            "mean_kld": self.kld()[0], "mean_kld_err": self.kld()[1],
            "mean_dp": 100.0 * self.p_diff()[0], "mean_dp_err": 100.0 * self.p_diff()[1],
            "rms_dp": 100.0 * self.rms_p_diff()[0], "rms_dp_err": 100.0 * self.rms_p_diff()[1],
            "same_top_p": 100.0 * self.same_top()[0], "same_top_p_err": 100.0 * self.same_top()[1],
        }
        if len(kv):
            out.update({"max_kld": float(kv[-1]), "median_kld": _median(kv),
                        "min_kld": float(kv[0]),
                        "max_dp": 100.0 * float(pv[-1]), "median_dp": 100.0 * _median(pv),
                        "min_dp": 100.0 * float(pv[0])})
            for f in (0.999, 0.99, 0.95, 0.9, 0.1, 0.05, 0.01, 0.001):
                out[f"kld_{100 * f:.1f}%"] = _percentile(kv, f)
            for f in (0.999, 0.99, 0.95, 0.9, 0.75, 0.25, 0.1, 0.05, 0.01, 0.001):
                out[f"dp_{100 * f:.1f}%"] = 100.0 * _percentile(pv, f)
        return out

    def chunk_line(self, chunk: int) -> str:
        ppl, ppl_u = self.ppl()
        r, r_u = self.log_ppl_ratio()
        k, k_u = self.kld()
        d, d_u = self.rms_p_diff()
        s, s_u = self.same_top()
        return (f"{chunk:4d}    {ppl:9.4f} ± {ppl_u:9.4f}    {r:10.5f} ± {r_u:10.5f}"
                f"    {k:10.5f} ± {k_u:10.5f}    {100 * d:6.3f} ± {100 * d_u:6.3f} %"
                f"    {100 * s:6.3f} ± {100 * s_u:6.3f} %")

    def report(self) -> str:
        """The final statistics, laid out as llama-perplexity prints them."""
        if self.count < 100:  # llama.cpp does no statistics on so few values
            return ""
        s = self.summary()
        def pm(label, key):
            return f"{label:<30}: {s[key]:10.6f} ± {s[key + '_err']:10.6f}"

        L = ["====== Perplexity statistics ======",
             pm("Mean PPL(Q)", "ppl_q"), pm("Mean PPL(base)", "ppl_base"),
             f"Cor(ln(PPL(Q)), ln(PPL(base))): {s['cor_ln_ppl']:6.2f}%",
             pm("Mean ln(PPL(Q)/PPL(base))", "ln_ppl_ratio"),
             pm("Mean PPL(Q)/PPL(base)", "ppl_ratio"), pm("Mean PPL(Q)-PPL(base)", "ppl_diff"),
             "",
             "====== KL divergence statistics ======",
             f"Mean    KLD: {s['mean_kld']:10.6f} ± {s['mean_kld_err']:10.6f}",
             f"Maximum KLD: {s['max_kld']:10.6f}"]
        for f in ("99.9", "99.0", "95.0", "90.0"):
            L.append(f"{f + '%':<8}KLD: {s[f'kld_{f}%']:10.6f}")
        L.append(f"Median  KLD: {s['median_kld']:10.6f}")
        for f in ("10.0", " 5.0", " 1.0", " 0.1"):
            L.append(f"{f + '%':<8}KLD: {s['kld_' + f.strip() + '%']:10.6f}")
        L += [f"Minimum KLD: {s['min_kld']:10.6f}", "",
              "====== Token probability statistics ======",
              f"Mean    Δp: {s['mean_dp']:6.3f} ± {s['mean_dp_err']:5.3f} %",
              f"Maximum Δp: {s['max_dp']:6.3f}%"]
        for f in ("99.9", "99.0", "95.0", "90.0", "75.0"):
            L.append(f"{f + '%':<8}Δp: {s[f'dp_{f}%']:6.3f}%")
        L.append(f"Median  Δp: {s['median_dp']:6.3f}%")
        for f in ("25.0", "10.0", " 5.0", " 1.0", " 0.1"):
            L.append(f"{f + '%':<8}Δp: {s['dp_' + f.strip() + '%']:6.3f}%")
        L += [f"Minimum Δp: {s['min_dp']:6.3f}%",
              f"RMS Δp    : {s['rms_dp']:6.3f} ± {s['rms_dp_err']:5.3f} %",
              f"Same top p: {s['same_top_p']:6.3f} ± {s['same_top_p_err']:5.3f} %"]
        return "\n".join(L)


KLD_TABLE_HEADER = ("chunk             PPL               ln(PPL(Q)/PPL(base))          "
                    "KL Divergence              Δp RMS            Same top p")


def kl_divergence(model, base_path, *, max_chunks: int = -1,
                  on_chunk: Callable[[int, int, KLDStats], None] | None = None) -> KLDStats:
    """Compares model with the base file's distributions over the same scored positions."""
    import numpy as np
    base = KLDBase(base_path)
    try:
        if base.n_vocab != model.n_vocab:
            raise PerplexityError(f"inconsistent vocabulary: {base_path} has {base.n_vocab} "
                                  f"tokens, the model {model.n_vocab}")
        n_ctx, first, n_scored = base.n_ctx, base.first, base.n_scored
        n_chunks = base.n_chunk if max_chunks < 0 else min(max_chunks, base.n_chunk)
        add_bos = model.add_bos
        stats = KLDStats()
        rows_all = np.arange(n_scored)
        for c in range(n_chunks):
            tl, top_b, counts, ids, lpb = base.read_chunk()
            logits, targets = chunk_logits(model, base.tokens, c, n_ctx, add_bos)
            rows = np.repeat(rows_all, counts)
            starts = np.concatenate([[0], np.cumsum(counts.astype(np.int64))])
            nll = np.empty(n_scored)
            kld = np.empty(n_scored)
            top = logits.argmax(axis=1)
            for a, b in _blocks(n_scored):
                lq = log_softmax(logits[a:b])
                nll[a:b] = -lq[np.arange(b - a), targets[a:b]]
                sa, sb = starts[a], starts[b]
                r = rows[sa:sb] - a
                lb = lpb[sa:sb]
                contrib = np.exp(lb) * (lb - lq[r, ids[sa:sb]])
                kld[a:b] = np.bincount(r, weights=contrib, minlength=b - a)
            nll_base = -tl.astype(np.float64)
            p_diff = np.exp(-nll) - np.exp(-nll_base)
            stats.add(nll, nll_base, kld, p_diff, top == top_b)
            if on_chunk:
                on_chunk(c + 1, n_chunks, stats)
        return stats
    finally:
        base.close()


# ---- command line ---------------------------------------------------------------------------

def add_arguments(p) -> None:
    p.add_argument("-m", "--model", required=True, help="path to a .gguf model")
    p.add_argument("-f", "--file", default=None,
                   help="text file to score (not needed with --kl-divergence)")
    p.add_argument("-c", "--ctx-size", type=int, default=512,
                   help="tokens per chunk; the second half of each is scored (default 512)")
    p.add_argument("-b", "--batch-size", type=int, default=512,
                   help="tokens per engine batch (default 512; does not change the result)")
    p.add_argument("-t", "--threads", type=int, default=None,
                   help="threads (default: physical cores)")
    p.add_argument("--chunks", type=int, default=-1,
                   help="score at most this many chunks (default: all)")
    p.add_argument("--kl-divergence-base", metavar="FILE", default=None,
                   help="without --kl-divergence: also save this model's token distributions "
                        "to FILE; with it: the base to compare against")
    p.add_argument("--kl-divergence", action="store_true",
                   help="compare -m with the distributions saved in --kl-divergence-base "
                        "(KL divergence, top-1 agreement, Δp)")


def run(args, out=None, err=None) -> int:
    from ..engine import Model
    out = out or sys.stdout
    err = err or sys.stderr
    if args.kl_divergence:
        if not args.kl_divergence_base:
            raise PerplexityError("--kl-divergence needs --kl-divergence-base FILE")
        n_ctx = _peek_header(args.kl_divergence_base)["n_ctx"]
    else:
        if not args.file:
            raise PerplexityError("-f FILE is required (the text to score)")
        n_ctx = args.ctx_size
        if n_ctx is None or n_ctx < 4:
            raise PerplexityError(f"the context must be at least 4 tokens, got {n_ctx}")
    model = Model(args.model, n_ctx=n_ctx, n_threads=args.threads,
                  n_batch=max(1, min(args.batch_size or 512, n_ctx)))
    t0 = time.perf_counter()
    if model.n_ctx_train and n_ctx > model.n_ctx_train:
        print(f"perplexity: warning: the model was trained on only {model.n_ctx_train} context "
              f"tokens ({n_ctx} specified)", file=err)

    if args.kl_divergence:
        base = _peek_header(args.kl_divergence_base)
        n = base["n_chunk"] if args.chunks < 0 else min(args.chunks, base["n_chunk"])
        print(f"kl_divergence: computing over {n} chunks, n_ctx={n_ctx}, "
              f"base {base.get('model', '?')}", file=err)
        print(KLD_TABLE_HEADER, file=out)

        def on_kld(i, n, stats):
            print(stats.chunk_line(i), file=out, flush=True)

        stats = kl_divergence(model, args.kl_divergence_base, max_chunks=args.chunks,
                              on_chunk=on_kld)
        print("", file=out)
        rep = stats.report()
        if rep:
            print(rep, file=out)
        print(f"[{stats.count} tokens scored, {time.perf_counter() - t0:.1f} s]", file=err)
        return 0

    with open(args.file, encoding="utf-8") as f:
        text = f.read()
    tokens = tokenize_text(model, text)
    n_chunks = count_chunks(len(tokens), n_ctx, args.chunks)
    print(f"perplexity: tokenized the input: {len(tokens)} tokens", file=err)
    print(f"perplexity: calculating perplexity over {n_chunks} chunks, n_ctx={n_ctx}, "
          f"scoring the last {n_ctx - 1 - n_ctx // 2} tokens of each", file=err)
    if args.kl_divergence_base:
        print(f"perplexity: saving the token distributions to {args.kl_divergence_base}",
              file=err)

    def on_chunk(i, n, ppl):
        out.write(f"[{i}]{ppl:.4f},")
        out.flush()

    from pathlib import Path
    res = perplexity(model, tokens, n_ctx, max_chunks=args.chunks, on_chunk=on_chunk,
                     kld_base=args.kl_divergence_base,
                     header_extra={"model": Path(args.model).name, "text": Path(args.file).name})
    out.write("\n")
    print(f"Final estimate: PPL = {res.ppl:.4f} +/- {res.ppl_err:.5f}", file=out)
    print(f"[{res.count} of {res.n_tokens} tokens scored, {time.perf_counter() - t0:.1f} s]",
          file=err)
    return 0


def _peek_header(path) -> dict:
    b = KLDBase(path)
    try:
        return b.header
    finally:
        b.close()
