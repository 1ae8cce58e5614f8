"""Every BPE pre-tokenizer against an independent reference.

The reference splits text the way llama.cpp does: each pre-tokenizer regex runs
through a regex engine over a "collapsed" copy of the text where every non-ASCII
code point is replaced by one byte for its category (so \\p{L} etc. work with a
byte regex) and non-ASCII whitespace by \\v. Then plain byte-level BPE by merge
rank. Ember's hand-written matchers must give the same ids on random text for
every pre-tokenizer, using gpt-2's merges with tokenizer.ggml.pre swapped.
"""
from __future__ import annotations

import random
import re
import unicodedata

import pytest
from gguf import GGUFReader

from ember.engine import Model
from tests.support import gguf_writer as gw

# ----------------------------------------------------------------------------- reference split

WHITESPACE = set(range(0x09, 0x0E)) | set(range(0x2000, 0x200B)) | {
    0x20, 0x85, 0xA0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000}
COLLAPSED = {"N": "\xd1", "L": "\xd2", "P": "\xd3", "M": "\xd4", "S": "\xd5"}
ASCII_CLASS = {"N": "0-9", "L": "A-Za-z", "P": "!-#%-*,-/:-;?-@\\[-\\]_\\{\\}", "M": "",
               "S": "\\$\\+<-\\>\\^`\\|~"}
ASCII_WS = " \\t\\n\\x0b\\x0c\\r"


def collapse(text: str, categories: bool) -> str:
    out = []
    for ch in text:
        c = ord(ch)
        if c < 128:
            out.append(ch)
        elif c in WHITESPACE:
            out.append("\x0b")
        elif categories:
            out.append(COLLAPSED.get(unicodedata.category(ch)[0], "\xd0"))
        else:
            out.append(ch)
    return "".join(out)


def translate(rx: str) -> str:
    """\\p{X} -> collapsed byte + its ASCII members; \\s -> ASCII whitespace; $ -> end."""
    out, inside, i = [], False, 0
    while i < len(rx):
        ch = rx[i]
        if ch == "\\":
            nx = rx[i + 1]
            if nx == "p":
                j = rx.index("}", i)
                cat = rx[i + 3:j][0]
                body = COLLAPSED[cat] + ASCII_CLASS[cat]
                out.append(body if inside else f"[{body}]")
                i = j + 1
                continue
            if nx == "s":
                out.append(ASCII_WS if inside else f"[{ASCII_WS}]")
            elif nx == "S":
                out.append(f"[^{ASCII_WS}]")
            else:
                out.append(rx[i:i + 2])
            i += 2
            continue
        if ch == "[":
            inside = True
        elif ch == "]" and inside:
            inside = False
        out.append("\\Z" if ch == "$" and not inside else ch)
        i += 1
    return "".join(out)


def split(text: str, regexes: list[str]) -> list[str]:
    pieces = [text] if text else []
    for rx in regexes:
        view = collapse(text, "\\p{" in rx)
        pattern = re.compile(translate(rx))
        new, start = [], 0
        for piece in pieces:
            seg = view[start:start + len(piece)]
            pos = 0
            for m in pattern.finditer(seg):
                if m.start() > pos:
                    new.append(piece[pos:m.start()])
                if m.end() > m.start():
                    new.append(piece[m.start():m.end()])
                pos = m.end()
            if pos < len(piece):
                new.append(piece[pos:])
            start += len(piece)
        pieces = new
    return pieces


CONTRACTIONS_CI = "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
GPT2 = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"
LLAMA3 = (CONTRACTIONS_CI + "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
          "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")
QWEN2 = LLAMA3.replace("\\p{N}{1,3}", "\\p{N}")
QWEN35 = (CONTRACTIONS_CI + "|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*"
          "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")
SEED_CODER = (CONTRACTIONS_CI + "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\\r\\n]+"
              "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")
JAIS2 = (CONTRACTIONS_CI + "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
         + "|".join(f"\\s{{{n}}}(?!\\S)" for n in (512, 256, 128, 64, 32, 16, 8, 4)) + "|\\s{1,2}(?!\\S)|\\s{1}")
UPPER = "((?=[\\p{L}])([^a-z]))"
LOWER = "((?=[\\p{L}])([^A-Z]))"
TEKKEN = (f"[^\\r\\n\\p{{L}}\\p{{N}}]?{UPPER}*{LOWER}+|[^\\r\\n\\p{{L}}\\p{{N}}]?{UPPER}+{LOWER}*|\\p{{N}}"
          "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")
