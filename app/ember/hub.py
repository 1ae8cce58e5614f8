"""The Hugging Face catalog: search GGUF models, list a repository's files (quantization,
size, and whether it fits this machine's RAM by the app's memory estimate, read from the
file's header fetched by range), and download one into the models folder with progress,
cancel, resume and a sha256 check. Nothing here touches the network unless called: the
app calls it only when the user asks (Search, a repository clicked, Download).

The hub is HF_ENDPOINT's (EMBER_HF_ENDPOINT first, https://huggingface.co by default), so
the tests run it against a local server speaking the same API."""
from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

DEFAULT_ENDPOINT = "https://huggingface.co"
CHUNK = 1 << 18
HEADER_FIRST = 2 << 20  # the first range read for a header; grows x4 up to HEADER_MOST
HEADER_MOST = 64 << 20
TIMEOUT = 60

# (phase, done, total) -> keep going; phase "check" (hashing a part kept from before) or
# "download"
Progress = Callable[[str, int, int], bool]

# "-Q4_K_M", ".q8_0", "-IQ3_XXS", "-F16", "-BF16", "-MXFP4_MOE" before ".gguf"
_QUANT = re.compile(r"(?:^|[.\-_])((?:I?Q\d+(?:_[0-9A-Z]+)*)|BF16|F16|F32|MXFP4(?:_MOE)?)"
                    r"(?=[.\-_]|$)", re.IGNORECASE)
_SPLIT = re.compile(r"-(\d{5})-of-(\d{5})(?=\.gguf$)", re.IGNORECASE)


class HubError(OSError):
    """The hub could not be reached or answered something else than expected; the message
    is a sentence for the user."""


class Cancelled(Exception):
    pass


@dataclass(frozen=True)
class RepoHit:
    repo_id: str
    downloads: int = 0
    likes: int = 0


@dataclass(frozen=True)
class HubFile:
    repo_id: str
    path: str  # inside the repository
    size: int
    sha256: str | None  # the LFS object id, which is the content's sha256

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]

    @property
    def quant(self) -> str:
        """ "Q4_K_M" from the file name, "" where it does not say."""
        stem = _SPLIT.sub("", self.name)
        stem = stem[:-5] if stem.lower().endswith(".gguf") else stem
        hits = _QUANT.findall(stem)
        return hits[-1].upper() if hits else ""

    @property
    def split_part(self) -> tuple[int, int] | None:
        """(n, of) for one part of a split model ("-00001-of-00003.gguf")."""
        m = _SPLIT.search(self.name)
        return (int(m.group(1)), int(m.group(2))) if m else None


def endpoint() -> str:
    return (os.environ.get("EMBER_HF_ENDPOINT") or os.environ.get("HF_ENDPOINT")
            or DEFAULT_ENDPOINT).rstrip("/")


def _quote(repo_id: str) -> str:
    return "/".join(urllib.parse.quote(part, safe="") for part in repo_id.split("/"))


