#!/usr/bin/env python3
"""Regenerate tests/golden/** with llama.cpp as the reference (DEV ONLY).

llama.cpp is never a runtime dependency of Ember and none of its code is
committed; it is only the yardstick these fixtures are measured with.  The
goldens are committed, so normal test runs never need it.

One-time setup (outside the repo, ~10-15 min on 2 cores)::

    pip download --no-deps --no-build-isolation llama-cpp-python==0.3.36 -d /work/ref
    cd /work/ref && tar xzf llama_cpp_python-0.3.36.tar.gz && cd llama_cpp_python-0.3.36
    cmake -S vendor/llama.cpp -B build -DLLAMA_CURL=OFF -DGGML_NATIVE=ON \\
          -DBUILD_SHARED_LIBS=ON -DCMAKE_BUILD_TYPE=Release
    cmake --build build --target llama llama-bench llama-quantize llama-perplexity -j2
    pip install --target /work/ref/pydeps diskcache     # the only missing pure-python dep

Then::

    export LLAMA_CPP_LIB_PATH=/work/ref/llama_cpp_python-0.3.36/build/bin
    export PYTHONPATH=/work/ref/llama_cpp_python-0.3.36:/work/ref/pydeps
    python tools/make_golden.py --llama-bin /work/ref/llama_cpp_python-0.3.36/build/bin

(the sdist's ``llama_cpp`` python package loads ``libllama.so`` from
``$LLAMA_CPP_LIB_PATH``; no pip install of llama-cpp-python is needed.)

What is generated (all small; see tests/golden/README.md for formats):

* meta.json            -- variants (path name, sha256, llama.cpp-quantizer identity),
                          texts (token ids), settings, perplexity results
* logits_<variant>_<text>.npz -- per-position reference statistics
* greedy_<variant>.json        -- greedy continuations (+ `ember run -n 32 --temp 0` cases)
* tokens_smollm2.json, tokens_gemma3.json -- tokenizer ids on ~40 strings

Model variants: the shipped SmolLM2 Q4_1 file plus F16 / Q8_0 / Q4_0 built
with gguf-py (tools/make_variants.py).  Those files are byte-identical to
llama.cpp's ``llama_model_quantize(pure=True, allow_requantize=True)`` output
(checked here with ``--check-quantizer``, result recorded in meta.json); the
goldens are always computed by llama.cpp on the gguf-py-made files, so tests
run the reference's exact inputs.  gemma-3-270m Q4_K_M is included as an
extra variant ("gemma3") for logits/greedy/tokenizer goldens.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tools import fetch_assets, make_variants  # noqa: E402

GOLDEN = REPO / "tests" / "golden"
TEXTS = REPO / "tests" / "data" / "texts"

# text name -> parse special tokens when tokenizing? (chat.txt holds ChatML markup)
TEXT_FILES = {"prose": False, "code": False, "chat": True, "essay": False}
PPL_TEXT = "essay"
PPL_CTX = 128
TOPK = 10
N_CTX = 2048
N_BATCH = 512
N_THREADS = 2
N_PREDICT = 48
N_RUN = 32

RAW_PROMPTS = [
    "The capital of France is",
    "Once upon a time, in a small village by the sea,",
    "def fibonacci(n):\n",
]
CHAT_PROMPTS = [
    "What is the boiling point of water at sea level?",
    "Write a haiku about autumn leaves.",
]
RUN_PROMPTS = [
    "The capital of France is",
    "The three primary colors are",
    "Water freezes at",
    "My favourite programming language is",
]

TOKENIZER_STRINGS = [
    "",
    " ",
    "  ",
    "\t",
    "\n",
    "\n\n\n",
    "Hello world",
    " Hello world",
    "Hello, World!",
    "HELLO wOrLd",
    "   leading and trailing spaces   ",
    "tabs\tand\nnewlines\r\nmixed",
    "The quick brown fox jumps over the lazy dog.",
    "It's a dog's life; they're here, we'll see, I'd've known.",
    "1234567890 3.14159 -42 1e-9 0x1F",
    "2026-11-29T18:07:00Z",
    "user@example.com https://example.org/a/b?c=d&e=f#g",
    "café naïve résumé Ångström",
    "Ελληνικά και русский текст",
    "日本語のテキストと中文文本",
    "한국어 문장입니다",
    "مرحبا بالعالم",
    "हिन्दी पाठ",
    "🙂🚀👍🏽 emoji 👨‍👩‍👧‍👦 family",
    "💩",
    "\u00a0non-breaking\u2009thin\u200bzero-width",
    "def f(x):\n    return x ** 2  # square\n",
    "for (int i = 0; i < n; ++i) { sum += a[i]; }",
    "if x!=y && a>=b || c<=d: pass",
    "    indented    code    with    runs",
    "{\"key\": [1, 2, {\"nested\": null}], \"ok\": true}",
    "<html><body><p class=\"x\">Hi</p></body></html>",
    "$$\\int_0^1 x^2\\,dx = \\frac{1}{3}$$",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    "!!!???...,,,;;;:::",
    "<|im_start|>user\nHi there<|im_end|>\n",
    "<|im_start|>assistant\n",
    "<|endoftext|>",
    "<bos><start_of_turn>user\nHello<end_of_turn>\n<start_of_turn>model\n",
    "<s>[INST] hi [/INST]</s>",
    "text<|im_end|>more text",
    "   \n  \n\t\t  mixed whitespace runs \n\n",
]


# ---------------------------------------------------------------------------

def _import_llama():
    try:
        import llama_cpp  # noqa: F401
        from llama_cpp import Llama
    except Exception as e:  # pragma: no cover
        sys.exit(f"cannot import llama_cpp ({e}); see the setup notes at the top of {__file__}")
    return Llama


def load(path: Path, **kw):
    Llama = _import_llama()
    args = dict(n_ctx=N_CTX, n_batch=N_BATCH, n_threads=N_THREADS, logits_all=True,
                verbose=False, seed=0)
    args.update(kw)
    return Llama(str(path), **args)


def sha256(path: Path) -> str:
    return make_variants.file_sha256_cached(Path(path))


def log(msg):
    print(f"[make_golden {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def position_stats(logits: np.ndarray, tokens: list[int]) -> dict[str, np.ndarray]:
    """Compact per-position summary of a [n, vocab] float32 logit matrix."""
    lg = logits.astype(np.float64)
    n = lg.shape[0]
    top = np.argsort(-lg, axis=1, kind="stable")[:, :TOPK]
    top_logits = np.take_along_axis(lg, top, axis=1)
    m = lg.max(axis=1)
    lse = m + np.log(np.exp(lg - m[:, None]).sum(axis=1))
    nxt = np.full(n, -1, dtype=np.int32)
    nxt[:-1] = tokens[1:]
    next_logit = np.full(n, np.nan)
    next_logit[:-1] = lg[np.arange(n - 1), nxt[:-1]]
    return {
        "tokens": np.asarray(tokens, dtype=np.int32),
        "top_ids": top.astype(np.int32),
        "top_logits": top_logits.astype(np.float32),
        "next_id": nxt,
        "next_logit": next_logit.astype(np.float32),
        "next_logprob": (next_logit - lse).astype(np.float32),
        "logsumexp": lse.astype(np.float32),
        "gap": (top_logits[:, 0] - top_logits[:, 1]).astype(np.float32),
    }


def chat_template(model_meta: dict) -> tuple[str, str]:
    """(template source, where it came from).  gemma-3-270m's GGUF carries no
    template; Gemma 2 and 3 share the turn format, so use llama.cpp's gemma-2 one."""
    if model_meta.get("tokenizer.chat_template"):
        return model_meta["tokenizer.chat_template"], "gguf:tokenizer.chat_template"
    if model_meta.get("general.architecture", "").startswith("gemma"):
        name = "google-gemma-2-2b-it.jinja"
        return (fetch_assets.templates_dir() / name).read_text(), "llama.cpp templates/" + name
    raise KeyError("model has no tokenizer.chat_template")


