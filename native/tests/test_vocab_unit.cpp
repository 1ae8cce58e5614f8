// Tokenizer unit tests on small synthetic GGUF vocabularies: BPE merges and
// pre-tokenization, SentencePiece merges and byte fallback, special-token
// partitioning, detokenization, and clear errors for broken vocabularies and
// bad inputs. With EMBER_VOCAB_DIR set, also fuzzes the real suite vocabularies.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "gguf/gguf.h"
#include "text/pretokenize.h"
#include "text/unicode.h"
#include "text/utf8.h"
#include "text/vocab.h"

using namespace ember;

static int g_failures = 0;
#define CHECK(cond)                                                             \
    do {                                                                        \
        if (!(cond)) {                                                          \
            std::printf("%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
            ++g_failures;                                                       \
        }                                                                       \
    } while (0)

namespace {

// ------------------------------------------------------------ GGUF builder

class GgufBuilder {
public:
    void str(const std::string& key, const std::string& v) { kv(key, 8); put_str(v); ++n_; }
    void u32(const std::string& key, uint32_t v) { kv(key, 4); put(v); ++n_; }
    void boolean(const std::string& key, bool v) { kv(key, 7); put((uint8_t)v); ++n_; }
    void strs(const std::string& key, const std::vector<std::string>& v) {
        kv(key, 9);
        put((uint32_t)8);
        put((uint64_t)v.size());
        for (const auto& s : v) put_str(s);
        ++n_;
    }
    void f32s(const std::string& key, const std::vector<float>& v) {
        kv(key, 9);
        put((uint32_t)6);
        put((uint64_t)v.size());
        for (float f : v) put(f);
        ++n_;
    }
    void i32s(const std::string& key, const std::vector<int32_t>& v) {
        kv(key, 9);
        put((uint32_t)5);
        put((uint64_t)v.size());
        for (int32_t x : v) put(x);
        ++n_;
    }
    std::vector<uint8_t> bytes() const {
        std::vector<uint8_t> out;
        auto app = [&out](const void* p, size_t n) { out.insert(out.end(), (const uint8_t*)p, (const uint8_t*)p + n); };
        app("GGUF", 4);
        const uint32_t version = 3;
        const uint64_t n_tensors = 0, n_kv = n_;
        app(&version, 4);
        app(&n_tensors, 8);
        app(&n_kv, 8);
        out.insert(out.end(), body_.begin(), body_.end());
        return out;
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
    }
    std::vector<uint8_t> body_;
    uint64_t n_ = 0;
};

struct Loaded {
    std::vector<uint8_t> data;
    std::unique_ptr<GGUFFile> gguf;
    std::unique_ptr<Vocab> vocab;
};

Loaded load(const GgufBuilder& b) {
    Loaded l;
    l.data = b.bytes();
    l.gguf = GGUFFile::from_memory(l.data.data(), l.data.size());
    l.vocab = Vocab::load(*l.gguf);
    return l;
}

// Status of the ember::Error fn throws, or -1 when it does not throw.
int status_of(const std::function<void()>& fn) {
    try {
        fn();
    } catch (const Error& e) {
        return e.status();
    } catch (...) {
        return 1000;
    }
    return -1;
}

int32_t id_of(const Vocab& v, const std::string& text) {
    for (int32_t i = 0; i < v.n_tokens(); ++i)
        if (v.token_text(i) == text) return i;
    return -1;
}

// ------------------------------------------------------------ BPE fixture

std::string byte_sym(uint8_t b) { return utf8::encode(unicode::byte_to_cp(b)); }

struct BpeSpec {
    std::vector<std::string> tokens;
    std::vector<int32_t> types;
    std::vector<std::string> merges;
    std::string pre = "gpt-2";
};

BpeSpec bpe_spec() {
    BpeSpec s;
    for (int b = 0; b < 256; ++b) {
        s.tokens.push_back(byte_sym((uint8_t)b));
        s.types.push_back(1);
    }
    const std::string G = byte_sym(' ');  // "Ġ"
    for (const std::string& t : {std::string("he"), std::string("ll"), std::string("hell"), std::string("hello"),
                                 G + "w", std::string("or"), G + "wor", std::string("ld"), G + "world"}) {
        s.tokens.push_back(t);
        s.types.push_back(1);
    }
    s.tokens.push_back("<|im_start|>");
    s.types.push_back(3);
    s.tokens.push_back("<|im_end|>");
    s.types.push_back(1);  // made CONTROL by its text
    s.tokens.push_back("<tool>");
    s.types.push_back(4);
    s.merges = {"h e", "l l", "he ll", "hell o", G + " w", "o r", G + "w or", "l d", G + "wor ld",
                "zz qq",     // parts are not tokens: skipped
                "nospace",   // malformed: skipped
                "hel lo"};   // "hel" is not a token: skipped
    return s;
}

GgufBuilder bpe_builder(const BpeSpec& s) {
    GgufBuilder b;
    b.str("general.architecture", "llama");
    b.str("tokenizer.ggml.model", "gpt2");
    b.str("tokenizer.ggml.pre", s.pre);
    b.strs("tokenizer.ggml.tokens", s.tokens);
    b.i32s("tokenizer.ggml.token_type", s.types);
    b.strs("tokenizer.ggml.merges", s.merges);
    b.u32("tokenizer.ggml.bos_token_id", (uint32_t)(s.tokens.size() - 3));  // <|im_start|> stands in for BOS
    b.u32("tokenizer.ggml.eos_token_id", (uint32_t)(s.tokens.size() - 3));
    return b;
}

void test_bpe() {
    const BpeSpec spec = bpe_spec();
    Loaded l = load(bpe_builder(spec));
    const Vocab& v = *l.vocab;
    const int32_t hello = id_of(v, "hello"), im_start = id_of(v, "<|im_start|>"), im_end = id_of(v, "<|im_end|>");
    const int32_t tool = id_of(v, "<tool>"), gworld = id_of(v, byte_sym(' ') + "world");

    CHECK(v.tokenize("hello", false, false) == std::vector<int32_t>({hello}));
    CHECK(v.tokenize("hello world", false, false) == std::vector<int32_t>({hello, gworld}));
    // parse_special decides whether control-token text becomes the token
    CHECK(v.tokenize("<|im_start|>hello", false, true) == std::vector<int32_t>({im_start, hello}));
    const std::vector<int32_t> plain = v.tokenize("<|im_start|>hello", false, false);
    CHECK(plain.size() > 2 && plain.back() == hello);
    for (int32_t id : plain) CHECK(id != im_start);
    // user-defined tokens are matched either way
    CHECK(v.tokenize("hello<tool>hello", false, false) == std::vector<int32_t>({hello, tool, hello}));
    // add_special: gpt2 vocabularies add no BOS unless the file says so
    CHECK(v.tokenize("hello", true, false) == std::vector<int32_t>({hello}));
    CHECK(!v.add_bos());

    CHECK(v.is_eog(im_end));
    CHECK(v.eot() == im_end);
    CHECK(v.is_control(im_end));
    CHECK(v.token_type(tool) == TokenType::USER_DEFINED);

    CHECK(v.detokenize(v.tokenize("hello world  \n\tx", false, false), false, false) == "hello world  \n\tx");
    CHECK(v.token_to_piece(gworld, false) == " world");
    CHECK(v.token_to_piece(im_start, false).empty());
    CHECK(v.token_to_piece(im_start, true) == "<|im_start|>");
    CHECK(v.detokenize({hello, im_start, hello}, false, true) == "hello<|im_start|>hello");
    CHECK(v.detokenize({hello, im_start, hello}, false, false) == "hellohello");
    // clean_up_tokenization_spaces (gpt-2 default)
    CHECK(v.detokenize(v.tokenize("hello , world .", false, false), false, false) == "hello, world.");

    // every byte sequence tokenizes; invalid UTF-8 becomes U+FFFD
    const std::vector<int32_t> bad = v.tokenize(std::string("he\xff\xc3llo\xe2\x82", 9), false, false);
    const std::string back = v.detokenize(bad, false, false);
    CHECK(back == "he\xEF\xBF\xBD\xEF\xBF\xBDllo\xEF\xBF\xBD\xEF\xBF\xBD");
    CHECK(v.tokenize(std::string("\0a\0", 3), false, false).size() == 3);
    CHECK(v.tokenize("", true, true).empty());

    // out-of-range ids
    CHECK(status_of([&] { v.token_to_piece(-1, false); }) == EMBER_ERR_INVALID_ARGUMENT);
    CHECK(status_of([&] { v.token_to_piece(v.n_tokens(), false); }) == EMBER_ERR_INVALID_ARGUMENT);
    CHECK(status_of([&] { v.detokenize({hello, 1 << 30}, false, false); }) == EMBER_ERR_INVALID_ARGUMENT);
    CHECK(status_of([&] { v.token_text(-5); }) == EMBER_ERR_INVALID_ARGUMENT);
    CHECK(!v.is_eog(-1) && !v.is_eog(1 << 30));

    // a long word merges in O(n log n): 200k letters
    const std::string big(200000, 'l');
    CHECK(v.tokenize(big, false, false).size() == 100000);
}

void test_bpe_errors() {
    {  // scores of another length than tokens
        BpeSpec s = bpe_spec();
        GgufBuilder b = bpe_builder(s);
        b.f32s("tokenizer.ggml.scores", std::vector<float>(s.tokens.size() - 1, 0.0f));
        CHECK(status_of([&] { load(b); }) == EMBER_ERR_FORMAT);
    }
    {  // token types of another length
        BpeSpec s = bpe_spec();
        s.types.pop_back();
        CHECK(status_of([&] { load(bpe_builder(s)); }) == EMBER_ERR_FORMAT);
    }
    {  // unknown pre-tokenizer
        BpeSpec s = bpe_spec();
        s.pre = "no-such-pre";
        CHECK(status_of([&] { load(bpe_builder(s)); }) == EMBER_ERR_UNSUPPORTED);
    }
    {  // no merges
        GgufBuilder b;
        b.str("tokenizer.ggml.model", "gpt2");
        b.strs("tokenizer.ggml.tokens", {"a", "b"});
        CHECK(status_of([&] { load(b); }) == EMBER_ERR_FORMAT);
    }
    {  // unknown model, no model, no tokens, empty tokens, tokens of the wrong type
        GgufBuilder b;
        b.str("tokenizer.ggml.model", "klingon");
        b.strs("tokenizer.ggml.tokens", {"a"});
        CHECK(status_of([&] { load(b); }) == EMBER_ERR_UNSUPPORTED);
        GgufBuilder c;
        c.strs("tokenizer.ggml.tokens", {"a"});
        CHECK(status_of([&] { load(c); }) == EMBER_ERR_FORMAT);
        GgufBuilder d;
        d.str("tokenizer.ggml.model", "llama");
        CHECK(status_of([&] { load(d); }) == EMBER_ERR_FORMAT);
        GgufBuilder e;
        e.str("tokenizer.ggml.model", "llama");
        e.strs("tokenizer.ggml.tokens", {});
        CHECK(status_of([&] { load(e); }) == EMBER_ERR_FORMAT);
        GgufBuilder f;
        f.str("tokenizer.ggml.model", "llama");
        f.i32s("tokenizer.ggml.tokens", {1, 2});
        CHECK(status_of([&] { load(f); }) == EMBER_ERR_FORMAT);
    }
    {  // special ids out of range fall back to "none" instead of failing
        BpeSpec s = bpe_spec();
        GgufBuilder b = bpe_builder(s);
        b.u32("tokenizer.ggml.eot_token_id", 999999);
        b.boolean("tokenizer.ggml.add_bos_token", true);
        Loaded l = load(b);
        CHECK(l.vocab->eot() == id_of(*l.vocab, "<|im_end|>"));
        CHECK(l.vocab->add_bos());
        CHECK(l.vocab->tokenize("hello", true, false).front() == l.vocab->bos());
    }
}

// ------------------------------------------------------------ SPM fixture

GgufBuilder spm_builder(bool with_bytes) {
    std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
    std::vector<float> scores = {0, 0, 0};
    std::vector<int32_t> types = {2, 3, 3};
    if (with_bytes) {
        for (int b = 0; b < 256; ++b) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "<0x%02X>", b);
            tokens.push_back(buf);
            scores.push_back(0);
            types.push_back(6);
        }
    }
    const std::string S = "\xE2\x96\x81";
    const std::vector<std::pair<std::string, float>> normal = {
        {S, -1}, {"h", -2}, {"i", -2}, {S + "h", -3}, {S + "hi", -1.5f}, {"hi", -4}, {"x", -2}, {"<|user|>", 0}};
    for (const auto& [t, sc] : normal) {
        tokens.push_back(t);
        scores.push_back(sc);
        types.push_back(t == "<|user|>" ? 4 : 1);
    }
    GgufBuilder b;
    b.str("general.architecture", "llama");
    b.str("tokenizer.ggml.model", "llama");
    b.strs("tokenizer.ggml.tokens", tokens);
    b.f32s("tokenizer.ggml.scores", scores);
    b.i32s("tokenizer.ggml.token_type", types);
    return b;
}

