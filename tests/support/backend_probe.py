"""Runs one model on one placement in a fresh process (the backend registry is read once
per process, from EMBER_BACKEND_PATH and the EMBER_TEST_BACKEND_* settings) and reports
where it ran and what it computed: tests/engine/test_backends.py drives it.

    python tests/support/backend_probe.py SPEC_JSON OUT_NPZ

SPEC: {"model": path, "backend": "test", "gpu_layers": -1, "isa": "scalar",
       "prompt": text, "contexts": 1, "n_ctx": 256}
Prints one JSON line: the placement of each context, the backend devices before, while
the contexts are open and after they are closed; OUT_NPZ gets the prompt's logits (every
position) and the next token's, per context.
"""
from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "app"))

import numpy as np  # noqa: E402
from ember import engine  # noqa: E402


def main() -> int:
    spec = json.loads(sys.argv[1])
    out = {"devices_before": [asdict(d) for d in engine.backend_devices()], "contexts": []}
    arrays = {}
    try:
        model = engine.Model(spec["model"], n_ctx=spec.get("n_ctx", 256), n_threads=spec.get("threads", 2),
                             isa=spec.get("isa", "scalar"), backend=spec.get("backend", "auto"),
                             gpu_layers=spec.get("gpu_layers", -1))
        ids = model.tokenize(spec.get("prompt", "The capital of France is"))
        fractions: list[float] = []
        cancel_at = spec.get("cancel_at")

        def progress(f: float) -> bool:
            fractions.append(f)
            return cancel_at is None or f < cancel_at
        out["progress"] = fractions
        contexts = [model.new_context(progress=progress) for _ in range(spec.get("contexts", 1))]
        out["devices_open"] = [asdict(d) for d in engine.backend_devices()]
        for i, ctx in enumerate(contexts):
            out["contexts"].append({"backend": ctx.backend, "note": ctx.backend_note,
                                    "backend_name": ctx.backend_name, "n_gpu_layers": ctx.n_gpu_layers})
            ctx.decode(ids, 0, all_logits=True)
            arrays[f"prompt{i}"] = np.array([ctx.logits(j) for j in range(len(ids))])
            ctx.decode([ids[-1]], len(ids))
            arrays[f"next{i}"] = ctx.logits(-1).copy()
            try:  # `ember bench`'s read-rate probe: the CPU's, so not where layers are offloaded
                out["contexts"][-1]["probe_bytes"] = ctx.read_bandwidth(0.0)[1]
            except engine.UnsupportedModelError as e:
                out["contexts"][-1]["probe_error"] = str(e)
        for ctx in contexts:
            ctx.close()
        out["devices_after"] = [asdict(d) for d in engine.backend_devices()]
        model.close()
    except engine.EmberError as e:
        out["error"] = str(e)
        out["error_type"] = type(e).__name__
        out["devices_after"] = [asdict(d) for d in engine.backend_devices()]
    np.savez(sys.argv[2], **arrays)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
