"""End-of-turn detection and a streaming stop-string scanner.

The engine stops on the model's end-of-generation token ids by itself; the
strings here are a second line of defence for models whose chat template ends
a turn with a marker the vocabulary does not flag as end-of-generation (or
for text that reaches us already detokenized).
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["KNOWN_END_MARKERS", "StopScanner", "detect_stop_strings"]

# Markers that end an assistant turn (or start the next non-assistant turn, for
# families that have no explicit end marker).  One is used only when it occurs
# literally in the model's template, so a marker of one family never truncates
# the output of another.
KNOWN_END_MARKERS: tuple[str, ...] = (
    "<|im_end|>",  # ChatML: Qwen, Hermes, SmolLM, LFM, MiniCPM, Kimi-K2, Yi, InternLM
    "<|eot_id|>",  # Llama 3.x
    "<|eom_id|>",  # Llama 3.1 after a tool call
    "<end_of_turn>",  # Gemma 1-3
    "<turn|>",  # Gemma 4
    "<|end|>",  # Phi-3/3.5, Apriel, Solar-Open (dropped for Harmony, see below)
    "<|return|>",  # Harmony (gpt-oss): final answer done
    "<|call|>",  # Harmony (gpt-oss): tool call emitted
    "<|eot|>",  # Llama 4, Glimmer
    "<|END_OF_TURN_TOKEN|>",  # Command-R / Command-A
    "<｜end▁of▁sentence｜>",  # DeepSeek V2/V3/R1 (full-width bars are part of the token)
    "</s>",  # Mistral, Zephyr, Llama 2 when spelled out in the template
    "<|endoftext|>",  # GLM-4, Falcon
    "<|user|>",  # GLM-4, Zephyr, Phi-3: the model starting a user turn is never an answer
    "<|observation|>",  # GLM-4: tool result turn
    "<|end_of_text|>",  # IBM Granite
    "<seed:eos>",  # ByteDance Seed-OSS
    "<end_of_sentence>",  # MiniMax-M1
    "[e~[",  # MiniMax-M2/M3
    "<|role_end|>",  # Ling / Bailing
    "<|assistant_end|>",  # Apertus
    "<|message_sep|>",  # GigaChat 3
    "<|end_of_msg|>",  # Kimi-K3
    "</assistant>",  # Poolside Laguna
    "<SPECIAL_12>",  # NVIDIA Nemotron Nano v2 (its <|im_end|> equivalent)
    "<sep>",  # Reka
    "<|end_of_turn|>",  # OpenChat
    "[|endofturn|]",  # EXAONE
    "<end_of_utterance>",  # SmolVLM / Idefics3
)

# Harmony (gpt-oss) closes every message, including the hidden analysis
# channel, with <|end|>; the answer itself ends with <|return|> or <|call|>.
# Stopping on <|end|> there would cut the reply off after the reasoning.
_HARMONY_SIGNATURE = ("<|channel|>", "<|return|>")


def detect_stop_strings(
    template_source: str, special_tokens: Iterable[str] = ()
) -> tuple[str, ...]:
    """Return the stop strings for a chat template.

    ``special_tokens`` are the model's EOS/EOT(/EOM) token texts; they always
    stop (but harmony's ``<|end|>``, which closes the reasoning too).  Known end-of-turn markers are added when the template uses them.
    Order is stable (special tokens first) and duplicates are removed.
    """
    harmony = all(sig in template_source for sig in _HARMONY_SIGNATURE)
    # a harmony file whose EOS or EOT is <|end|> still does not end on it: the engine drops
    # it from the end-of-generation tokens as llama.cpp does (native/src/text/vocab_load.cpp)
    stops = [tok for tok in special_tokens if tok and not (harmony and tok == "<|end|>")]
    for marker in KNOWN_END_MARKERS:
        if marker == "<|end|>" and harmony:
            continue
        if marker in template_source:
            stops.append(marker)
    return tuple(dict.fromkeys(stops))


class StopScanner:
    """Cut a stream of text at the first stop string.

    ``feed`` returns the text that is safe to show and whether generation
    should stop.  A tail that could still grow into a stop string is held
    back until the next chunk decides it, so a marker is never half-shown.
    The result does not depend on how the stream is split into chunks: the
    match that *completes* first wins, as it would if fed one character at a
    time.
    """

    def __init__(self, stop_strings: Iterable[str]) -> None:
        self._stops: tuple[str, ...] = tuple(
            dict.fromkeys(s for s in stop_strings if s)
        )
        self._prefixes = frozenset(s[:i] for s in self._stops for i in range(1, len(s)))
        self._max_hold = max((len(s) for s in self._stops), default=1) - 1
        self._pending = ""
        self.stopped = False
        self.matched: str | None = None

    @property
    def stop_strings(self) -> tuple[str, ...]:
        return self._stops

    def feed(self, text: str) -> tuple[str, bool]:
        if self.stopped:
            return "", True
        buf = self._pending + text

        best: tuple[int, int, str] | None = None  # (end, start, stop)
        for stop in self._stops:
            start = buf.find(stop)
            if start != -1:
                cand = (start + len(stop), start, stop)
                if best is None or cand[:2] < best[:2]:
                    best = cand
        if best is not None:
            _end, start, stop = best
            self.stopped = True
            self.matched = stop
            self._pending = ""
            return buf[:start], True

        hold = 0
        for k in range(min(self._max_hold, len(buf)), 0, -1):
            if buf[-k:] in self._prefixes:
                hold = k
                break
        cut = len(buf) - hold
        self._pending = buf[cut:]
        return buf[:cut], False

    def flush(self) -> str:
        """Release the held-back tail at the end of the stream (no stop seen)."""
        if self.stopped:
            return ""
        tail, self._pending = self._pending, ""
        return tail
