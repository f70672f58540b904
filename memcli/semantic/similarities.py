"""How alike each entry is to one text (a question), as one numpy row over the entries' vectors: a read-only
mapping of (document, line) to a cosine, with what the evidence ranking asks of it (the best few, within some
documents, the median, drawn toward other entries). Made by :meth:`memcli.semantic.vectors.EntryVectors.similarities`."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from itertools import repeat

import numpy as np


class Similarities(Mapping):
    """A question's cosine similarity with every entry that has a vector, by (document, line): a
    mapping over one array, with the order statistics a ranking needs computed in numpy (at 10^5
    entries a Python sort of them all costs more than the rest of a question)."""

    def __init__(self, keys: list[tuple[str, int]], position: dict[tuple[str, int], int], values: np.ndarray,
                 doc_rows: dict[str, np.ndarray] | None = None, matrix: np.ndarray | None = None,
                 question: np.ndarray | None = None):
        """``doc_rows``: each document's rows of ``values`` (what :meth:`within` reads); ``matrix``: the
        entries' vectors, a row each, and ``question`` the vector ``values`` measure them against (what
        :meth:`pairwise` and :meth:`toward` read)."""
        self._keys, self._position, self.values = keys, position, values
        self._doc_rows = doc_rows or {}
        self._matrix, self._question = matrix, question

    def toward(self, keys: list[tuple[str, int]], weight: float) -> Similarities:
        """The similarities with the question moved toward what ``keys`` say (Rocchio's relevance
        feedback, in vector space): the question's vector plus ``weight`` times the mean of theirs,
        normalised. Itself when it has no vectors or none of ``keys`` has one."""
        rows = [self._position[key] for key in keys if key in self._position]
        if self._matrix is None or self._question is None or not rows or weight <= 0:
            return self
        moved = self._question + weight * self._matrix[rows].mean(axis=0)
        moved /= max(float(np.linalg.norm(moved)), 1e-12)
        return Similarities(self._keys, self._position, self._matrix @ moved, self._doc_rows, self._matrix, moved)

    def pairwise(self, keys: list[tuple[str, int]]) -> np.ndarray:
        """The cosine similarity of each two of ``keys`` (a key without a vector: 0 with every other)."""
        n = len(keys)
        if self._matrix is None or not n:
            return np.zeros((n, n), np.float32)
        rows = [self._position.get(key, -1) for key in keys]
        vectors = self._matrix[[max(r, 0) for r in rows]] * (np.asarray(rows) >= 0)[:, None]
        return vectors @ vectors.T

    def __getitem__(self, key: tuple[str, int]) -> float:
        return float(self.values[self._position[key]])

    def __contains__(self, key) -> bool:
        return key in self._position

    def __iter__(self) -> Iterator[tuple[str, int]]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def within(self, docs: set[str]) -> Similarities:
        """The similarities of the entries of ``docs`` only (a question answered from those documents
        ranks, and takes its median, among them as if they were the whole library)."""
        kept = [d for d in sorted(docs) if d in self._doc_rows]
        rows = np.concatenate([self._doc_rows[d] for d in kept]) if kept else np.zeros(0, np.int64)
        keys, doc_rows, position = row_index((d, [self._keys[i][1] for i in self._doc_rows[d]]) for d in kept)
        return Similarities(keys, position, self.values[rows], doc_rows,
                            None if self._matrix is None else self._matrix[rows], self._question)

    def median(self) -> float:
        """The upper median (the value a sorted list holds at ``len // 2``)."""
        middle = len(self.values) // 2
        return float(np.partition(self.values, middle)[middle])

    def top(self, n: int, exclude=frozenset()) -> list[tuple[str, int]]:
        """The ``n`` most similar keys not in ``exclude``, most similar first (ties by key), exactly as
        a full sort would give them."""
        values = self.values
        want = min(len(values), n + len(exclude))
        if want <= 0:
            return []
        if want < len(values):
            threshold = np.partition(values, len(values) - want)[len(values) - want]
            chosen = np.flatnonzero(values >= threshold)  # ties at the threshold included
        else:
            chosen = np.arange(len(values))
        keys = [self._keys[i] for i in chosen.tolist() if self._keys[i] not in exclude]
        keys.sort(key=lambda key: (-self.values[self._position[key]], key))
        return keys[:n]


def row_index(runs) -> tuple[list[tuple[str, int]], dict[str, np.ndarray], dict[tuple[str, int], int]]:
    """(keys, each document's rows, each key's row) of a matrix whose rows are (document, its entries'
    lines) runs in order."""
    keys: list[tuple[str, int]] = []
    doc_rows: dict[str, np.ndarray] = {}
    for doc_id, lines in runs:
        doc_rows[doc_id] = np.arange(len(keys), len(keys) + len(lines), dtype=np.int64)
        keys.extend(zip(repeat(doc_id), lines))
    return keys, doc_rows, {key: at for at, key in enumerate(keys)}
