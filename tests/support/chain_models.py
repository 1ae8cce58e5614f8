"""Tiny llama-architecture models whose greedy output is fixed in advance (no tests here).

Every layer adds nothing to the residual stream (attention output and FFN down
projections are zero), so the last hidden state is the embedding of the last token.
Embeddings are one-hot and the output matrix maps each "current" token's dimension to
the row of the token that must follow, so greedy decoding walks a chain given by the
test: ``{"\\n": "Hello", "Hello": "!", "!": "<end_of_turn>"}`` makes a prompt ending in
a newline generate ``Hello!`` and then the end-of-turn token.  That lets tests check
prompt formats, end-of-generation tokens and streaming through the real engine and
app without depending on what a real model happens to say.

The vocabulary is GPT-2 byte level (every byte a token, no merges), the special
tokens the test names, and whole-word tokens for the chain.
"""
from __future__ import annotations

import numpy as np

from tests.support import gguf_writer as gw

CONTROL, USER_DEFINED, NORMAL = 3, 4, 1


def byte_chars() -> list[str]:
    """GPT-2's byte-to-character map, in byte order."""
    keep = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    m, n = {b: chr(b) for b in keep}, 0
    for b in range(256):
        if b not in m:
            m[b] = chr(256 + n)
            n += 1
    return [m[b] for b in range(256)]


class ChainModel:
    def __init__(self, control: list[str], user_defined: list[str], words: list[str],
                 chain: dict[str, str], template: str | None = None, arch_name: str = "chain",
                 n_embd: int = 32, n_ctx_train: int = 256):
        self.bytes = byte_chars()
        tokens = ["<pad>", "<bos>", "<eos>"]
        types = [CONTROL, CONTROL, CONTROL]
        for t in control:
            tokens.append(t)
            types.append(CONTROL)
        for t in user_defined:
            tokens.append(t)
            types.append(USER_DEFINED)
        for w in words:
            tokens.append(self._spelling(w))
            types.append(NORMAL)
        for ch in self.bytes:
            if ch not in tokens:
                tokens.append(ch)
                types.append(NORMAL)
        self.tokens, self.types = tokens, types
        self.ids = {t: i for i, t in enumerate(tokens)}
        self.chain = chain
        self.template = template
        self.arch_name = arch_name
        self.n_embd = n_embd
        self.n_ctx_train = n_ctx_train

    def _spelling(self, text: str) -> str:
        """A word as the byte-level vocabulary spells it ("\\n" is "Ċ", " a" is "Ġa")."""
        return "".join(self.bytes[b] for b in text.encode("utf-8"))

    def id(self, text: str) -> int:
        return self.ids[text] if text in self.ids else self.ids[self._spelling(text)]

    def spec(self) -> gw.GGUFSpec:
        spec = gw.tiny_llama(self.tokens, [], self.types, n_embd=self.n_embd, tied=False)
        spec.kv = [(k, t, self.n_ctx_train if k == "llama.context_length" else v)
                   for k, t, v in spec.kv if k != "general.name"]
        spec.add("general.name", gw.STRING, self.arch_name)
        if self.template is not None:
            spec.add("tokenizer.chat_template", gw.STRING, self.template)
        n_vocab, d = len(self.tokens), self.n_embd
        current = list(self.chain)
        if len(current) >= d:
            raise ValueError("too many chain links for the embedding width")
        dim = {self.id(t): i + 1 for i, t in enumerate(current)}
        emb = np.zeros((n_vocab, d), dtype=np.float32)
        emb[:, 0] = 1.0  # every other token: a direction no row of the output reads
        for tok, k in dim.items():
            emb[tok] = 0.0
            emb[tok, k] = 1.0
        out = np.zeros((n_vocab, d), dtype=np.float32)
        for cur, nxt in self.chain.items():
            out[self.id(nxt), dim[self.id(cur)]] = 1.0
        replace = {"token_embd.weight": emb, "output.weight": out,
                   "output_norm.weight": np.ones(d, dtype=np.float32)}
        for t in spec.tensors:
            name = t.name
            if name in replace:
                arr = replace[name]
            elif name.endswith(("attn_output.weight", "ffn_down.weight")):
                arr = np.zeros(list(reversed(t.ne)), dtype=np.float32)
            else:
                continue
            new = gw.f32_tensor(name, arr) if t.ggml_type == 0 else gw.f16_tensor(name, arr)
            t.data, t.ne = new.data, new.ne
        return spec

    def write(self, path) -> str:
        path.write_bytes(self.spec().to_bytes())
        return str(path)


