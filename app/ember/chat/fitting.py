"""Fitting a chat into the context window: render it with the template (or as raw text),
count its tokens and, by the chat's policy, leave out the oldest turns or refuse. The app
and the terminal chat share it."""
from __future__ import annotations

from dataclasses import dataclass, field

from .reasoning import THINK_OPEN, prompt_opens_thinking, strip_thoughts_from_history
from .template import ChatTemplate, raw_prompt


class ContextFull(Exception):
    """The chat cannot fit (policy "stop", or a single message too long); the message
    says what the user can do."""


@dataclass
class GenRequest:
    conv_id: int
    msg_id: int
    messages: list[dict]  # the chat so far (system first, if any), without the reply
    prefix: str = ""  # reply text already there (continue)
    max_new_tokens: int = 512
    params: object = None  # engine.SamplingParams (None: the engine's defaults)
    raw: bool = False
    policy: str = "drop_oldest"  # or "stop"


@dataclass
class BuiltPrompt:
    text: str  # what the ids spell (for display and tests; the engine is fed the ids)
    stop_strings: tuple[str, ...]
    n_tokens: int
    dropped: int = 0
    notice: str | None = None
    max_tokens: int = 0
    think_open: bool = False  # the prompt ends inside <think>: the reply starts in thoughts
    kept: list[dict] = field(default_factory=list)  # the messages that fit
    ids: list[int] = field(default_factory=list)  # the prompt's tokens, counted and fed as they are


def _render(template: ChatTemplate, messages: list[dict], prefix: str, raw: bool):
    """The prompt, the text to feed (prompt + the reply so far, when continuing) and
    whether the prompt opened a reasoning block that the reply starts inside."""
    if raw:
        messages = strip_thoughts_from_history(messages)
        text = "".join(m["content"] + ("\n\n" if m["role"] == "system" else "")
                       for m in messages) + prefix
        return raw_prompt(text, [template.eos_token]), text, False
    p = template.prompt(messages)
    opened = prompt_opens_thinking(p.text)
    if opened and prefix.lstrip().startswith(THINK_OPEN):
        # the stored reply carries the tag the template already wrote: not twice
        prefix = prefix.lstrip()[len(THINK_OPEN):]
    return p, p.text + prefix, opened


def build_prompt(tokenizer, n_ctx: int, template: ChatTemplate,
                 req: GenRequest) -> BuiltPrompt:
    """Renders the chat and fits it into n_ctx tokens by the request's policy (tokenizer:
    anything with the engine Model's prompt_ids()): drop_oldest removes the oldest turns
    after the system prompt; stop refuses. The prompt is tokenized here, once: the count
    the app shows is the length of the ids the engine is fed."""
    reserve = min(req.max_new_tokens, max(n_ctx // 4, 16))
    msgs = list(req.messages)
    dropped = 0
    while True:
        p, text, opened = _render(template, msgs, req.prefix, req.raw)
        ids = tokenizer.prompt_ids(text, parse_special=not req.raw)
        n = len(ids)
        if n + reserve <= n_ctx:
            break
        if req.policy == "stop":
            raise ContextFull(
                f"The conversation fills the context window ({n} of {n_ctx} tokens, and "
                f"{reserve} more are needed for the reply). Start a new chat, raise the "
                f"context length, or choose \"Drop oldest messages\" in Settings.")
        first = next((i for i, m in enumerate(msgs) if m["role"] != "system"), None)
        if first is None or first >= len(msgs) - 1:
            raise ContextFull(f"The message is too long for the context window ({n} of "
                              f"{n_ctx} tokens). Shorten it or raise the context length in "
                              f"Settings.")
        del msgs[first]
        dropped += 1
        while first < len(msgs) - 1 and msgs[first]["role"] == "assistant":
            del msgs[first]
            dropped += 1
    notice = None
    if dropped:
        notice = (f"{dropped} earlier message{'s' if dropped != 1 else ''} did not fit in the "
                  f"{n_ctx}-token context and {'were' if dropped != 1 else 'was'} left out.")
    return BuiltPrompt(text, tuple(p.stop_strings), n, dropped, notice,
                       max(1, min(req.max_new_tokens, n_ctx - n)), opened, msgs, ids)
