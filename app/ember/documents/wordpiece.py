"""BERT's WordPiece tokenizer in Python (uncased BERT vocabularies such as MiniLM's): the
text normaliser, the whitespace-and-punctuation split, then greedy longest-match pieces.
The engine has its own WPM (native/src/text); this one serves the numpy embedder."""
from __future__ import annotations

import unicodedata
from dataclasses import dataclass

# GGUF stores a word-initial piece with U+2581 in front and a continuation without "##"
_PHANTOM = "\u2581"
_CONTROL = 3  # gguf.TokenType.CONTROL


def _is_whitespace(ch: str) -> bool:
    return ch in " \t\n\r" or unicodedata.category(ch) == "Zs"


def _is_control(ch: str) -> bool:
    if ch in "\t\n\r":
        return False
    return unicodedata.category(ch) in ("Cc", "Cf")


def _is_punctuation(ch: str) -> bool:
    cp = ord(ch)
    # BERT counts every non-alphanumeric ASCII symbol as punctuation ($, ^, `, ...)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def _is_cjk(cp: int) -> bool:
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF
            or 0x2A700 <= cp <= 0x2B73F or 0x2B740 <= cp <= 0x2B81F or 0x2B820 <= cp <= 0x2CEAF
            or 0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)


def normalize(text: str, lowercase: bool = True) -> str:
    """BertNormalizer: drop control characters, whitespace to spaces, spaces around CJK
    ideographs, and for an uncased model strip accents (NFD, marks removed) and lowercase."""
    out = []
    for ch in text:
        cp = ord(ch)
        if cp == 0 or cp == 0xFFFD or _is_control(ch):
            continue
        if _is_whitespace(ch):
            out.append(" ")
        elif _is_cjk(cp):
            out.append(f" {ch} ")
        else:
            out.append(ch)
    text = "".join(out)
    if lowercase:
        text = "".join(c for c in unicodedata.normalize("NFD", text)
                       if unicodedata.category(c) != "Mn")
        text = text.lower()
    return text


def pre_tokenize(text: str) -> list[str]:
    """BertPreTokenizer: split on whitespace, every punctuation character a word of its own."""
    words: list[str] = []
    for chunk in text.split():
        start = 0
        for i, ch in enumerate(chunk):
            if _is_punctuation(ch):
                if i > start:
                    words.append(chunk[start:i])
                words.append(ch)
                start = i + 1
        if start < len(chunk):
            words.append(chunk[start:])
    return words


@dataclass
class WordPiece:
    initial: dict[str, int]       # pieces that start a word
    continuation: dict[str, int]  # pieces after the first ("##ing" in the HF vocabulary)
    unk_id: int
    cls_id: int
    sep_id: int
    pad_id: int = 0
    lowercase: bool = True
    max_word_chars: int = 100

    @classmethod
    def from_gguf_tokens(cls, tokens: list[str], types: list[int], unk_id: int, cls_id: int,
                         sep_id: int, pad_id: int = 0) -> WordPiece:
        initial, continuation = {}, {}
        for i, (tok, kind) in enumerate(zip(tokens, types)):
            if kind == _CONTROL:
                continue
            if tok.startswith(_PHANTOM):
                initial.setdefault(tok[1:], i)
            else:
                continuation.setdefault(tok, i)
        return cls(initial, continuation, unk_id, cls_id, sep_id, pad_id)

    @classmethod
    def from_gguf_layout(cls, layout) -> WordPiece:
        """From a GGUF file's vocabulary (an `ember.gguf_file.GGUFLayout`)."""
        v = layout.values
        tokens = layout.array("tokenizer.ggml.tokens")
        # older files name [CLS] cls_token_id; llama.cpp's converter now writes it as BOS
        cls_id = v.get("tokenizer.ggml.bos_token_id", v.get("tokenizer.ggml.cls_token_id"))
        if tokens is None or cls_id is None:
            raise ValueError(f"{layout.path}: no WordPiece vocabulary")
        return cls.from_gguf_tokens(tokens, layout.array("tokenizer.ggml.token_type"),
                                    unk_id=v["tokenizer.ggml.unknown_token_id"], cls_id=cls_id,
                                    sep_id=v["tokenizer.ggml.seperator_token_id"],
                                    pad_id=v.get("tokenizer.ggml.padding_token_id", 0))

    @classmethod
    def from_vocab(cls, vocab: dict[str, int], lowercase: bool = True) -> WordPiece:
        """From a Hugging Face tokenizer.json's model.vocab ("##" marks continuations)."""
        initial = {t: i for t, i in vocab.items() if not t.startswith("##")}
        continuation = {t[2:]: i for t, i in vocab.items() if t.startswith("##")}
        return cls(initial, continuation, vocab["[UNK]"], vocab["[CLS]"], vocab["[SEP]"],
                   vocab.get("[PAD]", 0), lowercase)

    def word_ids(self, word: str) -> list[int]:
        """Greedy longest match; a word with any part not in the vocabulary is one [UNK]."""
        if len(word) > self.max_word_chars:
            return [self.unk_id]
        ids, start = [], 0
        while start < len(word):
            table = self.initial if start == 0 else self.continuation
            end = len(word)
            while end > start and word[start:end] not in table:
                end -= 1
            if end == start:
                return [self.unk_id]
            ids.append(table[word[start:end]])
            start = end
        return ids

    def encode(self, text: str, max_tokens: int = 256) -> list[int]:
        """[CLS] pieces [SEP], the pieces cut so the whole is at most max_tokens."""
        ids: list[int] = []
        for word in pre_tokenize(normalize(text, self.lowercase)):
            ids.extend(self.word_ids(word))
            if len(ids) >= max_tokens - 2:
                break
        return [self.cls_id] + ids[:max_tokens - 2] + [self.sep_id]
