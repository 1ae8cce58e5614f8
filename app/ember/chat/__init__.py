"""Chat prompt construction: model chat templates, stop strings, raw mode."""

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
    raw_prompt,
)

__all__ = [
    "CHATML_TEMPLATE",
    "KNOWN_END_MARKERS",
    "ChatTemplate",
    "ChatTemplateError",
    "Prompt",
    "StopScanner",
    "TemplateCompileError",
    "TemplateRaisedError",
    "TemplateRenderError",
    "UnsupportedTemplateError",
    "detect_stop_strings",
    "raw_prompt",
]
