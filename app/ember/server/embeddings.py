"""OpenAI's embeddings endpoint (POST /v1/embeddings) and the served embedding model: the
request's inputs (a string, strings, token arrays) checked, embedded by the engine's
encoder, answered as floats or base64 with the token counts."""
from __future__ import annotations

import base64
from dataclasses import dataclass
from pathlib import Path

from ..chat import ChatTemplate
from ..chat.tools import tool_support
from ..engine import Embedder, Model
from .engine_state import model_ids
from .errors import ApiError, bad_request
from .protocol import _model, _type_name

MAX_INPUTS = 2048  # OpenAI's limit on inputs per request


def is_embedding_file(path: Path) -> bool:
    """Whether a GGUF file holds an encoder (served for /v1/embeddings, not for chat): the
    bert family, or any file whose attention is not causal. Reads the header only."""
    m = Model(path, metadata_only=True)
    try:
        arch = m.arch
        return arch == "bert" or m.metadata.get(f"{arch}.attention.causal") is False
    finally:
        m.close()


@dataclass
class EmbeddingRequest:
    model: str
    inputs: list[str | list[int]]
    base64: bool


def _inputs(body: dict, n_vocab: int) -> list[str | list[int]]:
    if "input" not in body:
        raise bad_request("'input' is required.", "input", "missing_required_parameter")
    raw = body["input"]
    if isinstance(raw, str):
        raw = [raw]
    elif isinstance(raw, list) and raw and all(isinstance(t, int) and not isinstance(t, bool)
                                               for t in raw):
        raw = [raw]  # one token array
    if not isinstance(raw, list):
        raise bad_request(f"'input' must be a string, an array of strings or of token arrays, "
                          f"not {_type_name(raw)}.", "input", "invalid_type")
    if not raw:
        raise bad_request("'input' must not be empty.", "input", "invalid_value")
    if len(raw) > MAX_INPUTS:
        raise bad_request(f"'input' may hold at most {MAX_INPUTS} items, not {len(raw)}.", "input",
                          "invalid_value")
    out: list[str | list[int]] = []
    for i, item in enumerate(raw):
        if isinstance(item, str):
            if not item:
                raise bad_request(f"'input[{i}]' must not be an empty string.", "input", "invalid_value")
            out.append(item)
        elif isinstance(item, list):
            if not item:
                raise bad_request(f"'input[{i}]' must not be an empty token array.", "input",
                                  "invalid_value")
            for t in item:
                if not isinstance(t, int) or isinstance(t, bool):
                    raise bad_request(f"'input[{i}]' must hold token ids (integers), not "
                                      f"{_type_name(t)}.", "input", "invalid_type")
                if not 0 <= t < n_vocab:
                    raise bad_request(f"Token {t} in 'input[{i}]' is outside the vocabulary "
                                      f"(0..{n_vocab - 1}).", "input", "invalid_value")
            out.append(list(item))
        else:
            raise bad_request(f"'input[{i}]' must be a string or a token array, not "
                              f"{_type_name(item)}.", "input", "invalid_type")
    return out


def parse_embeddings(body: dict, ids: tuple[str, ...], strict: bool, n_vocab: int,
                     n_embd: int) -> EmbeddingRequest:
    model = _model(body, ids, strict)
    fmt = body.get("encoding_format", "float")
    if fmt is None:
        fmt = "float"
    if fmt not in ("float", "base64"):
        raise bad_request(f"'encoding_format' must be 'float' or 'base64', not {fmt!r}.",
                          "encoding_format", "invalid_value")
    dims = body.get("dimensions")
    if dims is not None and (not isinstance(dims, int) or isinstance(dims, bool) or dims != n_embd):
        raise bad_request(f"'dimensions' {dims!r} is not supported: this model's vectors have "
                          f"{n_embd} dimensions (its pooling is not trained for shorter ones).",
                          "dimensions", "invalid_value")
    return EmbeddingRequest(model, _inputs(body, n_vocab), fmt == "base64")