def render_chat(model_meta: dict, user_msg: str) -> str:
    import jinja2
    tmpl, _ = chat_template(model_meta)
    env = jinja2.Environment(loader=jinja2.BaseLoader(), trim_blocks=True, lstrip_blocks=True)

    def raise_exception(msg):
        raise jinja2.TemplateError(msg)

    env.globals["raise_exception"] = raise_exception
    return env.from_string(tmpl).render(
        messages=[{"role": "user", "content": user_msg}],
        add_generation_prompt=True,
        bos_token=model_meta.get("_bos_text", ""),
        eos_token=model_meta.get("_eos_text", ""),
    )


def greedy(m, prompt_ids: list[int], n_predict: int, eog: set[int]) -> dict:
    """Batched prompt, then one token per decode step; argmax (lowest id on exact ties)."""
    m.reset()
    m.eval(prompt_ids)
    out, gaps, top2 = [], [], []
    for _ in range(n_predict):
        lg = np.asarray(m.scores[m.n_tokens - 1], dtype=np.float64)
        order = np.argsort(-lg, kind="stable")[:2]
        tok = int(order[0])
        out.append(tok)
        gaps.append(round(float(lg[order[0]] - lg[order[1]]), 5))
        top2.append([int(order[0]), int(order[1])])
        if tok in eog or len(out) == n_predict:
            break
        m.eval([tok])
    near = next((i for i, g in enumerate(gaps) if g < 1.0), None)
    return {
        "tokens": out,
        "text": m.detokenize(out).decode("utf-8", errors="replace"),
        "text_special": m.detokenize(out, special=True).decode("utf-8", errors="replace"),
        "gaps": gaps,
        "top2": top2,
        "first_near_tie": near,
        "stopped_on_eog": bool(out and out[-1] in eog),
    }


