"""Render a model's Jinja chat template the way Hugging Face transformers does.

GGUF files carry the template as ``tokenizer.chat_template``.  Templates are
untrusted input (they come with downloaded model files), so they run in
jinja2's immutable sandbox with the same conventions as transformers'
``apply_chat_template``: ``trim_blocks``, ``lstrip_blocks``, loop controls, a
non-escaping ``tojson`` filter, ``raise_exception``, ``strftime_now`` and the
``{% generation %}`` block.  Anything that goes wrong surfaces as a
``ChatTemplateError`` subclass; ``ChatTemplate.from_metadata`` and
``ChatTemplate.prompt`` fall back, with a human-readable notice, to the built-in
format the model's vocabulary points to (``builtin.py``: Gemma, Llama 3, Phi-3),
else ChatML.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .builtin import BUILTIN_FORMATS, CHATML_TEMPLATE, BuiltinFormat, detect_builtin_format
from .reasoning import strip_thoughts_from_history
from .stops import detect_stop_strings

__all__ = [
    "BUILTIN_FORMATS",
    "CHATML_TEMPLATE",
    "ChatTemplate",
    "ChatTemplateError",
    "Prompt",
    "TemplateCompileError",
    "TemplateRaisedError",
    "TemplateRenderError",
    "UnsupportedTemplateError",
    "fold_system_messages",
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

# A model that was not trained on a fallback format may never emit its end marker
# but happily invent the next turn, so a fallback also stops on a new turn starting.
_CHATML_EXTRA_STOPS = BUILTIN_FORMATS["chatml"].extra_stops

# Put after a message's text to find where the template wrote it (render_continuing): a
# string no chat contains and no template's filters change (no letters to case, no space
# to trim).
_CONTINUE_MARK = "\u2063\u2060\u2063"


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


def _raise_exception(message: str) -> None:
    raise TemplateRaisedError(message)


def _make_environment(now: Clock):
    # jinja2 is imported with the first template compiled, not when the app starts
    from .sandbox import make_environment
    return make_environment(now, _raise_exception)


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
        builtin: BuiltinFormat | None = None,
        fallback_format: BuiltinFormat | None = None,
        now: Clock = datetime.now,
    ) -> None:
        """Compile ``source``; raises TemplateCompileError.  Prefer the
        ``from_*`` constructors.

        ``builtin``: this is one of Ember's built-in formats (``source`` is its
        template).  ``fallback_format``: the built-in format ``prompt`` falls back
        to when this template fails to render (ChatML when None)."""
        self.source = source
        self.bos_token = bos_token
        self.eos_token = eos_token
        self.is_fallback = is_fallback
        self.notice = notice
        self.builtin = builtin
        self.fallback_format = fallback_format
        self._now = now
        self._extra_stop_tokens = tuple(extra_stop_tokens)
        import jinja2
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
            extra = builtin.extra_stops if builtin is not None else _CHATML_EXTRA_STOPS
            special = (*special, *extra)
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
        return cls.from_builtin(
            BUILTIN_FORMATS["chatml"],
            bos_token,
            eos_token,
            extra_stop_tokens=extra_stop_tokens,
            notice=notice,
            now=now,
        )

    @classmethod
    def from_builtin(
        cls,
        fmt: BuiltinFormat | str,
        bos_token: str = "",
        eos_token: str = "",
        *,
        extra_stop_tokens: Sequence[str] = (),
        notice: str | None = None,
        now: Clock = datetime.now,
    ) -> ChatTemplate:
        """One of the built-in formats (``BUILTIN_FORMATS``), flagged ``is_fallback``."""
        if isinstance(fmt, str):
            fmt = BUILTIN_FORMATS[fmt]
        return cls(
            fmt.source,
            bos_token=bos_token,
            eos_token=eos_token,
            extra_stop_tokens=extra_stop_tokens,
            is_fallback=True,
            notice=notice,
            builtin=fmt,
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
        result is the built-in format the model's vocabulary or architecture
        points to (Gemma turns for a gemma3 file...), else ChatML, with
        ``notice`` saying why.
        """
        tokens = _special_token_texts(metadata, token_text)
        bos, eos = tokens.get("bos", ""), tokens.get("eos", "")
        extra = tuple(tokens[k] for k in ("eot", "eom") if tokens.get(k))
        detected = detect_builtin_format(metadata)
        fallback = detected or BUILTIN_FORMATS["chatml"]

        def use_fallback(reason: str) -> ChatTemplate:
            notice = f"{reason}; using {_format_phrase(fallback)} instead."
            return cls.from_builtin(
                fallback, bos, eos, extra_stop_tokens=extra, notice=notice, now=now
            )

        source = metadata.get(META_TEMPLATE)
        if not isinstance(source, str) or not source.strip():
            return use_fallback(
                f"The model has no chat template ({META_TEMPLATE} is missing)"
            )
        try:
            return cls(
                source,
                bos_token=bos,
                eos_token=eos,
                extra_stop_tokens=extra,
                fallback_format=detected,
                now=now,
            )
        except TemplateCompileError as exc:
            return use_fallback(f"The model's chat template does not compile ({exc})")

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
        from jinja2.sandbox import SecurityError
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

    def render_continuing(
        self, messages: Sequence[Message], **kwargs: Any
    ) -> str:
        """The chat rendered up to the end of its last message's text, that message left
        open (not closed by the template's end-of-turn), so that generation continues it:
        an assistant prefill.  The last message is rendered with a marker after its text
        and the rendering cut at the marker, so whatever the template writes before the
        text (role header, a reasoning block) is kept and what closes the turn is not.
        Raises TemplateRenderError when the template does not render that message."""
        if not messages:
            raise TemplateRenderError("there is no message to continue")
        last = dict(messages[-1])
        text = last.get("content")
        text = text if isinstance(text, str) else _parts_text(text)
        last["content"] = text + _CONTINUE_MARK
        rendered = self.render([*messages[:-1], last], False, **kwargs)
        cut = rendered.rfind(_CONTINUE_MARK)
        if cut == -1:
            raise TemplateRenderError(
                "the template leaves out the final assistant message, so it cannot be "
                "continued"
            )
        return rendered[:cut]

    def prompt(
        self,
        messages: Sequence[Message],
        add_generation_prompt: bool = True,
        *,
        continue_final: bool = False,
        **kwargs: Any,
    ) -> Prompt:
        """Render for generation; never fails for a template that compiled.

        Reasoning (``<think>...</think>``) is taken out of earlier assistant turns
        first: it is never fed back, whatever the template does with it.  When the
        template fails and the chat has a system message, the system text is
        folded into the first user turn and the template tried again (templates
        without a system role, Gemma's, raise for one).  If that fails too, the
        result falls back (with a notice) to the built-in format for the model's
        vocabulary, ChatML when nothing better is known.

        ``continue_final``: the last message (an assistant prefill) is left open for the
        reply to continue (``render_continuing``), instead of a generation prompt.
        """
        messages = strip_thoughts_from_history(messages)

        def render(template: ChatTemplate, msgs: Sequence[Message]) -> str:
            if continue_final:
                return template.render_continuing(msgs, **kwargs)
            return template.render(msgs, add_generation_prompt, **kwargs)

        try:
            text = render(self, messages)
            return Prompt(text, self.stop_strings, self.is_fallback, self.notice)
        except ChatTemplateError as exc:
            error = exc
        folded = fold_system_messages(messages)
        if folded is not None:
            try:
                text = render(self, folded)
                return Prompt(text, self.stop_strings, self.is_fallback, self.notice)
            except ChatTemplateError:
                pass
        if self.is_fallback:  # already a built-in format: nothing further to fall back to
            raise error
        fmt = self.fallback_format or BUILTIN_FORMATS["chatml"]
        notice = (
            f"The model's chat template failed to render ({type(error).__name__}: {error}); "
            f"using {_format_phrase(fmt)} instead."
        )
        fallback = ChatTemplate.from_builtin(
            fmt,
            self.bos_token,
            self.eos_token,
            extra_stop_tokens=self._extra_stop_tokens,
            notice=notice,
            now=self._now,
        )
        text = render(fallback, messages)
        return Prompt(text, fallback.stop_strings, True, notice)


