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

namespace {

// groups [g0, g1) of four rows of ws bytes, nb blocks of BB bytes each (BB a constant:
// the copies compile to a few moves instead of a call per block)
template <size_t BB>
void interleave_groups(const uint8_t* src, uint8_t* out, size_t ws, int64_t nb, int64_t g0, int64_t g1) {
    for (int64_t g = g0; g < g1; ++g) {
        const uint8_t* r0 = src + (size_t)(4 * g) * ws;
        uint8_t* o = out + (size_t)(4 * g) * ws;
        for (int64_t i = 0; i < nb; ++i, o += 4 * BB)
            for (int rr = 0; rr < 4; ++rr) std::memcpy(o + rr * BB, r0 + (size_t)rr * ws + (size_t)i * BB, BB);
    }
}

// Q4_0's group block (kernels.h): value e of row r sits in step k = (e % 16) / 4, at byte
// 16 (e / 16) + 4 r + e % 4 of it; steps 0 and 2 in the low nibbles of the two 32-byte
// halves, 1 and 3 in their high nibbles.
inline int q4_0_group_byte(int r, int e) { return 16 * (e / 16) + 4 * r + e % 4; }
inline int q4_0_step(int e) { return (e % 16) / 4; }

// A Q4_0 block's value e (0..31): low nibbles are values 0-15, high nibbles 16-31.
inline uint8_t q4_0_value(const BlockQ4_0& b, int e) {
    return e < 16 ? (uint8_t)(b.qs[e] & 0x0f) : (uint8_t)(b.qs[e - 16] >> 4);
}

// Byte p of a steps pair (steps 2h and 2h + 1 of a 32-value group) from the four rows'
// values: value(r, e) for e of row r. Lane L = p / 16, row r = p % 16 / 4, byte b = p % 4
// hold values 16 L + 8 h + b (low nibble) and 16 L + 8 h + 4 + b (high nibble).
template <class V>
inline void put_step_pairs(uint8_t* out, const V& value) {
    for (int h = 0; h < 2; ++h)
        for (int L = 0; L < 2; ++L)
            for (int r = 0; r < 4; ++r)
                for (int b = 0; b < 4; ++b)
                    out[32 * h + 16 * L + 4 * r + b] =
                        (uint8_t)(value(r, 16 * L + 8 * h + b) | (value(r, 16 * L + 8 * h + 4 + b) << 4));
}

void q4_0_groups(const uint8_t* src, uint8_t* out, size_t ws, int64_t nb, int64_t g0, int64_t g1) {
    for (int64_t g = g0; g < g1; ++g) {
        const uint8_t* rows = src + (size_t)(4 * g) * ws;
        uint8_t* o = out + (size_t)(4 * g) * ws;
        for (int64_t i = 0; i < nb; ++i, o += 4 * sizeof(BlockQ4_0)) {
            for (int r = 0; r < 4; ++r) {
                const BlockQ4_0& b = reinterpret_cast<const BlockQ4_0*>(rows + (size_t)r * ws)[i];
                std::memcpy(o + 2 * r, &b.d, 2);
                // put_step_pairs on Q4_0's nibbles: values 0-15 are the low nibbles of
                // qs[0..15], 16-31 their high nibbles, so each byte pair makes two bytes
                for (int h = 0; h < 2; ++h)
                    for (int k = 0; k < 4; ++k) {
                        const uint8_t x = b.qs[8 * h + k], y = b.qs[8 * h + 4 + k];
                        o[8 + 32 * h + 4 * r + k] = (uint8_t)((x & 0x0f) | (y << 4));
                        o[8 + 32 * h + 16 + 4 * r + k] = (uint8_t)((x >> 4) | (y & 0xf0));
                    }
            }
        }
    }
}

// Q4_K's group super-block (kernels.h): value e of 32-group g of row r is step
// q4_0_step(e) of group g at byte q4_0_group_byte(r, e), the steps nibble packed in pairs
// from byte 64; scale / min j = 4g + r: low four bits in the low / high nibble of byte
// 16 + j, top two bits (scale's, then min's above them) in the low nibble of byte 48 + j
// (j < 16) or the high nibble of byte 48 + j - 16.
inline uint8_t q4_k_value(const BlockQ4_K& b, int g, int e) {
    return (uint8_t)((b.qs[32 * (g / 2) + e] >> (4 * (g % 2))) & 0x0f);
}
// the twelve scale bytes from the eight 6-bit scales and mins (k_scale_min_ref's inverse)
void q4_k_pack_scales(const int sc[8], const int mn[8], uint8_t q[12]) {
    for (int j = 0; j < 4; ++j) {
        q[j] = (uint8_t)(sc[j] | ((sc[j + 4] >> 4) << 6));
        q[j + 4] = (uint8_t)(mn[j] | ((mn[j + 4] >> 4) << 6));
        q[j + 8] = (uint8_t)((sc[j + 4] & 0x0f) | ((mn[j + 4] & 0x0f) << 4));
    }
}

// Q5_K's value e (0..31, five bits) of 32-group g: the low four bits as Q4_K's, the fifth
// bit g of qh[e]
inline uint8_t q4_k_value(const BlockQ5_K& b, int g, int e) {
    return (uint8_t)((b.qs[32 * (g / 2) + e] >> (4 * (g % 2))) & 0x0f);
}
inline uint8_t q5_k_value(const BlockQ5_K& b, int g, int e) {
    return (uint8_t)(q4_k_value(b, g, e) | (((b.qh[e] >> g) & 1) << 4));
}
// Q5_K's values in its group super-block (kernels.h): group pair q's 160 bytes from 64 +
// 160q are X X Y Y W (groups 2q, 2q + 1). Step k of group g at byte p of the step:
// steps 0 and 1 in the low five bits of X and Y, steps 2 and 3 split: their bits 0-2 in
// the top three bits of X and Y, their bits 3-4 in W (bits 4 (g % 2) + 0..1 for step 2,
// 4 (g % 2) + 2..3 for step 3)
inline int q5_k_x(int g) { return 64 + 160 * (g / 2) + 32 * (g % 2); }
inline int q5_k_w(int g) { return 64 + 160 * (g / 2) + 128; }
inline unsigned q5_k_get_value(const uint8_t* gb, int g, int r, int e) {
    const int k = q4_0_step(e), p = q4_0_group_byte(r, e);
    const unsigned x = gb[q5_k_x(g) + 64 * (k % 2) + p];
    if (k < 2) return x & 31;
    return (x >> 5) | (((gb[q5_k_w(g) + p] >> (4 * (g % 2) + 2 * (k - 2))) & 3) << 3);
}

// All of a group super-block's Q5_K values at once, each output byte written once: the
// four rows' values unpacked first (u[r][g][e], loops the compiler vectorizes), then X, Y
// and W byte by byte (one value at a time, a read-modify-write each, the copy of a 1B
// Q5_K_M file took 10.7 s in the background).
inline void q5_k_put_values(const BlockQ5_K* const b4[4], uint8_t* gb) {
    uint8_t u[4][8][32];
    for (int r = 0; r < 4; ++r)
        for (int g = 0; g < 8; ++g)
            for (int e = 0; e < 32; ++e)
                u[r][g][e] = q5_k_value(*b4[r], g, e);
    for (int q = 0; q < 4; ++q) {
        uint8_t* const v = gb + 64 + 160 * q;
        for (int p = 0; p < 32; ++p) {  // byte p of a step: row r, values 16 L + 4 k + b
            const int L = p / 16, r = p % 16 / 4, b = p % 4;
            uint8_t w = 0;
            for (int h = 0; h < 2; ++h) {
                const uint8_t* const x = u[r][2 * q + h] + 16 * L + b;  // x[4 k]: step k's value
                v[32 * h + p] = (uint8_t)(x[0] | ((x[8] & 7) << 5));
                v[64 + 32 * h + p] = (uint8_t)(x[4] | ((x[12] & 7) << 5));
                w = (uint8_t)(w | ((x[8] >> 3) << (4 * h)) | ((x[12] >> 3) << (4 * h + 2)));
            }
            v[128 + p] = w;
        }
    }
}

template <class B>
void q45_k_groups(const uint8_t* src, uint8_t* out, size_t ws, int64_t nb, int64_t g0, int64_t g1) {
    for (int64_t gr = g0; gr < g1; ++gr) {
        const uint8_t* rows = src + (size_t)(4 * gr) * ws;
        uint8_t* o = out + (size_t)(4 * gr) * ws;
        for (int64_t i = 0; i < nb; ++i, o += 4 * sizeof(B)) {
            std::memset(o, 0, 4 * sizeof(B));
            for (int r = 0; r < 4; ++r) {
                const auto& b = reinterpret_cast<const B*>(rows + (size_t)r * ws)[i];
                std::memcpy(o + 2 * r, &b.d, 2);
                std::memcpy(o + 8 + 2 * r, &b.dmin, 2);
                for (int g = 0; g < 8; ++g) {
                    int sc, mn;
                    k_scale_min_ref(b.scales, g, &sc, &mn);
                    const int j = 4 * g + r;
                    o[16 + j] = (uint8_t)((sc & 0x0f) | ((mn & 0x0f) << 4));
                    o[48 + j % 16] |= (uint8_t)(((sc >> 4) | ((mn >> 4) << 2)) << (4 * (j / 16)));
                }
            }
            const B* b4[4];
            for (int r = 0; r < 4; ++r) b4[r] = reinterpret_cast<const B*>(rows + (size_t)r * ws) + i;
            if constexpr (std::is_same<B, BlockQ5_K>::value) {
                q5_k_put_values(b4, o);
            } else {
                for (int g = 0; g < 8; ++g)
                    put_step_pairs(o + 64 + 64 * g, [&](int r, int e) { return q4_k_value(*b4[r], g, e); });
            }
        }
    }
}

template <class B>
void q45_k_block(const uint8_t* gb, int r, B& b) {
    std::memset(&b, 0, sizeof b);
    std::memcpy(&b.d, gb + 2 * r, 2);
    std::memcpy(&b.dmin, gb + 8 + 2 * r, 2);
    int sc[8], mn[8];
    for (int g = 0; g < 8; ++g) {
        const int j = 4 * g + r;
        const int hi = (gb[48 + j % 16] >> (4 * (j / 16))) & 0x0f;
        sc[g] = (gb[16 + j] & 0x0f) | ((hi & 3) << 4);
        mn[g] = (gb[16 + j] >> 4) | ((hi >> 2) << 4);
        for (int e = 0; e < 32; ++e) {
            unsigned u;
            if constexpr (std::is_same<B, BlockQ5_K>::value) {
                u = q5_k_get_value(gb, g, r, e);
                b.qh[e] |= (uint8_t)((u >> 4) << g);
            } else {
                const int k = q4_0_step(e), at = q4_0_group_byte(r, e);
                u = (gb[64 + 64 * g + 32 * (k / 2) + at] >> (4 * (k % 2))) & 0x0f;
            }
            b.qs[32 * (g / 2) + e] |= (uint8_t)((u & 0x0f) << (4 * (g % 2)));
        }
    }
    q4_k_pack_scales(sc, mn, b.scales);
}

// Q6_K's group super-block (kernels.h): value e of 32-group g of row r is step
// q4_0_step(e) of group g at byte q4_0_group_byte(r, e) of its three 32-byte vectors
// X, Y, Z (q6_k_vector): steps 0, 1 and 3 in their low six bits, step 2's two-bit pieces
// (low, middle, top) in their top two bits. Scale 2g + h of row r at byte 8 + 8g + 4h + r.
// Byte offset of group g's X (w = 0), Y (1) or Z (2): groups 2q and 2q + 1 side by side,
// X X Y Y Z Z, so that one 64-byte load holds a pair's X, Y or Z
inline int q6_k_vector(int g, int w) { return 72 + 192 * (g / 2) + 64 * w + 32 * (g % 2); }

// Row r's 32 values (0..63, before the -32) of 32-group g of a Q6_K block: ql holds their
// low four bits (groups 0-1 and 4-5 in the low nibbles), qh their top two bits.
inline void q6_k_group_values(const BlockQ6_K& b, int g, uint8_t u[32]) {
    const int n = g / 4, q = g % 4;
    const uint8_t* ql = b.ql + 64 * n + 32 * (q & 1);
    const uint8_t* qh = b.qh + 32 * n;
    for (int e = 0; e < 32; ++e) u[e] = (uint8_t)(((ql[e] >> (q < 2 ? 0 : 4)) & 0x0f) | (((qh[e] >> (2 * q)) & 3) << 4));
}
inline void q6_k_put_group_values(BlockQ6_K& b, int g, const uint8_t u[32]) {  // b's values zeroed first
    const int n = g / 4, q = g % 4;
    uint8_t* ql = b.ql + 64 * n + 32 * (q & 1);
    uint8_t* qh = b.qh + 32 * n;
    for (int e = 0; e < 32; ++e) {
        ql[e] |= (uint8_t)((u[e] & 0x0f) << (q < 2 ? 0 : 4));
        qh[e] |= (uint8_t)((u[e] >> 4) << (2 * q));
    }
}

void q6_k_groups(const uint8_t* src, uint8_t* out, size_t ws, int64_t nb, int64_t g0, int64_t g1) {
    for (int64_t gr = g0; gr < g1; ++gr) {
        const uint8_t* rows = src + (size_t)(4 * gr) * ws;
        uint8_t* o = out + (size_t)(4 * gr) * ws;
        for (int64_t i = 0; i < nb; ++i, o += 4 * sizeof(BlockQ6_K)) {
            for (int r = 0; r < 4; ++r) {
                const BlockQ6_K& b = reinterpret_cast<const BlockQ6_K*>(rows + (size_t)r * ws)[i];
                std::memcpy(o + 2 * r, &b.d, 2);
                for (int j = 0; j < 16; ++j) o[8 + 8 * (j / 2) + 4 * (j % 2) + r] = (uint8_t)b.scales[j];
                for (int g = 0; g < 8; ++g) {
                    uint8_t u[32];
                    q6_k_group_values(b, g, u);
                    // byte 16 L + 4 r + c of X, Y, Z: values 16 L + 4 k + c of steps k = 0, 1, 3
                    // in the low six bits, step 2's bits 0-1, 2-3, 4-5 in the top two
                    uint8_t* x = o + q6_k_vector(g, 0) + 4 * r;
                    uint8_t* y = o + q6_k_vector(g, 1) + 4 * r;
                    uint8_t* z = o + q6_k_vector(g, 2) + 4 * r;
                    for (int L = 0; L < 2; ++L)
                        for (int c = 0; c < 4; ++c) {
                            const uint8_t* v = u + 16 * L + c;
                            x[16 * L + c] = (uint8_t)(v[0] | ((v[8] & 3) << 6));
                            y[16 * L + c] = (uint8_t)(v[4] | (((v[8] >> 2) & 3) << 6));
                            z[16 * L + c] = (uint8_t)(v[12] | ((v[8] >> 4) << 6));
                        }
                }
            }
        }
    }
}

void q6_k_block(const uint8_t* gb, int r, BlockQ6_K& b) {
    std::memset(&b, 0, sizeof b);
    std::memcpy(&b.d, gb + 2 * r, 2);
    for (int j = 0; j < 16; ++j) b.scales[j] = (int8_t)gb[8 + 8 * (j / 2) + 4 * (j % 2) + r];
    for (int g = 0; g < 8; ++g) {
        uint8_t u[32];
        const uint8_t* x = gb + q6_k_vector(g, 0) + 4 * r;
        const uint8_t* y = gb + q6_k_vector(g, 1) + 4 * r;
        const uint8_t* z = gb + q6_k_vector(g, 2) + 4 * r;
        for (int L = 0; L < 2; ++L)
            for (int c = 0; c < 4; ++c) {
                const uint8_t X = x[16 * L + c], Y = y[16 * L + c], Z = z[16 * L + c];
                uint8_t* v = u + 16 * L + c;
                v[0] = X & 63;
                v[4] = Y & 63;
                v[12] = Z & 63;
                v[8] = (uint8_t)((X >> 6) | ((Y >> 6) << 2) | ((Z >> 6) << 4));
            }
        q6_k_put_group_values(b, g, u);
    }
}

}  // namespace

