"""Render a model's Jinja chat template the way Hugging Face transformers does.

GGUF files carry the template as ``tokenizer.chat_template``.  Templates are
untrusted input (they come with downloaded model files), so they run in
jinja2's immutable sandbox with the same conventions as transformers'
``apply_chat_template``: ``trim_blocks``, ``lstrip_blocks``, loop controls, a
non-escaping ``tojson`` filter, ``raise_exception``, ``strftime_now`` and the
``{% generation %}`` block.  Anything that goes wrong surfaces as a
``ChatTemplateError`` subclass; ``ChatTemplate.from_metadata`` and
``ChatTemplate.prompt`` fall back to ChatML with a human-readable notice.
"""

from __future__ import annotations

import json
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar

import jinja2
import jinja2.ext
import jinja2.nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment, SecurityError

from .stops import detect_stop_strings

__all__ = [
    "CHATML_TEMPLATE",
    "ChatTemplate",
    "ChatTemplateError",
    "Prompt",
    "TemplateCompileError",
    "TemplateRaisedError",
    "TemplateRenderError",
    "UnsupportedTemplateError",
    "raw_prompt",
]

Message = Mapping[str, Any]
Clock = Callable[[], datetime]

META_TEMPLATE = "tokenizer.chat_template"
META_TOKENS = "tokenizer.ggml.tokens"
META_TOKEN_IDS = {
    "bos": "tokenizer.ggml.bos_token_id",
    "eos": "tokenizer.ggml.eos_token_id",
    "eot": "tokenizer.ggml.eot_token_id",
    "eom": "tokenizer.ggml.eom_token_id",
}

# Used when a model has no usable template.  Unlike the bare HF default it
# tolerates ``content`` that is None or a list of typed parts (multimodal
# messages), because a fallback that can itself fail would be no fallback.
CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' }}"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% elif message['content'] is iterable %}"
    "{% for part in message['content'] %}"
    "{% if part is string %}{{ part }}{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
    "{% endfor %}"
    "{% endif %}"
    "{{ '<|im_end|>\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
# A model that was not trained on ChatML may never emit <|im_end|> but happily
# invent the next turn, so the fallback also stops on a new turn starting.
_CHATML_EXTRA_STOPS = ("<|im_start|>",)


class ChatTemplateError(Exception):
    """Base class for every chat-template failure."""


class TemplateCompileError(ChatTemplateError):
    """The template is not valid Jinja (or uses an unknown tag)."""


class TemplateRenderError(ChatTemplateError):
    """The template failed while rendering (undefined variable, type error...)."""


class TemplateRaisedError(TemplateRenderError):
    """The template called ``raise_exception``; the message is the template's own."""


class UnsupportedTemplateError(TemplateRenderError):
    """The template needs something the sandbox refuses (dunder access, mutation...)."""


class _GenerationExtension(jinja2.ext.Extension):
    """``{% generation %}...{% endgeneration %}``: HF marks assistant spans with
    it for training masks; for inference it only renders its body."""

    tags: ClassVar[set[str]] = {"generation"}

    def parse(self, parser: Any) -> jinja2.nodes.Node:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.Scope(body).set_lineno(lineno)


class _Sandbox(ImmutableSandboxedEnvironment):
    def unsafe_undefined(self, obj: Any, attribute: str) -> Any:
        # The stock sandbox returns an Undefined that only fails when *used*,
        # so `{{ ''.__class__ }}` would print nothing.  Refuse at the access:
        # a template probing internals is broken or hostile either way.
        raise SecurityError(
            f"access to attribute {attribute!r} of {type(obj).__name__!r} object is unsafe"
        )


def _raise_exception(message: str) -> None:
    raise TemplateRaisedError(message)


def _tojson(
    value: Any,
    ensure_ascii: bool = False,
    indent: int | None = None,
    separators: tuple[str, str] | None = None,
    sort_keys: bool = False,
) -> str:
    # Same signature and defaults as transformers' filter: no HTML escaping and
    # no key sorting (jinja's builtin does both), non-ASCII kept verbatim.
    return json.dumps(
        value,
        ensure_ascii=ensure_ascii,
        indent=indent,
        separators=separators,
        sort_keys=sort_keys,
    )