GPT4O = (f"[^\\r\\n\\p{{L}}\\p{{N}}]?{UPPER}*{LOWER}+{CONTRACTIONS_CI}?"
         f"|[^\\r\\n\\p{{L}}\\p{{N}}]?{UPPER}+{LOWER}*{CONTRACTIONS_CI}?|\\p{{N}}{{1,3}}"
         "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")
PORO = " ?[^(\\s|.,!?…。，、।۔،)]+"
CJK = "[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+"
DEEPSEEK_LETTERS = ("\\s?[A-Za-z\u00b5\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u01ba\u01bc-\u01bf\u01c4-\u0293"
                    "\u0295-\u02af\u0370-\u0373\u0376\u0377\u037b-\u037d\u037f\u0386\u0388-\u038a\u038c"
                    "\u038e-\u03a1\u03a3-\u03f5\u03f7-\u0481\u048a-\u052f\u0531-\u0556\u10a0-\u10c5"
                    "\u13a0-\u13f5\u13f8-\u13fd\u1c90-\u1cba\u1cbd-\u1cbf\u1d00-\u1d2b\u1d6b-\u1d77"
                    "\u1d79-\u1d9a\u1e00-\u1f15\u1f18-\u1f1d\u1f20-\u1f45\u1f48-\u1f4d\u1f50-\u1f57\u1f59"
                    "\u1f5b\u1f5d\u1f5f-\u1f7d\u1f80-\u1fb4\u1fb6-\u1fbc\u1fbe\u1fc2-\u1fc4\u1fc6-\u1fcc"
                    "\u1fd0-\u1fd3\u1fd6-\u1fdb\u1fe0-\u1fec\u1ff2-\u1ff4\u1ff6-\u1ffc\u2102\u2107"
                    "\u210a-\u2113\u2115\u2119-\u211d\u2124\u2126\u2128\u212a-\u212d\u212f-\u2134\u2139"
                    "\u213c-\u213f\u2145-\u2149\u214e\u2183\u2184\u2c00-\u2c7b\u2c7e-\u2ce4\u2ceb-\u2cee"
                    "\u2cf2\u2cf3\ua640-\ua66d\ua680-\ua69b\ua722-\ua76f\ua771-\ua787\ua78b-\ua78e"
                    "\uab70-\uabbf\ufb00-\ufb06\ufb13-\ufb17\uff21-\uff3a\uff41-\uff5a\U00010400-\U0001044f"
                    "\U000104b0-\U000104d3\U000104d8-\U000104fb\U00010c80-\U00010cb2\U00010cc0-\U00010cf2"
                    "\U000118a0-\U000118df\U0001e900-\U0001e943]+")
DEEPSEEK_PUNCT = "\\s?[!-/:-~\uff01-\uff0f\uff1a-\uff5e\u2018-\u201f\u3000-\u3002]+"

# pre name -> (regexes, ignore_merges)
PRE = {
    "default": (["[\\p{P}\\$\\+<=>\\^~\\|]+", GPT2, "\\p{N}+", "[0-9][0-9][0-9]"], False),
    "gpt-2": ([GPT2], False),
    "llama-bpe": ([LLAMA3], True),
    "dbrx": ([LLAMA3], False),
    "qwen2": ([QWEN2], False),
    "qwen35": ([QWEN35], False),
    "seed-coder": ([SEED_CODER], False),
    "jais-2": ([JAIS2], False),
    "smollm": (["\\p{N}", GPT2], False),
    "falcon": (["[\\p{P}\\$\\+<=>\\^~\\|`]+", GPT2, "[0-9][0-9][0-9]"], False),
    "deepseek-llm": (["[\r\n]", DEEPSEEK_LETTERS, DEEPSEEK_PUNCT, "\\s+$", CJK, "\\p{N}+"], False),
    "deepseek-coder": (["[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", CJK, "\\p{N}"], False),
    "poro-chat": ([PORO], False),
    "viking": ([PORO, "\\p{N}"], False),
    "tekken": ([TEKKEN], True),
    "gpt-4o": ([GPT4O], False),
    "chameleon": (["<sentinel:[0-9]+>", "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z", "([\\t\\n]|    |  )", "\\p{N}",
                   "[\\p{P}!-/:-@\\[-`{-~]", GPT2], False),
}