bool four_row_reencoded(DType type) { return type == DType::Q4_0 || type == DType::Q4_K || type == DType::Q5_K ||
                                                 type == DType::Q6_K; }

void four_row_block(DType type, const void* group, int64_t i, int r, void* block) {
    const TypeTraits& tt = *type_traits((uint32_t)type);
    const size_t bb = (size_t)tt.block_bytes;
    const uint8_t* gb = static_cast<const uint8_t*>(group) + (size_t)(4 * i) * bb;
    if (type == DType::Q4_K) {
        BlockQ4_K b;
        q45_k_block(gb, r, b);
        std::memcpy(block, &b, sizeof b);
        return;
    }
    if (type == DType::Q5_K) {
        BlockQ5_K b;
        q45_k_block(gb, r, b);
        std::memcpy(block, &b, sizeof b);
        return;
    }
    if (type == DType::Q6_K) {
        BlockQ6_K b;
        q6_k_block(gb, r, b);
        std::memcpy(block, &b, sizeof b);
        return;
    }
    if (type != DType::Q4_0) {
        std::memcpy(block, gb + (size_t)r * bb, bb);
        return;
    }
    BlockQ4_0 b;
    std::memcpy(&b.d, gb + 2 * r, 2);
    std::memset(b.qs, 0, sizeof b.qs);
    for (int e = 0; e < QK; ++e) {
        const int k = q4_0_step(e);
        const uint8_t v = (uint8_t)((gb[8 + 32 * (k / 2) + q4_0_group_byte(r, e)] >> (4 * (k % 2))) & 0x0f);
        b.qs[e % 16] |= (uint8_t)(e < 16 ? v : v << 4);
    }
    std::memcpy(block, &b, sizeof b);
}

