"""Built-in prompt formats for models whose GGUF file carries no chat template.

llama.cpp keeps a table of built-in formats and ``llama_chat_detect_template`` picks
one by looking for a family's markers.  A file without ``tokenizer.chat_template``
gives us no template text to look at, so the same choice is made from what the file
does say: its architecture and the special tokens in its vocabulary (a vocabulary with
``<start_of_turn>``/``<end_of_turn>`` was trained on Gemma turns, one with
``<|start_header_id|>``/``<|eot_id|>`` on Llama 3 headers, and so on).

Every format here is tolerant on purpose (a fallback that can fail is no fallback):
``content`` may be a string, None or a list of typed parts, roles need not alternate,
and a system message is folded into the next user turn where the family has no
system role, as Gemma's own template and llama.cpp's built-in do.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["BUILTIN_FORMATS", "CHATML_TEMPLATE", "BuiltinFormat", "detect_builtin_format"]

# ChatML (Qwen, SmolLM, Hermes...), and the last resort when nothing points anywhere.
# Unlike the bare HF default it tolerates ``content`` that is None or a list of typed
# parts (multimodal messages).
CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' }}"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% elif message['content'] is iterable %}"
    "{% for part in message['content'] %}"
    "{% if part is string %}{{ part }}"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
    "{% endfor %}"
    "{% endif %}"
    "{{ '<|im_end|>\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

# The text of a message's content, whatever its shape (string, None, typed parts).
_CONTENT_MACRO = (
    "{%- macro content_text(content) -%}"
    "{%- if content is string -%}{{ content }}"
    "{%- elif content is iterable -%}"
    "{%- for part in content -%}"
    "{%- if part is string -%}{{ part }}"
    "{%- elif part['type'] == 'text' -%}{{ part['text'] }}{%- endif -%}"
    "{%- endfor -%}"
    "{%- endif -%}"
    "{%- endmacro -%}"
)

# Gemma 1-3 (google/gemma-3-*-it): no system role; the system text goes in front of
# the first user turn followed by a blank line; "assistant" is "model"; contents are
# trimmed; <end_of_turn> closes every turn.
GEMMA_TEMPLATE = (
    _CONTENT_MACRO
    + "{{ bos_token }}"
    "{%- set ns = namespace(system='') -%}"
    "{%- for message in messages -%}"
    "{%- if message['role'] == 'system' -%}"
    "{%- set text = content_text(message['content']) | trim -%}"
    "{%- if text -%}"
    "{%- set ns.system = (ns.system + '\n\n' + text) if ns.system else text -%}"
    "{%- endif -%}"
    "{%- else -%}"
    "{%- set role = 'model' if message['role'] == 'assistant' else message['role'] -%}"
    "{{ '<start_of_turn>' + role + '\n' }}"
    "{%- if ns.system and role != 'model' -%}"
    "{{ ns.system + '\n\n' }}"
    "{%- set ns.system = '' -%}"
    "{%- endif -%}"
    "{{ content_text(message['content']) | trim }}"
    "{{ '<end_of_turn>\n' }}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<start_of_turn>model\n' }}{%- endif -%}"
)

# Llama 3 (meta-llama/Meta-Llama-3-8B-Instruct): header per turn, trimmed content.
LLAMA3_TEMPLATE = (
    _CONTENT_MACRO
    + "{{ bos_token }}"
    "{%- for message in messages -%}"
    "{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' }}"
    "{{ content_text(message['content']) | trim }}"
    "{{ '<|eot_id|>' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}"
    "{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}"
    "{%- endif -%}"
)

# Phi-3 / Phi-3.5 (microsoft/Phi-3.5-mini-instruct): <|role|> lines closed by <|end|>.
PHI3_TEMPLATE = (
    _CONTENT_MACRO
    + "{%- for message in messages -%}"
    "{%- set text = content_text(message['content']) -%}"
    "{%- if message['role'] != 'system' or text -%}"
    "{{ '<|' + message['role'] + '|>\n' + text + '<|end|>\n' }}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<|assistant|>\n' }}{%- endif -%}"
)


# Harmony (gpt-oss, openai/gpt-oss-*'s own template without its tool rendering): a system
# message with the identity, dates and reasoning level, the system prompt as the developer's
# instructions, earlier replies as their final channel only, and "<|start|>assistant" to
# generate (the model writes "<|channel|>analysis<|message|>..." itself). A reply ends with
# <|return|> (or <|call|> for a tool call); <|end|> only closes one of its messages.
HARMONY_TEMPLATE = (
    _CONTENT_MACRO
    + "{%- set identity = model_identity if model_identity is defined else "
    "'You are ChatGPT, a large language model trained by OpenAI.' -%}"
    "{%- set effort = reasoning_effort if reasoning_effort is defined else 'medium' -%}"
    "{{ '<|start|>system<|message|>' + identity + '\n' }}"
    "{{ 'Knowledge cutoff: 2024-06\n' }}"
    "{{ 'Current date: ' + strftime_now('%Y-%m-%d') + '\n\n' }}"
    "{{ 'Reasoning: ' + effort + '\n\n' }}"
    "{{ '# Valid channels: analysis, commentary, final. Channel must be included for every "
    "message.<|end|>' }}"
    "{%- set ns = namespace(first=0) -%}"
    "{%- if messages and messages[0]['role'] in ('system', 'developer') -%}"
    "{%- set ns.first = 1 -%}"
    "{%- set text = content_text(messages[0]['content']) -%}"
    "{%- if text -%}"
    "{{ '<|start|>developer<|message|># Instructions\n\n' + text + '\n\n<|end|>' }}"
    "{%- endif -%}"
    "{%- endif -%}"
    "{%- for message in messages[ns.first:] -%}"
    "{%- set text = content_text(message['content']) -%}"
    "{%- if message['role'] == 'assistant' -%}"
    "{%- if loop.last and not add_generation_prompt -%}"
    "{%- if message['thinking'] is defined -%}"
    "{{ '<|start|>assistant<|channel|>analysis<|message|>' + message['thinking'] + '<|end|>' }}"
    "{%- endif -%}"
    "{{ '<|start|>assistant<|channel|>final<|message|>' + text + '<|return|>' }}"
    "{%- else -%}"
    "{{ '<|start|>assistant<|channel|>final<|message|>' + text + '<|end|>' }}"
    "{%- endif -%}"
    "{%- elif message['role'] == 'user' -%}"
    "{{ '<|start|>user<|message|>' + text + '<|end|>' }}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<|start|>assistant' }}{%- endif -%}"
)


@dataclass(frozen=True)
class BuiltinFormat:
    name: str
    label: str  # for people: "Gemma", "Llama 3"...
    source: str  # a Jinja chat template
    # Strings that end a reply besides the template's own end markers: a model that
    # starts the next turn by itself is not answering any more.
    extra_stops: tuple[str, ...] = ()
    architectures: tuple[str, ...] = ()  # general.architecture values that imply it
    tokens: tuple[str, ...] = ()  # special tokens that, all present, imply it
    # the architecture alone decides, before the vocabulary: a family trained on one format
    # only, whatever vocabulary a converted (or synthetic) file carries
    arch_decides: bool = False


BUILTIN_FORMATS: dict[str, BuiltinFormat] = {
    f.name: f
    for f in (
        BuiltinFormat(
            "harmony",
            "Harmony (gpt-oss)",
            HARMONY_TEMPLATE,
            extra_stops=("<|return|>", "<|call|>", "<|start|>user"),
            architectures=("gpt-oss",),
            tokens=("<|start|>", "<|channel|>", "<|message|>", "<|return|>"),
            arch_decides=True,
        ),
        BuiltinFormat(
            "gemma",
            "Gemma",
            GEMMA_TEMPLATE,
            extra_stops=("<start_of_turn>",),
            architectures=("gemma", "gemma2", "gemma3", "gemma3n"),
            tokens=("<start_of_turn>", "<end_of_turn>"),
        ),
        BuiltinFormat(
            "llama3",
            "Llama 3",
            LLAMA3_TEMPLATE,
            extra_stops=("<|start_header_id|>",),
            tokens=("<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"),
        ),
        BuiltinFormat(
            "phi3",
            "Phi-3",
            PHI3_TEMPLATE,
            extra_stops=("<|user|>",),
            architectures=("phi3",),
            tokens=("<|user|>", "<|assistant|>", "<|end|>"),
        ),
        BuiltinFormat(
            "chatml",
            "ChatML",
            CHATML_TEMPLATE,
            extra_stops=("<|im_start|>",),
            tokens=("<|im_start|>", "<|im_end|>"),
        ),
    )
}


def _token_set(metadata: Mapping[str, Any]) -> frozenset[str] | None:
    tokens = metadata.get("tokenizer.ggml.tokens")
    if isinstance(tokens, Sequence) and not isinstance(tokens, (str, bytes)):
        # special tokens sit at the start or the end of a vocabulary; scanning the
        # whole list is still only a few milliseconds for 262k entries
        return frozenset(t for t in tokens if isinstance(t, str) and t.startswith("<"))
    return None


def detect_builtin_format(metadata: Mapping[str, Any]) -> BuiltinFormat | None:
    """The built-in format a model without a chat template was trained on, judged
    from its vocabulary's special tokens, then its architecture; None if nothing
    points anywhere (a base model: raw completion, or ChatML as the last resort)."""
    # The vocabulary first: it is what the model was trained to write (an architecture
    # name can cover several families: phi3 is also Phi-4, which speaks ChatML-like),
    # except for a family that has one format only (gpt-oss: harmony).
    arch = metadata.get("general.architecture")
    if isinstance(arch, str):
        for fmt in BUILTIN_FORMATS.values():
            if fmt.arch_decides and arch.lower() in fmt.architectures:
                return fmt
    tokens = _token_set(metadata)
    if tokens:
        for fmt in BUILTIN_FORMATS.values():
            if all(t in tokens for t in fmt.tokens):
                return fmt
    if isinstance(arch, str):
        for fmt in BUILTIN_FORMATS.values():
            if arch.lower() in fmt.architectures:
                return fmt
    return None
