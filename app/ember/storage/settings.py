"""User settings for the desktop app, kept as JSON in the data folder.

Unknown keys are ignored and bad values fall back to defaults, so a settings file
from another version (or edited by hand) never stops the app from starting."""
from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from .paths import data_dir
from ..placement import SELECTOR

THEMES = ("system", "light", "dark")
CONTEXT_POLICIES = ("drop_oldest", "stop")
PROMPT_MODES = ("auto", "chat", "raw")
# what a preset may set beside its system prompt (the replies' sampling and length)
PRESET_FIELDS = ("temperature", "top_k", "top_p", "min_p", "repeat_penalty", "max_new_tokens")

_LIMITS = {  # name: (min, max)
    "temperature": (0.0, 5.0),
    "top_k": (0, 1000),
    "top_p": (0.0, 1.0),
    "min_p": (0.0, 1.0),
    "repeat_penalty": (0.5, 3.0),
    "max_new_tokens": (1, 32768),
    "n_ctx": (128, 131072),
    "n_threads": (0, 256),
    "gpu_layers": (-1, 999),
    "font_size": (8, 28),
    "serve_port": (0, 65535),  # 0: a free port the system picks
}


@dataclass
class Settings:
    temperature: float = 0.7
    top_k: int = 40
    top_p: float = 0.95
    min_p: float = 0.05
    repeat_penalty: float = 1.1
    seed: int | None = None  # None: a new random seed for each reply
    max_new_tokens: int = 1024
    n_ctx: int = 4096
    n_threads: int = 0  # 0: the engine picks (physical cores)
    backend: str = "auto"  # Run on: "auto", "cpu" or a device ("cuda:0")
    gpu_layers: int = -1  # layers on that device (the output head counts as one); -1 auto
    theme: str = "system"
    font_size: int = 11
    context_policy: str = "drop_oldest"
    prompt_mode: str = "auto"  # auto: the model's chat template, raw completion without one
    system_prompt: str = ""  # default system prompt for new chats
    last_model: str | None = None
    recent_models: list[str] = field(default_factory=list)
    window_geometry: str | None = None  # hex of QWidget.saveGeometry()
    model_panel: bool = True  # the model card beside the chat (View > Model panel)
    # OpenAI-compatible endpoints added as models: {"url", "model", "api_key"}; on disk the
    # key is left out and marked "keyring": true where the platform keyring holds it
    endpoints: list[dict] = field(default_factory=list)
    serve: bool = False  # serve the loaded model on http://127.0.0.1:serve_port
    serve_port: int = 8080
    # speculative decoding with prompt-lookup drafts (engine/speculative.py): the same
    # replies, faster where they repeat the prompt (editing code, quoting a document)
    prompt_lookup: bool = False

    # ---- persistence -------------------------------------------------------------
    @staticmethod
    def default_path() -> Path:
        return data_dir() / "settings.json"

    @classmethod
    def load(cls, path: str | os.PathLike | None = None) -> Settings:
        p = Path(path) if path else cls.default_path()
        try:
            raw = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            raw = {}
        s = cls()
        if isinstance(raw, dict):
            for f in fields(cls):
                if f.name in raw:
                    setattr(s, f.name, raw[f.name])
        migrate = s._keys_from_keyring()
        s.validate()
        if migrate and p.exists():
            s.save(p)  # an older version's plain-text keys move to the keyring
        return s

    def _keys_from_keyring(self) -> bool:
        """Fills in the keys the keyring holds; True when the file still holds a key in plain
        text and a keyring could take it."""
        if not isinstance(self.endpoints, list):
            return False
        filed = [e for e in self.endpoints if isinstance(e, dict) and e.get("keyring")]
        plain = [e for e in self.endpoints if isinstance(e, dict) and e.get("api_key")]
        if not filed and not plain:
            return False  # the keyring package is not even imported
        from . import keystore
        for e in filed:
            if isinstance(e.get("url"), str):
                e["api_key"] = keystore.load(e["url"])
        return bool(plain) and keystore.available()

    def _endpoints_on_disk(self) -> tuple[list[dict], bool]:
        """The endpoints as written: keys moved to the keyring where it takes them, and
        whether a key is left in the file (which is then readable by its owner only)."""
        out, private = [], False
        for e in self.endpoints:
            e = dict(e)
            if e.get("api_key"):
                from . import keystore
                if keystore.store(e["url"], e["api_key"]):
                    e["api_key"], e["keyring"] = None, True
                else:
                    private = True
            out.append(e)
        return out, private

    def save(self, path: str | os.PathLike | None = None) -> None:
        p = Path(path) if path else self.default_path()
        p.parent.mkdir(parents=True, exist_ok=True)
        data = asdict(self)
        data["endpoints"], private = self._endpoints_on_disk()
        tmp = p.with_suffix(".tmp")
        tmp.unlink(missing_ok=True)  # os.open's mode applies only to a new file
        # O_BINARY (Windows): the text layer already writes \r\n; the C runtime would add a \r
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_BINARY", 0)
        fd = os.open(tmp, flags, 0o600 if private else 0o666)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(json.dumps(data, indent=2))
        os.replace(tmp, p)

    # ---- validation ------------------------------------------------------------------
    def validate(self) -> Settings:
        """Clamps numbers into range and resets anything of the wrong kind."""
        d = Settings()
        for f in fields(self):
            v = getattr(self, f.name)
            default = getattr(d, f.name)
            if f.name in _LIMITS:
                lo, hi = _LIMITS[f.name]
                kind = type(default)
                try:
                    v = kind(v)
                except (TypeError, ValueError):
                    v = default
                v = min(max(v, kind(lo)), kind(hi))
            setattr(self, f.name, v)
        if self.seed is not None:
            try:
                self.seed = int(self.seed)
                if self.seed < 0:
                    self.seed = None
            except (TypeError, ValueError):
                self.seed = None
        if not isinstance(self.backend, str) or not SELECTOR.match(self.backend):
            self.backend = d.backend
        for name, allowed in (("theme", THEMES),
                              ("context_policy", CONTEXT_POLICIES),
                              ("prompt_mode", PROMPT_MODES)):
            if getattr(self, name) not in allowed:
                setattr(self, name, getattr(d, name))
        if not isinstance(self.system_prompt, str):
            self.system_prompt = ""
        if self.last_model is not None and not isinstance(self.last_model, str):
            self.last_model = None
        if not isinstance(self.recent_models, list):
            self.recent_models = []
        self.recent_models = [m for m in self.recent_models if isinstance(m, str)][:10]
        if self.window_geometry is not None and not isinstance(self.window_geometry, str):
            self.window_geometry = None
        if not isinstance(self.model_panel, bool):
            self.model_panel = d.model_panel
        if not isinstance(self.prompt_lookup, bool):
            self.prompt_lookup = d.prompt_lookup
        if not isinstance(self.endpoints, list):
            self.endpoints = []
        self.endpoints = [
            {"url": e["url"], "model": str(e.get("model") or ""),
             "api_key": e.get("api_key") if isinstance(e.get("api_key"), str) else None}
            for e in self.endpoints if isinstance(e, dict) and isinstance(e.get("url"), str)][:20]
        self.serve = bool(self.serve) if isinstance(self.serve, (bool, int)) else False
        return self

    def remember_endpoint(self, url: str, model: str, api_key: str | None) -> None:
        """The endpoint's model, first in the list (once)."""
        entry = {"url": url, "model": model, "api_key": api_key}
        self.endpoints = [entry] + [e for e in self.endpoints
                                    if (e["url"], e["model"]) != (url, model)][:19]

    def forget_endpoint(self, url: str, model: str) -> None:
        """Drops the endpoint's model, and its key when no other entry of that address is
        left to use it."""
        self.endpoints = [e for e in self.endpoints if (e["url"], e["model"]) != (url, model)]
        if not any(e["url"] == url for e in self.endpoints):
            from . import keystore
            keystore.delete(url)

    def remember_model(self, path: str) -> None:
        self.last_model = path
        self.recent_models = [path] + [m for m in self.recent_models if m != path][:9]

    def forget_model(self, path: str) -> None:
        """Takes a model off the recent list (and off start-up's reopen)."""
        self.recent_models = [m for m in self.recent_models if m != path]
        if self.last_model == path:
            self.last_model = None

    def with_preset(self, params: dict | None) -> Settings:
        """A copy whose sampling and reply length are a preset's where it sets them
        (clamped as Settings' own are); everything else stays."""
        out = Settings(**{f.name: getattr(self, f.name) for f in fields(self)})
        for name, value in (params or {}).items():
            if name in PRESET_FIELDS:
                setattr(out, name, value)
        return out.validate()

    def preset_params(self) -> dict:
        """These settings' values of the fields a preset holds (a new preset's start)."""
        return {name: getattr(self, name) for name in PRESET_FIELDS}

    def sampling_params(self):
        from ..engine import SamplingParams
        return SamplingParams(temperature=self.temperature, top_k=self.top_k, top_p=self.top_p,
                              min_p=self.min_p, repeat_penalty=self.repeat_penalty,
                              seed=self.seed)
