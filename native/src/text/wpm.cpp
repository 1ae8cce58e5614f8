#include "text/wpm.h"

#include <algorithm>
#include <string>

#include "text/unicode.h"
#include "text/utf8.h"

namespace ember {

namespace {

// The CJK blocks BERT isolates character by character (its own list, which
// starts Extension F at U+2B920 rather than U+2B820).
bool is_cjk(uint32_t c) {
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
           (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

}  // namespace

void WpmEncoder::encode(std::string_view text, std::vector<int32_t>& out) const {
    // normalize and split into words
    std::vector<std::string> words(1);
    for (size_t i = 0; i < text.size();) {
        uint32_t c = utf8::decode(text, i);
        if (strip_accents_) c = unicode::nfd_first(c);
        if (unicode::is_whitespace(c)) {
            if (!words.back().empty()) words.emplace_back();
            continue;
        }
        const unicode::Category cat = unicode::category(c);
        if (c == 0 || c == utf8::kReplacement || cat == unicode::OTHER) continue;
        if (strip_accents_ && cat == unicode::MARK) continue;
        if (lowercase_) c = unicode::to_lower(c);
        if (cat == unicode::PUNCT || (c < 0x7F && cat == unicode::SYMBOL) || is_cjk(c)) {
            if (!words.back().empty()) words.emplace_back();
            utf8::append(words.back(), c);
            words.emplace_back();
        } else {
            utf8::append(words.back(), c);
        }
    }

    const size_t max_len = table_.max_len;
    std::string word;
    for (const std::string& w : words) {
        if (w.empty()) continue;
        word.assign("\xE2\x96\x81").append(w);  // word-initial pieces are stored with U+2581
        const size_t start = out.size();
        const size_t n = word.size();
        bool ok = true;
        for (size_t i = 0; i < n && ok;) {
            ok = false;
            for (size_t j = std::min(n, i + max_len + 1); j > i; --j) {
                const int32_t id = table_.find(std::string_view(word).substr(i, j - i));
                if (id >= 0) {
                    out.push_back(id);
                    i = j;
                    ok = true;
                    break;
                }
            }
        }
        if (!ok) out.resize(start);
        if (out.size() == start && unk_ >= 0) out.push_back(unk_);
    }
}

}  // namespace ember