void four_row_layout(const Tensor& w, void* dst, int64_t r0, int64_t r1) {
    const TypeTraits& tt = *type_traits((uint32_t)w.type);
    const size_t bb = (size_t)tt.block_bytes, ws = w.nb[1];
    const int64_t nb = w.ne[0] / tt.block_size, full = w.ne[1] / 4 * 4;
    const uint8_t* src = static_cast<const uint8_t*>(w.data);
    uint8_t* out = static_cast<uint8_t*>(dst);
    const int64_t g0 = r0 / 4, g1 = (r1 < full ? r1 : full) / 4;
    if (g1 > g0 && w.type == DType::Q4_0) {
        q4_0_groups(src, out, ws, nb, g0, g1);
    } else if (g1 > g0 && w.type == DType::Q4_K) {
        q45_k_groups<BlockQ4_K>(src, out, ws, nb, g0, g1);
    } else if (g1 > g0 && w.type == DType::Q5_K) {
        q45_k_groups<BlockQ5_K>(src, out, ws, nb, g0, g1);
    } else if (g1 > g0 && w.type == DType::Q6_K) {
        q6_k_groups(src, out, ws, nb, g0, g1);
    } else if (g1 > g0) {
        switch (bb) {
            case sizeof(BlockQ4_0): interleave_groups<sizeof(BlockQ4_0)>(src, out, ws, nb, g0, g1); break;
            case sizeof(BlockQ4_1): interleave_groups<sizeof(BlockQ4_1)>(src, out, ws, nb, g0, g1); break;
            case sizeof(BlockQ5_0): interleave_groups<sizeof(BlockQ5_0)>(src, out, ws, nb, g0, g1); break;
            case sizeof(BlockQ5_1): interleave_groups<sizeof(BlockQ5_1)>(src, out, ws, nb, g0, g1); break;
            case sizeof(BlockQ8_0): interleave_groups<sizeof(BlockQ8_0)>(src, out, ws, nb, g0, g1); break;
            case sizeof(BlockQ2_K): interleave_groups<sizeof(BlockQ2_K)>(src, out, ws, nb, g0, g1); break;
            case sizeof(BlockQ3_K): interleave_groups<sizeof(BlockQ3_K)>(src, out, ws, nb, g0, g1); break;
            case sizeof(BlockQ4_K): interleave_groups<sizeof(BlockQ4_K)>(src, out, ws, nb, g0, g1); break;
            case sizeof(BlockQ5_K): interleave_groups<sizeof(BlockQ5_K)>(src, out, ws, nb, g0, g1); break;
            default:
                for (int64_t g = g0; g < g1; ++g) {
                    const uint8_t* rs = src + (size_t)(4 * g) * ws;
                    uint8_t* o = out + (size_t)(4 * g) * ws;
                    for (int64_t i = 0; i < nb; ++i)
                        for (int rr = 0; rr < 4; ++rr, o += bb) std::memcpy(o, rs + (size_t)rr * ws + (size_t)i * bb, bb);
                }
        }
    }
    const int64_t t0 = r0 > full ? r0 : full;  // the rows after the last whole group, as they are
    if (r1 > t0) std::memcpy(out + (size_t)t0 * ws, src + (size_t)t0 * ws, (size_t)(r1 - t0) * ws);
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
            avx2 = scalar;
            register_avx2_attention(avx2);
            avx512 = avx2;
            register_avx512_attention(avx512);
        }
    };
    static const Levels k;
    return isa == Isa::AVX512 ? k.avx512 : isa == Isa::AVX2 ? k.avx2 : k.scalar;
}

