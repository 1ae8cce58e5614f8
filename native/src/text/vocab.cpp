#include <string>

#include "core/error.h"
#include "text/unicode.h"
#include "text/utf8.h"
#include "text/vocab_impl.h"

namespace ember {

namespace {

void replace_all(std::string& s, const std::string& from, const std::string& to) {
    std::string out;
    out.reserve(s.size());
    size_t pos = 0;
    for (size_t hit; (hit = s.find(from, pos)) != std::string::npos; pos = hit + from.size())
        out.append(s, pos, hit - pos).append(to);
    out.append(s, pos, std::string::npos);
    s.swap(out);
}

const std::string kSpaceMark = "\xE2\x96\x81";  // U+2581, SentencePiece's visible space

int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

}  // namespace

void VocabImpl::check_id(int32_t id) const {
    if (id < 0 || id >= table_.size())
        fail(EMBER_ERR_INVALID_ARGUMENT, "token id " + std::to_string(id) + " is outside the vocabulary (0.." +
                                             std::to_string(table_.size() - 1) + ")");
}

bool VocabImpl::is_control(int32_t id) const {
    check_id(id);
    return (table_.attr[(size_t)id] & ATTR_CONTROL) != 0;
}

const std::string& VocabImpl::token_text(int32_t id) const {
    check_id(id);
    return table_.text[(size_t)id];
}

uint32_t VocabImpl::token_attr(int32_t id) const {
    check_id(id);
    return table_.attr[(size_t)id];
}

// The effective type: text-detected control tokens report CONTROL.
TokenType VocabImpl::token_type(int32_t id) const {
    const uint32_t a = token_attr(id);
    if (a & ATTR_CONTROL) return TokenType::CONTROL;
    if (a & ATTR_USER_DEFINED) return TokenType::USER_DEFINED;
    if (a & ATTR_UNKNOWN) return TokenType::UNKNOWN;
    if (a & ATTR_BYTE) return TokenType::BYTE;
    if (a & ATTR_UNUSED) return TokenType::UNUSED;
    if (a & ATTR_NORMAL) return TokenType::NORMAL;
    return TokenType::UNDEFINED;
}

std::vector<int32_t> VocabImpl::tokenize(std::string_view text, bool add_special, bool parse_special) const {
    std::vector<int32_t> out;
    std::vector<Fragment> frags;
    special_.partition(text, parse_special, frags);

    switch (model_) {
        case VocabModel::SPM: {
            if (add_special && add_bos_) out.push_back(bos_);
            // SentencePiece adds its dummy prefix to the text after every special token too
            bool after_special = true;
            std::string piece;
            for (const Fragment& f : frags) {
                if (f.token >= 0) {
                    out.push_back(f.token);
                    after_special = true;
                    continue;
                }
                piece.clear();
                if (add_space_prefix_ && after_special) piece = kSpaceMark;
                for (char c : text.substr(f.off, f.len)) {
                    if (c == ' ')
                        piece += kSpaceMark;
                    else
                        piece += c;
                }
                spm_->encode(piece, out);
                after_special = false;
            }
            if (add_special && add_eos_) out.push_back(eos_);
            break;
        }
        case VocabModel::BPE: {
            if (add_special && add_bos_) out.push_back(bos_);
            for (const Fragment& f : frags) {
                if (f.token >= 0)
                    out.push_back(f.token);
                else
                    bpe_->encode(text.substr(f.off, f.len), out);
            }
            if (add_special && add_eos_) out.push_back(eos_);
            break;
        }
        case VocabModel::WPM: {
            if (add_special && bos_ >= 0) out.push_back(bos_);
            for (const Fragment& f : frags) {
                if (f.token >= 0)
                    out.push_back(f.token);
                else
                    wpm_->encode(text.substr(f.off, f.len), out);
            }
            if (add_special && sep_ >= 0) out.push_back(sep_);
            break;
        }
    }
    return out;
}

std::string VocabImpl::render_piece(int32_t id) const {
    const uint32_t a = table_.attr[(size_t)id];
    const std::string& text = table_.text[(size_t)id];
    if (a & (ATTR_UNKNOWN | ATTR_CONTROL | ATTR_USER_DEFINED)) return text;
    if (a & ATTR_NORMAL) {
        if (model_ == VocabModel::BPE && !escape_whitespace_) {
            // byte-level: every code point stands for one byte
            std::string out;
            for (size_t i = 0; i < text.size();) {
                const size_t start = i;
                const int b = unicode::cp_to_byte(utf8::decode(text, i));
                if (b >= 0)
                    out.push_back((char)b);
                else
                    out.append(text, start, i - start);  // not a byte stand-in: keep as is
            }
            return out;
        }
        std::string out = text;
        replace_all(out, kSpaceMark, " ");
        return out;
    }
    if (a & ATTR_BYTE) {
        if (text.size() == 6 && text.compare(0, 3, "<0x") == 0 && text[5] == '>') {
            const int hi = hex_digit(text[3]), lo = hex_digit(text[4]);
            if (hi >= 0 && lo >= 0) return std::string(1, (char)(hi * 16 + lo));
        }
        return text;
    }
    return "";  // unused / undefined tokens render as nothing
}

void VocabImpl::build_pieces() {
    pieces_.resize((size_t)table_.size());
    for (int32_t id = 0; id < table_.size(); ++id) pieces_[(size_t)id] = render_piece(id);
}

std::string VocabImpl::token_to_piece(int32_t id, bool special) const {
    check_id(id);
    if (!special && (table_.attr[(size_t)id] & (ATTR_UNKNOWN | ATTR_CONTROL))) return "";
    return pieces_[(size_t)id];
}

std::string VocabImpl::detokenize(const std::vector<int32_t>& ids, bool remove_special, bool unparse_special) const {
    for (int32_t id : ids) check_id(id);
    size_t begin = 0, end = ids.size();
    if (remove_special && add_bos_ && end > begin && ids[begin] == bos_) ++begin;
    if (remove_special && add_eos_ && end > begin && ids[end - 1] == eos_) --end;

    std::string out;
    // the space SentencePiece prefixed to the text comes off the first visible piece
    bool strip_space = add_space_prefix_;
    for (size_t i = begin; i < end; ++i) {
        const int32_t id = ids[i];
        const std::string piece = token_to_piece(id, unparse_special);
        if (piece.empty()) continue;
        if (strip_space && piece[0] == ' ')
            out.append(piece, 1, std::string::npos);
        else
            out += piece;
        strip_space = false;
    }
    if (clean_spaces_) clean_spaces(out);
    return out;
}

// HF clean_up_tokenization_spaces, pass for pass as the reference applies it.
void VocabImpl::clean_spaces(std::string& s) const {
    // " ?" " !" " ." " ," lose the space
    std::string a;
    a.reserve(s.size());
    for (size_t i = 0; i < s.size(); ++i) {
        const char next = i + 1 < s.size() ? s[i + 1] : '\0';
        if (s[i] == ' ' && (next == '?' || next == '!' || next == '.' || next == ',')) continue;
        a += s[i];
    }
    // " ' " becomes "'"
    std::string b;
    b.reserve(a.size());
    for (size_t i = 0; i < a.size(); ++i) {
        const char x = a[i];
        if (i >= 1 && x == '\'' && i + 1 < a.size() && a[i - 1] == ' ' && a[i + 1] == ' ') {
            b.pop_back();
            b += x;
            a[i + 1] = '\0';  // consumed: it must not count as a space for the next check
            ++i;
            continue;
        }
        b += x;
    }
    // " 's" " 'm" " 're" " 've" lose the space
    std::string c;
    c.reserve(b.size());
    for (size_t i = 0; i < b.size(); ++i) {
        const char x = b[i];
        if (i >= 1 && b[i - 1] == ' ' && x == '\'' && i + 1 < b.size()) {
            const char x1 = b[i + 1];
            const char x2 = i + 2 < b.size() ? b[i + 2] : '\0';
            if (x1 == 's' || x1 == 'm' || ((x1 == 'r' || x1 == 'v') && x2 == 'e')) c.pop_back();
        }
        c += x;
    }
    s.swap(c);
}

}  // namespace ember
