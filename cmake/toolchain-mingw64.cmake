# Cross build for 64-bit Windows with Debian/Ubuntu's mingw-w64 (posix thread model, for
# std::thread), used by scripts/test_windows.sh: builds ember.dll and the native C++
# tests as Windows executables and runs them under wine on a Linux machine.
set(CMAKE_SYSTEM_NAME Windows)
set(CMAKE_SYSTEM_PROCESSOR x86_64)

set(EMBER_CROSS_PREFIX "x86_64-w64-mingw32-" CACHE STRING "Cross tool prefix")
set(EMBER_CROSS_SUFFIX "-posix" CACHE STRING "Cross compiler suffix (thread model)")
set(CMAKE_C_COMPILER ${EMBER_CROSS_PREFIX}gcc${EMBER_CROSS_SUFFIX})
set(CMAKE_CXX_COMPILER ${EMBER_CROSS_PREFIX}g++${EMBER_CROSS_SUFFIX})
set(CMAKE_RC_COMPILER ${EMBER_CROSS_PREFIX}windres)

set(CMAKE_FIND_ROOT_PATH /usr/x86_64-w64-mingw32)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# Static libgcc/libstdc++/winpthread: the DLL and the tests need no mingw runtime DLLs
# next to them (no DLL hunting under wine, nor on a user's machine).
set(CMAKE_EXE_LINKER_FLAGS_INIT "-static")
set(CMAKE_SHARED_LINKER_FLAGS_INIT "-static")

# ctest runs every test through wine (WINEDEBUG=-all keeps its chatter out of the logs).
set(CMAKE_CROSSCOMPILING_EMULATOR env WINEDEBUG=-all wine)
