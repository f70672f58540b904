"""The token-level stage of a question: the entries an answer reads, ordered by how the question's words
find them (:mod:`memcli.semantic.alignment`), and whether memory holds every word of it at all.

The evidence readers rank whole lines (BM25 and one vector per entry); here each content word of the
question is matched against each token of the lines read, so of two lines about the same things the one
holding what the question asks about comes first, and a question whose person, object or relation no
line read holds (the weakest word's best match under ``floor``) is answered "I don't know" without a
model call. The constants are chosen by cross-validation on the development pair
(``benchmarks/bench_answers.py``; docs/benchmarks.md, "The line that answers").
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from memcli.retrieve.evidence import Evidence
from memcli.semantic.alignment import Alignment, align
from memcli.semantic.vectors import entry_text
from memcli.store.lines import Library

Pick = tuple[str, int]  # (document, line) of an entry


@dataclass(frozen=True)
class Tuning:
    reorder: bool = True  # the entries read in their alignment's order (off: the readers' order, aligned)
    rank: float = 0.0  # taken off an entry's alignment times log(1 + its place in the readers' ranking)
    top: int = 0  # entries aligned: this many of the readers' best (0: all read); the rest follow, unaligned
    floor: float = 0.0  # abstain when the question's least-met word matches no line read better (0: never)


# Chosen on the development pair (benchmarks/bench_answers.py): reordering moves a gold entry first for 55%
# of the questions against 48%, yet the answer's F1 is higher when the alignment is a term of each
# candidate's score (extractive.Tuning.align) and the readers' order stays. The floor is off: at 0.25 it
# changes no answer of the development pair, but a held word can match as low as that ("agency" against
# "I decided to apply to Open Door", 0.23) when an answer reads few lines (docs/benchmarks.md).
DEFAULT = Tuning(reorder=False, floor=0.0)


@dataclass
class Aligned:
    order: list[Pick]  # the entries read, best aligned first
    alignments: dict[Pick, Alignment] = field(default_factory=dict)
    words: list[str] = field(default_factory=list)  # the question's content words, as matched
    weakest: float = 1.0  # the best match, in any line read, of the question's least-met content word

    def missing(self, tuning: Tuning | None = None) -> str | None:
        """The question's word no line read holds (``tuning.floor``; default :data:`DEFAULT`), or None."""
        tuning = tuning or DEFAULT
        if tuning.floor <= 0 or self.weakest >= tuning.floor or not self.alignments:
            return None
        best = [max(a.matches[i] for a in self.alignments.values()) for i in range(len(self.words))]
        return self.words[min(range(len(best)), key=best.__getitem__)]


def read_picks(library: Library, read: list[Evidence]) -> list[Pick]:
    return [(e.doc, n) for e in read for n in library.doc(e.doc).lines if e.start_line <= n <= e.end_line]


def align_read(aligner, library: Library, question: str, read: list[Evidence], order: list[Pick],
               tuning: Tuning | None = None) -> Aligned:
    """The entries of ``read``, each of the ``tuning.top`` best of the readers' ``order`` (all when 0)
    aligned with ``question``; with ``tuning.reorder`` those by their alignment, less ``tuning.rank``
    times log(1 + their place in it) (ties: the readers' order), then the others in the readers' order."""
    tuning = tuning or DEFAULT
    picks = read_picks(library, read)
    place = {pick: at for at, pick in enumerate(order)}
    picks.sort(key=lambda pick: place.get(pick, len(place)))
    if not picks:
        return Aligned([])
    head, tail = (picks[:tuning.top], picks[tuning.top:]) if tuning.top else (picks, [])
    asked = aligner.question(question)
    content = asked.content()
    lines = aligner.lines([entry_text(library.doc(d).entries[n]) for d, n in head])
    found = {pick: align(asked, line, content) for pick, line in zip(head, lines)}
    ranked = (sorted(range(len(head)), key=lambda i: (-(found[head[i]].score - tuning.rank * math.log1p(i)), i))
              if tuning.reorder else list(range(len(head))))
    weakest = (min(max(a.matches[i] for a in found.values()) for i in range(len(content))) if content else 1.0)
    return Aligned([head[i] for i in ranked] + tail, found, [asked.words[i] for i in content], float(weakest))
