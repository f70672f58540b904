"""The deterministic evidence policy (``memcli ask --evidence-only``): no model at all.

1. BM25 over heading partitions of the library and CURRENT picks candidate
   regions (``retrieve.partitions`` of them).
2. Every live entry in those regions is scored on its own: the summed idf of
   the question's terms it contains (a person the question names counts when
   they are the speaker), plus its region's BM25 score relative to the best
   region (weight ``region_weight``; 8 measured best on the development
   conversations, against 0, 1, 4 and 16), so regions keep their BM25 order
   and entries are ordered inside them.
3. Entries are taken best first (with ``context`` entries before each) until
   the token budget is full.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from memcli.index import LibraryIndex, terms
from memcli.retrieve.evidence import Evidence, Library, assemble
from memcli.store import Store


@dataclass
class Retrieval:
    evidence: list[Evidence]
    trace: list[dict] = field(default_factory=list)


def evidence_only(store: Store, index: LibraryIndex, question: str, *, budget: int,
                  partitions: int = 40, context: int = 0, region_weight: float = 8.0) -> Retrieval:
    wanted = set(terms(question))
    idf = index.idf()
    hits = index.search(question, partitions)
    library = Library(store)
    scores: dict[tuple[str, int], float] = {}
    top = hits[0].score if hits and hits[0].score > 0 else 1.0
    for hit in hits:
        doc = library.doc(hit.doc)
        region = max(hit.score, 0.0) / top
        for line in doc.lines:
            if not hit.start_line <= line <= hit.end_line:
                continue
            entry = doc.entries[line]
            own = set(terms(f"{entry.meta.get('speaker', '')} {entry.text}"))
            score = sum(idf(t) for t in wanted & own) + 16.0 * region
            key = (hit.doc, line)
            scores[key] = max(scores.get(key, 0.0), score)
    ranked = sorted(scores, key=lambda key: (-scores[key], key))
    picks: list[tuple[str, int]] = []
    for doc_id, line in ranked:
        for neighbour in library.doc(doc_id).neighbours(line, context):
            if neighbour <= line:  # the entry and the one(s) before it
                picks.append((doc_id, neighbour))
        picks.append((doc_id, line))
    trace = [{"tool": "search", "query": question, "hits": len(hits)}]
    return Retrieval(assemble(library, _dedupe(picks), budget), trace)


def _dedupe(picks: list[tuple[str, int]]) -> list[tuple[str, int]]:
    seen: set[tuple[str, int]] = set()
    out = []
    for pick in picks:
        if pick not in seen:
            seen.add(pick)
            out.append(pick)
    return out
