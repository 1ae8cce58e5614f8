"""Source rules for native/ that no compiler enforces.

thread_local objects with destructors are use-after-free at thread exit in the Windows
build: mingw-w64's emulated TLS frees a thread's TLS block before the C++ destructors
registered for it run (GCC bug 80816). ember.dll crashed so in a worker thread's exit
under wine. Per-thread state goes through core/thread_state.h, whose only thread_local
is a plain pointer; this test keeps new thread_local declarations from creeping back.
"""

import re
from pathlib import Path

NATIVE = Path(__file__).resolve().parents[2] / "native"
ALLOWED = {"src/core/thread_state.cpp": re.compile(r"thread_local\s+\w+\s*\*\s*\w+\s*=\s*nullptr;")}


def _code(text):
    """The text without // and /* */ comments (string literals are rare enough here)."""
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def test_thread_local_only_as_plain_pointer_in_thread_state():
    found = []
    for path in sorted(NATIVE.rglob("*")):
        if path.suffix not in {".cpp", ".h", ".cu", ".cuh", ".mm", ".c"}:
            continue
        rel = path.relative_to(NATIVE).as_posix()
        for line in _code(path.read_text(encoding="utf-8")).splitlines():
            if "thread_local" not in line:
                continue
            allowed = ALLOWED.get(rel)
            if not (allowed and allowed.search(line)):
                found.append(f"{rel}: {line.strip()}")
    assert not found, "thread_local outside core/thread_state.cpp's plain pointer:\n" + "\n".join(found)


def test_the_rule_sees_a_declaration():
    # the scan must flag the pattern that crashed (a vector with a destructor)
    line = _code("    thread_local std::vector<float> wide;  // grows once per thread\n")
    assert "thread_local" in line and not ALLOWED["src/core/thread_state.cpp"].search(line)
    assert ALLOWED["src/core/thread_state.cpp"].search("thread_local ThreadState* t_state = nullptr;")


# The layers of native/src, as docs/DESIGN.md's map draws them: a folder may include the
# folders listed for it (and itself), nothing else. core knows no weight format and no
# backend; the backend layer knows tensors and graphs, never a model.
LAYERS = {
    "core": set(),
    "gguf": {"core"},
    "quant": {"core"},
    "text": {"core", "gguf"},
    "sample": {"core", "text"},
    "cpu": {"core", "quant"},
    "backend": {"core", "cpu", "quant"},
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/[^"]+"', re.M)


def _layer_offenders(root: Path) -> list[str]:
    found = []
    for layer, allowed in LAYERS.items():
        for path in sorted((root / "src" / layer).rglob("*")):
            if path.suffix not in {".cpp", ".h", ".cu", ".cuh", ".mm", ".c"}:
                continue
            for folder in INCLUDE.findall(_code(path.read_text(encoding="utf-8"))):
                if folder != layer and folder not in allowed:
                    found.append(f"{path.relative_to(root).as_posix()} includes {folder}/")
    return found


def test_each_native_layer_includes_only_the_layers_below_it():
    offenders = _layer_offenders(NATIVE)
    assert not offenders, "includes across the layers:\n" + "\n".join(offenders)


def test_the_layer_rule_sees_an_include(tmp_path):
    # core including the codecs' header is what the rule exists to catch
    (tmp_path / "src" / "core").mkdir(parents=True)
    (tmp_path / "src" / "core" / "tensor.h").write_text('#include "core/dtype.h"\n#include "quant/types.h"\n')
    assert _layer_offenders(tmp_path) == ["src/core/tensor.h includes quant/"]