def gemma_turns_model() -> ChainModel:
    """No chat template; Gemma's turn tokens in the vocabulary.  After the generation
    prompt (which ends in a newline) it says "Hello!" and then <end_of_turn>."""
    return ChainModel(control=["<start_of_turn>", "<end_of_turn>"], user_defined=[],
                      words=["Hello"],
                      chain={"\n": "Hello", "Hello": "!", "!": "<end_of_turn>"},
                      arch_name="gemma-turns-chain")


# ChatML whose generation prompt opens the reasoning block, as DeepSeek-R1's does.
THINKING_CHATML = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n<think>\n{% endif %}"
)


def reasoning_model() -> ChainModel:
    """A ChatML model whose template opens <think>: it thinks "Hmm, a greeting." and
    answers "Hi there" (the close tag split from the answer), then <|im_end|>."""
    return ChainModel(control=["<|im_start|>", "<|im_end|>"], user_defined=["<think>", "</think>"],
                      words=["Hmm", ", a greeting.", "Hi", " there"],
                      chain={"\n": "Hmm", "Hmm": ", a greeting.", ", a greeting.": "</think>",
                             "</think>": "Hi", "Hi": " there", " there": "<|im_end|>"},
                      template=THINKING_CHATML, arch_name="reasoning-chain")


# What the tool-calling chain models below say (the reply's pieces, in order).
PARIS_CALL = '\n{"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}\n'
ROME_CALL = '\n<tool_call>\n{"name": "get_time", "arguments": {"city": "Rome"}}\n</tool_call>'


def hermes_tools_model(template: str) -> ChainModel:
    """A model with a Qwen/Hermes template (template: its source, e.g. llama.cpp's
    Qwen2.5 one) that answers every turn with two <tool_call> blocks, get_weather(Paris,
    2) and get_time(Rome), then <eos>."""
    return ChainModel(control=["<|im_start|>", "<|im_end|>"],
                      user_defined=["<tool_call>", "</tool_call>"],
                      words=[PARIS_CALL, ROME_CALL],
                      chain={"\n": "<tool_call>", "<tool_call>": PARIS_CALL,
                             PARIS_CALL: "</tool_call>", "</tool_call>": ROME_CALL,
                             ROME_CALL: "<eos>"},
                      template=template, arch_name="hermes-tools-chain")


LLAMA_CALL = '{"name": "get_weather", "parameters": {"city": "Paris", "days": 2}}'
LLAMA_AFTER_NAME = 'get_time", "parameters": {"city": "Lima"}}'
LLAMA_ARGS = '{"city": "Oslo", "days": 1}}'


def llama_tools_model(template: str) -> ChainModel:
    """A model with a Llama 3.x template that answers with the JSON call get_weather(Paris,
    2); made to start a call ('{"name": "' after the prompt) it calls get_time(Lima), and
    after '..."parameters": ' it writes the arguments {"city": "Oslo", "days": 1}."""
    return ChainModel(control=["<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
                               "<|eot_id|>", "<|eom_id|>", "<|python_tag|>"],
                      user_defined=[], words=[LLAMA_CALL, LLAMA_AFTER_NAME, LLAMA_ARGS],
                      chain={"\n": LLAMA_CALL, LLAMA_CALL: "<eos>",
                             '"': LLAMA_AFTER_NAME, LLAMA_AFTER_NAME: "<eos>",
                             " ": LLAMA_ARGS, LLAMA_ARGS: "<eos>"},
                      template=template, arch_name="llama-tools-chain")


