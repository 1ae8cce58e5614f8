#!/usr/bin/env bash
# Cross-compiles Ember's native C++ tests for 64-bit Arm Linux and runs them under
# qemu-user, so the NEON kernels are checked against the scalar reference on x86 CI:
#   1. every test under `qemu-aarch64 -cpu max` (ctest; dotprod, i8mm, ... available),
#   2. the kernel tests again under a CPU without dotprod (cortex-a72), which makes the
#      run-time detection pick the plain-NEON kernels.
# Installs the cross compiler and qemu with apt-get when they are missing. Exits nonzero
# on any build error or test failure.
#   BUILD_DIR  build directory (default build-aarch64)
#   JOBS       parallel build jobs (default 2)
#   AARCH64_CXX_FLAGS  optimisation flags of the cross build (default -O2 -DNDEBUG)
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/apt.sh

BUILD_DIR=${BUILD_DIR:-build-aarch64}
JOBS=${JOBS:-2}

need=()
command -v aarch64-linux-gnu-g++ >/dev/null || need+=(g++-aarch64-linux-gnu)
command -v qemu-aarch64 >/dev/null || need+=(qemu-user)
if ((${#need[@]})); then
    echo "== installing ${need[*]}"
    apt_install "${need[@]}"
fi

echo "== aarch64 cross build ($BUILD_DIR)"
GEN=()
command -v ninja >/dev/null && GEN=(-G Ninja)
# a build directory configured for another toolchain cannot be switched in place
if [ -f "$BUILD_DIR/CMakeCache.txt" ] && ! grep -q "toolchain-aarch64.cmake" "$BUILD_DIR/CMakeCache.txt"; then
    rm -rf "$BUILD_DIR"
fi
# -O2, not Release's -O3: Debian 12's aarch64 GCC 12.2 crashes (ICE in
# vect_transform_reduction) vectorizing a std::fmax reduction over a division, as in
# native/tests/test_kernels.cpp. The kernels are intrinsics, so what is tested is the same.
cmake -S . -B "$BUILD_DIR" "${GEN[@]}" \
    -DCMAKE_TOOLCHAIN_FILE="$PWD/cmake/toolchain-aarch64.cmake" \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="${AARCH64_CXX_FLAGS:--O2 -DNDEBUG}" \
    -DEMBER_TESTS=ON -DEMBER_WERROR=ON >/dev/null
# only the tests: the shared library is for the host's Python package (and the test
# executables are static, so test_backend_ops, which dlopens a backend, reports itself skipped)
targets=()
for src in native/tests/test_*.cpp; do targets+=("$(basename "$src" .cpp)"); done
cmake --build "$BUILD_DIR" -j"$JOBS" --target "${targets[@]}"
rm -f "$BUILD_DIR/libember-test.so"  # from an older layout of this script

echo "== native tests under qemu-aarch64 -cpu max"
ctest --test-dir "$BUILD_DIR" --output-on-failure

echo "== kernel tests under qemu-aarch64 -cpu cortex-a72 (no dotprod: plain NEON kernels)"
for t in test_neon_kernels test_kernels; do
    if [ -x "$BUILD_DIR/$t" ]; then
        qemu-aarch64 -cpu cortex-a72 "$BUILD_DIR/$t"
    fi
done
echo "== aarch64 tests passed"
