#!/usr/bin/env python3
"""The broken-GGUF cases of tests/engine/test_gguf_robustness.py, for a test program that runs
outside pytest (the Windows build of native/tests/test_gguf_malformed, under wine).

    gguf_cases.py write DIR STARTER.gguf   # DIR/NN.gguf + DIR/expected.json
    gguf_cases.py check DIR OUTPUT          # OUTPUT: test_gguf_malformed's stdout

`check` asserts what the pytest suite asserts of the sanitizer build: one line per file,
"<status>\\t<message>", with the expected status and the expected words in the message.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "app")]


def write(out: Path, starter: str) -> int:
    import gguf

    from tests.support import gguf_writer as gw
    from tests.engine.test_gguf_robustness import cases

    r = gguf.GGUFReader(starter)

    def strings(key):
        f = r.fields[key]
        return [bytes(f.parts[i]).decode("utf-8") for i in f.data]

    tokens, merges = strings("tokenizer.ggml.tokens"), strings("tokenizer.ggml.merges")
    types = [int(r.fields["tokenizer.ggml.token_type"].parts[i][0])
             for i in r.fields["tokenizer.ggml.token_type"].data]
    out.mkdir(parents=True, exist_ok=True)
    expected = []
    for i, (name, data, status, words) in enumerate(
            cases(lambda **kw: gw.tiny_llama(tokens, merges, types, **kw))):
        (out / f"{i:02d}.gguf").write_bytes(data)
        expected.append({"file": f"{i:02d}.gguf", "name": name, "status": status,
                         "words": list(words)})
    (out / "expected.json").write_text(json.dumps(expected, indent=1))
    print(f"{len(expected)} broken files in {out}")
    return 0


def check(out: Path, output: Path) -> int:
    expected = json.loads((out / "expected.json").read_text())
    lines = [ln.rstrip("\r") for ln in output.read_text(encoding="utf-8", errors="replace")
             .splitlines()]
    failures = []
    if len(lines) != len(expected):
        failures.append(f"{len(lines)} result lines for {len(expected)} files")
    for e, line in zip(expected, lines):
        got, _, msg = line.partition("\t")
        if not got.strip().isdigit() or int(got) != e["status"]:
            failures.append(f"{e['name']}: status {got!r}, expected {e['status']} ({msg})")
        for w in e["words"]:
            if w not in msg:
                failures.append(f"{e['name']}: message {msg!r} lacks {w!r}")
    for f in failures:
        print("FAIL", f)
    print(f"{len(expected)} broken files: {'all refused as expected' if not failures else f'{len(failures)} failure(s)'}")
    return 1 if failures else 0


def main(argv: list[str]) -> int:
    if len(argv) == 3 and argv[0] == "write":
        return write(Path(argv[1]), argv[2])
    if len(argv) == 3 and argv[0] == "check":
        return check(Path(argv[1]), Path(argv[2]))
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