def _make_environment(now: Clock) -> _Sandbox:
    env = _Sandbox(
        trim_blocks=True,
        lstrip_blocks=True,
        extensions=[_GenerationExtension, jinja2.ext.loopcontrols],
    )
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = lambda fmt: now().strftime(fmt)
    return env


def _template_line(exc: BaseException) -> int | None:
    # jinja rewrites tracebacks so frames of compiled templates carry the
    # template's own filename and line numbers; the innermost one is the culprit.
    line = None
    for frame, lineno in traceback.walk_tb(exc.__traceback__):
        if frame.f_code.co_filename == "<template>":
            line = lineno
    return line


def _describe(exc: BaseException) -> str:
    line = _template_line(exc)
    where = f" (template line {line})" if line is not None else ""
    return f"{type(exc).__name__}: {exc}{where}"


@dataclass(frozen=True)
class Prompt:
    """What to feed the engine: the prompt text and where to stop."""

    text: str
    stop_strings: tuple[str, ...]
    is_fallback: bool = False
    notice: str | None = None


class ChatTemplate:
    """A compiled chat template plus the stop strings that go with it."""

    def __init__(
        self,
        source: str,
        *,
        bos_token: str = "",
        eos_token: str = "",
        extra_stop_tokens: Sequence[str] = (),
        is_fallback: bool = False,
        notice: str | None = None,
        now: Clock = datetime.now,
    ) -> None:
        """Compile ``source``; raises TemplateCompileError.  Prefer the
        ``from_*`` constructors."""
        self.source = source
        self.bos_token = bos_token
        self.eos_token = eos_token
        self.is_fallback = is_fallback
        self.notice = notice
        self._now = now
        self._extra_stop_tokens = tuple(extra_stop_tokens)
        try:
            self._template = _make_environment(now).from_string(source)
        except jinja2.TemplateSyntaxError as exc:
            raise TemplateCompileError(
                f"{exc.message} (template line {exc.lineno})"
            ) from exc
        except (
            Exception
        ) as exc:  # anything else the parser throws is still "won't compile"
            raise TemplateCompileError(_describe(exc)) from exc
        special = (eos_token, *self._extra_stop_tokens)
        if is_fallback:
            special = (*special, *_CHATML_EXTRA_STOPS)
        self.stop_strings: tuple[str, ...] = detect_stop_strings(source, special)

    # -- constructors -------------------------------------------------------

    @classmethod
    def from_string(
        cls,
        source: str,
        bos_token: str = "",
        eos_token: str = "",
        *,
        extra_stop_tokens: Sequence[str] = (),
        now: Clock = datetime.now,
    ) -> ChatTemplate:
        """Strict: raises TemplateCompileError if ``source`` does not compile."""
        return cls(
            source,
            bos_token=bos_token,
            eos_token=eos_token,
            extra_stop_tokens=extra_stop_tokens,
            now=now,
        )

    @classmethod
    def chatml(
        cls,
        bos_token: str = "",
        eos_token: str = "",
        *,
        extra_stop_tokens: Sequence[str] = (),
        notice: str | None = None,
        now: Clock = datetime.now,
    ) -> ChatTemplate:
        """The ChatML fallback, flagged ``is_fallback``."""
        return cls(
            CHATML_TEMPLATE,
            bos_token=bos_token,
            eos_token=eos_token,
            extra_stop_tokens=extra_stop_tokens,
            is_fallback=True,
            notice=notice,
            now=now,
        )

    @classmethod
    def from_metadata(
        cls,
        metadata: Mapping[str, Any],
        *,
        token_text: Callable[[int], str] | None = None,
        now: Clock = datetime.now,
    ) -> ChatTemplate:
        """Build from GGUF metadata; never raises.

        Special-token texts are looked up with ``token_text(id)`` (e.g. the
        engine's vocabulary) or, failing that, the ``tokenizer.ggml.tokens``
        array if the metadata includes it.  Without a usable template the
        result is the ChatML fallback with ``notice`` saying why.
        """
        tokens = _special_token_texts(metadata, token_text)
        bos, eos = tokens.get("bos", ""), tokens.get("eos", "")
        extra = tuple(tokens[k] for k in ("eot", "eom") if tokens.get(k))

        source = metadata.get(META_TEMPLATE)
        if not isinstance(source, str) or not source.strip():
            notice = f"The model has no chat template ({META_TEMPLATE} is missing); using ChatML instead."
            return cls.chatml(bos, eos, extra_stop_tokens=extra, notice=notice, now=now)
        try:
            return cls(
                source, bos_token=bos, eos_token=eos, extra_stop_tokens=extra, now=now
            )
        except TemplateCompileError as exc:
            notice = f"The model's chat template does not compile ({exc}); using ChatML instead."
            return cls.chatml(bos, eos, extra_stop_tokens=extra, notice=notice, now=now)

    # -- rendering ----------------------------------------------------------

    def render(
        self,
        messages: Sequence[Message],
        add_generation_prompt: bool = True,
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        documents: Sequence[Mapping[str, Any]] | None = None,
        **kwargs: Any,
    ) -> str:
        """Render like ``apply_chat_template(..., tokenize=False)``.

        Extra ``kwargs`` (``enable_thinking``, ``date_string``...) reach the
        template as variables and may override ``bos_token``/``eos_token``.
        Raises a ChatTemplateError subclass on any failure.
        """
        context: dict[str, Any] = {
            "messages": messages,
            "tools": tools,
            "documents": documents,
            "add_generation_prompt": add_generation_prompt,
            "bos_token": self.bos_token,
            "eos_token": self.eos_token,
            **kwargs,
        }
        try:
            return self._template.render(context)
        except ChatTemplateError:
            raise
        except SecurityError as exc:
            raise UnsupportedTemplateError(
                f"the template does something the sandbox forbids: {_describe(exc)}"
            ) from exc
        except Exception as exc:  # RecursionError, TypeError, UndefinedError...: a bad template must not crash us
            raise TemplateRenderError(_describe(exc)) from exc

    def prompt(
        self,
        messages: Sequence[Message],
        add_generation_prompt: bool = True,
        **kwargs: Any,
    ) -> Prompt:
        """Render, falling back to ChatML (with a notice) if the template fails."""
        try:
            text = self.render(messages, add_generation_prompt, **kwargs)
            return Prompt(text, self.stop_strings, self.is_fallback, self.notice)
        except ChatTemplateError as exc:
            if self.is_fallback:  # already ChatML: nothing further to fall back to
                raise
            notice = f"The model's chat template failed to render ({type(exc).__name__}: {exc}); using ChatML instead."
            fallback = ChatTemplate.chatml(
                self.bos_token,
                self.eos_token,
                extra_stop_tokens=self._extra_stop_tokens,
                notice=notice,
                now=self._now,
            )
            text = fallback.render(messages, add_generation_prompt, **kwargs)
            return Prompt(text, fallback.stop_strings, True, notice)


def raw_prompt(text: str, stop_strings: Sequence[str] = ()) -> Prompt:
    """Raw completion: the text goes to the model as-is, no template.

    Pass the model's EOS/EOT texts (e.g. ``template.stop_strings``, or just
    the EOS) if generation should end on them."""
    return Prompt(text, tuple(dict.fromkeys(s for s in stop_strings if s)))


def _special_token_texts(
    metadata: Mapping[str, Any], token_text: Callable[[int], str] | None
) -> dict[str, str]:
    vocab = metadata.get(META_TOKENS)
    texts: dict[str, str] = {}
    for name, key in META_TOKEN_IDS.items():
        raw = metadata.get(key)
        try:
            # llama.cpp reports every metadata value as a string, so "2" is an id too.
            token_id = int(raw)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            continue
        if token_id < 0:
            continue
        text = ""
        if token_text is not None:
            try:
                text = token_text(token_id)
            except (
                LookupError,
                ValueError,
            ):  # broken metadata: treat the token as unknown
                text = ""
        elif (
            isinstance(vocab, Sequence)
            and not isinstance(vocab, str)
            and token_id < len(vocab)
        ):
            text = str(vocab[token_id])
        if text:
            texts[name] = text
    return texts
