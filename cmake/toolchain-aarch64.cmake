# Cross build for 64-bit Arm Linux with Debian/Ubuntu's gcc-aarch64-linux-gnu, used by
# scripts/test_aarch64.sh to run the native tests (the NEON kernels above all) under
# qemu-user on an x86 machine.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(EMBER_CROSS_PREFIX "aarch64-linux-gnu-" CACHE STRING "Cross tool prefix")
set(CMAKE_C_COMPILER ${EMBER_CROSS_PREFIX}gcc)
set(CMAKE_CXX_COMPILER ${EMBER_CROSS_PREFIX}g++)

# Look for libraries and headers in the target sysroot only, programs on the host.
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# Static executables: qemu-aarch64 then needs no Arm sysroot (-L) to run them.
set(CMAKE_EXE_LINKER_FLAGS_INIT "-static")

# ctest runs every test through the emulator. "-cpu max" enables every feature qemu
# models (dotprod, i8mm, ...); EMBER_QEMU_CPU picks another CPU, e.g. cortex-a72 to run
# the plain-NEON paths the way a CPU without dotprod would.
set(EMBER_QEMU_CPU "max" CACHE STRING "CPU model qemu-aarch64 emulates for the tests")
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -cpu ${EMBER_QEMU_CPU})
