"""memcli's reader, run with numpy: which span of a passage answers a question, or that none does.

The weights are all-MiniLM-L6-v2's (the encoder's, :mod:`memcli.semantic.encoder`) with the upper
layers and a start/end head replaced by ``reader.safetensors`` (package data, fp16), trained by
``training/train_reader.py`` on public QA sets (docs/reader.md is the model card). A window is
``[CLS] question [SEP] passage [SEP]`` (:mod:`memcli.qa.features`); a span's score is its start
logit plus its end logit, and "no answer" scores the [CLS] position's pair. :attr:`Span.margin`
(the span's score less the no-answer score of its window) says how sure the reader is: below
:data:`THRESHOLD` it abstains.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from memcli import deadline, parsing
from memcli.qa import features
from memcli.semantic.encoder import Encoder, EncoderMissing, pad, read_safetensors, transformer

WEIGHTS = "reader.safetensors"
BATCH_TOKENS = 8192


@dataclass
class Span:
    passage: int  # which of the passages read
    start: int  # characters of that passage
    end: int
    text: str
    score: float  # start + end logit
    null: float  # the no-answer score of the window it was read in
    second: Span | None = None  # with ``by_part``: the best span of the same part that does not overlap this one

    @property
    def margin(self) -> float:
        return self.score - self.null


def weights_path() -> Path:
    return Path(str(resources.files("memcli.qa").joinpath(WEIGHTS)))


def metadata(path: Path) -> dict[str, str]:
    with open(path, "rb") as handle:
        size = struct.unpack("<Q", handle.read(8))[0]
        return parsing.loads(handle.read(size)).get("__metadata__", {})


class Reader:
    """``read(question, passages)``: the best span of each passage; ``best(...)``: the best of all."""

    def __init__(self, encoder: Encoder | None = None, path: Path | None = None):
        encoder = encoder or Encoder()
        path = path or weights_path()
        try:
            tuned = read_safetensors(path)
            self.info = metadata(path)
        except (OSError, ValueError, KeyError) as exc:
            raise EncoderMissing(f"the reader's weights {path} cannot be read ({exc})",
                                 hint="reinstall memcli") from exc
        self.weights = dict(encoder.weights)
        self.weights.update({k: np.asarray(v, dtype=np.float32) for k, v in tuned.items()})
        self.tokenizer = encoder.tokenizer
        self.threshold = THRESHOLD
        self.encoder = encoder
        self._vectors: dict[str, np.ndarray] = {}

    def alike(self, a: str, b: str) -> float:
        """How alike two spans are as values (the cosine of their sentence vectors): a rent and a rent, a
        city and a city score high; a rent and the reason for it, low."""
        missing = [t for t in dict.fromkeys((a, b)) if t not in self._vectors]
        if missing:
            if len(self._vectors) > 4096:
                self._vectors.clear()
            self._vectors.update(zip(missing, self.encoder.encode(missing)))
        return float(self._vectors[a] @ self._vectors[b])

    def logits(self, batch: list[list[int]], firsts: list[int]) -> list[tuple[np.ndarray, np.ndarray]]:
        """Start and end logits of each window (token ids, where its passage begins)."""
        out: list[tuple[np.ndarray, np.ndarray]] = [(np.zeros(0), np.zeros(0))] * len(batch)
        order = sorted(range(len(batch)), key=lambda i: len(batch[i]))
        at = 0
        while at < len(order):
            end = at + 1
            while end < len(order) and (end - at + 1) * len(batch[order[end]]) <= BATCH_TOKENS:
                end += 1
            picks = order[at:end]
            deadline.check()
            ids, mask = pad([batch[i] for i in picks])
            types = np.zeros_like(ids)
            for row, i in enumerate(picks):
                types[row, firsts[i]:len(batch[i])] = 1
            hidden = transformer(self.weights, ids, mask, types)
            scores = hidden @ self.weights["qa_outputs.weight"].T + self.weights["qa_outputs.bias"]
            for row, i in enumerate(picks):
                n = len(batch[i])
                out[i] = (scores[row, :n, 0], scores[row, :n, 1])
            at = end
        return out

    def read(self, question: str, passages: list[str]) -> list[Span | None]:
        """Each passage's best span (None for an empty passage), every window of it read."""
        return [spans[0] for spans in self.by_part(question, passages, [[(0, len(p))] for p in passages])]

    def by_part(self, question: str, passages: list[str],
                parts: list[list[tuple[int, int]]] | None = None) -> list[list[Span | None]]:
        """The best span within each part of each passage (``parts[p]``: character ranges of passage
        ``p``; default: its lines), every passage read whole (its windows), the margin of a span taken
        against the no-answer score of the window it was read in: the per-part score (does this part
        answer the question?)."""
        if parts is None:
            parts = [line_ranges(passage) for passage in passages]
        q = features.question_ids(self.tokenizer, question)
        windows = [(p, w) for p, passage in enumerate(passages) for w in features.windows(self.tokenizer, q, passage)]
        logits = self.logits([w.ids for _, w in windows], [w.first for _, w in windows])
        out: list[list[Span | None]] = [[None] * len(ranges) for ranges in parts]
        for (p, w), (start, end) in zip(windows, logits):
            null = float(start[0] + end[0])
            token_starts, token_ends = np.array(w.starts), np.array(w.ends)
            for k, (lo, hi) in enumerate(parts[p]):
                inside = np.flatnonzero((token_starts >= lo) & (token_ends <= hi)) + w.first
                if not len(inside):
                    continue
                first, stop = int(inside[0]), int(inside[-1]) + 1
                found = best_span(start, end, first, stop)
                if found is None:
                    continue
                i, j, score = found
                known = out[p][k]
                if known is None or score - null > known.margin:
                    a, b = w.char_span(i, j)
                    out[p][k] = Span(p, a, b, passages[p][a:b], score, null)
                    beside = [s for s in (best_span(start, end, first, i), best_span(start, end, j + 1, stop)) if s]
                    if beside:
                        i2, j2, score2 = max(beside, key=lambda s: s[2])
                        a, b = w.char_span(i2, j2)
                        out[p][k].second = Span(p, a, b, passages[p][a:b], score2, null)
        return out

    def best(self, question: str, passages: list[str]) -> Span | None:
        spans = [s for s in self.read(question, passages) if s is not None]
        return max(spans, key=lambda s: s.margin, default=None)


def line_ranges(text: str) -> list[tuple[int, int]]:
    """The character range of each line of ``text``."""
    out, at = [], 0
    for line in text.split("\n"):
        out.append((at, at + len(line)))
        at += len(line) + 1
    return out


def best_span(start: np.ndarray, end: np.ndarray, first: int, stop: int,
              longest: int = features.MAX_ANSWER) -> tuple[int, int, float] | None:
    """The ``(i, j, start[i] + end[j])`` with ``first <= i <= j < stop`` and ``j - i < longest`` that
    scores highest."""
    if stop <= first:
        return None
    s, e = start[first:stop], end[first:stop]
    pair = s[:, None] + e[None, :]
    n = len(s)
    rows, cols = np.indices((n, n))
    pair = np.where((cols >= rows) & (cols - rows < longest), pair, -np.inf)
    flat = int(np.argmax(pair))
    i, j = divmod(flat, n)
    return i + first, j + first, float(pair[i, j])


# The margin below which the reader says there is no answer: chosen with how ask answers from the reader's
# scores (benchmarks/tune_reader.py, on the development conversations and the update suite's tune half;
# docs/reader.md gives what other sets would choose).
THRESHOLD = 0.5
