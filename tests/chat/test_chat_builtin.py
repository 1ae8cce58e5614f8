"""Models without a chat template: the built-in format is chosen from the vocabulary
and architecture (Gemma turns for gemma3), a system prompt is folded into the first
user turn where the format has no system role, and <end_of_turn> ends the reply."""
from __future__ import annotations

from pathlib import Path

import pytest

from ember.chat import (
    BUILTIN_FORMATS,
    ChatTemplate,
    StopScanner,
    TemplateRaisedError,
    detect_builtin_format,
    fold_system_messages,
)
from tests.support.chain_models import gemma_turns_model

CHAT = [
    {"role": "system", "content": "You are a concise assistant."},
    {"role": "user", "content": "What is the capital of France?"},
    {"role": "assistant", "content": "Paris."},
    {"role": "user", "content": "And of Italy?"},
]
# Gemma 3's own template (google/gemma-3-*-it) renders CHAT as this: no system role,
# the system text and a blank line open the first user turn, the assistant is "model".
GEMMA_CHAT = (
    "<bos><start_of_turn>user\nYou are a concise assistant.\n\nWhat is the capital of France?"
    "<end_of_turn>\n<start_of_turn>model\nParis.<end_of_turn>\n"
    "<start_of_turn>user\nAnd of Italy?<end_of_turn>\n<start_of_turn>model\n"
)


def _template(templates_dir: Path, name: str, bos="<bos>", eos="<eos>") -> ChatTemplate:
    return ChatTemplate.from_string((templates_dir / name).read_text("utf-8"), bos, eos)


# --------------------------------------------------------------------------- detection

@pytest.mark.parametrize("meta, want", [
    ({"general.architecture": "gemma3"}, "gemma"),
    ({"general.architecture": "llama",
      "tokenizer.ggml.tokens": ["<pad>", "<start_of_turn>", "<end_of_turn>", "a"]}, "gemma"),
    ({"general.architecture": "llama",
      "tokenizer.ggml.tokens": ["<|begin_of_text|>", "<|start_header_id|>",
                                "<|end_header_id|>", "<|eot_id|>"]}, "llama3"),
    ({"general.architecture": "phi3",
      "tokenizer.ggml.tokens": ["<s>", "<|user|>", "<|assistant|>", "<|end|>"]}, "phi3"),
    # phi3 is also Phi-4's architecture name, whose vocabulary speaks ChatML
    ({"general.architecture": "phi3",
      "tokenizer.ggml.tokens": ["<|im_start|>", "<|im_sep|>", "<|im_end|>"]}, "chatml"),
    ({"general.architecture": "qwen2",
      "tokenizer.ggml.tokens": ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]}, "chatml"),
    ({"general.architecture": "llama", "tokenizer.ggml.tokens": ["<s>", "</s>", "a"]}, None),
    ({}, None),
])
def test_format_is_chosen_from_vocabulary_then_architecture(meta, want):
    got = detect_builtin_format(meta)
    assert (got.name if got else None) == want


def test_gemma_builtin_matches_gemmas_own_template(templates_dir: Path):
    gemma = ChatTemplate.from_builtin("gemma", "<bos>", "<eos>")
    assert gemma.render(CHAT) == GEMMA_CHAT
    # without a system message, byte for byte what Gemma 2's template renders
    gemma2 = _template(templates_dir, "google-gemma-2-2b-it.jinja")
    assert gemma.render(CHAT[1:]) == gemma2.render(CHAT[1:])
    assert gemma.render(CHAT[1:], add_generation_prompt=False) == \
        gemma2.render(CHAT[1:], add_generation_prompt=False)
    # stops: the model's EOS, the turn end, and the model starting a turn by itself
    assert gemma.stop_strings == ("<eos>", "<start_of_turn>", "<end_of_turn>")


def test_phi3_builtin_matches_phi35s_template(templates_dir: Path):
    phi = ChatTemplate.from_builtin("phi3", "<s>", "<|endoftext|>")
    ref = _template(templates_dir, "microsoft-Phi-3.5-mini-instruct.jinja", "<s>", "<|endoftext|>")
    assert phi.render(CHAT) == ref.render(CHAT)
    assert "<|end|>" in phi.stop_strings


def test_llama3_builtin_renders_headers():
    llama3 = ChatTemplate.from_builtin("llama3", "<|begin_of_text|>", "<|end_of_text|>")
    out = llama3.render(CHAT[:2])
    assert out == ("<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
                   "You are a concise assistant.<|eot_id|><|start_header_id|>user<|end_header_id|>"
                   "\n\nWhat is the capital of France?<|eot_id|>"
                   "<|start_header_id|>assistant<|end_header_id|>\n\n")
    assert "<|eot_id|>" in llama3.stop_strings


@pytest.mark.parametrize("name", sorted(BUILTIN_FORMATS))
def test_builtin_formats_never_fail(name):
    t = ChatTemplate.from_builtin(name)
    odd = [{"role": "system", "content": None},
           {"role": "user", "content": [{"type": "text", "text": "look"}, {"type": "image"}]},
           {"role": "user", "content": "again"}, {"role": "tool", "content": "42"}]
    assert "look" in t.render(odd) and "again" in t.render(odd)