# ----------------------------------------------------------------------------- reference BPE


def byte_map() -> dict[int, str]:
    keep = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    m, n = {b: chr(b) for b in keep}, 0
    for b in range(256):
        if b not in m:
            m[b] = chr(256 + n)
            n += 1
    return m


class ReferenceBpe:
    def __init__(self, tokens: list[str], merges: list[str]):
        self.ids = {t: i for i, t in enumerate(tokens)}
        self.ranks = {}
        for r, m in enumerate(merges):
            a, _, b = m.partition(" ")
            self.ranks.setdefault((a, b), r)
        self.bytes = byte_map()

    def encode(self, text: str, regexes: list[str], ignore_merges: bool) -> list[int]:
        out = []
        for word in split(text, regexes):
            sym = [self.bytes[b] for b in word.encode("utf-8")]
            whole = "".join(sym)
            if ignore_merges and whole in self.ids:
                out.append(self.ids[whole])
                continue
            while len(sym) > 1:
                ranked = [(self.ranks.get((sym[i], sym[i + 1]), 1 << 60), i) for i in range(len(sym) - 1)]
                rank, i = min(ranked)
                if rank == 1 << 60:
                    break
                sym[i:i + 2] = [sym[i] + sym[i + 1]]
            out.extend(self.ids[s] for s in sym if s in self.ids)
        return out


# ----------------------------------------------------------------------------- test

ALPHABET = (list("aAzZ09 \t\n\r\x0b\x1c'.,!?-_/<>|()$+=^~`") +
            ["  ", "    ", "'s", "'LL", "IMGIMGABZ", "<sentinel:12>", "é", "\u0301", "ß", "Ω", "中", "😀",
             "\u00a0", "\u3000", "\u2028", "ﬀ", "١", "²", "Ⅻ", "…", "。", "，", "।", "\u0085", "ÄÖ", "ǅ",
             "\u200d", "\ufffd", "가", "\u0378", "ｗ", "！", "‘", "Hello", " world", "HTTPServer", "12345"])


@pytest.fixture(scope="module")
def gpt2_vocab(vocab_dir):
    r = GGUFReader(vocab_dir / "ggml-vocab-gpt-2.gguf")
    tokens = r.fields["tokenizer.ggml.tokens"].contents()
    types = r.fields["tokenizer.ggml.token_type"].contents()
    merges = r.fields["tokenizer.ggml.merges"].contents()
    return tokens, types, merges, ReferenceBpe(tokens, merges)


def vocab_with_pre(tmp_path, tokens, types, merges, pre: str):
    s = gw.GGUFSpec()
    s.add("general.architecture", gw.STRING, "gpt2")
    s.add("tokenizer.ggml.model", gw.STRING, "gpt2")
    s.add("tokenizer.ggml.pre", gw.STRING, pre)
    s.add("tokenizer.ggml.tokens", gw.ARRAY, (gw.STRING, tokens))
    s.add("tokenizer.ggml.token_type", gw.ARRAY, (gw.I32, types))
    s.add("tokenizer.ggml.merges", gw.ARRAY, (gw.STRING, merges))
    path = tmp_path / f"vocab-{pre}.gguf"
    path.write_bytes(s.to_bytes())
    return path


@pytest.mark.parametrize("pre", sorted(PRE))
def test_pre_tokenizer_matches_reference(pre, gpt2_vocab, tmp_path, native_lib):
    tokens, types, merges, ref = gpt2_vocab
    model = Model(vocab_with_pre(tmp_path, tokens, types, merges, pre), vocab_only=True)
    regexes, ignore_merges = PRE[pre]
    rng = random.Random(pre)
    texts = ["", "Hello world", "I'M  12345 ok\n\n  x", "HELLOWorld's helloWORLD's", "a  \u3000b\u2028 ",
             "IMGIMGABCDEZ <sentinel:7> 。，…!"]
    texts += ["".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 24))) for _ in range(400)]
    bad = []
    for text in texts:
        got = model.tokenize(text, add_special=False, parse_special=False)
        want = ref.encode(text, regexes, ignore_merges)
        if got != want:
            bad.append(f"  {text!r}: got {got} want {want}")
    model.close()
    assert not bad, f"{pre}: {len(bad)}/{len(texts)} differ\n" + "\n".join(bad[:8])