def eog_ids(m) -> set[int]:
    import llama_cpp
    vocab = m._model.vocab
    return {t for t in range(m.n_vocab()) if llama_cpp.llama_vocab_is_eog(vocab, t)}


def special_texts(m) -> dict:
    md = dict(m.metadata)
    for key, name in (("tokenizer.ggml.bos_token_id", "_bos_text"),
                      ("tokenizer.ggml.eos_token_id", "_eos_text")):
        if key in md:
            md[name] = m.detokenize([int(md[key])], special=True).decode("utf-8", "replace")
    return md


# ---------------------------------------------------------------------------

def check_quantizer(variants: dict[str, Path]) -> dict:
    """Quantize with llama.cpp (pure) and compare against the gguf-py files."""
    import llama_cpp
    res = {}
    with tempfile.TemporaryDirectory(dir=fetch_assets.asset_dir()) as td:
        td = Path(td)

        def q(src, dst, ftype):
            p = llama_cpp.llama_model_quantize_default_params()
            p.ftype, p.pure, p.allow_requantize, p.nthread = ftype, True, True, N_THREADS
            rc = llama_cpp.llama_model_quantize(str(src).encode(), str(dst).encode(), ctypes.byref(p))
            assert rc == 0, rc
            return dst

        lf16 = q(variants["Q4_1"], td / "F16.gguf", make_variants.FTYPES["F16"])
        made = {"F16": lf16,
                "Q8_0": q(lf16, td / "Q8_0.gguf", make_variants.FTYPES["Q8_0"]),
                "Q4_0": q(lf16, td / "Q4_0.gguf", make_variants.FTYPES["Q4_0"])}
        for k, p in made.items():
            a, b = fetch_assets.sha256_file(p), sha256(variants[k])
            res[k] = {"llama_cpp_sha256": a, "identical_file": a == b}
            log(f"quantizer {k}: llama.cpp {a[:12]} gguf-py {b[:12]} identical={a == b}")
    return res


def run_perplexity(bin_dir: Path, model: Path, text: Path) -> dict:
    exe = bin_dir / "llama-perplexity"
    cmd = [str(exe), "-m", str(model), "-f", str(text), "-c", str(PPL_CTX),
           "-t", str(N_THREADS), "--no-warmup"]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = r.stdout
    m = re.search(r"Final estimate: PPL = ([0-9.]+) \+/- ([0-9.]+)", out)
    if r.returncode != 0 or not m:
        raise RuntimeError(f"llama-perplexity failed:\n{out[-3000:]}")
    chunks = [float(x) for x in re.findall(r"\[\d+\]([0-9.]+)", out)]
    nchunk = re.search(r"calculating perplexity over (\d+) chunks", out)
    return {"ppl": float(m.group(1)), "ppl_err": float(m.group(2)), "running_ppl": chunks,
            "n_chunks": int(nchunk.group(1)) if nchunk else len(chunks),
            "cmd": "llama-perplexity -m MODEL -f tests/data/texts/%s.txt -c %d -t %d"
                   % (PPL_TEXT, PPL_CTX, N_THREADS)}