void test_spm() {
    Loaded l = load(spm_builder(true));
    const Vocab& v = *l.vocab;
    const int32_t shi = id_of(v, "\xE2\x96\x81hi"), x = id_of(v, "x"), sp = id_of(v, "\xE2\x96\x81");
    const int32_t user = id_of(v, "<|user|>");
    CHECK(v.add_bos() && v.bos() == 1 && v.eos() == 2 && v.unk() == 0);
    CHECK(v.tokenize("hi", true, false) == std::vector<int32_t>({1, shi}));
    CHECK(v.tokenize("hi", false, false) == std::vector<int32_t>({shi}));
    CHECK(v.tokenize("hi x", false, false) == std::vector<int32_t>({shi, sp, x}));
    // byte fallback keeps any byte, valid UTF-8 or not
    const std::string odd = std::string("hi \xff\x00\xc3\xa9", 7);
    const std::vector<int32_t> ids = v.tokenize(odd, false, false);
    CHECK(v.detokenize(ids, false, false) == odd);
    CHECK(v.token_to_piece(id_of(v, "<0x0A>"), false) == "\n");
    // the dummy space prefix comes off the first visible piece only
    CHECK(v.detokenize(v.tokenize(" hi", false, false), false, false) == " hi");
    CHECK(v.detokenize(v.tokenize("hi", true, false), true, false) == "hi");
    CHECK(v.detokenize(v.tokenize("hi", true, false), false, false) == "hi");
    CHECK(v.detokenize(v.tokenize("hi", true, false), false, true) == "<s> hi");
    // control text is literal without parse_special; user-defined tokens always split
    CHECK(v.tokenize("</s>", false, true) == std::vector<int32_t>({2}));
    CHECK(v.tokenize("x</s>x", false, true) == std::vector<int32_t>({sp, x, 2, sp, x}));
    CHECK(v.tokenize("hi<|user|>hi", false, false) == std::vector<int32_t>({shi, user, shi}));
    CHECK(v.is_eog(2));

    // without byte tokens an unknown character becomes <unk>
    Loaded nb = load(spm_builder(false));
    CHECK(nb.vocab->tokenize("hiq", false, false).back() == nb.vocab->unk());
}