def test_missing_template_uses_the_detected_format_with_a_notice():
    meta = {"general.architecture": "gemma3", "tokenizer.ggml.bos_token_id": 2,
            "tokenizer.ggml.eos_token_id": 1,
            "tokenizer.ggml.tokens": ["<pad>", "<eos>", "<bos>", "<start_of_turn>",
                                      "<end_of_turn>"]}
    t = ChatTemplate.from_metadata(meta)
    assert t.is_fallback and t.builtin is BUILTIN_FORMATS["gemma"]
    assert t.notice == ("The model has no chat template (tokenizer.chat_template is missing); "
                        "using the built-in Gemma format instead.")
    assert t.prompt(CHAT).text == GEMMA_CHAT
    # a template that does not compile falls back to the same format
    t = ChatTemplate.from_metadata({**meta, "tokenizer.chat_template": "{% for %}"})
    assert t.builtin is BUILTIN_FORMATS["gemma"] and t.prompt(CHAT).text == GEMMA_CHAT


# --------------------------------------------------------------------------- system folding

def test_system_prompt_is_folded_for_a_template_without_system_role(templates_dir: Path):
    gemma2 = _template(templates_dir, "google-gemma-2-2b-it.jinja")
    with pytest.raises(TemplateRaisedError, match="System role not supported"):
        gemma2.render(CHAT)
    prompt = gemma2.prompt(CHAT)
    # Gemma's format, not a ChatML fallback, with the system text in the first turn
    assert not prompt.is_fallback and prompt.notice is None
    assert prompt.text == GEMMA_CHAT
    assert "<end_of_turn>" in prompt.stop_strings


def test_fold_system_messages():
    assert fold_system_messages(CHAT[1:]) is None  # nothing to fold
    folded = fold_system_messages(CHAT)
    assert [m["role"] for m in folded] == ["user", "assistant", "user"]
    assert folded[0]["content"] == "You are a concise assistant.\n\nWhat is the capital of France?"
    assert CHAT[1]["content"] == "What is the capital of France?"  # caller's list untouched
    parts = fold_system_messages([{"role": "system", "content": "S"},
                                  {"role": "user", "content": [{"type": "text", "text": "U"}]}])
    assert parts[0]["content"][0] == {"type": "text", "text": "S\n\n"}
    assert fold_system_messages([{"role": "system", "content": "S"}]) == \
        [{"role": "user", "content": "S"}]


def test_a_failing_template_falls_back_to_the_vocabularys_format():
    meta = {"tokenizer.chat_template": "{{ raise_exception('Roles must alternate') }}",
            "general.architecture": "gemma3"}
    prompt = ChatTemplate.from_metadata(meta).prompt(CHAT[1:])
    assert prompt.is_fallback
    assert prompt.notice.endswith("using the built-in Gemma format instead.")
    assert prompt.text.startswith("<start_of_turn>user\nWhat is the capital of France?")


# --------------------------------------------------------------------------- the real gemma3 file

@pytest.mark.native
def test_gemma3_file_gets_gemma_turns(gemma_model_path):
    from ember.engine import Model
    m = Model(gemma_model_path, vocab_only=True)
    try:
        assert m.arch == "gemma3"
        assert "tokenizer.chat_template" not in m.metadata
        t = ChatTemplate.from_metadata(m.metadata, token_text=m.token_text)
        assert t.builtin is BUILTIN_FORMATS["gemma"]
        prompt = t.prompt(CHAT)
        assert prompt.text == GEMMA_CHAT
        # the turn markers are the vocabulary's single special tokens, BOS once
        ids = m.tokenize(prompt.text, add_special=False, parse_special=True)
        sot, eot = (m.tokenize(s, add_special=False, parse_special=True)
                    for s in ("<start_of_turn>", "<end_of_turn>"))
        assert len(sot) == 1 and len(eot) == 1
        assert ids[0] == m.bos_id and ids.count(m.bos_id) == 1
        assert ids.count(sot[0]) == 4 and ids.count(eot[0]) == 3
        # <end_of_turn> ends generation: an end-of-generation token in the engine's
        # vocabulary, and a stop string for text that arrives already detokenized
        assert m.is_eog(eot[0])
        assert "<end_of_turn>" in prompt.stop_strings
        scanner = StopScanner(prompt.stop_strings)
        assert scanner.feed("Rome.<end_of") == ("Rome.", False)
        assert scanner.feed("_turn>\n<start_of_turn>user") == ("", True)
    finally:
        m.close()


@pytest.mark.native
def test_generation_stops_on_end_of_turn(tmp_path):
    from ember.engine import GenerationStats, Model, SamplingParams, Session
    cm = gemma_turns_model()
    m = Model(cm.write(tmp_path / "gemma-turns.gguf"), n_ctx=128)
    try:
        t = ChatTemplate.from_metadata(m.metadata, token_text=m.token_text)
        assert t.builtin is BUILTIN_FORMATS["gemma"]  # from the vocabulary alone
        prompt = t.prompt(CHAT[:2])
        assert prompt.text == ("<bos><start_of_turn>user\nYou are a concise assistant.\n\n"
                               "What is the capital of France?<end_of_turn>\n"
                               "<start_of_turn>model\n")
        stats = GenerationStats()
        out = "".join(Session(m).generate(prompt.text, 16, SamplingParams(temperature=0.0),
                                          stats=stats))
        # the model says "Hello!" and then <end_of_turn>; without it as an end of
        # generation it would run on to the 16-token limit
        assert out == "Hello!"
        assert stats.stop_reason == "eog"
        assert stats.stop_token == cm.id("<end_of_turn>")
        assert stats.generated_tokens == 2
    finally:
        m.close()
