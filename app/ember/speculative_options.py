"""The speculative-decoding options of `ember run`, `ember chat` and `ember serve` (llama.cpp's
names where it has them), and the SpeculativeParams they give."""
from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .engine import Model, SpeculativeParams


def add_speculative_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("speculative decoding (greedy output unchanged, sampled output "
                             "from the same distribution; docs/SPECULATIVE.md)")
    g.add_argument("-md", "--model-draft", "--draft-model", dest="model_draft", default=None,
                   metavar="DRAFT.gguf",
                   help="a small model with the same vocabulary drafts tokens that the model "
                        "checks in one batched pass (default: none)")
    g.add_argument("--lookup", action="store_true",
                   help="prompt-lookup drafts: the tokens that followed the last few tokens' "
                        "latest earlier occurrence in the prompt or reply (no second model; "
                        "strong for code editing and answering from a document) (default: %(default)s)")
    g.add_argument("--lookup-ngram", type=int, default=3, metavar="N",
                   help="longest n-gram prompt lookup matches (default: %(default)s)")
    g.add_argument("--draft-max", "--draft", dest="draft_max", type=int, default=16, metavar="N",
                   help="most tokens drafted per pass (default: %(default)s); the length "
                        "used adapts to how many drafts are accepted")
    g.add_argument("--draft-min", type=int, default=0, metavar="N",
                   help="drafts shorter than N are not verified (default: %(default)s)")
    g.add_argument("--draft-p-min", type=float, default=0.5, metavar="P",
                   help="a draft model stops drafting when its most likely token is below P "
                        "(default: %(default)s)")
    g.add_argument("-cd", "--ctx-size-draft", type=int, default=None, metavar="N",
                   help="the draft model's context length (default: the model's)")


def speculative_from_args(args, target: Model | None = None) -> SpeculativeParams | None:
    """The options as SpeculativeParams (None when neither a draft model nor lookup is
    asked for); loads the draft model and, given the target, checks their vocabularies."""
    from .engine import Model, SpeculativeParams
    from .engine.speculative import check_vocab_compatible
    if not getattr(args, "model_draft", None) and not getattr(args, "lookup", False):
        return None  # (`ember` with no display builds its chat's arguments without them)
    if args.draft_max < 1 or args.draft_min < 0 or args.draft_min > args.draft_max:
        raise ValueError("--draft-max must be at least 1 and --draft-min between 0 and it")
    if args.lookup_ngram < 1:
        raise ValueError("--lookup-ngram must be at least 1")
    draft = None
    if args.model_draft:
        n_ctx = args.ctx_size_draft or getattr(args, "ctx_size", None)
        draft = Model(args.model_draft, n_ctx=n_ctx, n_threads=getattr(args, "threads", None))
        if target is not None:
            check_vocab_compatible(target, draft)
    return SpeculativeParams(lookup=args.lookup, draft_model=draft, draft_max=args.draft_max,
                             draft_min=args.draft_min, ngram_max=args.lookup_ngram,
                             draft_p_min=args.draft_p_min, draft_n_ctx=args.ctx_size_draft)