void test_pretokenizer_names() {
    PreTokenizerConfig c;
    for (const char* n : {"default", "gpt-2", "smollm", "llama-bpe", "qwen2", "deepseek-llm", "deepseek-coder",
                          "falcon", "starcoder", "refact", "command-r", "mpt", "phi-2", "gpt-4o", "poro-chat", "jais",
                          "tekken", "chatglm-bpe", "viking", "bloom", "olmo", "dbrx", "smaug-bpe", "stablelm2",
                          "chameleon", "exaone", "minerva-7b", "codeshell", "qwen35", "gemma4", ""})
        CHECK(pre_tokenizer_from_name(n, c));
    CHECK(!pre_tokenizer_from_name("made-up", c));
    CHECK(pre_tokenizer_from_name("llama-bpe", c) && c.ignore_merges && c.force_add_bos);
    CHECK(pre_tokenizer_from_name("smollm", c) && c.split == PreSplit::STARCODER && !c.clean_spaces);

    auto words = [](PreSplit s, const std::string& text) {
        const std::vector<uint32_t> cps = utf8::decode_all(text);
        std::vector<uint32_t> lens;
        pre_tokenize(s, cps, lens);
        std::vector<std::string> out;
        size_t off = 0;
        for (uint32_t n : lens) {
            std::string w;
            for (size_t i = off; i < off + n; ++i) utf8::append(w, cps[i]);
            out.push_back(w);
            off += n;
        }
        return out;
    };
    using W = std::vector<std::string>;
    CHECK(words(PreSplit::GPT2, "Hello, y'all!  ok\n") == W({"Hello", ",", " y", "'", "all", "!", " ", " ok", "\n"}));
    CHECK(words(PreSplit::LLAMA3, "I'M 12345 ok\n\n  x") == W({"I", "'M", " ", "123", "45", " ok", "\n\n", " ", " x"}));
    CHECK(words(PreSplit::QWEN2, "ab12") == W({"ab", "1", "2"}));
    CHECK(words(PreSplit::STARCODER, "x=12") == W({"x", "=", "1", "2"}));
    CHECK(words(PreSplit::TEKKEN, "HelloWORLDfoo") == W({"Hello", "WORLDfoo"}));
    CHECK(words(PreSplit::GPT4O, "helloWORLD's HELLOWorld") == W({"hello", "WORLD's", " HELLOWorld"}));
    CHECK(words(PreSplit::NEWLINES, "a b\n\nc") == W({"a b", "\n\n", "c"}));
    CHECK(words(PreSplit::DEEPSEEK_LLM, "ab  ") == W({"ab", "  "}));
    CHECK(words(PreSplit::PORO, "hi, there") == W({"hi", ",", " there"}));
}

