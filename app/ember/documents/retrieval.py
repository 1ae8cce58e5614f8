"""Finding passages for a question: words (FTS5, BM25), meaning (vectors, cosine), and the
two fused by reciprocal rank, which needs no score calibration between them."""
from __future__ import annotations

from dataclasses import dataclass

from .embedder import Embedder
from .library import Library, Passage

RRF_K = 60  # Cormack et al.'s constant: ranks past ~60 add little, the top ones dominate


@dataclass(frozen=True)
class Hit:
    passage: Passage
    score: float
    word_rank: int | None     # 1-based, None where the word search did not return it
    vector_rank: int | None


def reciprocal_rank_fusion(*rankings: list[int], k: int = RRF_K) -> list[tuple[int, float]]:
    """Ids ranked by the sum over rankings of 1 / (k + rank); ties keep first appearance."""
    scores: dict[int, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + rank)
    return sorted(scores.items(), key=lambda kv: -kv[1])


def search(library: Library, query: str, embedder: Embedder | None, k: int = 5,
           mode: str = "hybrid", scope=None, depth: int = 50) -> list[Hit]:
    """The top `k` passages for `query`. mode: "hybrid", "words" or "vectors"; scope: files
    and folders to search in (None: the whole library); depth: how many of each list fuse."""
    if mode not in ("hybrid", "words", "vectors"):
        raise ValueError(f"mode {mode!r}")
    words = library.search_words(query, depth, scope) if mode != "vectors" else []
    vectors = []
    if mode != "words" and embedder is not None:
        q = embedder.embed([query])[0]
        vectors = library.search_vectors(q, embedder.name, depth, scope)
    word_ids = [i for i, _ in words]
    vector_ids = [i for i, _ in vectors]
    if mode == "words":
        fused = [(i, s) for i, s in words]
    elif mode == "vectors":
        fused = [(i, s) for i, s in vectors]
    else:
        fused = reciprocal_rank_fusion(word_ids, vector_ids)
    word_rank = {i: r for r, i in enumerate(word_ids, 1)}
    vector_rank = {i: r for r, i in enumerate(vector_ids, 1)}
    return [Hit(library.passage(i), s, word_rank.get(i), vector_rank.get(i))
            for i, s in fused[:k]]
