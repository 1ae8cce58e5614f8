"""Source rules for native/ that no compiler enforces.

thread_local objects with destructors are use-after-free at thread exit in the Windows
build: mingw-w64's emulated TLS frees a thread's TLS block before the C++ destructors
registered for it run (GCC bug 80816). ember.dll crashed so in a worker thread's exit
under wine. Per-thread state goes through core/thread_state.h, whose only thread_local
is a plain pointer; this test keeps new thread_local declarations from creeping back.
"""

import re
from pathlib import Path

NATIVE = Path(__file__).resolve().parent.parent / "native"
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
