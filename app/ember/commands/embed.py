"""`ember embed`: sentence vectors of texts from an embedding model (the bert family), as
JSON on stdout (OpenAI's embeddings list, or one array a line); statistics on stderr."""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("-m", "--model", required=True, metavar="MODEL.gguf",
                   help="an embedding model (GGUF `bert`: all-MiniLM, bge, e5)")
    p.add_argument("-p", "--prompt", action="append", default=None, metavar="TEXT",
                   help="a text to embed (may be given several times)")
    p.add_argument("-f", "--file", default=None, metavar="FILE",
                   help="texts to embed, one a line (blank lines skipped); - reads stdin")
    p.add_argument("-t", "--threads", type=int, default=None, metavar="N",
                   help="threads (default: the number of physical cores)")
    p.add_argument("--pooling", choices=["mean", "cls", "last"], default=None,
                   help="how a text's token states become one vector (default: the file's)")
    p.add_argument("--no-normalize", action="store_true",
                   help="leave the vectors as pooled (default: unit length)")
    p.add_argument("--truncate", type=int, default=None, metavar="N",
                   help="cut texts to N tokens ([CLS] and [SEP] included); default: a text "
                        "longer than the model reads is an error")
    p.add_argument("-o", "--output", choices=["json", "jsonl"], default="json",
                   help="json: OpenAI's embeddings list (default); jsonl: one array a line")


def read_texts(args) -> list[str]:
    texts = list(args.prompt or [])
    if args.file is not None:
        raw = sys.stdin.read() if args.file == "-" else Path(args.file).read_text(encoding="utf-8")
        texts += [line for line in raw.splitlines() if line.strip()]
    if not texts:
        raise SystemExit("ember embed: nothing to embed: give -p TEXT or -f FILE")
    return texts


def run(args) -> int:
    from ..engine import Embedder, Model

    texts = read_texts(args)
    if args.truncate is not None and args.truncate < 2:
        raise SystemExit("ember embed: --truncate needs at least 2 tokens ([CLS] and [SEP])")
    model = Model(args.model, n_threads=args.threads)
    embedder = Embedder(model, pooling=args.pooling)
    seqs = [embedder.tokenize(t, args.truncate) for t in texts]
    for i, s in enumerate(seqs):
        if len(s) > embedder.n_seq_max:
            raise ValueError(f"text {i + 1} has {len(s)} tokens; {Path(args.model).name} "
                             f"reads at most {embedder.n_seq_max} (--truncate "
                             f"{embedder.n_seq_max} cuts it)")
    start = time.perf_counter()
    vectors = embedder.embed_tokens(seqs, normalize=not args.no_normalize)
    seconds = time.perf_counter() - start
    out = sys.stdout
    if args.output == "jsonl":
        for v in vectors:
            out.write(json.dumps([float(x) for x in v]) + "\n")
    else:
        n_tokens = sum(len(s) for s in seqs)
        json.dump({"object": "list",
                   "data": [{"object": "embedding", "index": i, "embedding": [float(x) for x in v]}
                            for i, v in enumerate(vectors)],
                   "model": Path(args.model).name,
                   "usage": {"prompt_tokens": n_tokens, "total_tokens": n_tokens}}, out)
        out.write("\n")
    out.flush()
    n_tok = sum(len(s) for s in seqs)
    rate = len(texts) / seconds if seconds > 0 else 0.0
    print(f"[embedded {len(texts)} texts, {n_tok} tokens, {embedder.n_embd} dimensions, "
          f"pooling {embedder.pooling}; {seconds:.3f} s, {rate:.1f} texts/s]", file=sys.stderr)
    return 0
