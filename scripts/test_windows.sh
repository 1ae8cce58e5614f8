#!/usr/bin/env bash
# Windows proof on a Linux machine: cross-compiles the engine (ember.dll) and the native
# C++ tests for 64-bit Windows with mingw-w64 (static runtime, no DLLs to find) and runs
# them under wine, which exercises the Win32 code paths of native/ (CreateFileMapping /
# MapViewOfFile, _aligned_malloc, std::thread on winpthreads, DLL exports via EMBER_API):
#   1. every test executable with no arguments (ctest, through wine),
#   2. the tokenizer suites (EMBER_VOCAB_DIR) and the broken-GGUF cases of
#      tests/engine/test_gguf_robustness.py through the Windows test programs,
#   3. a DLL smoke test (packaging/windows/dll_smoke.c): LoadLibrary(ember.dll), the ABI
#      version, model load from a non-ASCII path, tokenize/detokenize "Hello world", a
#      greedy continuation; its output must equal the Linux build's (same program, dlopen)
#      and the greedy tokens llama.cpp's (tests/golden/greedy_Q4_1.json).
# Installs mingw-w64 and wine with apt-get when they are missing. Exits nonzero on any
# build error or test failure.
#   BUILD_DIR  build directory (default build-mingw)
#   JOBS       parallel build jobs (default 2)
#   PYTHON     python with the test requirements (default python3)
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/apt.sh

BUILD_DIR=${BUILD_DIR:-build-mingw}
JOBS=${JOBS:-2}
PY=${PYTHON:-python3}
ASSETS=${EMBER_ASSET_DIR:-$HOME/.cache/ember-assets}
export WINEDEBUG=-all WINEDLLOVERRIDES="mscoree,mshtml=" # no Mono/Gecko install prompts
unset DISPLAY WAYLAND_DISPLAY                             # wine needs no screen here
t_start=$SECONDS

