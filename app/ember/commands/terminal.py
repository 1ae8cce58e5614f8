"""Terminal chat on the engine: for machines without a display, and `ember chat`."""
from __future__ import annotations

import sys

from ..chat import (
    CancelToken,
    ChatTemplate,
    ContextFull,
    GenRequest,
    ReasoningStream,
    build_prompt,
    stream_reply,
)
from ..engine import GenerationStats, Model, SamplingParams, Session

DIM, RESET = "\x1b[2m", "\x1b[0m"
THOUGHT_PREFIX = "| "  # where the terminal shows no colours


class ReplyWriter:
    """Writes a streamed reply: reasoning (``<think>...</think>``) dimmed on a terminal,
    each line prefixed with ``| `` elsewhere, and the answer as plain text after it."""

    def __init__(self, out, opened: bool = False, color: bool | None = None):
        self.out = out
        if color is None:
            isatty = getattr(out, "isatty", None)
            color = bool(isatty and isatty())
        self.color = color
        self.stream = ReasoningStream(opened=opened)
        self._in_thought = False
        self._line_start = True

    def _thought(self, text: str) -> None:
        if not self._in_thought:
            self._in_thought = True
            if self.color:
                self.out.write(DIM)
        if self.color:
            self.out.write(text)
            self._line_start = text.endswith("\n")
            return
        for ch in text:
            if self._line_start:
                self.out.write(THOUGHT_PREFIX)
            self.out.write(ch)
            self._line_start = ch == "\n"

    def _end_thought(self) -> None:
        if self._in_thought:
            self._in_thought = False
            if self.color:
                self.out.write(RESET)
            self.out.write("\n\n")
            self._line_start = True

    def _write(self, pieces) -> None:
        for kind, text in pieces:
            if kind == "thought":
                self._thought(text)
            else:
                self._end_thought()
                self.out.write(text)
        self.out.flush()

    def feed(self, text: str) -> None:
        self._write(self.stream.feed(text))

    def finish(self) -> None:
        self._write(self.stream.finish())
        if self._in_thought and self.color:
            self.out.write(RESET)  # cut off while thinking: never leave the terminal dim
            self._in_thought = False
        self.out.flush()

    @property
    def answer(self) -> str:
        return self.stream.answer


def chat_loop(model_path, n_ctx: int = 2048, params: SamplingParams | None = None,
              system: str | None = None, max_tokens: int = 512, stdin=None, stdout=None,
              policy: str = "drop_oldest", speculative=None) -> int:
    """A chat on stdin/stdout. The chat is fitted into the context as the app fits it
    (policy "drop_oldest" leaves out the oldest turns and says so; "stop" refuses).
    speculative: SpeculativeParams for every reply (engine/speculative.py)."""
    stdin = stdin or sys.stdin
    out = stdout or sys.stdout
    print(f"loading {model_path} ...", file=sys.stderr)
    model = Model(model_path, n_ctx=n_ctx)
    template = ChatTemplate.from_metadata(model.metadata, token_text=model.token_text)
    if template.notice:
        print(f"note: {template.notice}", file=sys.stderr)
    if speculative is not None and speculative.draft_model is not None:
        from ..engine.speculative import check_vocab_compatible
        check_vocab_compatible(model, speculative.draft_model)  # EmberError: ember's message
    session = Session(model, speculative=speculative)
    messages: list[dict] = [{"role": "system", "content": system}] if system else []
    params = params or SamplingParams(temperature=0.7)
    where = model.context.backend + (f" ({model.context.backend_note})" if model.context.backend_note else "")
    print(f"{model.arch} model, {model.ftype}, context {model.n_ctx} tokens. Runs on {where}. "
          "Type a message; an empty line or Ctrl-D quits.", file=sys.stderr)
    while True:
        out.write("\n> ")
        out.flush()
        line = stdin.readline()
        if not line or not line.strip():
            return 0
        messages.append({"role": "user", "content": line.rstrip("\n")})
        try:
            built = build_prompt(model, model.n_ctx, template,
                                 GenRequest(0, 0, messages, max_new_tokens=max_tokens,
                                            params=params, policy=policy))
        except ContextFull as e:
            print(f"ember: {e}", file=sys.stderr)
            messages.pop()  # not sent: the next message starts from the chat before it
            continue
        if built.notice:
            print(f"note: {built.notice}", file=sys.stderr)
        writer = ReplyWriter(out, opened=built.think_open)
        stats = GenerationStats()
        token = CancelToken(session.context)
        try:
            for text in stream_reply(session, built, params, stats, token):
                writer.feed(text)
        except KeyboardInterrupt:
            token.cancel()
        writer.finish()
        out.write("\n")
        # only the answer goes back into the chat: reasoning is never fed to later turns
        messages.append({"role": "assistant", "content": writer.answer.strip()})
        tps = stats.generated_tokens / stats.generation_seconds if stats.generation_seconds else 0
        print(f"[{stats.generated_tokens} tokens, {tps:.1f} t/s]", file=sys.stderr)
