"""Chat prompt construction: model chat templates, built-in formats, stop strings,
raw mode, and reasoning blocks in replies."""

from .builtin import BUILTIN_FORMATS, BuiltinFormat, detect_builtin_format
from .fitting import BuiltPrompt, ContextFull, GenRequest, build_prompt
from .reasoning import ReasoningStream, Reply, prompt_opens_thinking, split_reply, strip_thoughts, strip_thoughts_from_history
from .stops import KNOWN_END_MARKERS, StopScanner, detect_stop_strings
from .streaming import CancelToken, stream_reply
from .template import CHATML_TEMPLATE, ChatTemplate, ChatTemplateError, Prompt, TemplateCompileError, TemplateRaisedError, TemplateRenderError, UnsupportedTemplateError, fold_system_messages, raw_prompt

__all__ = [
    "BUILTIN_FORMATS",
    "CHATML_TEMPLATE",
    "KNOWN_END_MARKERS",
    "BuiltPrompt",
    "BuiltinFormat",
    "CancelToken",
    "ChatTemplate",
    "ChatTemplateError",
    "ContextFull",
    "GenRequest",
    "Prompt",
    "ReasoningStream",
    "Reply",
    "StopScanner",
    "TemplateCompileError",
    "TemplateRaisedError",
    "TemplateRenderError",
    "UnsupportedTemplateError",
    "build_prompt",
    "detect_builtin_format",
    "detect_stop_strings",
    "fold_system_messages",
    "prompt_opens_thinking",
    "raw_prompt",
    "split_reply",
    "stream_reply",
    "strip_thoughts",
    "strip_thoughts_from_history",
]