// ------------------------------------------------------------ real vocabularies

void fuzz_suites() {
    const char* dir = std::getenv("EMBER_VOCAB_DIR");
    if (!dir || !*dir) {
        std::printf("EMBER_VOCAB_DIR not set: suite fuzzing not run\n");
        return;
    }
    std::mt19937 rng(1234);
    const char* pieces[] = {"a", "Z", " ", "  ", "\n", "\t", "'s", "1", "é", "中", "😀", "\xE2\x80\x8D", "<|im_start|>",
                            "<s>", "</s>", "<|endoftext|>", "\xff", "\xc3", "\xe2\x82", "\xf0\x9f", "\x80", "\0"};
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
        const std::string path = e.path().string();
        if (e.path().extension() != ".gguf" || e.path().filename().string().rfind("ggml-vocab-", 0) != 0) continue;
        std::unique_ptr<GGUFFile> g;
        std::unique_ptr<Vocab> v;
        try {
            g = GGUFFile::open(path);
            v = Vocab::load(*g);
        } catch (const Error& err) {
            // vocabularies Ember does not implement must say so, not crash
            CHECK(err.status() == EMBER_ERR_UNSUPPORTED);
            std::printf("  %s: %s\n", e.path().filename().string().c_str(), err.what());
            continue;
        }
        // SentencePiece byte fallback makes any byte string round-trip exactly
        const bool spm = g->get_string("tokenizer.ggml.model") == "llama";
        for (int iter = 0; iter < 300; ++iter) {
            std::string s;
            const int n = (int)(rng() % 24);
            for (int i = 0; i < n; ++i) {
                const char* p = pieces[rng() % (sizeof pieces / sizeof *pieces)];
                s.append(p, *p ? std::strlen(p) : 1);
            }
            for (bool special : {false, true}) {
                const std::vector<int32_t> ids = v->tokenize(s, special, special);
                for (int32_t id : ids) CHECK(id >= 0 && id < v->n_tokens());
                const std::string back = v->detokenize(ids, false, special);
                if (spm && !special && s.find("</s>") == std::string::npos && back != s) {
                    auto hex = [](const std::string& x) {
                        std::string h;
                        char buf[4];
                        for (unsigned char c : x) std::snprintf(buf, sizeof buf, "%02x", c), h += buf;
                        return h;
                    };
                    std::printf("  %s: %s -> %s\n", e.path().filename().string().c_str(), hex(s).c_str(),
                                hex(back).c_str());
                    CHECK(back == s);
                }
            }
        }
    }
}

}  // namespace

int main() {
    try {
        test_bpe();
        test_bpe_errors();
        test_spm();
        test_pretokenizer_names();
        fuzz_suites();
    } catch (const std::exception& e) {
        std::printf("unexpected exception: %s\n", e.what());
        ++g_failures;
    }
    std::printf("%s (%d failures)\n", g_failures ? "FAILED" : "OK", g_failures);
    return g_failures ? 1 : 0;
}