def _sequence(embedder: Embedder, item: str | list[int]) -> list[int]:
    """A text's tokens with the model's [CLS]/[SEP]; a token array as the text's pieces, the
    special tokens added where the array lacks them (as a string would get them)."""
    if isinstance(item, str):
        return embedder.tokenize(item)
    m = embedder.model
    ids = list(item)
    if m.add_bos and m.bos_id >= 0 and ids[0] != m.bos_id:
        ids = [m.bos_id] + ids
    if m.add_eos and m.eos_id >= 0 and ids[-1] != m.eos_id:
        ids = ids + [m.eos_id]
    return ids


def answer(loaded, body: dict) -> dict:
    """The /v1/embeddings answer for a loaded model (in a worker thread)."""
    embedder: Embedder | None = getattr(loaded, "embedder", None)
    if embedder is None:
        raise ApiError(400, f"The model '{loaded.id}' is a text-generation model "
                            f"({loaded.model.arch}) and makes no embeddings; serve an embedding "
                            f"model (GGUF bert: all-MiniLM, bge, e5) for /v1/embeddings.",
                       param="model", code="model_not_embedding")
    req = parse_embeddings(body, loaded.ids, loaded.strict_model_names, loaded.model.n_vocab,
                           embedder.n_embd)
    seqs = [_sequence(embedder, item) for item in req.inputs]
    for i, s in enumerate(seqs):
        if len(s) > embedder.n_seq_max:
            raise ApiError(400, f"This model's maximum context length is {embedder.n_seq_max} "
                                f"tokens, however input {i} has {len(s)} tokens. Please reduce "
                                f"the input.", param="input", code="context_length_exceeded",
                           extra={"n_prompt_tokens": len(s), "n_ctx": embedder.n_seq_max})
    vectors = embedder.embed_tokens(seqs)
    data = []
    for i, v in enumerate(vectors):
        if req.base64:
            # the float32 bytes, little-endian, as OpenAI's clients decode them
            emb: object = base64.b64encode(v.astype("<f4").tobytes()).decode("ascii")
        else:
            emb = [float(x) for x in v]
        data.append({"object": "embedding", "index": i, "embedding": emb})
    n_tokens = sum(len(s) for s in seqs)
    return {"object": "list", "data": data, "model": req.model,
            "usage": {"prompt_tokens": n_tokens, "total_tokens": n_tokens}}


class _NoSlots:
    """An embedding model's stand-in for the slot pool (/health, /slots, /metrics): it
    generates nothing."""

    contexts: tuple = ()
    threads = None
    width = 0

    def status(self) -> dict:
        return {"slots_idle": 0, "slots_processing": 0, "requests_waiting": 0,
                "requests_finished": 0, "requests_cancelled": 0}

    def slots(self) -> list[dict]:
        return []

    def metrics(self) -> dict:
        return {**self.status(), "prompt_tokens": 0, "prompt_tokens_evaluated": 0,
                "prompt_seconds": 0.0, "generated_tokens": 0, "generation_seconds": 0.0}

    def close(self) -> None:
        pass


class EmbeddingModel:
    """A served embedding model: what the routes read of a LoadedModel (ids, the model, a
    pool that is always idle), the engine's Embedder, and a refusal for every generation
    route."""

    def __init__(self, path: Path, *, n_threads: int | None = None, alias: str | None = None,
                 strict_model_names: bool = False, reasoning_format: str = "deepseek", **_ignored):
        self.path = path
        self.ids = model_ids(path, alias)
        self.strict_model_names = strict_model_names
        self.reasoning_format = reasoning_format
        self.model = Model(path, n_threads=n_threads)
        try:
            self.embedder = Embedder(self.model)
        except Exception:
            self.model.close()
            raise
        self.template = ChatTemplate.from_metadata(self.model.metadata,
                                                   token_text=self.model.token_text)
        self.tool_support = tool_support(self.template)
        self.pool = _NoSlots()
        self.n_ctx = self.embedder.n_seq_max

    @property
    def id(self) -> str:
        return self.ids[0]

    def _refuse(self, *_args, **_kw):
        raise ApiError(400, f"The model '{self.id}' is an embedding model ({self.model.arch}): it "
                            f"makes vectors (POST /v1/embeddings), not text.", param="model",
                       code="model_not_generative")

    prepare = prepare_choices = chat_prompt = _refuse

    def close(self) -> None:
        self.embedder.close()
        self.model.close()
