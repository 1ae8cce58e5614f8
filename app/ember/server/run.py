"""`ember serve`: bind the socket, start answering (/health says 503 until the model is
loaded), load the model in the background, serve until Ctrl-C."""
from __future__ import annotations

import os
import socket
import sys
import threading
from pathlib import Path


def add_arguments(p) -> None:
    p.add_argument("-m", "--model", required=True, metavar="MODEL.gguf",
                   help="path to a .gguf model")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on; 0.0.0.0 exposes the model to the network "
                        "(default: %(default)s)")
    p.add_argument("--port", type=int, default=8080,
                   help="TCP port; 0 lets the system choose (printed) (default: %(default)s)")
    p.add_argument("--parallel", type=int, default=1, metavar="N",
                   help="requests generated at once, each in a context of its own; more wait "
                        "in a queue (default: %(default)s)")
    p.add_argument("-c", "--ctx-size", type=int, default=None, metavar="N",
                   help="context length of each slot in tokens (default: the model's trained "
                        "length, at most 4096)")
    p.add_argument("-t", "--threads", type=int, default=None, metavar="N",
                   help="threads per decode (default: every physical core for one slot; "
                        "with several, the cores shared out, one decode per core)")
    p.add_argument("--api-key", default=None, metavar="KEY",
                   help="require 'Authorization: Bearer KEY' (default: $EMBER_API_KEY, else "
                        "none)")
    p.add_argument("--cors", default=None, metavar="ORIGIN",
                   help="let web pages from ORIGIN (e.g. http://localhost:3000, or *) call the "
                        "server (default: none)")
    p.add_argument("--allow-host", action="append", default=[], metavar="NAME",
                   help="another name the Host header may carry (a reverse proxy's); "
                        "repeatable (default: the bound address and the loopback names)")
    p.add_argument("--alias", default=None, metavar="NAME",
                   help="the model id clients see (default: the file name without .gguf)")
    p.add_argument("--reasoning-format", choices=("deepseek", "none"), default="deepseek",
                   help="where a thinking model's <think> block goes in a chat answer: "
                        "'deepseek' in reasoning_content beside content, 'none' left in content "
                        "(a request's reasoning_format overrides it) (default: %(default)s)")
    p.add_argument("--strict-model-names", action="store_true",
                   help="refuse (404) a request whose 'model' is not this model's id or file "
                        "name (default: any name is answered by the one model, which the "
                        "answer's 'model' names)")
    from ..speculative_options import add_speculative_args
    add_speculative_args(p)


def _bind(host: str, port: int) -> socket.socket:
    family, type_, proto, _, addr = socket.getaddrinfo(
        host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    sock = socket.socket(family, type_, proto)
    if os.name != "nt":  # on Windows SO_REUSEADDR lets two servers share a port
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(addr)
    sock.listen(128)
    return sock


def _url(host: str, port: int) -> str:
    shown = "127.0.0.1" if host in ("", "0.0.0.0") else "[::1]" if host == "::" else host
    return f"http://[{shown}]:{port}" if ":" in shown and not shown.startswith("[") \
        else f"http://{shown}:{port}"


def uvicorn_server(app):
    """The uvicorn server `ember serve` runs app on (the app's Settings switch can too);
    call .run(sockets=[a bound socket])."""
    import uvicorn  # here, not at the top: `ember --help` and the other commands stay fast

    # each implementation named, none left to "auto": the packaged build lists exactly these
    config = uvicorn.Config(app, loop="asyncio", http="h11", ws="none", lifespan="off",
                            log_level="warning", access_log=False, server_header=False,
                            timeout_keep_alive=5, timeout_graceful_shutdown=3)
    return uvicorn.Server(config)


def serve(args) -> int:
    from .app import ServerState, build_app
    from .engine_state import LoadedModel

    path = Path(args.model)
    if not path.is_file():
        print(f"ember serve: {path} does not exist", file=sys.stderr)
        return 2
    if args.parallel < 1 or args.parallel > 64:
        print("ember serve: --parallel must be between 1 and 64", file=sys.stderr)
        return 2
    api_key = args.api_key if args.api_key is not None else os.environ.get("EMBER_API_KEY")
    try:
        sock = _bind(args.host, args.port)
    except OSError as e:
        print(f"ember serve: cannot listen on {args.host}:{args.port}: {e.strerror or e}",
              file=sys.stderr)
        return 1
    port = sock.getsockname()[1]
    state = ServerState(str(path))
    app = build_app(state, host=args.host, api_key=api_key or None, cors=args.cors,
                    allow_hosts=tuple(args.allow_host))
    server = uvicorn_server(app)

    def load() -> None:
        from ..speculative_options import speculative_from_args
        try:
            from .embeddings import EmbeddingModel, is_embedding_file
            kind = EmbeddingModel if is_embedding_file(path) else LoadedModel
            state.loaded = kind(path, n_slots=args.parallel, n_ctx=args.ctx_size,
                                       n_threads=args.threads, alias=args.alias,
                                       strict_model_names=args.strict_model_names,
                                       reasoning_format=args.reasoning_format,
                                       speculative=speculative_from_args(args))
        except Exception as e:  # noqa: BLE001 (EmberError, OSError...: told, then exit 1)
            state.error = str(e) or type(e).__name__
            print(f"ember serve: cannot load {path}: {state.error}", file=sys.stderr, flush=True)
            server.should_exit = True
            return
        loaded = state.loaded
        if isinstance(loaded, EmbeddingModel):
            print(f"ember serve: {loaded.id} loaded (an embedding model: POST /v1/embeddings, "
                  f"{loaded.embedder.n_embd} dimensions, {loaded.n_ctx} tokens a text at most)",
                  flush=True)
            return
        pool = loaded.pool
        if pool.threads is None:
            how = "decoding on every core"
        else:
            how = (f"{pool.width} decoding at once, {pool.threads} thread"
                   f"{'s' if pool.threads != 1 else ''} each")
        slots = f"{args.parallel} slot{'s' if args.parallel != 1 else ''}"
        print(f"ember serve: {loaded.id} loaded ({slots} of {loaded.n_ctx} tokens, {how})",
              flush=True)
        if loaded.speculative is not None:
            print(f"ember serve: speculative decoding: {loaded.speculative.describe()}", flush=True)

    url = _url(args.host, port)
    print(f"ember serve: listening on {url} (OpenAI API at {url}/v1)", flush=True)
    if args.host not in ("127.0.0.1", "localhost", "::1") and not api_key:
        print("ember serve: warning: listening beyond this machine without --api-key",
              file=sys.stderr, flush=True)
    threading.Thread(target=load, daemon=True, name="ember-load").start()
    try:
        server.run(sockets=[sock])
    finally:
        if state.loaded is not None:
            state.loaded.close()
    return 1 if state.error else 0
