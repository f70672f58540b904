"""The token-level stage of a question: how each entry an answer reads meets the question's words
(:mod:`memcli.semantic.alignment`), and whether memory holds every word of it at all.

The evidence readers rank whole lines (BM25 and one vector per entry); here each content word of the
question is matched against each token of the lines read, so of two lines about the same things the one
holding what the question asks about aligns higher (the extractive answer weighs that in, and the
entries can be put in that order), and a question whose person, object or relation no line read holds
(the weakest word's best match under ``floor``) can be answered "I don't know" without a model call.
The constants are chosen by cross-validation on the development pair (``benchmarks/bench_answers.py``;
docs/benchmarks.md, "The line that answers").
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from memcli.index import LibraryIndex
from memcli.retrieve.evidence import Evidence, entry_picks
from memcli.retrieve.evidence_reader import meaning
from memcli.semantic.alignment import Alignment, Tokens, align, asked_kind, best_matches, kind_match
from memcli.semantic.vectors import entry_text
from memcli.semantic.wordpiece import basic_words
from memcli.store.lines import Library

Pick = tuple[str, int]  # (document, line) of an entry


@dataclass(frozen=True)
class Tuning:
    reorder: bool = True  # the entries read in their alignment's order (off: the readers' order)
    floor: float = 0.0  # abstain when the question's least-met word matches no line read better (0: never)


# Chosen on the development pair (benchmarks/bench_answers.py, which also tried a rank penalty and aligning
# only the readers' best few): reordering moves a gold entry first for 55% of the questions against 48%,
# yet the answer's F1 is higher when the alignment is a term of each candidate's score
# (extractive.Tuning.align) and the readers' order stays. The floor is off: at 0.25 it changes no answer of
# the development pair, but a held word can match as low as that ("agency" against "I decided to apply to
# Open Door", 0.23) when an answer reads few lines (docs/benchmarks.md).
DEFAULT = Tuning(reorder=False, floor=0.0)


@dataclass
class Aligned:
    order: list[Pick]  # the entries read, best aligned first (with ``Tuning.reorder``)
    alignments: dict[Pick, Alignment] = field(default_factory=dict)
    words: list[str] = field(default_factory=list)  # the question's content words, as matched
    best: list[float] = field(default_factory=list)  # per content word: its best match in any line read
    encoder: object | None = None  # the MiniLM encoder it used (sentence vectors: extractive.restated)
    kind: np.ndarray | None = None  # the kind of answer the question asks for (alignment.asked_kind)
    tokens: dict[Pick, Tokens] = field(default_factory=dict)  # each entry's tokens, as aligned
    near: dict[Pick, float] = field(default_factory=dict)  # each entry's cosine with the question's meaning
    capitalised: frozenset[str] = frozenset()  # the words the question writes capitalised, lower case

    def typed(self, pick: Pick, span: str) -> float:
        """How well ``span`` of line ``pick`` gives the kind of answer the question asks for
        (:func:`memcli.semantic.alignment.kind_match`); 0 when the line was not aligned."""
        line = self.tokens.get(pick)
        if line is None or self.kind is None:
            return 0.0
        return kind_match(line, basic_words(span), self.kind)

    @property
    def weakest(self) -> float:
        """The best match, in any line read, of the question's least-met content word (1.0 with none)."""
        return min(self.best, default=1.0)

    def _other_words(self, pick: Pick, names: set[str]):
        """Line ``pick``'s best match of each of the question's content words other than ``names`` (lower
        case) and their short forms ("Mel": capitalised, as a name is written; "car" is no short form of
        Caroline), or None when it was not aligned or the question has no other word."""
        found = self.alignments.get(pick)
        keep = [at for at, word in enumerate(self.words)
                if word not in names and not (word in self.capitalised and any(n.startswith(word) for n in names))]
        return found.matches[keep] if found is not None and keep else None

    def held(self, pick: Pick, names: set[str]) -> float | None:
        """How well line ``pick`` holds the question's content words other than ``names`` (lower case):
        their mean match in it (None when it was not aligned, or the question has no other word)."""
        matches = self._other_words(pick, names)
        return None if matches is None else float(matches.mean())

    def least(self, pick: Pick, names: set[str]) -> float | None:
        """How well line ``pick`` holds the question's content word (other than ``names``) it holds least:
        that word's best match in it (None as for :meth:`held`)."""
        matches = self._other_words(pick, names)
        return None if matches is None else float(matches.min())

    def missing(self, tuning: Tuning | None = None) -> str | None:
        """The question's word no line read holds (``tuning.floor``; default :data:`DEFAULT`), or None."""
        tuning = tuning or DEFAULT
        if tuning.floor <= 0 or not self.best or self.weakest >= tuning.floor:
            return None
        return self.words[self.best.index(self.weakest)]


def align_read(aligner, library: Library, question: str, read: list[Evidence], order: list[Pick],
               tuning: Tuning | None = None, index: LibraryIndex | None = None) -> Aligned:
    """Every entry of ``read`` aligned with ``question``, in the readers' ``order``, or with
    ``tuning.reorder`` by their alignment (ties: the readers' order); with ``index``, also each entry's
    cosine with the question's meaning as the evidence ranking compares it (without the name of the one
    person it names: :func:`memcli.retrieve.evidence_reader.meaning`), from the index's vectors."""
    tuning = tuning or DEFAULT
    place = {pick: at for at, pick in enumerate(order)}
    picks = sorted(entry_picks(library, read), key=lambda pick: place.get(pick, len(place)))
    if not picks:
        return Aligned([])
    asked = aligner.question(question)
    content = asked.content()
    lines = aligner.lines([entry_text(library.doc(d).entries[n]) for d, n in picks])
    found = {pick: align(asked, line, content) for pick, line in zip(picks, lines)}
    if tuning.reorder:
        picks = sorted(picks, key=lambda pick: -found[pick].score)  # stable: ties keep the readers' order
    best = best_matches(list(found.values())) if content else []
    return Aligned(picks, found, [asked.words[i] for i in content], [float(b) for b in best], aligner.encoder,
                   asked_kind(asked), dict(zip(found, lines)), near_meaning(index, library, question, picks),
                   frozenset(word.lower() for word in re.findall(r"\b[A-Z]\w*", question)))


def near_meaning(index: LibraryIndex | None, library: Library, question: str, picks: list[Pick]) -> dict[Pick, float]:
    """The cosine of each entry of ``picks`` with ``question``'s meaning (the ranking's question vector, kept
    by the index, and the entries' stored vectors); empty without ``index`` or its vectors."""
    vectors = index.vectors() if index is not None else None
    if vectors is None or not picks:
        return {}
    asked = vectors.question(meaning(index, question))
    found = vectors.of({pick: library.doc(pick[0]).entries[pick[1]] for pick in picks})
    return {pick: float(found[pick] @ asked) for pick in picks}
