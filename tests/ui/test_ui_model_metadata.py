"""Per-layer metadata arrays (newer files store e.g. attention.head_count_kv once per
layer) never break the model card or `ember info`: they are summarised, and sizes
computed from them use the right per-layer values."""
from __future__ import annotations

import pytest
from ember.metadata import describe_value, is_per_layer, meta_int, meta_ints, per_layer_summary

from tests.support.ui import data_dir, find, make_window  # noqa: F401

# --------------------------------------------------------------------------- helpers

def test_meta_int_takes_scalars_arrays_and_junk():
    assert meta_int(8) == 8 and meta_int("8") == 8 and meta_int(8.0) == 8
    assert meta_int([8, 8, 16, 16]) == 16
    assert meta_int([8, 8, 16, 16], reduce="min") == 8
    assert meta_int([8, 2, 8], reduce="sum") == 18
    assert meta_int([2, 8, 8], reduce="mode") == 8
    for junk in (None, [], "eight", {"a": 1}, [None, "x"], float("nan")):
        assert meta_int(junk, default=7) == 7
    assert meta_ints([1, "2", None, 3.0]) == [1, 2, 3]


def test_per_layer_summary():
    assert per_layer_summary([8] * 30) == "8"
    assert per_layer_summary([8, 8, 8, 8, 8, 2] * 5) == "8 (per layer: 2-8)"
    assert per_layer_summary([8, 8, 16, 16]) == "8 (per layer: 8-16)"
    assert per_layer_summary([True] * 5 + [False]) == "true (per layer: 5 true, 1 false)"
    assert per_layer_summary([0.5, 0.25]) == "0.5 (per layer: 0.25-0.5)"
    assert describe_value([2, 4], n_layer=2) == "2 (per layer: 2-4)"
    assert describe_value([2, 4], n_layer=3) == "[2, 4] (2 items)"  # not one per layer
    assert describe_value(["a", "b"]) == "[a, b] (2 items)"
    assert describe_value(12) == "12"
    assert is_per_layer([1, 2], 2) and not is_per_layer(["x"], 1) and not is_per_layer([], 0)


# --------------------------------------------------------------------------- files

def _write_per_layer_gguf(path):
    """A header-only llama file, written by gguf-py, whose head counts and FFN width are
    per-layer arrays (as gemma4 and other newer converters write them)."""
    import gguf

    from tests.support.chain_models import byte_chars
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("per-layer test")
    w.add_block_count(4)
    w.add_context_length(256)
    w.add_embedding_length(64)
    w.add_head_count([8, 8, 16, 16])
    w.add_head_count_kv([2, 2, 4, 4])
    w.add_feed_forward_length([128, 128, 256, 256])
    w.add_layer_norm_rms_eps(1e-5)
    w.add_array("llama.attention.sliding_window_pattern", [True, False, True, False])
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("smollm")
    w.add_token_list(byte_chars())
    w.add_token_types([1] * 256)
    w.add_token_merges(["Ġ Ġ"])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@pytest.fixture
def per_layer_gguf(tmp_path):
    return _write_per_layer_gguf(tmp_path / "per-layer.gguf")


@pytest.fixture(scope="module")
def gemma4_vocab(vocab_dir):
    from ember.engine import Model
    path = vocab_dir / "ggml-vocab-gemma-4.gguf"
    kv = Model(path, metadata_only=True).metadata["gemma4.attention.head_count_kv"]
    assert isinstance(kv, list) and len(kv) == 30  # really one value per block
    return path


@pytest.mark.native
def test_describe_model_with_per_layer_arrays(per_layer_gguf):
    from ember.engine import Model
    from ember.model_card import describe_model, estimate_ram
    m = Model(per_layer_gguf, metadata_only=True)
    info = describe_model(m, per_layer_gguf)
    assert info["n_layer"] == 4
    assert info["heads_text"] == "8 (per layer: 8-16), KV 2 (per layer: 2-4)"
    # sized for the largest layer
    assert (info["n_head"], info["n_head_kv"], info["n_ff"]) == (16, 4, 256)
    assert info["kv_heads_total"] == 2 + 2 + 4 + 4  # the KV cache holds each layer's own heads
    # the KV part of the estimate: K and V, F16, per token, over every layer's KV heads
    per_token = 2 * 2 * info["head_dim"] * 12
    assert estimate_ram(info, 2048) - estimate_ram(info, 1024) >= per_token * 1024


@pytest.mark.native
def test_gemma4_vocab_file_describes(gemma4_vocab):
    from ember.engine import Model
    from ember.model_card import describe_model
    m = Model(gemma4_vocab, metadata_only=True)
    info = describe_model(m, gemma4_vocab)
    assert info["arch"] == "gemma4" and info["n_layer"] == 30
    assert info["heads_text"] == "16, KV 8 (per layer: 2-8)"
    assert info["kv_heads_total"] == 25 * 8 + 5 * 2
    assert info["has_template"]


@pytest.mark.native
@pytest.mark.parametrize("which", ["per-layer", "gemma-4"])
def test_model_card_shows_per_layer_values_and_the_real_error(qtbot, data_dir, which, tmp_path,
                                                             vocab_dir):
    """Opening such a file shows its card from the header; the load then fails with the
    engine's own reason (neither file has weights), never a Python TypeError."""
    from PySide6.QtWidgets import QLabel
    if which == "per-layer":
        path, arch, heads = (_write_per_layer_gguf(tmp_path / "p.gguf"), "llama",
                             "8 (per layer: 8-16), KV 2 (per layer: 2-4)")
    else:
        path, arch, heads = (vocab_dir / "ggml-vocab-gemma-4.gguf", "gemma4",
                             "16, KV 8 (per layer: 2-8)")
    win = make_window(qtbot, data_dir)
    with qtbot.waitSignal(win.model_failed, timeout=120_000) as blocker:
        win.open_model_path(str(path))
    title, _, detail = blocker.args[0].partition("\n")
    assert title.endswith(path.name) and detail  # the engine's reason, in words
    assert "TypeError" not in detail and "int()" not in detail
    # the card was filled from the header before the load failed
    assert find(win, QLabel, "modelArch").text() == arch
    assert find(win, QLabel, "modelHeads").text() == heads
    assert win.model is None


@pytest.mark.native
@pytest.mark.parametrize("which", ["per-layer", "gemma-4"])
def test_ember_info_summarises_per_layer_values(which, tmp_path, vocab_dir, capsys):
    from ember.commands import cli
    if which == "per-layer":
        path = _write_per_layer_gguf(tmp_path / "p.gguf")
        want = ["llama.attention.head_count = 8 (per layer: 8-16)  [8, 8, 16, 16]",
                "llama.attention.head_count_kv = 2 (per layer: 2-4)  [2, 2, 4, 4]",
                "llama.feed_forward_length = 128 (per layer: 128-256)  [128, 128, 256, 256]",
                "llama.attention.sliding_window_pattern = true (per layer: 2 true, 2 false)"]
    else:
        path = vocab_dir / "ggml-vocab-gemma-4.gguf"
        want = ["gemma4.attention.head_count_kv = 8 (per layer: 2-8)  [8, 8, 8, 8, ... (30 items)]",
                "gemma4.attention.head_count = 16\n"]
    assert cli.main(["info", str(path)]) == 0
    out = capsys.readouterr().out
    for line in want:
        assert line in out
    # arrays that are not per layer (the vocabulary) are shown as before
    assert "tokenizer.ggml.token_type = [1, 1, 1, 1, ... (" in out or which == "gemma-4"