// Eight independent accumulators: lets the compiler keep the adds in flight (and
// vectorize) without reassociating a single running sum.
float dot_f32(const float* a, const float* b, int64_t n) {
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; ++j) acc[j] += a[i + j] * b[i + j];
    float s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    for (; i < n; ++i) s += a[i] * b[i];
    return s;
}

float dot_f32_f16(const float* a, const uint16_t* b, int64_t n) {
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; ++j) acc[j] += a[i + j] * fp16_to_fp32(b[i + j]);
    float s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    for (; i < n; ++i) s += a[i] * fp16_to_fp32(b[i]);
    return s;
}

void axpy_f16(float* y, const uint16_t* x, float a, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] += a * fp16_to_fp32(x[i]);
}

void attn_scores(const float* q, size_t qs, int G, const uint16_t* k, size_t stride, int64_t nk, int64_t d,
                 float scale, float* out, size_t ldo) {
    for (int g = 0; g < G; ++g)
        for (int64_t j = 0; j < nk; ++j) out[g * ldo + j] = dot_f32_f16(q + g * qs, k + j * stride, d) * scale;
}

void attn_accumulate(float* acc, size_t as, int G, const uint16_t* v, size_t stride, const float* w, size_t ldw,
                     int64_t nk, int64_t d) {
    for (int g = 0; g < G; ++g)
        for (int64_t j = 0; j < nk; ++j) axpy_f16(acc + g * as, v + j * stride, w[g * ldw + j], d);
}

