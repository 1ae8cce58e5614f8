"""The window's parts: messages and the chat view, composer, sidebar, model card,
welcome view and banners, one file per family. They hold no engine state; MainWindow
wires them."""
from __future__ import annotations

from .banner import Banner
from .basics import (
           CONTENT_MAX_WIDTH,
           AutoTextBrowser,
           ElidedLabel,
           HeaderLayout,
           fitted_text,
           text_area_width,
)
from .chat_view import ChatView
from .composer import ChatInput, ChatModelBar, Composer, QueueBar
from .message import MessageWidget
from .model_card import ModelCard
from .sidebar import ConversationDelegate, Sidebar
from .welcome import NoModelBar, WelcomeView

__all__ = ["AutoTextBrowser", "Banner", "CONTENT_MAX_WIDTH", "ChatInput", "ChatModelBar",
           "ChatView", "Composer", "ConversationDelegate", "ElidedLabel", "HeaderLayout",
           "MessageWidget", "ModelCard", "NoModelBar", "QueueBar", "Sidebar", "WelcomeView",
           "fitted_text", "text_area_width"]
