"""The native GBNF grammar: which strings it accepts and refuses (against the slow Python
reference in tests/support/gbnf_reference.py), errors with a line and column for bad
grammars, and the logits mask on a real vocabulary: every token it leaves can continue
the text, the tokens it masks cannot, and end-of-generation stays only where the grammar
may end."""
from __future__ import annotations

import ctypes
import random

import numpy as np
import pytest
from ember.chat.json_schema import JSON_OBJECT_GBNF
from ember.engine import EmberError, Grammar, Model

from tests.support.gbnf_reference import Reference

pytestmark = pytest.mark.native

ARITHMETIC = r"""
# integers with + - * / and parentheses
root   ::= expr
expr   ::= term (("+" | "-") term)*
term   ::= factor (("*" | "/") factor)*
factor ::= [0-9]{1,3}
         | "(" expr ")"      # an alternative on its own line
"""

UNICODE = r"""
root ::= "é" [α-ω]{1,3} [^a-z\n]? "日本" tail
tail ::= ( "\u00e9" | [\x41-\x43] )*
"""

MISC = r"""
root  ::= word ("," ws word){0,2} "."?
word  ::= [a-c]+ | "\"" [^"\\]* "\"" | "x" . "x"
ws    ::= [ \t]*
"""

NESTED = r"""
root ::= list
list ::= "[" ( item ( "," item )* )? "]"
item ::= list | [01] | "ab"{2}
"""

GRAMMARS = {"arithmetic": ARITHMETIC, "unicode": UNICODE, "misc": MISC, "nested": NESTED,
            "json": JSON_OBJECT_GBNF}
ALPHABETS = {"arithmetic": "0123(+)*/- ", "unicode": "éαβωz日本ABCD\n", "misc": 'abcx,. "\\\t',
             "nested": "[],01ab", "json": '{}[]:," 0-1.eatrufnl\\\n'}


@pytest.fixture(scope="module")
def vocab(starter_model_path):
    return Model(starter_model_path, vocab_only=True)


@pytest.mark.parametrize("name", list(GRAMMARS))
def test_accepts_exactly_the_reference_sentences(name):
    native, ref = Grammar(GRAMMARS[name]), Reference(GRAMMARS[name])
    rng = random.Random(name)
    sentences = [s for s in (ref.sentence(rng) for _ in range(300)) if s is not None]
    assert len(sentences) > 50
    for s in sentences:
        assert native.matches(s), (name, s)
    # random strings, and sentences with one character changed, dropped or added: mostly
    # refused, and the native grammar must refuse exactly those the reference does
    alphabet = ALPHABETS[name]
    probes = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 8)))
              for _ in range(400)]
    for s in sentences[:150]:
        i = rng.randrange(len(s) + 1)
        probes += [s[:i] + rng.choice(alphabet) + s[i + 1:], s[:i] + s[i + 1:],
                   s[:i] + rng.choice(alphabet) + s[i:]]
    refused = 0
    for p in probes:
        expected = ref.matches(p)
        refused += not expected
        assert native.matches(p) == expected, (name, p)
    assert refused > len(probes) // 4


def test_known_examples():
    g = Grammar(ARITHMETIC)
    for good in ["1", "12+3", "(1+2)*3", "((7))", "1*2*3-4/5"]:
        assert g.matches(good), good
    for bad in ["", "1+", "(1", "1234", "+1", "1 + 2", "()"]:
        assert not g.matches(bad), bad
    j = Grammar(JSON_OBJECT_GBNF)
    assert j.matches('{"a": [1, -2.5e3, {"b": null}], "c": "\\u00e9\\n", "d": true}')
    for bad in ['[1]', '{"a" 1}', '{"a": 01}', '{"a": "\n"}', '{"a": tru}', '{,}', '{}}']:
        assert not j.matches(bad), bad


def test_partial_text_keeps_its_state():
    g = Grammar(UNICODE)
    data = "éαβ日本".encode()
    for b in data[:-1]:  # one byte at a time, through the middle of each character
        g.accept_text(bytes([b]))
        assert not g.can_end
    g.accept_text(data[-1:] + b"A")
    assert g.can_end and not g.is_done  # the tail may go on
    with pytest.raises(EmberError, match="cannot continue"):
        g.accept_text("z")
    g.accept_text("é")  # the refused byte left the state as it was
    assert g.can_end
    done = Grammar('root ::= "ab"')
    done.accept_text("ab")
    assert done.can_end and done.is_done