void swiglu_f32(const float* g, const float* u, float* y, int64_t n) {
    for (int64_t k = 0; k < n; ++k) y[k] = (g[k] / (1.0f + std::exp(-g[k]))) * u[k];
}

float exp_sub_sum(float* s, int64_t n, float max) {
    float sum = 0.0f;
    for (int64_t i = 0; i < n; ++i) {
        s[i] = std::exp(s[i] - max);
        sum += s[i];
    }
    return sum;
}

namespace {

// rows [r_begin, r_end) of w, whose bytes start at base (w->data, or w->x4 for gemm_x4)
void gemm_rows(GemmFn gemm, const uint8_t* base, const Tensor* w, const Tensor* x, const Tensor* out,
               int64_t r_begin, int64_t r_end, bool packs, int64_t row_block) {
    const int64_t K = w->ne[0], N = x->ne[1];
    const size_t lds = out->nb[1] / sizeof(float);
    const size_t ws = w->nb[1];
    {
        // Also for N == 1: the tile kernels give each (row, column) the same operations
        // whatever N is, so one-token decoding and batched prefill agree bit for bit.
        // Cache blocking: the rows kMulMatRowBlock at a time against every column. The
        // block types' tiles unpack those rows into a panel (kept in L2) once per call and
        // stream the activation columns past it (from L3 at worst: a batch of 512 columns
        // of 8192 Q8 values is 4.5 MB); the tile kernel reuses each loaded block across
        // its register tile. Each weight row is read from memory once per product. (With
        // chunks of 60 columns every row was read, and unpacked, once per chunk.)
        // 60-column chunks remain where rows are not unpacked: the float types, and the
        // levels whose tiles walk the columns row by row (NEON, scalar), which want the
        // chunk's activations in L2 across rows.
        const bool blocks = w->type != DType::F32 && w->type != DType::F16 && w->type != DType::BF16;
        const int64_t kColChunk = packs && blocks ? N : 60;
        if (N == 1) {
            // Decoding reuses nothing across rows: one call for the whole range, so any
            // per-call set-up (widening the activation row) happens once.
            gemm(K, (int)(r_end - r_begin), 1, base + (size_t)r_begin * ws, ws, x->row(0), x->nb[1],
                 out->row<float>(0) + r_begin, lds);
            return;
        }
        for (int64_t c0 = 0; c0 < N; c0 += kColChunk) {
            const int nc = (int)(N - c0 < kColChunk ? N - c0 : kColChunk);
            for (int64_t r0 = r_begin; r0 < r_end; r0 += row_block) {
                const int nr = (int)(r_end - r0 < row_block ? r_end - r0 : row_block);
                gemm(K, nr, nc, base + (size_t)r0 * ws, ws, x->row(c0), x->nb[1], out->row<float>(c0) + r0, lds);
            }
        }
    }
}

// Rows [r_begin, r_end) of out = w^T x.
void mul_mat_rows(const DotKernels& k, const Tensor* w, const Tensor* x, const Tensor* out, int64_t r_begin,
                  int64_t r_end, bool packs) {
    const int64_t K = w->ne[0], N = x->ne[1];
    const int64_t row_block = N > 1 && k.batch_rows ? k.batch_rows() : kMulMatRowBlock;
    if (k.gemm && w->x4 && k.gemm_x4) {
        // the groups filled in the four-row layout, the rows after them as they are
        const int64_t full = w->x4_rows();
        if (r_begin < full) {
            const int64_t mid = r_end < full ? r_end : full;
            gemm_rows(k.gemm_x4, static_cast<const uint8_t*>(w->x4), w, x, out, r_begin, mid, packs, row_block);
            r_begin = mid;
        }
        if (r_begin >= r_end) return;
    }
    if (k.gemm) {
        gemm_rows(k.gemm, static_cast<const uint8_t*>(w->data), w, x, out, r_begin, r_end, packs, row_block);
        return;
    }
    for (int64_t r0 = r_begin; r0 < r_end; r0 += kMulMatRowBlock) {
        const int64_t r1 = r0 + kMulMatRowBlock < r_end ? r0 + kMulMatRowBlock : r_end;
        for (int64_t c = 0; c < N; ++c) {
            const void* a = x->row(c);
            float* o = out->row<float>(c);
            for (int64_t r = r0; r < r1; ++r) k.vec_dot(K, o + r, w->row(r), a);
        }
    }
}

}  // namespace

