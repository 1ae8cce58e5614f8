// Grammar unit tests: GBNF parsing (accepted and refused texts, errors with line and
// column), the matcher over UTF-8 split anywhere, and the mask over a small synthetic
// vocabulary against a brute-force check of every token (its text fed to a fresh matcher).
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "sample/gbnf.h"
#include "sample/grammar.h"

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

std::shared_ptr<const CompiledGrammar> compile(const std::string& text) {
    return std::make_shared<const CompiledGrammar>(parse_gbnf(text));
}

bool matches(const std::shared_ptr<const CompiledGrammar>& g, const std::string& text) {
    GrammarMatcher m(g, nullptr);
    try {
        m.accept_bytes(text);
    } catch (const Error&) {
        return false;
    }
    return m.can_end();
}

std::string error_of(const std::string& text) {
    try {
        parse_gbnf(text);
    } catch (const Error& e) {
        CHECK(e.status() == EMBER_ERR_INVALID_ARGUMENT);
        return e.what();
    }
    return "";
}

void test_parse_and_match() {
    auto g = compile(
        "root ::= \"{\" ws pair (\",\" ws pair)* \"}\"  # an object\n"
        "pair ::= [a-z]+ ws \":\" ws ( [0-9]{1,3} | \"null\" )\n"
        "ws   ::= [ \\t\\n]*\n");
    CHECK(matches(g, "{a:1}"));
    CHECK(matches(g, "{ ab : 123,\n cd:null}"));
    CHECK(!matches(g, "{a:1234}"));
    CHECK(!matches(g, "{a:1,}"));
    CHECK(!matches(g, "{A:1}"));
    CHECK(!matches(g, "{a:1"));

    auto u = compile("root ::= [^a-z] \"\\u00e9\" . [\\x41-\\x43]?\n");
    CHECK(matches(u, "Z\xc3\xa9\xe6\x97\xa5"));      // Z é 日
    CHECK(matches(u, "\xe6\x97\xa5\xc3\xa9xB"));     // 日 é x B
    CHECK(!matches(u, "a\xc3\xa9x"));
    CHECK(!matches(u, "Z\xc3\xa9"));
    CHECK(!matches(u, "Z\xc3\xa9\xc3"));            // a character cut short
    CHECK(!matches(u, "Z\xc3\xa9\xff"));            // not UTF-8

    auto rep = compile("root ::= \"ab\"{2,3} \"c\"{0,1} \"d\"{2,}\n");
    CHECK(matches(rep, "ababdd"));
    CHECK(matches(rep, "abababcddd"));
    CHECK(!matches(rep, "abdd"));
    CHECK(!matches(rep, "ababababdd"));
    CHECK(!matches(rep, "ababccdd"));
    CHECK(!matches(rep, "ababd"));

    // alternatives may continue on the next line; a rule ends where the next one starts
    auto multi = compile("root ::= a\n     | b\na ::= \"x\"\nb ::= \"y\" a?\n");
    CHECK(matches(multi, "x") && matches(multi, "y") && matches(multi, "yx"));
    CHECK(!matches(multi, "xy"));
}

void test_errors() {
    CHECK(error_of("root ::= \"abc").find("line 1, column 10") != std::string::npos);
    CHECK(error_of("root ::= a\na ::= [b-").find("line 2, column 7") != std::string::npos);
    CHECK(error_of("root ::= x").find("'x' is used but never defined") != std::string::npos);
    CHECK(error_of("root ::= root \"a\"").find("left-recursive") != std::string::npos);
    CHECK(error_of("root ::= (\"\")+").find("left-recursive") != std::string::npos);
    CHECK(error_of("a ::= \"x\"").find("no rule 'root'") != std::string::npos);
    CHECK(error_of("root ::= \"a\"{99999}").find("above") != std::string::npos);
    std::string deep = "root ::= ";
    for (int i = 0; i < 300; ++i) deep += "(";
    CHECK(error_of(deep).find("nested too deeply") != std::string::npos);
}

void test_state_survives_a_refusal() {
    auto g = compile("root ::= \"ab\" | \"ac\"\n");
    GrammarMatcher m(g, nullptr);
    m.accept_bytes("a");
    bool threw = false;
    try {
        m.accept_bytes("x");
    } catch (const Error&) {
        threw = true;
    }
    CHECK(threw);
    m.accept_bytes("c");
    CHECK(m.can_end() && m.is_done());
}

// Every token of a small vocabulary checked one by one against what the mask says.
void test_mask_against_brute_force() {
    std::vector<std::string> pieces = {"",  "{",   "}",  "a",   "ab",  "abc", "b",  ":",  "1",
                                       "12", "{a", "a:", ":1", "1}", "\xc3", "\xa9", "\xc3\xa9",
                                       " ", "x", "<eos>"};
    std::vector<bool> eog(pieces.size(), false);
    eog.back() = true;
    auto vocab = GrammarVocab::build(pieces, eog);
    auto g = compile("root ::= \"{\" [a-b\\u00e9]+ \":\" [0-9]+ \"}\"\n");
    const std::vector<std::string> prefixes = {"", "{", "{a", "{ab", "{\xc3", "{a:", "{a:1", "{a:1}"};
    for (const std::string& prefix : prefixes) {
        GrammarMatcher m(g, vocab);
        m.accept_bytes(prefix);
        std::vector<float> logits(pieces.size() + 2, 0.0f);  // two ids past the vocabulary
        size_t n = 0;
        try {
            n = m.apply(logits.data(), (int32_t)logits.size());
        } catch (const Error&) {
            n = 0;
        }
        size_t kept = 0;
        for (size_t id = 0; id < logits.size(); ++id) {
            const bool allowed = !std::isinf(logits[id]);
            kept += allowed;
            bool expected = false;
            if (id < pieces.size() && eog[id]) {
                expected = m.can_end();
            } else if (id < pieces.size() && !pieces[id].empty()) {
                GrammarMatcher fresh(g, nullptr);
                try {
                    fresh.accept_bytes(prefix + pieces[id]);
                    expected = true;
                } catch (const Error&) {
                    expected = false;
                }
            }
            if (allowed != expected)
                std::printf("prefix '%s' token %zu '%s': mask %d, brute force %d\n", prefix.c_str(), id,
                            id < pieces.size() ? pieces[id].c_str() : "", allowed, expected);
            CHECK(allowed == expected);
        }
        CHECK(kept == n);
    }
}

}  // namespace

int main() {
    test_parse_and_match();
    test_errors();
    test_state_survives_a_refusal();
    test_mask_against_brute_force();
    if (g_failures) {
        std::printf("%d check(s) failed\n", g_failures);
        return 1;
    }
    std::printf("grammar tests passed\n");
    return 0;
}
