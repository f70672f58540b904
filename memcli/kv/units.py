"""Memory units at the grain retrieval needs, each kept as one composable KV block (``ask --kv-compose``).

A unit is a run of consecutive live entries of one document: a topic
document's heading section or a day of CURRENT (a transcript's session),
cut at :data:`WINDOW_TOKENS` (memcli's token estimate, so the cut needs no
model and consolidation can tell which blocks went stale without one).
A run shorter than a quarter of that is continued into the next section or
day rather than kept as a block of a few tokens.

A unit's text is its entries as evidence shows them (``[date time] who:
text``, the date left out when the line above has it), and its label
``window:<doc>@<hash of that text>`` names its content: a changed entry
changes the label (and the block's key), an untouched window keeps its
block however much the rest of the document changed.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from memcli.retrieve.evidence import Evidence, assemble
from memcli.store.lines import DocLines, Library
from memcli.tokens import count_tokens

WINDOW_TOKENS = 512
LABEL_PREFIX = "window:"


@dataclass
class MemoryUnit:
    doc: str
    lines: list[int]  # the entries' line numbers in the document
    evidence: list[Evidence]  # the entries as evidence (citations), in document order

    @property
    def text(self) -> str:
        return "".join(e.text + "\n" for e in self.evidence)

    @property
    def label(self) -> str:
        return f"{LABEL_PREFIX}{self.doc}@{hashlib.sha256(self.text.encode()).hexdigest()[:16]}"


def _day(entry) -> str:
    return (entry.time or "")[:10]


def windows(library: Library, doc_id: str) -> list[MemoryUnit]:
    """The units of one document, in document order."""
    doc: DocLines = library.doc(doc_id)
    runs: list[list[int]] = []
    used = 0
    for line in doc.lines:
        entry = doc.entries[line]
        cost = count_tokens(entry.text) + 8  # the line's time and speaker, roughly
        if runs:
            last = runs[-1][-1]
            boundary = doc.section_of(last) != doc.section_of(line) or _day(doc.entries[last]) != _day(entry)
            if used + cost > WINDOW_TOKENS or (boundary and used >= WINDOW_TOKENS // 4):
                runs.append([])
                used = 0
        else:
            runs.append([])
        runs[-1].append(line)
        used += cost
    return [MemoryUnit(doc_id, run, assemble(library, [(doc_id, line) for line in run], budget=1 << 30))
            for run in runs]


class Units:
    """The units of the documents of one question's ranking, computed once per document."""

    def __init__(self, library: Library):
        self.library = library
        self._by_doc: dict[str, list[MemoryUnit]] = {}
        self._where: dict[tuple[str, int], MemoryUnit] = {}

    def of(self, doc_id: str, line: int) -> MemoryUnit | None:
        """The unit holding entry ``line`` of ``doc_id``."""
        if doc_id not in self._by_doc:
            self._by_doc[doc_id] = windows(self.library, doc_id)
            for unit in self._by_doc[doc_id]:
                for at in unit.lines:
                    self._where[(doc_id, at)] = unit
        return self._where.get((doc_id, line))

    def ranked(self, picks: list[tuple[str, int]]) -> list[MemoryUnit]:
        """Units in the order of their best-ranked entry in ``picks`` (entries best first)."""
        out: list[MemoryUnit] = []
        seen: set[int] = set()
        for doc_id, line in picks:
            unit = self.of(doc_id, line)
            if unit is not None and id(unit) not in seen:
                seen.add(id(unit))
                out.append(unit)
        return out

    def every(self) -> list[MemoryUnit]:
        """Every unit of the store, document by document."""
        out: list[MemoryUnit] = []
        for doc_id in self.library.store.all_ids():
            self.of(doc_id, -1)
            out.extend(self._by_doc[doc_id])
        return out


def fill(ranked: list[MemoryUnit], budget: int, count) -> list[MemoryUnit]:
    """The best units of ``ranked`` that fit ``budget`` tokens together (``count``: the model's token
    count of a unit's text); a unit that does not fit is passed over for the next."""
    chosen: list[MemoryUnit] = []
    used = 0
    for unit in ranked:
        cost = count(unit.text)
        if used + cost <= budget:
            chosen.append(unit)
            used += cost
        if budget - used < WINDOW_TOKENS // 8:
            break
    return chosen


def stale_windows(store, labels: set[str]) -> set[str]:
    """The ``window:`` labels among ``labels`` that no unit of the store has any more."""
    library = Library(store)
    ids = set(store.all_ids())
    live: dict[str, set[str]] = {}
    stale = set()
    for label in labels:
        own = label.removeprefix("compose:")
        if not own.startswith(LABEL_PREFIX) or "@" not in own:
            continue
        doc_id = own[len(LABEL_PREFIX):].rsplit("@", 1)[0]
        if doc_id not in ids:
            stale.add(label)
            continue
        if doc_id not in live:
            live[doc_id] = {unit.label for unit in windows(library, doc_id)}
        if own not in live[doc_id]:
            stale.add(label)
    return stale
