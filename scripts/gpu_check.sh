#!/usr/bin/env bash
# The GPU checks of the CUDA backend, as one command for a lent GPU machine (nothing can be
# fetched there): build, the op-by-op harness against the CPU backend, compute-sanitizer
# (memcheck, racecheck) over it, whole models against the CPU (tools/gpu_check.py e2e), and
# speed (ember bench, CUDA and CPU, on a 1B-shaped Q4_K_M file; GPU_CHECK_8B=1 adds the 8B
# shape, a 16 GB F16 file on the way). Results land in $OUT (default /tmp/gpu-check).
#
# What must travel with the working tree (ignored paths, named in the device tool's carry):
#   .gpu/whl/gguf-0.19.0-py3-none-any.whl    (pip download --no-deps gguf==0.19.0 -d .gpu/whl)
#   .gpu/assets/suites/.complete and .gpu/assets/suites/vocab/ggml-vocab-{llama-bpe,llama-spm,
#   qwen2,phi-3}.gguf                        (copied from ~/.cache/ember-assets/suites)
# scripts/gpu_check.sh --prepare lays those out here.
set -uo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--prepare" ]; then
    mkdir -p .gpu/whl .gpu/assets/suites/vocab
    grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || echo '/.gpu/' >> .git/info/exclude
    python3 -m pip download -q --no-deps gguf==0.19.0 -d .gpu/whl
    src=${EMBER_ASSET_DIR:-$HOME/.cache/ember-assets}/suites
    cp "$src/.complete" .gpu/assets/suites/
    for v in llama-bpe llama-spm qwen2 phi-3; do cp "$src/vocab/ggml-vocab-$v.gguf" .gpu/assets/suites/vocab/; done
    du -sh .gpu
    exit 0
fi
OUT=${OUT:-/tmp/gpu-check}
mkdir -p "$OUT"
exec > >(tee "$OUT/log.txt") 2>&1
t0=$SECONDS
status=0
step() { echo; echo "== [$((SECONDS - t0)) s] $*"; }

step "machine"
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv || true
if ls .gpu/whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .gpu/whl/*.whl && export PYTHONPATH=/tmp/site
fi
export EMBER_ASSET_DIR=$PWD/.gpu/assets

step "build (sm_90)"
GEN=(); command -v ninja >/dev/null && GEN=(-G Ninja)
cmake -S . -B build-gpu "${GEN[@]}" -DCMAKE_BUILD_TYPE=Release -DEMBER_TESTS=ON -DEMBER_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90-real >/dev/null || exit 1
cmake --build build-gpu -j16 --target ember ember-cuda ember-test test_backend_ops test_cuda_dequant || exit 1
export EMBER_LIB=$PWD/build-gpu/libember.so

step "backends"
PYTHONPATH=$PWD/app:${PYTHONPATH:-} python3 -m ember info --backends | tee "$OUT/backends.txt"

step "op harness: CUDA against the CPU"
./build-gpu/test_backend_ops build-gpu/libember-cuda.so > "$OUT/ops_cuda.txt"; rc=$?
grep -v '^ok' "$OUT/ops_cuda.txt"; [ $rc = 0 ] || status=1

step "compute-sanitizer memcheck and racecheck over the harness"
if command -v compute-sanitizer >/dev/null; then
    for tool in memcheck racecheck; do
        EMBER_CUDA_GRAPHS=0 timeout 240 compute-sanitizer --tool $tool --error-exitcode 9 \
            ./build-gpu/test_backend_ops build-gpu/libember-cuda.so > "$OUT/sanitizer_$tool.txt" 2>&1
        rc=$?; echo "$tool: exit $rc"; tail -3 "$OUT/sanitizer_$tool.txt"; [ $rc = 0 ] || status=1
    done
fi

step "whole models: CUDA against the CPU"
PYTHONUNBUFFERED=1 python3 tools/gpu_check.py e2e "$OUT" || status=1

step "speed"
extra=(); [ "${GPU_CHECK_8B:-0}" = 1 ] && extra=(--8b)
PYTHONUNBUFFERED=1 python3 tools/gpu_check.py bench "$OUT" "${extra[@]}" || status=1
rm -rf "$OUT/models"
step "done: status $status"
exit $status
