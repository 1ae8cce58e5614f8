#include "core/fp16.h"

namespace ember {

float g_fp16_table[65536];

namespace {
struct Fp16TableInit {
    Fp16TableInit() {
        for (uint32_t i = 0; i < 65536; ++i) g_fp16_table[i] = fp16_to_fp32_exact((uint16_t)i);
    }
} g_fp16_table_init;
}  // namespace

}  // namespace ember