def refresh_meta_from_npz(meta: dict, models: dict[str, Path]) -> None:
    """Derive meta["texts"] and per-variant add_bos / mean NLL from the npz files."""
    import gguf
    texts = {}
    for k, p in models.items():
        v = meta["variants"][k]
        f = gguf.GGUFReader(p).fields.get("tokenizer.ggml.add_bos_token")
        v["add_bos"] = bool(f.contents()) if f is not None else False
        fam = "gemma3" if k == "gemma3" else "smollm2"
        for tn, special in TEXT_FILES.items():
            fn = GOLDEN / f"logits_{k}_{tn}.npz"
            if not fn.is_file():
                continue
            with np.load(fn) as z:
                toks, lp = z["tokens"], z["next_logprob"]
            v.setdefault("mean_nll", {})[tn] = round(float(-lp[:-1].astype(np.float64).mean()), 6)
            t = texts.setdefault(tn, {"file": f"tests/data/texts/{tn}.txt",
                                      "parse_special": special, "n_tokens": {}, "tokens": {}})
            t["n_tokens"][fam] = int(len(toks))
            t["tokens"][fam] = toks.tolist()
    meta["texts"] = texts


def make_tokenizer_golden(path: Path, name: str) -> None:
    m = load(path, vocab_only=True, logits_all=False)
    cases = []
    for s in TOKENIZER_STRINGS:
        for add_special in (True, False):
            for parse_special in (True, False):
                ids = m.tokenize(s.encode("utf-8"), add_bos=add_special, special=parse_special)
                cases.append({"text": s, "add_special": add_special,
                              "parse_special": parse_special, "ids": list(map(int, ids))})
    md = dict(m.metadata)
    doc = {
        "model": path.name,
        "model_sha256": sha256(path),
        "tokenizer_model": md.get("tokenizer.ggml.model"),
        "tokenizer_pre": md.get("tokenizer.ggml.pre"),
        "generator": "llama.cpp llama_tokenize via llama-cpp-python 0.3.36 (add_special, parse_special)",
        "cases": cases,
    }
    (GOLDEN / f"tokens_{name}.json").write_text(json.dumps(doc, ensure_ascii=False, indent=1) + "\n")
    log(f"tokens_{name}.json: {len(cases)} cases")
    del m


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--llama-bin", type=Path, default=None,
                    help="dir with llama-perplexity (skip perplexity if omitted)")
    ap.add_argument("--only", nargs="*", default=None,
                    help="subset of: quantizer logits greedy perplexity tokens")
    ap.add_argument("--no-gemma", action="store_true")
    ap.add_argument("--variants", nargs="*", default=None,
                    help="restrict logits/greedy/perplexity to these variants")
    a = ap.parse_args()
    parts = set(a.only or ["quantizer", "logits", "greedy", "perplexity", "tokens"])
    GOLDEN.mkdir(parents=True, exist_ok=True)

    meta_path = GOLDEN / "meta.json"
    meta = json.loads(meta_path.read_text()) if meta_path.is_file() else {}

    variants = make_variants.build_all()
    models: dict[str, Path] = dict(variants)
    if not a.no_gemma:
        models["gemma3"] = fetch_assets.gemma_model()

    meta["generator"] = {
        "reference": "llama.cpp (vendored in llama-cpp-python 0.3.36 sdist), CPU, GGML_NATIVE=ON",
        "settings": {"n_ctx": N_CTX, "n_batch": N_BATCH, "n_threads": N_THREADS,
                     "logits_all": True, "topk": TOPK, "kv_cache": "f16 (llama.cpp default)"},
        "regenerate": "see tests/golden/README.md",
    }
    meta.setdefault("variants", {})
    for k, p in models.items():
        entry = meta["variants"].get(k, {})
        entry.update({"file": p.name, "sha256": sha256(p)})
        if k in make_variants.VARIANTS:
            entry["made_by"] = "tools/make_variants.py (gguf-py 0.19.0) from " + (
                "Q4_1" if k == "F16" else "F16")
        meta["variants"][k] = entry

    if "quantizer" in parts:
        for k, r in check_quantizer(variants).items():
            meta["variants"][k]["llama_cpp_quantize"] = r

    texts = {n: (TEXTS / f"{n}.txt").read_text() for n in TEXT_FILES}
    run_models = {k: p for k, p in models.items() if not a.variants or k in a.variants}

    def save_meta():
        refresh_meta_from_npz(meta, models)
        meta_path.write_text(json.dumps(meta, indent=1) + "\n")

    save_meta()

    if "logits" in parts:
        for k, p in run_models.items():
            m = load(p)
            for tn, special in TEXT_FILES.items():
                ids = m.tokenize(texts[tn].encode(), add_bos=True, special=special)
                if len(ids) > N_CTX:
                    raise RuntimeError(f"{tn}: {len(ids)} tokens > n_ctx")
                m.reset()
                t0 = time.time()
                m.eval(ids)
                lg = np.array(m.scores[: len(ids)], dtype=np.float32)
                st = position_stats(lg, ids)
                np.savez_compressed(GOLDEN / f"logits_{k}_{tn}.npz", **st)
                nll = -st["next_logprob"][:-1].astype(np.float64)
                log(f"logits {k}/{tn}: {len(ids)} tokens, mean NLL {nll.mean():.4f} "
                    f"({time.time() - t0:.1f}s)")
            del m
        save_meta()

    if "greedy" in parts:
        for k, p in run_models.items():
            m = load(p)
            md = special_texts(m)
            eog = eog_ids(m)
            doc = {"model": p.name, "model_sha256": sha256(p), "n_predict": N_PREDICT,
                   "eog_ids": sorted(eog), "cases": [], "run": []}
            for pr in RAW_PROMPTS:
                ids = m.tokenize(pr.encode(), add_bos=True, special=False)
                g = greedy(m, ids, N_PREDICT, eog)
                doc["cases"].append({"kind": "raw", "prompt": pr, "prompt_ids": ids, **g})
            doc["chat_template_source"] = chat_template(md)[1]
            for um in CHAT_PROMPTS:
                rendered = render_chat(md, um)
                # a template that already emits the BOS text must not get a second BOS
                add_special = not (m._model.add_bos_token() and md.get("_bos_text")
                                   and rendered.startswith(md["_bos_text"]))
                ids = m.tokenize(rendered.encode(), add_bos=add_special, special=True)
                g = greedy(m, ids, N_PREDICT, eog)
                doc["cases"].append({"kind": "chat", "user": um, "prompt": rendered,
                                     "add_special": add_special, "prompt_ids": ids, **g})
            for pr in RUN_PROMPTS:
                ids = m.tokenize(pr.encode(), add_bos=True, special=False)
                g = greedy(m, ids, N_RUN, eog)
                doc["run"].append({"prompt": pr, "n": N_RUN, "temp": 0, "prompt_ids": ids,
                                   "tokens": g["tokens"], "text": g["text"],
                                   "gaps": g["gaps"], "first_near_tie": g["first_near_tie"],
                                   "stopped_on_eog": g["stopped_on_eog"]})
            (GOLDEN / f"greedy_{k}.json").write_text(
                json.dumps(doc, ensure_ascii=False, indent=1) + "\n")
            log(f"greedy_{k}.json written")
            del m

    if "perplexity" in parts and a.llama_bin:
        meta.setdefault("perplexity", {"results": {}})
        meta["perplexity"].update({"text": f"tests/data/texts/{PPL_TEXT}.txt", "ctx": PPL_CTX})
        for k, p in run_models.items():
            r = run_perplexity(a.llama_bin, p, TEXTS / f"{PPL_TEXT}.txt")
            meta["perplexity"]["results"][k] = r
            log(f"perplexity {k}: {r['ppl']} +/- {r['ppl_err']} over {r['n_chunks']} chunks")
        save_meta()

    if "tokens" in parts:
        make_tokenizer_golden(variants["Q4_1"], "smollm2")
        if not a.no_gemma:
            make_tokenizer_golden(models["gemma3"], "gemma3")

    save_meta()
    log(f"wrote {meta_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
