// The four-row layout of the weights' copy (kernels.h: four_row_layout): four rows' blocks
// interleaved, and for Q4_0, Q4_K, Q5_K and Q6_K re-encoded so a decode kernel reads one
// row group's values with whole-register loads; the way back to one row's block; and
// WeightRepack, which makes a model's copies in the background.
#include "cpu/repack.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "core/arena.h"
#include "core/error.h"
#include "core/memory.h"
#include "core/threadpool.h"
#include "cpu/kernels_ref.h"
#include "quant/types.h"

#ifdef __linux__
#  include <sys/mman.h>
#endif

namespace ember {

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

// ---- a model's copies, made in the background --------------------------------------

WeightRepack::~WeightRepack() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
    for (auto& [p, n] : blocks_) aligned_free(p);
}

double WeightRepack::progress(bool wait) const {
    std::unique_lock<std::mutex> lock(mu_);
    if (wait) cv_.wait(lock, [&] { return !running_; });
    if (!running_ || total_ == 0) return 1.0;
    return (double)done_.load() / (double)total_;
}

bool WeightRepack::start(Isa isa, const std::vector<Tensor*>& weights, ReleaseFn release) {
    const char* off = std::getenv("EMBER_NO_REPACK");
    if (!blocks_.empty() || (off && *off && std::strcmp(off, "0") != 0)) return false;

    std::vector<Tensor*> todo;
    uint64_t bytes = 0;
    for (Tensor* t : weights) {
        if (!t || t->extra || t->ne[1] < 4 || t->ne[2] != 1 || t->ne[3] != 1) continue;
        if (!four_row_layout_read(t->type, isa)) continue;
        bool seen = false;  // a tied head is also the embedding
        for (Tensor* u : todo) seen |= u == t;
        if (seen) continue;
        todo.push_back(t);
        bytes += t->n_bytes();
    }
    if (todo.empty()) return false;
    // The copies must stay resident (the file pages they replace need not): leave a
    // margin of what is available (and of the address space left), and where they do not
    // fit read the rows as they are.
    const MemoryLimits lim = memory_limits();
    const uint64_t margin = 512ull << 20;
    if (lim.available.bytes != UINT64_MAX && bytes + margin > lim.available.bytes) return false;
    // nor may it take the address space later allocations (the compute buffer) need
    if (lim.address_space.bytes != UINT64_MAX && bytes + margin > lim.address_space.bytes) return false;

    // One allocation for all the copies, its start on a 2 MiB boundary and 2 MiB pages
    // asked for over all of it before the first touch, where the system allows them:
    // fewer faults filling it, fewer TLB misses streaming it. (One buffer per tensor left
    // each tensor's first and last partial 2 MiB, and every tensor under 4 MiB, on 4 KiB
    // pages: 30% of a 1B model's copy; streaming those reads ~15% slower on Zen 3.)
    constexpr size_t kHuge = 2u << 20;
    std::vector<size_t> at(todo.size());
    size_t total = 0;
    for (size_t i = 0; i < todo.size(); ++i) {
        at[i] = total;
        total += (todo[i]->n_bytes() + 63) / 64 * 64;
    }
    const size_t span = (total + kHuge - 1) / kHuge * kHuge;  // base (< block + kHuge) + span: inside
    void* block = nullptr;
    try {
        block = aligned_malloc(span + kHuge);
    } catch (const Error&) {
        return false;
    }
    uint8_t* base = reinterpret_cast<uint8_t*>(((uintptr_t)block + kHuge - 1) & ~(uintptr_t)(kHuge - 1));
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    // (not the last, partial one: a 2 MiB page there would count its unused part as resident)
    if (total >= kHuge) madvise(base, total / kHuge * kHuge, MADV_HUGEPAGE);
#endif
    blocks_.emplace_back(block, span + kHuge);

    // Published here, while no graph runs: the buffers and their fill counts (0 rows, so
    // every reader keeps to data until the copier publishes a piece).
    for (size_t i = 0; i < todo.size(); ++i) {
        Tensor* t = todo[i];
        filled_.emplace_back(0);
        groups_.push_back(RowGroups{base + at[i], &filled_.back()});
        t->extra = &groups_.back();
    }
    total_ = bytes;
    {
        std::lock_guard<std::mutex> l(mu_);
        running_ = true;
    }

    // One tensor after another, 1024 rows at a time, in order, so that each fill count
    // only grows. Each piece is published (release: its bytes before its count) and only
    // then is this process's mapping of its file pages dropped: a reader that took the
    // count before still reads the file, whose pages then come back from the page cache
    // (same bytes).
    auto fill = [this, todo, release] {
        for (size_t i = 0; i < todo.size() && !stop_.load(std::memory_order_relaxed); ++i) {
            const Tensor& t = *todo[i];
            const RowGroups& g = *row_groups(&t);
            std::atomic<int64_t>& filled = *const_cast<std::atomic<int64_t>*>(g.filled);
            for (int64_t r = 0; r < t.ne[1] && !stop_.load(std::memory_order_relaxed); r += 1024) {
                const int64_t r1 = std::min<int64_t>(t.ne[1], r + 1024);
                four_row_layout(t, const_cast<void*>(g.data), r, r1);
                filled.store(r1, std::memory_order_release);
                if (release)
                    release(static_cast<const uint8_t*>(t.data) + (size_t)r * t.nb[1], (uint64_t)(r1 - r) * t.nb[1]);
                done_.fetch_add((uint64_t)(r1 - r) * t.nb[1]);
            }
        }
        std::lock_guard<std::mutex> l(mu_);
        running_ = false;
        cv_.notify_all();
    };
    try {
        thread_ = std::thread([fill] {
            ThreadPool::lower_this_thread();  // graph threads come first
            fill();
        });
    } catch (const std::exception&) {
        fill();  // no thread to be had: filled now, before the context opens
    }
    return true;
}

}  // namespace ember