void mul_mat(const Tensor* w, const Tensor* x, const Tensor* out, int ith, int nth, Isa isa,
             std::atomic<int64_t>* next_chunk) {
    const int64_t M = w->ne[1];
    const DotKernels& k = dot_kernels(w->type, isa);
    const bool packs = isa == Isa::AVX2 || isa == Isa::AVX512;  // block tiles that pack panels
    const int64_t blocks = (M + kMulMatRowBlock - 1) / kMulMatRowBlock;
    if (next_chunk && nth > 1) {
        if (x->ne[1] == 1) {
            // Decoding streams the weights from memory: each thread starts on its own
            // contiguous share (the static split's, counter next_chunk[ith]), taking it in
            // claims of half of what is left of it, so that a thread slowed down by the
            // machine leaves a tail the others take in small claims (counter of the share
            // they take from). An uncontested share is one run of addresses, its software
            // prefetches crossing from claim to claim; guided claims from one counter
            // (each a share of what was left of the whole matrix, the threads' claims
            // interleaved) restarted every thread's stream a dozen times per product:
            // 0.5-1.5% slower (1B Q4_0 and Q6_K, two threads, in-process alternation).
            const int64_t per = (blocks + nth - 1) / nth, least = 4;  // 4 blocks: 64 rows
            for (int j = 0; j < nth; ++j) {
                const int t = (ith + j) % nth;
                const int64_t s0 = per * t, s1 = s0 + per < blocks ? s0 + per : blocks;
                std::atomic<int64_t>& claimed = next_chunk[t];
                int64_t b = claimed.load(std::memory_order_relaxed);
                while (s0 + b < s1) {
                    const int64_t left = s1 - s0 - b;
                    int64_t take = j == 0 ? (left + 1) / 2 : least;
                    if (take < least) take = least;
                    if (take > left) take = left;
                    if (!claimed.compare_exchange_weak(b, b + take, std::memory_order_relaxed)) continue;
                    const int64_t r0 = (s0 + b) * kMulMatRowBlock;
                    const int64_t r1 = (s0 + b + take) * kMulMatRowBlock < M ? (s0 + b + take) * kMulMatRowBlock : M;
                    mul_mat_rows(k, w, x, out, r0, r1, packs);
                    b = claimed.load(std::memory_order_relaxed);
                }
            }
            return;
        }
        const int64_t per_thread = 8;  // about eight chunks per thread for prefill
        int64_t per = blocks / (per_thread * (int64_t)nth);
        if (per < 1) per = 1;
        for (;;) {
            const int64_t b = next_chunk->fetch_add(per, std::memory_order_relaxed);
            if (b >= blocks) return;
            const int64_t r0 = b * kMulMatRowBlock;
            const int64_t r1 = (b + per) * kMulMatRowBlock < M ? (b + per) * kMulMatRowBlock : M;
            mul_mat_rows(k, w, x, out, r0, r1, packs);
        }
    }
    // rows split across threads in whole blocks of kMulMatRowBlock
    const int64_t per = (blocks + nth - 1) / nth;
    const int64_t r_begin = per * ith * kMulMatRowBlock;
    const int64_t r_end = r_begin + per * kMulMatRowBlock < M ? r_begin + per * kMulMatRowBlock : M;
    if (r_begin >= r_end) return;
    mul_mat_rows(k, w, x, out, r_begin, r_end, packs);
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
