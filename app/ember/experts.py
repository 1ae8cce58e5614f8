"""What a mixture-of-experts file spends per token, from its GGUF tensor table alone (no
engine): the expert tensors (``ffn_*_exps``, one slice per expert) against the rest, in
parameters and in bytes, so the card can say "3.3B active" and the RAM estimate can tell
the mapped file from the working set a decode touches."""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from .gguf_file import GGUFLayout, read_layout

__all__ = ["ExpertSplit", "expert_split", "expert_split_of_layout", "is_expert_tensor"]

# llama.cpp's names for the stacked expert weights and their biases (LLM_TENSOR_FFN_*_EXPS:
# ffn_gate_exps, ffn_up_exps, ffn_down_exps, ffn_gate_up_exps). Shared experts (_shexp)
# and the router (ffn_gate_inp) run for every token, so they are not expert tensors.
_EXPERT_NAME = re.compile(r"\.ffn_[a-z_]+_exps\.(weight|bias)$")


@dataclass(frozen=True)
class ExpertSplit:
    """A MoE file's parameters and bytes, split into expert tensors and the rest."""
    n_expert: int
    n_expert_used: int
    n_params: int          # every tensor's elements
    expert_params: int     # the ffn_*_exps tensors' elements (all experts)
    file_size: int         # what is mapped
    expert_bytes: int      # the ffn_*_exps tensors' bytes in the file

    @property
    def active_params(self) -> int:
        """Parameters one token runs through: everything but the experts, plus the
        chosen n_expert_used of n_expert slices of each expert tensor."""
        return self.n_params - self.expert_params + self.expert_params * self.n_expert_used // self.n_expert

    @property
    def working_set_bytes(self) -> int:
        """File bytes one decoded token reads: the header and non-expert tensors whole,
        n_expert_used / n_expert of the expert tensors."""
        return self.file_size - self.expert_bytes + self.expert_bytes * self.n_expert_used // self.n_expert


def is_expert_tensor(name: str, shape: tuple[int, ...], n_expert: int) -> bool:
    """A stacked expert tensor: its name says so and its outermost dimension is one slice
    per expert (a tensor that only looks like one is counted as always active)."""
    return bool(_EXPERT_NAME.search(name)) and len(shape) >= 2 and shape[-1] == n_expert


def _int(value) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def expert_split_of_layout(layout: GGUFLayout, file_size: int) -> ExpertSplit | None:
    """The split of a parsed file; None for a dense model (no experts, or odd counts)."""
    arch = layout.values.get("general.architecture")
    if not isinstance(arch, str):
        return None
    n_expert = _int(layout.values.get(f"{arch}.expert_count"))
    n_used = _int(layout.values.get(f"{arch}.expert_used_count"))
    if n_expert <= 1 or not 0 < n_used <= n_expert:
        return None
    # a tensor's bytes: from its offset to the next tensor's (alignment padding included,
    # at most general.alignment - 1 bytes), the last one to the end of the file; this
    # needs no table of the element types, so a type the app does not know still counts
    ordered = sorted(layout.tensors, key=lambda t: t.offset)
    ends = [t.offset for t in ordered[1:]] + [file_size - layout.data_start]
    n_params = expert_params = expert_bytes = 0
    for t, end in zip(ordered, ends):
        n_params += t.n_elements
        if is_expert_tensor(t.name, t.shape, n_expert):
            expert_params += t.n_elements
            expert_bytes += max(end - t.offset, 0)
    if not expert_params:
        return None
    return ExpertSplit(n_expert, n_used, n_params, expert_params, file_size, expert_bytes)


def expert_split(path: str | Path) -> ExpertSplit | None:
    """The split of a GGUF file's experts; None for a dense model or a file whose header
    cannot be read (the engine's own reader is the one that reports why)."""
    path = Path(path)
    try:
        return expert_split_of_layout(read_layout(path), path.stat().st_size)
    except (OSError, ValueError):
        return None
