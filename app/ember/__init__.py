"""Ember: an offline desktop chat app for local LLMs, on its own inference engine."""

__version__ = "0.1.0"
