"""Where Ember keeps its data (models, history, settings, logs) on each platform."""
from __future__ import annotations

import os
import sys
from pathlib import Path


def data_dir() -> Path:
    """$EMBER_DATA_DIR, else the platform's per-user data folder."""
    env = os.environ.get("EMBER_DATA_DIR")
    if env:
        base = Path(env)
    elif sys.platform == "win32":
        base = Path(os.environ.get("LOCALAPPDATA", Path.home() / "AppData" / "Local")) / "Ember"
    elif sys.platform == "darwin":
        base = Path.home() / "Library" / "Application Support" / "Ember"
    else:
        base = Path(os.environ.get("XDG_DATA_HOME", Path.home() / ".local" / "share")) / "ember"
    base.mkdir(parents=True, exist_ok=True)
    return base


def models_dir() -> Path:
    d = data_dir() / "models"
    d.mkdir(parents=True, exist_ok=True)
    return d
