"""Chat prompt construction: model chat templates, built-in formats, stop strings,
raw mode, and reasoning blocks in replies."""

from .builtin import BUILTIN_FORMATS, BuiltinFormat, detect_builtin_format
from .reasoning import (
    ReasoningStream,
    Reply,
    prompt_opens_thinking,
    split_reply,
    strip_thoughts,
    strip_thoughts_from_history,
)
from .stops import KNOWN_END_MARKERS, StopScanner, detect_stop_strings
from .template import (
    CHATML_TEMPLATE,
    ChatTemplate,
    ChatTemplateError,
    Prompt,
    TemplateCompileError,
    TemplateRaisedError,
    TemplateRenderError,
    UnsupportedTemplateError,
    fold_system_messages,
    raw_prompt,
)

__all__ = [
    "BUILTIN_FORMATS",
    "CHATML_TEMPLATE",
    "KNOWN_END_MARKERS",
    "BuiltinFormat",
    "ChatTemplate",
    "ChatTemplateError",
    "Prompt",
    "ReasoningStream",
    "Reply",
    "StopScanner",
    "TemplateCompileError",
    "TemplateRaisedError",
    "TemplateRenderError",
    "UnsupportedTemplateError",
    "detect_builtin_format",
    "detect_stop_strings",
    "fold_system_messages",
    "prompt_opens_thinking",
    "raw_prompt",
    "split_reply",
    "strip_thoughts",
    "strip_thoughts_from_history",
]
