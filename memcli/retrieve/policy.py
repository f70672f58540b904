"""The deterministic evidence policy (``memcli ask --evidence-only``): no model at all.

1. BM25 over heading partitions of the library and CURRENT picks candidate
   regions (``partitions`` of them); documents a caller prefers (the hybrid
   reader's selection) add their own best partitions.
2. Every live entry in those regions is scored on its own: the summed idf of
   the question's terms it contains (a person the question names counts when
   they are the speaker), plus its region's BM25 score relative to the best
   region times ``region_weight``, so regions keep their BM25 order and
   entries are ordered inside them.
3. Entries are taken best first (with ``context`` entries before each) until
   the token budget is full.

The same ranking is the recall guard of the agentic and hybrid readers: it
fills whatever budget their own choices leave.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from memcli.index import LibraryIndex, terms
from memcli.retrieve.evidence import Evidence, Library, assemble
from memcli.store import Store

REGION_WEIGHT = 8.0  # measured on the development conversations against 4 and 16 (README, "ask")
PREFERRED_BOOST = 1.5  # region score factor for documents the hybrid reader selected


@dataclass
class Retrieval:
    evidence: list[Evidence]
    trace: list[dict] = field(default_factory=list)


def ranked_entries(library: Library, index: LibraryIndex, question: str, *, partitions: int = 40,
                   context: int = 0, region_weight: float = REGION_WEIGHT,
                   prefer: tuple[str, ...] = ()) -> list[tuple[str, int]]:
    """(doc, line) of entries, best first, for ``question``."""
    wanted = set(terms(question))
    idf = index.idf()
    hits = index.search(question, partitions)
    for doc_id in prefer:
        hits += [h for h in index.search(question, 10, doc=doc_id, refresh=False) if h not in hits]
    top = max((h.score for h in hits), default=0.0) or 1.0
    scores: dict[tuple[str, int], float] = {}
    for hit in hits:
        doc = library.doc(hit.doc)
        region = max(hit.score, 0.0) / top * (PREFERRED_BOOST if hit.doc in prefer else 1.0)
        for line in doc.lines:
            if not hit.start_line <= line <= hit.end_line:
                continue
            entry = doc.entries[line]
            own = set(terms(f"{entry.meta.get('speaker', '')} {entry.text}"))
            score = sum(idf(t) for t in wanted & own) + region_weight * region
            key = (hit.doc, line)
            scores[key] = max(scores.get(key, 0.0), score)
    ranked = sorted(scores, key=lambda key: (-scores[key], key))
    picks: list[tuple[str, int]] = []
    for doc_id, line in ranked:
        for neighbour in library.doc(doc_id).neighbours(line, context):
            if neighbour <= line:  # the entry and the one(s) before it
                picks.append((doc_id, neighbour))
        picks.append((doc_id, line))
    return dedupe(picks)


def evidence_only(store: Store, index: LibraryIndex, question: str, *, budget: int, **options) -> Retrieval:
    library = Library(store)
    picks = ranked_entries(library, index, question, **options)
    trace = [{"tool": "search", "query": question, "entries": len(picks)}]
    return Retrieval(assemble(library, picks, budget), trace)


def dedupe(picks: list[tuple[str, int]]) -> list[tuple[str, int]]:
    seen: set[tuple[str, int]] = set()
    out = []
    for pick in picks:
        if pick not in seen:
            seen.add(pick)
            out.append(pick)
    return out
