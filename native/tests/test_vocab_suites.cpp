// Runs llama.cpp's tokenizer suites (ggml-vocab-*.gguf with .inp/.out) against
// Ember's tokenizer, with the flags test-tokenizer-0 uses: add_special=false,
// parse_special=false. The directory comes from EMBER_VOCAB_DIR; without it the
// test reports "not run" and passes (tests/test_tokenizer_suites.py is the CI check).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "gguf/gguf.h"
#include "text/vocab.h"

namespace fs = std::filesystem;

namespace {

struct Case {
    std::string text;
    std::vector<int32_t> expected;
};

std::string read_file(const fs::path& p) {
    std::ifstream f(p, std::ios::binary);
    std::ostringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

std::vector<Case> read_suite(const fs::path& inp, const fs::path& out) {
    const std::string raw = read_file(inp);
    const std::string sep = "\n__ggml_vocab_test__\n";
    std::vector<std::string> texts;
    for (size_t pos = 0; pos < raw.size();) {
        const size_t next = raw.find(sep, pos);
        if (next == std::string::npos) {
            texts.push_back(raw.substr(pos));
            break;
        }
        texts.push_back(raw.substr(pos, next - pos));
        pos = next + sep.size();
    }
    std::vector<Case> cases;
    std::istringstream lines(read_file(out));
    std::string line;
    for (size_t i = 0; std::getline(lines, line); ++i) {
        Case c;
        c.text = i < texts.size() ? texts[i] : std::string();
        std::istringstream ids(line);
        for (int32_t id; ids >> id;) c.expected.push_back(id);
        cases.push_back(std::move(c));
    }
    if (cases.size() != texts.size()) {
        std::fprintf(stderr, "%s: %zu inputs but %zu outputs\n", inp.string().c_str(), texts.size(), cases.size());
        cases.clear();
    }
    return cases;
}

std::string ids_str(const std::vector<int32_t>& v) {
    std::string s;
    for (int32_t id : v) s += std::to_string(id) + " ";
    return s;
}

}  // namespace

int main(int argc, char** argv) {
    const char* dir = std::getenv("EMBER_VOCAB_DIR");
    if (!dir || !*dir) {
        std::printf("EMBER_VOCAB_DIR is not set: tokenizer suites not run\n");
        return 0;
    }
    const bool verbose = std::getenv("EMBER_VOCAB_VERBOSE") != nullptr;
    const std::string only = argc > 1 ? argv[1] : "";

    std::vector<fs::path> vocabs;
    for (const auto& e : fs::directory_iterator(dir)) {
        const std::string name = e.path().filename().string();
        if (name.rfind("ggml-vocab-", 0) == 0 && e.path().extension() == ".gguf" &&
            fs::exists(e.path().string() + ".inp") && fs::exists(e.path().string() + ".out") &&
            (only.empty() || name.find(only) != std::string::npos))
            vocabs.push_back(e.path());
    }
    std::sort(vocabs.begin(), vocabs.end());
    if (vocabs.empty()) {
        std::fprintf(stderr, "no ggml-vocab-*.gguf suites in %s\n", dir);
        return 1;
    }

    int failed_suites = 0;
    for (const fs::path& path : vocabs) {
        const std::string name = path.filename().string();
        const std::vector<Case> cases = read_suite(path.string() + ".inp", path.string() + ".out");
        size_t pass = 0;
        std::string error;
        double ms = 0;
        try {
            auto gguf = ember::GGUFFile::open(path.string());
            auto vocab = ember::Vocab::load(*gguf);
            const auto t0 = std::chrono::steady_clock::now();
            for (const Case& c : cases) {
                const std::vector<int32_t> got = vocab->tokenize(c.text, false, false);
                if (got == c.expected) {
                    ++pass;
                } else if (verbose) {
                    std::printf("  FAIL %s: '%s'\n    expected %s\n    got      %s\n", name.c_str(), c.text.c_str(),
                                ids_str(c.expected).c_str(), ids_str(got).c_str());
                }
            }
            ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        } catch (const std::exception& e) {
            error = e.what();
        }
        const bool ok = error.empty() && !cases.empty() && pass == cases.size();
        if (!ok) ++failed_suites;
        std::printf("%-36s %3zu/%-3zu %s %s(%.1f ms)\n", name.c_str(), pass, cases.size(), ok ? "PASS" : "FAIL",
                    error.empty() ? "" : ("error: " + error + " ").c_str(), ms);
    }
    std::printf("%zu suites, %d failed\n", vocabs.size(), failed_suites);
    return failed_suites == 0 ? 0 : 1;
}