MISTRAL_CALLS = ('[{"name": "get_weather", "arguments": {"city": "Paris", "days": 2}, '
                 '"id": "a1B2c3D4e"}]')


def mistral_tools_model(template: str) -> ChainModel:
    """A model with a Mistral template whose [TOOL_CALLS] is a control token (as in Mistral's
    own vocabularies): after [/INST] it writes [TOOL_CALLS] and one call in a JSON array."""
    return ChainModel(control=["[INST]", "[/INST]", "[TOOL_CALLS]", "[AVAILABLE_TOOLS]",
                               "[/AVAILABLE_TOOLS]", "[TOOL_RESULTS]", "[/TOOL_RESULTS]"],
                      user_defined=[], words=[MISTRAL_CALLS],
                      chain={"[/INST]": "[TOOL_CALLS]", "[TOOL_CALLS]": MISTRAL_CALLS,
                             MISTRAL_CALLS: "<eos>"},
                      template=template, arch_name="mistral-tools-chain")


HARMONY_ANALYSIS = ("analysis<|message|>The user greets.<|end|><|start|>assistant<|channel|>"
                    "final<|message|>")
HARMONY_CALL = 'get_weather <|constrain|>json<|message|>{"city": "Paris", "days": 2}'
HARMONY_ARGS = '{"city": "Oslo", "days": 1}'


def harmony_model(template: str) -> ChainModel:
    """A model with gpt-oss' template (harmony channels; the tags inside the words are plain
    text, the ones between them control tokens): it reasons "The user greets." and answers
    "Hello there"; made to open a call ("...to=functions.") it calls get_weather(Paris, 2),
    and after a named call's header it writes {"city": "Oslo", "days": 1}."""
    return ChainModel(control=["<|start|>", "<|end|>", "<|message|>", "<|channel|>",
                               "<|constrain|>", "<|return|>", "<|call|>"],
                      user_defined=[], words=[HARMONY_ANALYSIS, "Hello there", HARMONY_CALL,
                                              HARMONY_ARGS],
                      chain={"t": "<|channel|>", "<|channel|>": HARMONY_ANALYSIS,
                             HARMONY_ANALYSIS: "Hello there", "Hello there": "<|return|>",
                             ".": HARMONY_CALL, HARMONY_CALL: "<|call|>",
                             "<|message|>": HARMONY_ARGS, HARMONY_ARGS: "<|call|>"},
                      template=template, arch_name="harmony-chain")


def harmony_app_model(template: str) -> ChainModel:
    """gpt-oss's harmony turns (template: openai-gpt-oss-120b.jinja's text): after the
    generation prompt's ``<|start|>assistant`` it writes its analysis "Hmm, a greeting.",
    then the final answer "Hi there", then <|return|>. The vocabulary has harmony's
    markers as o200k_harmony does (<|end|>, <|return|>, <|call|> control tokens, which the
    engine turns into: <|end|> shown and not the end, the other two ends); the second
    header is one word token so that no token is followed by two different ones. Its
    trained context is 1024 tokens: harmony's system message alone is some 200."""
    return ChainModel(control=["<|end|>", "<|return|>", "<|call|>"],
                      user_defined=["<|start|>assistant", "<|start|>", "<|channel|>",
                                    "<|message|>"],
                      words=["analysis", "Hmm", ", a greeting.",
                             "assistant<|channel|>final<|message|>", "Hi", " there"],
                      chain={"<|start|>assistant": "<|channel|>", "<|channel|>": "analysis",
                             "analysis": "<|message|>", "<|message|>": "Hmm",
                             "Hmm": ", a greeting.", ", a greeting.": "<|end|>",
                             "<|end|>": "<|start|>",
                             "<|start|>": "assistant<|channel|>final<|message|>",
                             "assistant<|channel|>final<|message|>": "Hi", "Hi": " there",
                             " there": "<|return|>"},
                      template=template, arch_name="harmony-app-chain", n_ctx_train=1024)
