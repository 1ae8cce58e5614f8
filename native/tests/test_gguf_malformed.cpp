// Loads GGUF files through the C ABI and prints "<status>\t<message>" per file, so
// the pytest suite can feed it many kinds of broken file under AddressSanitizer/UBSan.
// Without arguments it checks a few in-memory cases of its own (for ctest).
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "ember.h"
#include "gguf/gguf.h"

namespace {

void put_u32(std::vector<uint8_t>& b, uint32_t v) { b.insert(b.end(), (uint8_t*)&v, (uint8_t*)&v + 4); }
void put_u64(std::vector<uint8_t>& b, uint64_t v) { b.insert(b.end(), (uint8_t*)&v, (uint8_t*)&v + 8); }
void put_str(std::vector<uint8_t>& b, const std::string& s) {
    put_u64(b, s.size());
    b.insert(b.end(), s.begin(), s.end());
}

std::vector<uint8_t> header(uint64_t n_tensors, uint64_t n_kv) {
    std::vector<uint8_t> b = {'G', 'G', 'U', 'F'};
    put_u32(b, 3);
    put_u64(b, n_tensors);
    put_u64(b, n_kv);
    return b;
}

int expect_status(const char* what, const std::vector<uint8_t>& bytes, ember_status want) {
    ember_status got = EMBER_OK;
    std::string msg;
    try {
        ember::GGUFFile::from_memory(bytes.data(), bytes.size());
    } catch (const ember::Error& e) {
        got = e.status();
        msg = e.what();
    }
    const bool ok = got == want;
    std::printf("%s %-28s status=%d %s\n", ok ? "ok  " : "FAIL", what, (int)got, msg.c_str());
    return ok ? 0 : 1;
}

int self_test() {
    int failures = 0;
    failures += expect_status("empty", {}, EMBER_ERR_FORMAT);
    failures += expect_status("bad magic", {'G', 'G', 'M', 'L', 3, 0, 0, 0}, EMBER_ERR_FORMAT);
    auto v = header(0, 0);
    v[4] = 9;
    failures += expect_status("unknown version", v, EMBER_ERR_UNSUPPORTED);
    failures += expect_status("absurd tensor count", header(UINT64_MAX / 2, 0), EMBER_ERR_FORMAT);
    failures += expect_status("absurd kv count", header(0, UINT64_MAX), EMBER_ERR_FORMAT);
    auto s = header(0, 1);
    put_u64(s, UINT64_MAX);  // key length
    failures += expect_status("huge key length", s, EMBER_ERR_FORMAT);
    auto a = header(0, 1);
    put_str(a, "k");
    put_u32(a, 9);  // array
    put_u32(a, 6);  // of f32
    put_u64(a, UINT64_MAX / 4 + 1);  // count * 4 overflows
    failures += expect_status("array size overflow", a, EMBER_ERR_FORMAT);
    auto t = header(1, 0);
    put_str(t, "w");
    put_u32(t, 2);
    put_u64(t, 1ull << 40);
    put_u64(t, 1ull << 40);  // 2^80 elements
    put_u32(t, 0);
    put_u64(t, 0);
    failures += expect_status("dims product overflow", t, EMBER_ERR_FORMAT);
    auto ok = header(0, 1);
    put_str(ok, "general.architecture");
    put_u32(ok, 8);
    put_str(ok, "llama");
    failures += expect_status("valid (no tensors)", ok, EMBER_OK);
    return failures;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) return self_test() == 0 ? 0 : 1;
    for (int i = 1; i < argc; ++i) {
        ember_model* m = nullptr;
        ember_model_params p = ember_model_default_params();
        ember_status st = ember_model_load(argv[i], &p, &m);
        std::printf("%d\t%s\n", (int)st, ember_last_error());
        if (m) {
            // a file that loads must also evaluate without touching memory it does not own
            ember_context* ctx = nullptr;
            ember_context_params cp = ember_context_default_params();
            cp.n_ctx = 64;
            cp.n_threads = 1;
            if (ember_context_create(m, &cp, &ctx) == EMBER_OK) {
                ember_token tok = 0;
                ember_decode(ctx, &tok, 1, 0, false);
                ember_context_free(ctx);
            }
            ember_model_free(m);
        }
    }
    return 0;
}