@pytest.mark.parametrize("text, where", [
    ('root ::= "abc', "line 1, column 10"),
    ('root ::= [a-z', "line 1, column 10"),
    ('root ::= a\na ::= "x" | b', "line 2, column 13"),
    ('root ::= "x"\n\n  other ::= ( "y" ', "line 3, column 13"),
    ('root ::= "x" ::= "y"', "line 1, column 14"),
    ('root ::= [z-a]', "line 1, column 13"),
    ('root ::= "\\q"', "line 1, column 11"),
    ('root ::= "a"{3,1}', "line 1, column 13"),
    ('root ::= "a"\nroot ::= "b"', "line 2, column 1"),
    ('root ::= "é" @', "line 1, column 14"),
    ('root ::= x\nx ::= y "a"\ny ::= x | "b"', "line 2, column 1"),
])
def test_bad_grammars_name_line_and_column(text, where):
    with pytest.raises(EmberError) as e:
        Grammar(text)
    assert where in str(e.value), str(e.value)


def test_what_each_refusal_says():
    cases = {
        'root ::= expr\nexpr ::= expr "+" "1" | "1"': "left-recursive",
        'root ::= ("a"?)* "b"': "left-recursive",  # a repeated group that can be empty
        'root ::= thing': "'thing' is used but never defined",
        'start ::= "a"': "no rule 'root'",
        '': "empty",
        'root ::= "a"{20000}': "repetition count above",
    }
    for text, what in cases.items():
        with pytest.raises(EmberError, match=what):
            Grammar(text)
    assert Grammar('start ::= "a"', root="start").matches("a")


def test_too_many_parses_is_an_error_not_a_blow_up():
    # after n a's every sequence of n pending b's and c's is a parse of its own
    g = Grammar('root ::= "a" root "b" | "a" root "c" | ""')
    g.accept_text("a" * 7)
    with pytest.raises(EmberError, match="too ambiguous"):
        g.accept_text("a" * 3)
    g.accept_text("ab")  # the state before the refused text


def test_mask_masks_tokens_that_would_need_too_many_parses(vocab):
    g = Grammar('root ::= "a" root "b" | "a" root "c" | ""', vocab)
    g.accept_text("a" * 7)
    n = vocab.n_vocab
    row, ptr = _row(n)
    g.apply(ptr, n)  # no error: the tokens of many a's are masked, the others stay
    pieces = {t: vocab.token_to_piece(t) for t in range(n)}
    kept = {pieces[t] for t in np.flatnonzero(row == 0)}
    assert {b"a", b"b", b"c"} <= kept
    assert not any(p.startswith(b"aaaa") for p in kept)


def _row(n):
    row = np.zeros(n, dtype=np.float32)
    return row, row.ctypes.data_as(ctypes.POINTER(ctypes.c_float))


def _utf8_split(data: bytes) -> tuple[str, bool] | None:
    """data as text, and whether it ends inside a character; None when it is not UTF-8."""
    for cut in range(0, 4):
        head = data[:len(data) - cut]
        try:
            text = head.decode("utf-8")
        except UnicodeDecodeError:
            continue
        if cut:
            tail = data[len(data) - cut:]
            lead = tail[0]
            need = 2 if lead >> 5 == 6 else 3 if lead >> 4 == 14 else 4 if lead >> 3 == 30 else 0
            if not need or cut >= need or any(b >> 6 != 2 for b in tail[1:]):
                return None
        return text, cut > 0
    return None


@pytest.fixture(scope="module")
def qwen2_vocab(vocab_dir):
    return Model(vocab_dir / "ggml-vocab-qwen2.gguf", vocab_only=True)


@pytest.mark.parametrize("name", ["arithmetic", "json", "misc", "unicode", "qwen2-json",
                                  "qwen2-unicode"])