class Hub:
    """One hub's API. opener: urllib.request.urlopen's signature (Request, timeout)."""

    def __init__(self, base: str | None = None, token: str | None = None, opener=None):
        self.base = (base or endpoint()).rstrip("/")
        self.token = token if token is not None else os.environ.get("HF_TOKEN")
        self.opener = opener or _urlopen

    # ---- requests -------------------------------------------------------------------
    def _request(self, url: str, headers: dict | None = None) -> urllib.request.Request:
        h = {"User-Agent": "Ember", **(headers or {})}
        if self.token:
            h["Authorization"] = f"Bearer {self.token}"
        return urllib.request.Request(url, headers=h)

    def _open(self, url: str, headers: dict | None = None):
        try:
            return self.opener(self._request(url, headers), timeout=TIMEOUT)
        except urllib.error.HTTPError as e:
            raise HubError(_http_reason(e, url)) from e
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", None) or e
            raise HubError(f"Could not reach {self.host}: {reason}.") from e

    def _json(self, url: str):
        with self._open(url) as r:
            try:
                return json.loads(r.read().decode("utf-8"))
            except ValueError as e:
                raise HubError(f"{self.host} answered something that is not the hub's "
                               "API (not JSON).") from e

    @property
    def host(self) -> str:
        return urllib.parse.urlsplit(self.base).netloc or self.base

    def file_url(self, f: HubFile) -> str:
        return (f"{self.base}/{_quote(f.repo_id)}/resolve/main/"
                + "/".join(urllib.parse.quote(p) for p in f.path.split("/")))

    # ---- the catalog --------------------------------------------------------------------
    def search(self, query: str, limit: int = 30) -> list[RepoHit]:
        """Repositories with GGUF files matching query, most downloaded first."""
        q = urllib.parse.urlencode({"search": query.strip(), "filter": "gguf",
                                    "sort": "downloads", "direction": "-1",
                                    "limit": str(limit)})
        data = self._json(f"{self.base}/api/models?{q}")
        if not isinstance(data, list):
            raise HubError(f"{self.host} answered the search with something unexpected.")
        return [RepoHit(str(d["id"]), int(d.get("downloads") or 0), int(d.get("likes") or 0))
                for d in data if isinstance(d, dict) and d.get("id")]

    def files(self, repo_id: str) -> list[HubFile]:
        """The repository's .gguf files, by name."""
        data = self._json(f"{self.base}/api/models/{_quote(repo_id)}/tree/main?recursive=1")
        if not isinstance(data, list):
            raise HubError(f"{self.host} answered the file list with something unexpected.")
        out = []
        for d in data:
            if not (isinstance(d, dict) and d.get("type") == "file"
                    and str(d.get("path", "")).lower().endswith(".gguf")):
                continue
            lfs = d.get("lfs") if isinstance(d.get("lfs"), dict) else {}
            sha = lfs.get("oid") or lfs.get("sha256")
            out.append(HubFile(repo_id, str(d["path"]), int(lfs.get("size") or d.get("size") or 0),
                               str(sha) if sha else None))
        return sorted(out, key=lambda f: f.path.lower())

    # ---- a file's header and memory --------------------------------------------------------
    def header_info(self, f: HubFile) -> dict:
        """The model card's facts for f (ember.model_card.describe_model), from its header
        read by range requests into a sparse file as large as f: the engine's own parser,
        without downloading the weights."""
        from .engine import EmberError, Model, ModelFormatError
        from .model_card import describe_model
        want = HEADER_FIRST
        with tempfile.TemporaryDirectory(prefix="ember-hub-") as tmp:
            path = Path(tmp) / f.name
            while True:
                head = self._read_range(f, 0, min(want, f.size) if f.size else want)
                with open(path, "wb") as out:
                    out.write(head)
                    if f.size > len(head):
                        out.truncate(f.size)  # sparse: no disk for the rest
                try:
                    model = Model(str(path), metadata_only=True)
                except ModelFormatError:
                    if len(head) >= f.size or want >= HEADER_MOST:
                        raise
                    want *= 4  # a header longer than the part read (a large vocabulary)
                    continue
                except EmberError:
                    raise
                try:
                    info = describe_model(model, path)
                finally:
                    model.close()
                info.update(path=self.file_url(f), file_name=f.name)
                return info

    def _read_range(self, f: HubFile, start: int, n: int) -> bytes:
        with self._open(self.file_url(f), {"Range": f"bytes={start}-{start + n - 1}"}) as r:
            return r.read(n)  # a server ignoring Range sends it all: n bytes are enough

    # ---- download -------------------------------------------------------------------------
    def download(self, f: HubFile, folder: str | Path, progress: Progress | None = None) -> Path:
        """Downloads f into folder as f.name, by way of f.name + ".part": a part left by a
        cancelled or broken download is resumed (its bytes hashed again, the rest asked for
        by range). Checked against f's sha256 before it takes its name; a mismatch removes
        the part. Cancelled (progress returned False) keeps the part to resume."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        dest = folder / f.name
        if dest.exists():
            raise HubError(f"{f.name} is already in {folder}.")
        part = folder / (f.name + ".part")
        h = hashlib.sha256()
        done = part.stat().st_size if part.exists() else 0
        if f.size and done > f.size:
            part.unlink()
            done = 0
        if done:
            _hash_file(part, h, done, f.size, progress)
        try:
            if not f.size or done < f.size:
                done, h = self._fetch_rest(f, part, h, done, progress)
        except OSError as e:
            if isinstance(e, HubError):
                raise
            raise HubError(f"The download stopped at {_mb(done)}: {e}. Download it again "
                           "to go on from there.") from e
        if f.size and done != f.size:
            raise HubError(f"The download stopped at {_mb(done)} of {_mb(f.size)}. "
                           "Download it again to go on from there.")
        if f.sha256 and h.hexdigest() != f.sha256.lower():
            part.unlink(missing_ok=True)
            raise HubError(f"The downloaded {f.name} is not the file the hub lists (sha256 "
                           f"{h.hexdigest()[:16]}…, expected {f.sha256[:16]}…): it was "
                           "damaged on the way. Download it again.")
        os.replace(part, dest)
        return dest

    def _fetch_rest(self, f: HubFile, part: Path, h, done: int, progress):
        """Appends what the part lacks; returns the bytes held and their hash (a fresh one
        where the server sent the whole file again instead of the range)."""
        headers = {"Range": f"bytes={done}-"} if done else {}
        with self._open(self.file_url(f), headers) as r:
            if done and getattr(r, "status", 200) != 206:  # the range was not honoured
                h, done = hashlib.sha256(), 0
            total = f.size or int(r.headers.get("Content-Length") or 0) + done
            with open(part, "ab" if done else "wb") as out:
                if progress and not progress("download", done, total):
                    raise Cancelled()
                while chunk := r.read(CHUNK):
                    out.write(chunk)
                    h.update(chunk)
                    done += len(chunk)
                    if progress and not progress("download", done, total):
                        raise Cancelled()
        return done, h


def _hash_file(path: Path, h, n: int, total: int, progress) -> None:
    with open(path, "rb") as f:
        seen = 0
        while seen < n and (chunk := f.read(min(CHUNK * 16, n - seen))):
            h.update(chunk)
            seen += len(chunk)
            if progress and not progress("check", seen, total or n):
                raise Cancelled()


def _mb(n: int) -> str:
    return f"{n / 2**20:.0f} MB"


def _http_reason(e: urllib.error.HTTPError, url: str) -> str:
    if e.code in (401, 403):
        return ("The hub asks for a login to get this (a gated or private repository): "
                "accept its terms on the website and set HF_TOKEN.")
    if e.code == 404:
        return "The hub has no such repository or file (was it renamed or removed?)."
    return f"The hub answered {e.code} {e.reason} for {urllib.parse.urlsplit(url).path}."


def _urlopen(request, timeout: float = TIMEOUT):
    from .starter import urlopen  # certifi's CA bundle where it is installed
    return urlopen(request, timeout=timeout)
