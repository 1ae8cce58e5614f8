// avx512 kernels. Deliberately empty for now: every entry falls back to the AVX2 kernels
// (cpu/kernels_avx2.cpp), which run unchanged on AVX-512 CPUs. 512-bit / VNNI versions
// are only worth adding once they can be run against tests/test_kernels on an AVX-512
// machine (the development machines so far have none, and qemu-user lacks AVX-512).
#include "cpu/kernels.h"

namespace ember {

void register_avx512_kernels(KernelTable&) {}

}  // namespace ember
