// Calls on one model handle from several threads at once, as the server's parallel slots
// make them: every tokenization equals the single-threaded one, and the last-error
// strings (ember_last_error and ember_model_last_error) are each thread's own, so a
// failure on one thread never shows in another's message and a success elsewhere never
// clears it. Goes through the C ABI, on a small byte-level BPE vocabulary written to a
// temporary GGUF file.
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "ember.h"
#include "text/unicode.h"
#include "text/utf8.h"

using namespace ember;

static std::atomic<int> g_failures{0};
#define CHECK(cond)                                                             \
    do {                                                                        \
        if (!(cond)) {                                                          \
            std::printf("%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
            ++g_failures;                                                       \
        }                                                                       \
    } while (0)

namespace {

// Just enough GGUF (v3, metadata only) for a vocabulary.
class GgufWriter {
public:
    void str(const std::string& key, const std::string& v) { kv(key, 8); put_str(v); }
    void u32(const std::string& key, uint32_t v) { kv(key, 4); put(v); }
    void strs(const std::string& key, const std::vector<std::string>& v) {
        kv(key, 9);
        put((uint32_t)8);
        put((uint64_t)v.size());
        for (const auto& s : v) put_str(s);
    }
    void i32s(const std::string& key, const std::vector<int32_t>& v) {
        kv(key, 9);
        put((uint32_t)5);
        put((uint64_t)v.size());
        for (int32_t x : v) put(x);
    }
    void write(const std::string& path) const {
        std::ofstream f(path, std::ios::binary);
        const uint32_t version = 3;
        const uint64_t n_tensors = 0;
        f.write("GGUF", 4);
        f.write((const char*)&version, 4);
        f.write((const char*)&n_tensors, 8);
        f.write((const char*)&n_kv_, 8);
        f.write((const char*)body_.data(), (std::streamsize)body_.size());
    }

private:
    template <class T>
    void put(T v) {
        const uint8_t* p = (const uint8_t*)&v;
        body_.insert(body_.end(), p, p + sizeof(T));
    }
    void put_str(const std::string& s) {
        put((uint64_t)s.size());
        body_.insert(body_.end(), s.begin(), s.end());
    }
    void kv(const std::string& key, uint32_t type) {
        put_str(key);
        put(type);
        ++n_kv_;
    }
    std::vector<uint8_t> body_;
    uint64_t n_kv_ = 0;
};

std::string write_vocab() {
    std::vector<std::string> tokens;
    std::vector<int32_t> types;
    for (int b = 0; b < 256; ++b) {
        tokens.push_back(utf8::encode(unicode::byte_to_cp((uint8_t)b)));
        types.push_back(1);
    }
    const std::string G = utf8::encode(unicode::byte_to_cp(' '));  // "Ġ"
    for (const std::string& t : {std::string("he"), std::string("ll"), std::string("hell"), std::string("hello"),
                                 G + "w", std::string("or"), G + "wor", std::string("ld"), G + "world"}) {
        tokens.push_back(t);
        types.push_back(1);
    }
    GgufWriter w;
    w.str("general.architecture", "llama");
    w.str("tokenizer.ggml.model", "gpt2");
    w.str("tokenizer.ggml.pre", "gpt-2");
    w.strs("tokenizer.ggml.tokens", tokens);
    w.i32s("tokenizer.ggml.token_type", types);
    w.strs("tokenizer.ggml.merges", {"h e", "l l", "he ll", "hell o", G + " w", "o r", G + "w or", "l d",
                                     G + "wor ld"});
    const auto path = std::filesystem::temp_directory_path() /
                      ("ember_test_api_threads_" + std::to_string(std::random_device{}()) + ".gguf");
    w.write(path.string());
    return path.string();
}

std::vector<ember_token> tokenize(const ember_model* m, const std::string& text, ember_status* status) {
    std::vector<ember_token> ids(text.size() + 4);
    int32_t n = 0;
    *status = ember_tokenize(m, text.data(), (int32_t)text.size(), false, false, ids.data(), (int32_t)ids.size(), &n);
    ids.resize(*status == EMBER_OK ? (size_t)n : 0);
    return ids;
}

// One thread's failing call: a buffer too small for this thread's own text, so the
// message ("... (N needed)") names how many tokens that text has and so which thread.
ember_status fail_on(const ember_model* m, const std::string& text) {
    ember_token one;
    int32_t n = 0;
    return ember_tokenize(m, text.data(), (int32_t)text.size(), false, false, &one, 1, &n);
}

// Thread A fails, thread B then reads and succeeds: B must not see A's message, and A
// must still read its own afterwards.
void test_messages_stay_on_their_thread(const ember_model* m) {
    CHECK(fail_on(m, "hello hello") == EMBER_ERR_BUFFER_TOO_SMALL);
    const std::string mine = ember_model_last_error(m);
    CHECK(!mine.empty() && mine == ember_last_error());
    std::thread other([&] {
        CHECK(std::strcmp(ember_model_last_error(m), "") == 0);  // nothing failed on this thread
        ember_status s;
        tokenize(m, "hello world", &s);
        CHECK(s == EMBER_OK);
        CHECK(std::strcmp(ember_model_last_error(m), "") == 0);
    });
    other.join();
    CHECK(mine == ember_model_last_error(m));  // a success on another thread did not clear it
    CHECK(mine == ember_last_error());
    ember_status s;
    tokenize(m, "hello", &s);
    CHECK(s == EMBER_OK && std::strcmp(ember_model_last_error(m), "") == 0);  // this thread's success did
}

// Several threads tokenize at once, each failing now and then with its own message.
void test_concurrent_tokenize(const ember_model* m) {
    std::vector<std::string> texts;
    const char* words[] = {"hello", " world", " hell", "o", " wor", "ld", " he", "ll", " w", "x"};
    for (int i = 0; i < 64; ++i) {
        std::string t;
        for (int j = 0; j <= i % 13; ++j) t += words[(size_t)(i * 7 + j * 3) % 10];
        texts.push_back(t);
    }
    std::vector<std::vector<ember_token>> want;
    for (const auto& t : texts) {
        ember_status s;
        want.push_back(tokenize(m, t, &s));
        CHECK(s == EMBER_OK);
    }
    const int n_threads = 6, rounds = 3000;
    std::vector<std::string> fail_text, fail_message;
    for (int t = 0; t < n_threads; ++t) {
        std::string text = "hello";
        for (int j = 0; j <= t; ++j) text += " hello";  // t + 2 tokens
        CHECK(fail_on(m, text) == EMBER_ERR_BUFFER_TOO_SMALL);
        fail_text.push_back(text);
        fail_message.push_back(ember_last_error());
    }
    std::atomic<int> wrong_ids{0}, wrong_messages{0};
    std::vector<std::thread> pool;
    for (int t = 0; t < n_threads; ++t) {
        pool.emplace_back([&, t] {
            for (int r = 0; r < rounds; ++r) {
                if ((r + t) % 5 == 0) {
                    if (fail_on(m, fail_text[(size_t)t]) != EMBER_ERR_BUFFER_TOO_SMALL ||
                        fail_message[(size_t)t] != ember_model_last_error(m) ||
                        fail_message[(size_t)t] != ember_last_error())
                        ++wrong_messages;
                    continue;
                }
                const size_t i = (size_t)(r * 31 + t * 17) % texts.size();
                ember_status s;
                if (tokenize(m, texts[i], &s) != want[i] || s != EMBER_OK) ++wrong_ids;
                if (*ember_model_last_error(m) != '\0' || *ember_last_error() != '\0') ++wrong_messages;
            }
        });
    }
    for (auto& th : pool) th.join();
    if (wrong_ids || wrong_messages)
        std::printf("concurrent tokenize: %d wrong results, %d wrong messages\n", wrong_ids.load(),
                    wrong_messages.load());
    CHECK(wrong_ids == 0);
    CHECK(wrong_messages == 0);
}

}  // namespace

int main() {
    const std::string path = write_vocab();
    ember_model_params mp = ember_model_default_params();
    mp.vocab_only = true;
    ember_model* m = nullptr;
    if (ember_model_load(path.c_str(), &mp, &m) != EMBER_OK) {
        std::printf("could not load the test vocabulary: %s\n", ember_last_error());
        std::filesystem::remove(path);
        return 1;
    }
    test_messages_stay_on_their_thread(m);
    test_concurrent_tokenize(m);
    ember_model_free(m);
    std::filesystem::remove(path);
    if (g_failures) std::printf("%d failures\n", g_failures.load());
    return g_failures ? 1 : 0;
}