def test_mask_keeps_exactly_the_tokens_that_can_continue(request, name):
    # the starter's 49k vocabulary, and qwen2's 151k with its many CJK tokens (the walk's
    # remembered non-ASCII characters)
    vocab = request.getfixturevalue("qwen2_vocab" if name.startswith("qwen2") else "vocab")
    name = name.removeprefix("qwen2-")
    ref = Reference(GRAMMARS[name])
    g = Grammar(GRAMMARS[name], vocab)
    n = vocab.n_vocab
    pieces = [vocab.token_to_piece(t) for t in range(n)]
    eog = {t for t in range(n) if vocab.is_eog(t)}
    rng = np.random.default_rng(abs(hash(name)) % 2**32)
    row, ptr = _row(n)
    checked_kept = checked_masked = 0
    for walk in range(3):
        g.reset()
        text = b""
        for _step in range(8):
            row[:] = 0
            n_kept = g.apply(ptr, n)
            kept = np.flatnonzero(row == 0)
            assert len(kept) == n_kept
            masked = np.flatnonzero(row != 0)
            assert np.all(np.isneginf(row[masked]))
            prefix = text.decode("utf-8", errors="strict") if _utf8_split(text)[1] is False \
                else None
            ends_here = prefix is not None and ref.matches(prefix)
            assert bool(eog & set(kept.tolist())) == ends_here
            sample_kept = [t for t in kept if t not in eog]
            if len(sample_kept) > 300:
                sample_kept = rng.choice(sample_kept, 300, replace=False)
            for t in sample_kept:
                split = _utf8_split(text + pieces[t])
                assert split is not None, (text, pieces[t])
                assert ref.viable(split[0]), (text, pieces[t])
                checked_kept += 1
            for t in rng.choice(masked, min(300, len(masked)), replace=False):
                if t in eog or not pieces[t]:
                    continue
                split = _utf8_split(text + pieces[t])
                if split is None:
                    continue  # not UTF-8: masked, rightly
                if split[1]:
                    continue  # ends inside a character: the reference cannot judge it
                assert not ref.viable(split[0]), (text, pieces[t])
                checked_masked += 1
            choices = [t for t in kept if t not in eog]
            if not choices:
                break
            t = int(rng.choice(choices))
            g.accept(t)
            text += pieces[t]
    assert checked_kept > 100 and checked_masked > 100


def test_end_of_generation_only_where_the_grammar_may_end(vocab):
    g = Grammar('root ::= "yes" | "yes, sir"', vocab)
    n = vocab.n_vocab
    row, ptr = _row(n)
    eos = vocab.eos_token if hasattr(vocab, "eos_token") else None
    eog = [t for t in range(n) if vocab.is_eog(t)]
    g.apply(ptr, n)
    assert all(np.isneginf(row[eog]))
    with pytest.raises(EmberError, match="cannot end here"):
        g.accept(eog[0])
    g.accept_text("yes")
    row[:] = 0
    g.apply(ptr, n)
    assert not any(np.isneginf(row[eog]))  # it may end, or go on with ", sir"
    assert not np.isneginf(row[vocab.tokenize(",", add_special=False)[0]])
    g.accept(eog[0])
    assert g.is_done
    del eos


@pytest.mark.parametrize("prefix", ['{"a": "日本', '{"a": [1, "x"], "b', '{"é": tr'])
def test_mask_agrees_with_the_matcher_on_every_token(qwen2_vocab, prefix):
    # the walk over the trie (with the states it reuses) against feeding every token's
    # text to the matcher one by one, on all 151k tokens
    vocab = qwen2_vocab
    n = vocab.n_vocab
    g = Grammar(JSON_OBJECT_GBNF, vocab)
    g.accept_text(prefix)
    row, ptr = _row(n)
    g.apply(ptr, n)
    check = Grammar(JSON_OBJECT_GBNF)
    check.accept_text(prefix)
    eog = {t for t in range(n) if vocab.is_eog(t)}
    disagree = []
    for t in range(n):
        piece = vocab.token_to_piece(t) if t not in eog else b""
        expected = False
        if piece:
            try:
                check.accept_text(piece)
                expected = True
            except EmberError:
                pass
            else:
                check.reset()
                check.accept_text(prefix)
        if expected != (row[t] == 0):
            disagree.append((t, piece))
    assert not disagree, disagree[:10]
    assert 0 < np.count_nonzero(row == 0) < n
