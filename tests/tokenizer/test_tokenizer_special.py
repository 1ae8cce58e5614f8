"""Special tokens, BOS/EOS, end-of-generation and detokenization details on the
suite vocabularies (which carry the real special-token tables of their models)."""
from __future__ import annotations

import functools
import time

import pytest

from ember.engine import EmberError, Model


@pytest.fixture(scope="module")
def vocab(vocab_dir, native_lib):
    @functools.lru_cache(maxsize=None)
    def get(name: str) -> Model:
        return Model(vocab_dir / f"ggml-vocab-{name}.gguf", vocab_only=True)
    return get


def test_parse_special_controls_control_tokens(vocab):
    qwen = vocab("qwen2")
    text = "<|im_start|>user\nhi<|im_end|>"
    ids = qwen.tokenize(text, add_special=False, parse_special=True)
    assert ids[0] == 151644 and ids[-1] == 151645
    plain = qwen.tokenize(text, add_special=False, parse_special=False)
    assert 151644 not in plain and 151645 not in plain
    assert len(plain) > len(ids)
    assert qwen.detokenize(plain) == text
    assert qwen.detokenize(ids, unparse_special=True) == text
    assert qwen.detokenize(ids, unparse_special=False) == "user\nhi"


def test_user_defined_tokens_always_match(vocab):
    # deepseek's byte-like user-defined tokens and mpt's whitespace runs are
    # "added tokens": matched with parse_special off as well
    ds = vocab("deepseek-llm")
    assert ds.tokenize("ø", add_special=False) == [100002]
    mpt = vocab("mpt")
    ids = mpt.tokenize("a" + " " * 24 + "b", add_special=False)
    assert 50254 in ids


def test_add_special_follows_gguf_and_model_defaults(vocab):
    assert vocab("llama-bpe").tokenize("Hello", add_special=True)[0] == 128000
    assert vocab("llama-bpe").tokenize("Hello", add_special=False)[0] != 128000
    assert vocab("llama-spm").tokenize("Hello", add_special=True)[0] == 1
    assert vocab("gpt-2").tokenize("Hello", add_special=True) == vocab("gpt-2").tokenize("Hello", add_special=False)
    assert vocab("gemma-4").tokenize("Hello", add_special=True)[0] == vocab("gemma-4").bos_id
    bert = vocab("bert-bge")
    ids = bert.tokenize("hello", add_special=True)
    assert ids[0] == 101 and ids[-1] == 102


@pytest.mark.parametrize("name,marker", [
    ("llama-bpe", "<|eot_id|>"), ("qwen2", "<|im_end|>"), ("phi-3", "<|end|>"),
    ("gemma-4", "<turn|>"), ("command-r", "<|END_OF_TURN_TOKEN|>"),
    ("deepseek-llm", "<｜end▁of▁sentence｜>"), ("gpt-2", "<|endoftext|>"),
])
def test_end_of_turn_markers_are_eog(vocab, name, marker):
    m = vocab(name)
    ids = m.tokenize(marker, add_special=False, parse_special=True)
    assert len(ids) == 1, ids
    assert m.is_eog(ids[0])
    assert m.is_eog(m.eos_id)


def test_ordinary_tokens_are_not_eog(vocab):
    m = vocab("llama-bpe")
    assert not any(m.is_eog(t) for t in m.tokenize("Hello world, how are you?", add_special=False))
    assert not m.is_eog(128000)  # BOS


def test_spm_pieces_and_leading_space(vocab):
    spm = vocab("llama-spm")
    ids = spm.tokenize("Hello world", add_special=True)
    assert ids[0] == 1
    assert spm.token_to_piece(ids[1]) == b" Hello"
    assert spm.token_to_piece(1) == b""
    assert spm.token_to_piece(1, special=True) == b"<s>"
    assert spm.token_to_piece(13) == b"\n"  # <0x0A>
    # the dummy prefix space is dropped once, after a BOS or not
    assert spm.detokenize(ids) == "Hello world"
    assert spm.detokenize(ids, remove_special=True) == "Hello world"
    assert spm.detokenize(ids[1:]) == "Hello world"
    assert spm.detokenize(ids, unparse_special=True) == "<s> Hello world"


def test_streaming_pieces_concatenate_to_text(vocab):
    m = vocab("qwen2")
    text = "Grüße 😶‍🌫️ 中文 — done"
    ids = m.tokenize(text, add_special=False)
    assert b"".join(m.token_to_piece(t) for t in ids).decode("utf-8") == text


def test_bad_token_ids_raise(vocab):
    m = vocab("gpt-2")
    with pytest.raises(EmberError):
        m.detokenize([0, 10**8])
    with pytest.raises(EmberError):
        m.token_to_piece(-1)
    assert not m.is_eog(-1) and not m.is_eog(10**8)


@pytest.mark.parametrize("name", ["gpt-2", "llama-bpe", "llama-spm", "qwen2", "gemma-4", "deepseek-llm"])
def test_100kb_tokenizes_well_under_a_second(vocab, vocab_dir, name):
    base = (vocab_dir / "ggml-vocab-llama-bpe.gguf.inp").read_text(encoding="utf-8")
    text = (base.replace("__ggml_vocab_test__", "") * 200)[:100_000]
    m = vocab(name)
    t0 = time.perf_counter()
    ids = m.tokenize(text, add_special=False)
    dt = time.perf_counter() - t0
    assert ids
    assert dt < 0.5, f"{name}: {dt:.3f} s for 100 KB"