need=()
command -v x86_64-w64-mingw32-g++-posix >/dev/null || need+=(g++-mingw-w64-x86-64-posix)
command -v x86_64-w64-mingw32-gcc-posix >/dev/null || need+=(gcc-mingw-w64-x86-64-posix)
command -v wine >/dev/null || need+=(wine wine64)
if ((${#need[@]})); then
    echo "== [windows] installing ${need[*]} (apt-get)"
    apt_install "${need[@]}"
fi

echo "== [windows] mingw-w64 cross build ($BUILD_DIR)"
GEN=()
command -v ninja >/dev/null && GEN=(-G Ninja)
# a build directory configured for another toolchain or generator cannot be reused
if [ -f "$BUILD_DIR/CMakeCache.txt" ] && { ! grep -q "toolchain-mingw64.cmake" "$BUILD_DIR/CMakeCache.txt" \
        || ! grep -q "^CMAKE_GENERATOR:INTERNAL=${GEN[1]:-Unix Makefiles}$" "$BUILD_DIR/CMakeCache.txt"; }; then
    rm -rf "$BUILD_DIR"
fi
cmake -S . -B "$BUILD_DIR" "${GEN[@]}" \
    -DCMAKE_TOOLCHAIN_FILE="$PWD/cmake/toolchain-mingw64.cmake" \
    -DCMAKE_BUILD_TYPE=Release -DEMBER_TESTS=ON -DEMBER_WERROR=ON >/dev/null
targets=(ember ember-test)  # ember-test: the backend test_backend_ops loads
for src in native/tests/test_*.cpp; do targets+=("$(basename "$src" .cpp)"); done
cmake --build "$BUILD_DIR" -j"$JOBS" --target "${targets[@]}"
BUILD_ABS=$(cd "$BUILD_DIR" && pwd)
x86_64-w64-mingw32-gcc-posix -std=c11 -O2 -Wall -Wextra -Werror -static -Inative/include \
    packaging/windows/dll_smoke.c -o "$BUILD_DIR/dll_smoke.exe" -lshell32
for dll in "$BUILD_DIR"/ember.dll; do
    imports=$(x86_64-w64-mingw32-objdump -p "$dll" | sed -n 's/^\s*DLL Name: //p' | tr '\n' ' ')
    echo "ember.dll imports: $imports"
    if echo "$imports" | grep -qiE "libstdc|libgcc|libwinpthread"; then
        echo "ember.dll depends on mingw runtime DLLs (expected a static runtime)" >&2; exit 1
    fi
done

echo "== [windows] wine prefix"
t0=$SECONDS
wine cmd /c ver >/dev/null 2>&1 || true  # first run creates ~/.wine (a few seconds)
echo "wine $(wine --version 2>/dev/null) ready in $((SECONDS - t0)) s"
winpath() { winepath -w "$1" 2>/dev/null; }

echo "== [windows] native tests under wine (no arguments)"
ctest --test-dir "$BUILD_DIR" --output-on-failure

echo "== [windows] test assets (starter model, tokenizer suites)"
"$PY" tools/fetch_assets.py starter >/dev/null
"$PY" tools/fetch_assets.py suites >/dev/null
STARTER="$ASSETS/starter/SmolLM2-135M-Instruct.Q4_1.gguf"

echo "== [windows] tokenizer suites + vocabulary fuzzing under wine (EMBER_VOCAB_DIR)"
VOCAB_WIN=$(winpath "$ASSETS/suites/vocab")
(cd "$BUILD_DIR" && EMBER_VOCAB_DIR="$VOCAB_WIN" wine test_vocab_suites.exe | tr -d '\r' | tail -3)
(cd "$BUILD_DIR" && EMBER_VOCAB_DIR="$VOCAB_WIN" wine test_vocab_unit.exe | tr -d '\r' | tail -1)

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

echo "== [windows] broken GGUF files refused (tests/engine/test_gguf_robustness.py cases, under wine)"
"$PY" packaging/windows/gguf_cases.py write "$WORK/broken" "$STARTER"
(cd "$WORK/broken" && wine "$BUILD_ABS/test_gguf_malformed.exe" [0-9]*.gguf > out.txt)
"$PY" packaging/windows/gguf_cases.py check "$WORK/broken" "$WORK/broken/out.txt"

echo "== [windows] DLL smoke test: LoadLibrary(ember.dll), load, tokenize, greedy"
LINUX_LIB=$(ls app/ember/_native/libember.so build/libember.so 2>/dev/null | head -1 || true)
[ -n "$LINUX_LIB" ] || { echo "no Linux libember.so to compare with (build it first)" >&2; exit 1; }
cc -std=c11 -O2 -Wall -Wextra -Werror -Inative/include packaging/windows/dll_smoke.c \
    -o "$WORK/dll_smoke" -ldl
# a model path with spaces and non-ASCII characters (UTF-8 -> UTF-16 in mapped_file.cpp)
mkdir -p "$WORK/modèle ü"
MODEL="$WORK/modèle ü/smol ✓.gguf"
ln "$STARTER" "$MODEL" 2>/dev/null || cp "$STARTER" "$MODEL"
smoke() {  # smoke ISA OUT: the same program on both systems, the same kernels
    EMBER_ISA=$1 "$WORK/dll_smoke" "$PWD/$LINUX_LIB" "$MODEL" 8 > "$WORK/linux_$1.txt"
    (cd "$BUILD_ABS" && EMBER_ISA=$1 wine dll_smoke.exe ember.dll "$(winpath "$MODEL")" 8) \
        | tr -d '\r' > "$WORK/windows_$1.txt"
    diff -u "$WORK/linux_$1.txt" "$WORK/windows_$1.txt" \
        || { echo "the Windows DLL's output ($1 kernels) differs from the Linux library's" >&2; exit 1; }
}
smoke ""        # the best kernels this CPU has (EMBER_ISA unset)
smoke scalar    # the reference kernels
sed 's/^/  windows: /' "$WORK/windows_.txt"
# llama.cpp's greedy tokens up to its first near-tie (later ones may flip with the kernels,
# as in tests/engine/test_greedy.py)
read -r k golden < <("$PY" -c 'import json; r=json.load(open("tests/golden/greedy_Q4_1.json"))["run"][0]
assert r["prompt"] == "The capital of France is"; t=r["first_near_tie"]
k=8 if t is None else min(8, t)
print(k, *r["tokens"][:8])')
got=$(sed -n 's/^greedy "The capital of France is": //p' "$WORK/windows_.txt")
[ "$k" = 0 ] || [ "$(echo "$got" | cut -d' ' -f1-"$k")" = "$(echo "$golden" | cut -d' ' -f1-"$k")" ] \
    || { echo "greedy tokens $got differ from llama.cpp's $golden before its first near-tie ($k)" >&2; exit 1; }
if [ "$got" = "$golden" ]; then
    echo "greedy tokens = llama.cpp's golden ($golden); Linux and Windows outputs identical"
else
    echo "greedy tokens = llama.cpp's up to its near-tie at $k ($got vs $golden); Linux = Windows"
fi

echo "== [windows] all Windows checks passed ($((SECONDS - t_start)) s)"
