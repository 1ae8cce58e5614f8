// The CPU's kernel dispatch: which instruction sets this CPU runs (CPUID / getauxval, the
// EMBER_ISA override), the tuning chosen for it (AMX, AMD, decode prefetch), and the
// per-level kernel tables, each level falling back to the one below.
#include "cpu/kernels.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <type_traits>

#include "core/error.h"
#include "core/fp16.h"
#include "cpu/kernels_ref.h"
#include "quant/types.h"

#if defined(__x86_64__) || defined(_M_X64)
#  define EMBER_X86 1
#  if defined(_MSC_VER)
#    include <intrin.h>
#  else
#    include <cpuid.h>
#  endif
#endif
#if defined(__aarch64__) || defined(_M_ARM64)
#  define EMBER_ARM64 1
#endif
#if defined(EMBER_X86) && defined(__linux__)
#  include <sys/syscall.h>
#  include <unistd.h>
#endif

namespace ember {

const char* isa_name(Isa isa) {
    switch (isa) {
        case Isa::SCALAR: return "scalar";
        case Isa::AVX2: return "avx2";
        case Isa::AVX512: return "avx512";
        case Isa::NEON: return "neon";
    }
    return "?";
}

#ifdef EMBER_X86
namespace {
void cpuid(int leaf, int sub, unsigned r[4]) {
#  if defined(_MSC_VER)
    int regs[4];
    __cpuidex(regs, leaf, sub);
    for (int i = 0; i < 4; ++i) r[i] = (unsigned)regs[i];
#  else
    __cpuid_count(leaf, sub, r[0], r[1], r[2], r[3]);
#  endif
}
unsigned long long xgetbv0() {
#  if defined(_MSC_VER)
    return _xgetbv(0);
#  else
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((unsigned long long)hi << 32) | lo;
#  endif
}
}  // namespace
#endif

Isa detect_isa() {
#ifdef EMBER_X86
    unsigned r[4];
    cpuid(0, 0, r);
    const unsigned max_leaf = r[0];
    cpuid(1, 0, r);
    const bool osxsave = (r[2] >> 27) & 1, fma = (r[2] >> 12) & 1, f16c = (r[2] >> 29) & 1,
               avx = (r[2] >> 28) & 1;
    if (!osxsave || !avx || max_leaf < 7) return Isa::SCALAR;
    const unsigned long long xcr0 = xgetbv0();
    const bool ymm_state = (xcr0 & 0x6) == 0x6;
    const bool zmm_state = (xcr0 & 0xe6) == 0xe6;
    cpuid(7, 0, r);
    const bool avx2 = (r[1] >> 5) & 1;
    const bool avx512f = (r[1] >> 16) & 1, avx512bw = (r[1] >> 30) & 1, avx512vl = (r[1] >> 31) & 1;
    const bool avx512vnni = (r[2] >> 11) & 1;  // the level's tiles use vpdpwssd (Ice Lake, Zen 4 and later)
    if (ymm_state && zmm_state && avx2 && fma && f16c && avx512f && avx512bw && avx512vl && avx512vnni)
        return Isa::AVX512;
    if (ymm_state && avx2 && fma && f16c) return Isa::AVX2;
    return Isa::SCALAR;
#elif defined(EMBER_ARM64)
    return Isa::NEON;  // Advanced SIMD is mandatory on AArch64
#else
    return Isa::SCALAR;
#endif
}

bool amx_supported() {
    static const bool ok = [] {
#if defined(EMBER_X86) && defined(__linux__) && defined(SYS_arch_prctl)
        if (detect_isa() != Isa::AVX512) return false;
        unsigned r[4];
        cpuid(7, 0, r);
        const bool tile = (r[3] >> 24) & 1, int8 = (r[3] >> 25) & 1;
        if (!tile || !int8) return false;
        const unsigned long long xcr0 = xgetbv0();
        if ((xcr0 & (3ull << 17)) != (3ull << 17)) return false;  // XTILECFG, XTILEDATA
        // Linux 5.16+: a process must ask for the tile data state before its first tile
        // instruction (ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA = 18); without it they fault
        return syscall(SYS_arch_prctl, 0x1023, 18) == 0;
#else
        return false;  // other systems: not enabled here (Windows would need no request, untested)
#endif
    }();
    return ok;
}

namespace {
std::atomic<int> g_amx_on{-1};  // -1: not decided yet (the environment decides)
}  // namespace

bool amx_enabled() {
    int on = g_amx_on.load(std::memory_order_relaxed);
    if (on < 0) {
        const char* env = std::getenv("EMBER_AMX");
        on = amx_supported() && !(env && std::string(env) == "0") ? 1 : 0;
        g_amx_on.store(on, std::memory_order_relaxed);
    }
    return on == 1;
}

void set_amx_enabled(bool on) { g_amx_on.store(on && amx_supported() ? 1 : 0, std::memory_order_relaxed); }

bool cpu_is_amd() {
#ifdef EMBER_X86
    static const bool amd = [] {
        unsigned r[4];
        cpuid(0, 0, r);
        return r[1] == 0x68747541u && r[3] == 0x69746e65u && r[2] == 0x444d4163u;  // "Auth" "enti" "cAMD"
    }();
    return amd;
#else
    return false;
#endif
}

namespace {
std::atomic<int> g_amd_tuning{-1};  // -1: as the CPU
}  // namespace

bool amd_tuning() {
    int v = g_amd_tuning.load(std::memory_order_relaxed);
    if (v < 0) {  // first use: EMBER_AMD_TUNING=0 / 1 (for measuring one choice against the other), else the CPU's
        const char* env = std::getenv("EMBER_AMD_TUNING");
        v = env && (*env == '0' || *env == '1') ? *env - '0' : cpu_is_amd() ? 1 : 0;
        int expected = -1;
        if (!g_amd_tuning.compare_exchange_strong(expected, v, std::memory_order_relaxed)) v = expected;
    }
    return v == 1;
}

void set_amd_tuning(bool on) { g_amd_tuning.store(on ? 1 : 0, std::memory_order_relaxed); }

// Software prefetch in the decode kernels (kpanel_x86.h, prefetch_ahead): 2 KiB ahead was
// the best distance on a Sapphire Rapids-class Xeon and within noise of 4-16 KiB on Zen 3.
// On Zen 4 (AMD with AVX-512) the requests slowed the AVX-512 decodes from memory, one
// thread, 48 matrices of 8192 x 2048 (bench_decode_stream, share of the probed rate): Q4_K
// 85-92% with them, 100% without; Q5_K 75% / 97%; Q6_K 64-70% / 82-86%; AVX2's Q4_K and
// Q5_K 91-94% either way. There the hardware prefetchers are left alone.
size_t decode_prefetch_default() {
#ifdef EMBER_X86
    if (cpu_is_amd() && detect_isa() == Isa::AVX512) return 0;
    return 2048;
#else
    return 0;  // the NEON kernels issue none
#endif
}

namespace detail {
std::atomic<size_t> g_decode_prefetch{~(size_t)0};  // all ones: not decided yet
}  // namespace detail
using detail::g_decode_prefetch;

size_t decode_prefetch() {
    size_t v = g_decode_prefetch.load(std::memory_order_relaxed);
    if (v == ~(size_t)0) {
        v = decode_prefetch_default();
        if (const char* env = std::getenv("EMBER_DECODE_PREFETCH"); env && *env) {
            char* end = nullptr;
            const unsigned long long b = std::strtoull(env, &end, 10);
            if (end && *end == 0 && b <= (1u << 20)) v = (size_t)b;
        }
        g_decode_prefetch.store(v, std::memory_order_relaxed);
    }
    return v;
}

void set_decode_prefetch(size_t bytes) { g_decode_prefetch.store(bytes, std::memory_order_relaxed); }

bool attention_prefetch() {
#ifdef EMBER_X86
    return decode_prefetch() != 0;
#else
    return true;  // where the decode kernels issue none by design, not measured without it
#endif
}

bool isa_supported(Isa isa) {
    const Isa best = detect_isa();
    if (isa == Isa::SCALAR) return true;
    if (isa == Isa::NEON) return best == Isa::NEON;
    if (best == Isa::NEON) return false;
    return (int)isa <= (int)best;
}

Isa active_isa() {
    const Isa best = detect_isa();
    const char* env = std::getenv("EMBER_ISA");
    if (!env || !*env) return best;
    const std::string want(env);
    for (Isa isa : {Isa::SCALAR, Isa::AVX2, Isa::AVX512, Isa::NEON})
        if (want == isa_name(isa)) return isa_supported(isa) ? isa : best;
    return best;
}

namespace {

struct Tables {
    KernelTable scalar{}, avx2{}, avx512{}, neon{};
    // A level's table is filled only where the CPU runs that level: its register function
    // lives in the level's own file, compiled for that instruction set, and the compiler
    // may use it there (an AddressSanitizer build wrote its shadow bytes with an AVX-512
    // store, so the AVX-512 table's registration died of SIGILL on Zen 3). An empty table
    // sends dot_kernels() to the level below.
    Tables() {
        decode_prefetch();  // resolved before any kernel reads it
        register_scalar_kernels(scalar);
        if (isa_supported(Isa::AVX2)) register_avx2_kernels(avx2);
        if (isa_supported(Isa::AVX512)) register_avx512_kernels(avx512);
        if (isa_supported(Isa::NEON)) register_neon_kernels(neon);
    }
};

const Tables& tables() {
    static const Tables t;  // built on first use, thread-safe
    return t;
}

const KernelTable& table_of(Isa isa) {
    switch (isa) {
        case Isa::AVX2: return tables().avx2;
        case Isa::AVX512: return tables().avx512;
        case Isa::NEON: return tables().neon;
        default: return tables().scalar;
    }
}

}  // namespace

const DotKernels* dot_kernels_exact(DType type, Isa isa) {
    const uint32_t i = (uint32_t)type;
    if (i >= kDTypeCount) return nullptr;
    const DotKernels& k = table_of(isa)[i];
    return k.vec_dot ? &k : nullptr;
}

const DotKernels& dot_kernels(DType type, Isa isa) {
    // fall back level by level: AVX-512 -> AVX2 -> scalar, NEON -> scalar
    for (Isa level = isa;; level = (level == Isa::AVX512) ? Isa::AVX2 : Isa::SCALAR) {
        if (const DotKernels* k = dot_kernels_exact(type, level)) return *k;
        if (level == Isa::SCALAR) break;
    }
    // the model loader refuses such weights (weight_type_supported), so only a bug gets here
    fail(EMBER_ERR_INTERNAL, std::string("no matrix kernel for type ") +
                                 (type_name((uint32_t)type) ? type_name((uint32_t)type) : std::to_string((int)type)));
}

bool four_row_layout_read(DType type, Isa isa) {
    const uint32_t i = (uint32_t)type;
    return i < kDTypeCount && dot_kernels(type, isa).gemm_x4 != nullptr;
}

bool weight_type_supported(DType type) { return dot_kernels_exact(type, Isa::SCALAR) != nullptr; }

const AttentionKernels& attention_kernels(Isa isa) {
    struct Levels {  // one table per x86 level and the scalar one (NEON runs the scalar table)
        AttentionKernels scalar, avx2, avx512;
        Levels() {
            scalar.dot_f32_f16 = dot_f32_f16;
            scalar.axpy_f16 = axpy_f16;
            scalar.exp_sub_sum = exp_sub_sum;
            scalar.scores = attn_scores;
            scalar.accumulate = attn_accumulate;
            scalar.swiglu = swiglu_f32;
            scalar.delta_step = delta_step_f32;
            avx2 = scalar;
            register_avx2_attention(avx2);
            avx512 = avx2;
            register_avx512_attention(avx512);
        }
    };
    static const Levels k;
    return isa == Isa::AVX512 ? k.avx512 : isa == Isa::AVX2 ? k.avx2 : k.scalar;
}

const char* isa_label(Isa isa) {
    switch (isa) {
        case Isa::AVX2: return "AVX2";
        case Isa::AVX512: return "AVX-512";
        case Isa::NEON: return "NEON";
        default: return "scalar";
    }
}

}  // namespace ember
