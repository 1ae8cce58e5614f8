"""Terminal chat on the engine: for machines without a display, and `ember chat`."""
from __future__ import annotations

import sys

from .chat import ChatTemplate, StopScanner
from .engine import GenerationStats, Model, SamplingParams, Session


def chat_loop(model_path, n_ctx: int = 2048, params: SamplingParams | None = None,
              system: str | None = None, max_tokens: int = 512, stdin=None, stdout=None) -> int:
    stdin = stdin or sys.stdin
    out = stdout or sys.stdout
    print(f"loading {model_path} ...", file=sys.stderr)
    model = Model(model_path, n_ctx=n_ctx)
    template = ChatTemplate.from_metadata(model.metadata, token_text=model.token_text)
    if template.notice:
        print(f"note: {template.notice}", file=sys.stderr)
    session = Session(model)
    messages: list[dict] = [{"role": "system", "content": system}] if system else []
    params = params or SamplingParams(temperature=0.7)
    print(f"{model.arch} model, {model.ftype}, context {model.n_ctx} tokens. "
          "Type a message; an empty line or Ctrl-D quits.", file=sys.stderr)
    while True:
        out.write("\n> ")
        out.flush()
        line = stdin.readline()
        if not line or not line.strip():
            return 0
        messages.append({"role": "user", "content": line.rstrip("\n")})
        prompt = template.prompt(messages)
        scanner = StopScanner(prompt.stop_strings)
        stats = GenerationStats()
        reply = []
        try:
            for piece in session.generate(prompt.text, max_tokens, params, stats=stats):
                emit, stopped = scanner.feed(piece)
                out.write(emit)
                out.flush()
                reply.append(emit)
                if stopped:
                    break
            else:
                tail = scanner.flush()
                out.write(tail)
                reply.append(tail)
        except KeyboardInterrupt:
            model.cancel()
        out.write("\n")
        messages.append({"role": "assistant", "content": "".join(reply).strip()})
        tps = stats.generated_tokens / stats.generation_seconds if stats.generation_seconds else 0
        print(f"[{stats.generated_tokens} tokens, {tps:.1f} t/s]", file=sys.stderr)
