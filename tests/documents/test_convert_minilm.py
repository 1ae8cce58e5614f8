"""tools/convert_minilm.py: the GGUF `bert` file it writes, read back with gguf-py, holds
llama.cpp's keys and names and the safetensors' tensors bit for bit."""
from __future__ import annotations

import gguf
import numpy as np
import pytest
from safetensors.numpy import load_file


def _field(reader: gguf.GGUFReader, key: str):
    f = reader.fields[key]
    if f.types[0] == gguf.GGUFValueType.STRING:
        return bytes(f.parts[f.data[0]]).decode()
    if f.types[0] == gguf.GGUFValueType.ARRAY:
        if f.types[1] == gguf.GGUFValueType.STRING:
            return [bytes(f.parts[i]).decode() for i in f.data]
        return [int(f.parts[i][0]) for i in f.data]
    return f.parts[f.data[0]][0]


@pytest.fixture(scope="module")
def reader_f32(minilm_gguf):
    return gguf.GGUFReader(minilm_gguf("f32"))


def test_metadata_is_what_llamacpp_writes_for_bert(reader_f32):
    r = reader_f32
    assert _field(r, "general.architecture") == "bert"
    assert _field(r, "bert.block_count") == 6
    assert _field(r, "bert.embedding_length") == 384
    assert _field(r, "bert.feed_forward_length") == 1536
    assert _field(r, "bert.attention.head_count") == 12
    assert _field(r, "bert.context_length") == 512
    assert _field(r, "bert.attention.causal") == False
    assert _field(r, "bert.pooling_type") == gguf.PoolingType.MEAN
    assert abs(_field(r, "bert.attention.layer_norm_epsilon") - 1e-12) < 1e-18
    assert _field(r, "tokenizer.ggml.model") == "bert"
    assert _field(r, "tokenizer.ggml.pre") == "bert-bge"
    assert _field(r, "tokenizer.ggml.token_type_count") == 2
    assert _field(r, "tokenizer.ggml.bos_token_id") == 101   # [CLS]
    assert _field(r, "tokenizer.ggml.seperator_token_id") == 102
    assert _field(r, "tokenizer.ggml.unknown_token_id") == 100
    assert _field(r, "tokenizer.ggml.padding_token_id") == 0


def test_vocabulary_in_phantom_space_form(reader_f32):
    tokens = _field(reader_f32, "tokenizer.ggml.tokens")
    types = _field(reader_f32, "tokenizer.ggml.token_type")
    assert len(tokens) == len(types) == 30522
    # ids from bert-base-uncased's vocab.txt: 1996 "the", 2075 "##ing", 101 "[CLS]"
    assert tokens[1996] == "\u2581the" and types[1996] == gguf.TokenType.NORMAL
    assert tokens[2075] == "ing" and types[2075] == gguf.TokenType.NORMAL
    assert tokens[101] == "[CLS]" and types[101] == gguf.TokenType.CONTROL
    assert [i for i, t in enumerate(types) if t == gguf.TokenType.CONTROL] == [0, 100, 101, 102, 103]


def test_tensor_names_are_bert_tensors(reader_f32):
    allowed = {gguf.TENSOR_NAMES[t].format(bid=i)
               for t in gguf.MODEL_TENSORS[gguf.MODEL_ARCH.BERT] for i in range(6)}
    names = [t.name for t in reader_f32.tensors]
    assert len(names) == len(set(names)) == 5 + 6 * 16
    assert {n.rsplit(".", 1)[0] for n in names} <= allowed


def test_f32_tensors_are_bit_equal_to_the_safetensors(reader_f32, minilm_dir):
    st = load_file(str(minilm_dir / "model.safetensors"))
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.BERT, 6)
    unused = {"embeddings.position_ids", "pooler.dense.weight", "pooler.dense.bias"}
    want = {names.get_name(k, try_suffixes=(".weight", ".bias")): v
            for k, v in st.items() if k not in unused}
    got = {}
    for t in reader_f32.tensors:
        assert t.tensor_type == gguf.GGMLQuantizationType.F32
        got[t.name] = np.asarray(t.data).reshape(tuple(reversed(t.shape.tolist())))
    assert set(got) == set(want)
    for name, data in got.items():
        assert data.shape == want[name].shape and data.tobytes() == want[name].tobytes(), name


def test_f16_file_rounds_matrices_and_keeps_vectors(minilm_gguf, minilm_dir):
    r = gguf.GGUFReader(minilm_gguf("f16"))
    st = load_file(str(minilm_dir / "model.safetensors"))
    kinds = {t.name: t.tensor_type for t in r.tensors}
    F16, F32 = gguf.GGMLQuantizationType.F16, gguf.GGMLQuantizationType.F32
    assert kinds["token_embd.weight"] == F16 and kinds["blk.0.ffn_up.weight"] == F16
    assert kinds["position_embd.weight"] == F32 and kinds["token_types.weight"] == F32
    assert kinds["blk.0.attn_output_norm.weight"] == F32 and kinds["blk.0.attn_q.bias"] == F32
    up = next(np.asarray(t.data) for t in r.tensors if t.name == "blk.2.ffn_up.weight")
    want = st["encoder.layer.2.intermediate.dense.weight"].astype(np.float16)
    assert up.reshape(want.shape).tobytes() == want.tobytes()