def _format_phrase(fmt: BuiltinFormat) -> str:
    return "ChatML" if fmt.name == "chatml" else f"the built-in {fmt.label} format"


def fold_system_messages(messages: Sequence[Message]) -> list[dict] | None:
    """The chat with its system messages folded into the first user turn, the way
    templates without a system role (Gemma's) do it: the system text, a blank line,
    then the user's text.  None when there is no system message to fold."""
    system: list[str] = []
    rest: list[dict] = []
    for m in messages:
        if m.get("role") == "system":
            content = m.get("content")
            text = content if isinstance(content, str) else _parts_text(content)
            if text.strip():
                system.append(text.strip())
        else:
            rest.append(dict(m))
    if len(rest) == len(messages):
        return None
    if not system:
        return rest
    prefix = "\n\n".join(system)
    for m in rest:
        if m.get("role") == "user":
            content = m.get("content")
            if isinstance(content, (list, tuple)):
                m["content"] = [{"type": "text", "text": prefix + "\n\n"}, *content]
            else:
                # Gemma's own template: system text, blank line, the trimmed message
                # (any other value as its text: API clients send numbers and bools too)
                text = "" if content is None else str(content)
                m["content"] = f"{prefix}\n\n{text.strip()}"
            return rest
    # no user turn at all: the system text becomes one
    return [{"role": "user", "content": prefix}, *rest]


def _parts_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, Sequence) and not isinstance(content, (str, bytes)):
        out = []
        for part in content:
            if isinstance(part, str):
                out.append(part)
            elif isinstance(part, Mapping) and part.get("type") == "text":
                out.append(str(part.get("text", "")))
        return "".join(out)
    return str(content)


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
