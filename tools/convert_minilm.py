#!/usr/bin/env python3
"""Convert a sentence-transformers BERT folder (all-MiniLM-L6-v2: model.safetensors,
tokenizer.json, 1_Pooling/config.json) to a GGUF `bert` file, with the keys and tensor
names llama.cpp's converter writes, using gguf-py and safetensors (no torch).

    python tools/convert_minilm.py [MODEL_DIR] [-o OUT.gguf] [--outtype f16|f32]

MODEL_DIR defaults to the fetched copy (tools/fetch_assets.py minilm).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import gguf
import numpy as np

# sentence-transformers' pooling config -> gguf.PoolingType
_POOLING_MODES = {
    "pooling_mode_mean_tokens": gguf.PoolingType.MEAN,
    "pooling_mode_cls_token": gguf.PoolingType.CLS,
    "pooling_mode_lasttoken": gguf.PoolingType.LAST,
}
# tensors a BERT checkpoint carries that an embedding model does not use
_SKIPPED = ("embeddings.position_ids", "pooler.dense.weight", "pooler.dense.bias")


def _read_json(path: Path) -> dict:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def pooling_type(model_dir: Path) -> gguf.PoolingType | None:
    """The pooling named by modules.json's Pooling module, or None without one."""
    modules = model_dir / "modules.json"
    if not modules.is_file():
        return None
    for mod in _read_json(modules):
        if mod["type"].endswith("Pooling"):
            config = _read_json(model_dir / mod["path"] / "config.json")
            for key, kind in _POOLING_MODES.items():
                if config.get(key):
                    return kind
            raise ValueError(f"{model_dir}: pooling {config} is not mean, CLS or last")
    return None


def vocab(tokenizer: dict) -> tuple[list[str], list[int]]:
    """Tokens in id order and their gguf token types, written the way llama.cpp's WPM
    reader expects: a word-initial piece gets U+2581 in front, a "##" continuation
    loses its "##", control tokens stay as they are."""
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
            types.append(gguf.TokenType.UNUSED)
        elif i in added and added[i].get("special"):
            tokens.append(tok)
            types.append(gguf.TokenType.CONTROL)
        else:
            tokens.append(tok[2:] if tok.startswith("##") else "\u2581" + tok)
            types.append(gguf.TokenType.USER_DEFINED if i in added else gguf.TokenType.NORMAL)
    return tokens, types


def tensor_type(gguf_name: str, array: np.ndarray, outtype: str) -> gguf.GGMLQuantizationType:
    """llama.cpp's rule: vectors, norms, position and token-type embeddings stay F32."""
    if outtype == "f32" or array.ndim <= 1 or gguf_name.endswith("_norm.weight"):
        return gguf.GGMLQuantizationType.F32
    if gguf_name.startswith(("position_embd.", "token_types.")):
        return gguf.GGMLQuantizationType.F32
    return gguf.GGMLQuantizationType.F16


def converted_tensors(model_dir: Path, n_layer: int, outtype: str):
    """Yields (gguf name, array as stored, its type) for every tensor the model uses."""
    from safetensors.numpy import load_file

    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.BERT, n_layer)
    weights = load_file(str(model_dir / "model.safetensors"))
    for hf_name in sorted(weights):
        name = hf_name.removeprefix("bert.")
        if name in _SKIPPED or name.startswith("cls."):
            continue
        new_name = names.get_name(name, try_suffixes=(".weight", ".bias"))
        if new_name is None:
            raise ValueError(f"{model_dir}: no GGUF name for tensor {hf_name}")
        data = weights[hf_name].astype(np.float32, copy=False)
        kind = tensor_type(new_name, data, outtype)
        if kind == gguf.GGMLQuantizationType.F16:
            data = data.astype(np.float16)
        yield new_name, data, kind


def convert(model_dir: Path, out: Path, outtype: str = "f16") -> Path:
    model_dir = Path(model_dir)
    config = _read_json(model_dir / "config.json")
    if config.get("model_type") != "bert":
        raise ValueError(f"{model_dir}: model_type {config.get('model_type')!r} is not bert")
    tokenizer = _read_json(model_dir / "tokenizer.json")
    n_layer = config["num_hidden_layers"]

    writer = gguf.GGUFWriter(str(out), gguf.MODEL_ARCH_NAMES[gguf.MODEL_ARCH.BERT])
    writer.add_type(gguf.GGUFType.MODEL)
    writer.add_name(model_dir.name)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32 if outtype == "f32"
                         else gguf.LlamaFileType.MOSTLY_F16)
    writer.add_block_count(n_layer)
    writer.add_context_length(config["max_position_embeddings"])
    writer.add_embedding_length(config["hidden_size"])
    writer.add_feed_forward_length(config["intermediate_size"])
    writer.add_head_count(config["num_attention_heads"])
    writer.add_layer_norm_eps(config["layer_norm_eps"])
    writer.add_causal_attention(False)
    if (pooling := pooling_type(model_dir)) is not None:
        writer.add_pooling_type(pooling)

    tokens, types = vocab(tokenizer)
    if len(tokens) != config["vocab_size"]:
        raise ValueError(f"tokenizer has {len(tokens)} tokens, config says {config['vocab_size']}")
    writer.add_token_type_count(config.get("type_vocab_size", 1))
    writer.add_tokenizer_model("bert")
    # llama.cpp's pre-tokenizer hash of this tokenizer is BGE's (checked with `tokenizers`);
    # WPM ignores it, it only identifies the pre-tokenizer
    writer.add_tokenizer_pre("bert-bge")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    gguf.SpecialVocab(model_dir, n_vocab=len(tokens)).add_to_gguf(writer, quiet=True)

    for name, data, kind in converted_tensors(model_dir, n_layer, outtype):
        writer.add_tensor(name, data, raw_dtype=kind)

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model_dir", nargs="?", type=Path, help="sentence-transformers folder")
    ap.add_argument("-o", "--outfile", type=Path)
    ap.add_argument("--outtype", choices=["f16", "f32"], default="f16")
    a = ap.parse_args(argv)
    model_dir = a.model_dir
    if model_dir is None:
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
        from tools.fetch_assets import minilm_dir
        model_dir = minilm_dir()
    out = a.outfile or Path(f"{model_dir.name}.{a.outtype.upper()}.gguf")
    convert(model_dir, out, a.outtype)
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
