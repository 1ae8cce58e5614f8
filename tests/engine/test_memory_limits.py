"""A model or a context that cannot fit in memory is refused before anything is mapped or
allocated, with what it needs and what there is (native/src/core/memory.h). The limit is an
RLIMIT_AS set inside a child process, so the test needs no big file and no cgroup rights."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from ember.engine import native

ROOT = Path(__file__).resolve().parents[2]

# The child imports the engine first, then caps its address space at what it uses now
# plus HEADROOM bytes, then runs the steps and prints one JSON line per step.
CHILD = r"""
import json, os, resource, sys
sys.path.insert(0, sys.argv[1])
from ember.engine import EmberError, Model
path, headroom, steps = sys.argv[2], int(sys.argv[3]), sys.argv[4].split(",")
def vm_size():
    for line in open("/proc/self/status"):
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
used = vm_size()
resource.setrlimit(resource.RLIMIT_AS, (used + headroom, resource.RLIM_INFINITY))
model = None
for step in steps:
    try:
        if step == "load":
            model = Model(path)
            out = {"ok": True}
        else:  # ctx<N>: create a context of N tokens and decode one token in it
            ctx = model.new_context(n_ctx=int(step[3:]))
            ctx.decode([1], 0)
            out = {"ok": True, "n_ctx": ctx.n_ctx}
            ctx.close()
    except EmberError as e:
        out = {"ok": False, "status": e.status, "message": e.message}
    print(json.dumps({"step": step, **out}), flush=True)
"""

MiB = 1 << 20


def run_child(path: Path, headroom: int, steps: list[str], **env) -> list[dict]:
    r = subprocess.run(
        [sys.executable, "-c", CHILD, str(ROOT / "app"), str(path), str(headroom), ",".join(steps)],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        check=False,
    )
    assert r.returncode == 0, r.stderr
    return [json.loads(line) for line in r.stdout.splitlines()]


@pytest.fixture(scope="module")
def starter_shape(starter_model_path):
    import gguf

    r = gguf.GGUFReader(starter_model_path)

    def num(key):
        return int(r.fields[key].parts[-1][0])

    n_head = num("llama.attention.head_count")
    return {
        "n_layer": num("llama.block_count"),
        "n_head_kv": num("llama.attention.head_count_kv"),
        "head_dim": num("llama.embedding_length") // n_head,
    }


def test_a_model_larger_than_the_address_space_left_is_refused_with_its_size(starter_model_path):
    size = starter_model_path.stat().st_size
    (res,) = run_child(starter_model_path, size // 2, ["load"])
    assert not res["ok"] and res["status"] == native.ERR_OUT_OF_MEMORY
    msg = res["message"]
    assert msg.startswith("not enough memory for this model: it needs ")
    assert f"weights {size / MiB:.0f} MiB" in msg, msg  # the file's size
    assert "RLIMIT_AS" in msg and "EMBER_NO_MEMORY_CHECK=1" in msg


def test_without_the_check_the_same_load_fails_later_and_less_clearly(starter_model_path):
    size = starter_model_path.stat().st_size
    (res,) = run_child(starter_model_path, size // 2, ["load"], EMBER_NO_MEMORY_CHECK="1")
    # the mapping itself fails: proof that the message above came from the check
    assert not res["ok"] and "not enough memory for this model" not in res["message"]


def test_a_context_too_large_is_refused_and_the_model_stays_usable(
    starter_model_path, starter_shape
):
    n_big = 65536
    kv = (
        2
        * starter_shape["n_layer"]
        * starter_shape["head_dim"]
        * starter_shape["n_head_kv"]
        * 2
        * n_big
    )
    assert kv > 1024 * MiB  # so 1 GiB of headroom cannot hold it
    load, big, small = run_child(starter_model_path, 1024 * MiB, ["load", f"ctx{n_big}", "ctx512"])
    assert load["ok"]
    assert not big["ok"] and big["status"] == native.ERR_OUT_OF_MEMORY
    msg = big["message"]
    assert msg.startswith("not enough memory for this context: it needs ")
    assert f"KV cache {kv / (1 << 30):.2f} GiB for {n_big} tokens" in msg, msg
    assert "RLIMIT_AS" in msg and "try a smaller context size" in msg
    assert small == {"step": "ctx512", "ok": True, "n_ctx": 512}


def test_a_context_that_fits_is_not_refused(starter_model_path):
    # the same model and limit with the default context: no false refusal
    load, ctx = run_child(starter_model_path, 1024 * MiB, ["load", "ctx2048"])
    assert load["ok"] and ctx == {"step": "ctx2048", "ok": True, "n_ctx": 2048}
