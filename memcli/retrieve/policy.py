"""The deterministic evidence policy (``memcli ask --evidence-only``): no model at all.

1. BM25 over heading partitions of the library and CURRENT picks candidate
   regions (``partitions`` of them); documents a caller prefers (the hybrid
   reader's selection) add their own best partitions.
2. Every live entry in those regions is scored on its own: the summed idf of
   the question's terms it contains (a person the question names counts when
   they are the speaker), plus its region's BM25 score relative to the best
   region times ``region_weight``, so regions keep their BM25 order and
   entries are ordered inside them.
3. Pseudo-relevance feedback: the terms the best entries share (by summed
   idf) join the question's terms at a lower weight; BM25 with those terms
   adds its regions (their bonus scaled by the same weight), and the entries
   are scored again, so an entry that says what the best ones say in other
   words than the question's can still rank.
4. A question in the conversation passes most of its score to the entry
   after it (the reply that answers it), which often shares no word with the
   question asked of memory.
5. Entries are taken best first (with ``context`` entries before each) until
   the token budget is full.

The same ranking is the recall guard of the agentic and hybrid readers: it
fills whatever budget their own choices leave.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from memcli.index import LibraryIndex, terms
from memcli.retrieve.evidence import DocLines, Evidence, Library, assemble
from memcli.store import Store

REGION_WEIGHT = 8.0  # measured on the development conversations against 4 and 16 (README, "ask")
PREFERRED_BOOST = 1.5  # region score factor for documents the hybrid reader selected
FEEDBACK_ENTRIES, FEEDBACK_TERMS, FEEDBACK_WEIGHT = 5, 20, 0.3  # pseudo-relevance feedback (README, "ask")
FOLLOW_WEIGHT = 0.9  # share of a conversational question's score its reply gets


@dataclass
class Retrieval:
    evidence: list[Evidence]
    trace: list[dict] = field(default_factory=list)
    order: list[tuple[str, int]] = field(default_factory=list)  # entries best first (what an answer reads first)
    library: Library | None = None  # the documents as the evidence was read (for best_part)


def ranked_entries(library: Library, index: LibraryIndex, question: str, *, partitions: int = 40,
                   context: int = 0, region_weight: float = REGION_WEIGHT,
                   prefer: tuple[str, ...] = ()) -> list[tuple[str, int]]:
    """(doc, line) of entries, best first, for ``question``."""
    wanted = set(terms(question))
    idf = index.idf()
    candidates: dict[tuple[str, int], tuple[float, set[str]]] = {}  # entry -> (region bonus, its terms)

    def add_regions(hits: list, weight: float) -> None:
        top = max((h.score for h in hits), default=0.0) or 1.0
        for hit in hits:
            doc = library.doc(hit.doc)
            region = weight * max(hit.score, 0.0) / top * (PREFERRED_BOOST if hit.doc in prefer else 1.0)
            for line in doc.lines:
                key = (hit.doc, line)
                if hit.start_line <= line <= hit.end_line and (key not in candidates or candidates[key][0] < region):
                    entry = doc.entries[line]
                    candidates[key] = (region, set(terms(f"{entry.meta.get('speaker', '')} {entry.text}")))

    def score(weights: dict[str, float]) -> dict[tuple[str, int], float]:
        return {key: region + sum(weights[t] * idf(t) for t in own if t in weights)
                for key, (region, own) in candidates.items()}

    hits = index.search(question, partitions)
    for doc_id in prefer:
        hits += [h for h in index.search(question, 10, doc=doc_id, refresh=False) if h not in hits]
    add_regions(hits, region_weight)
    weights = dict.fromkeys(wanted, 1.0)
    feedback = feedback_terms(candidates, score(weights), wanted, idf)
    if feedback:
        weights.update(dict.fromkeys(feedback, FEEDBACK_WEIGHT))
        add_regions(index.search(" ".join(feedback), partitions // 2, refresh=False), region_weight * FEEDBACK_WEIGHT)
    scores = score(weights)
    for (doc_id, line), value in list(scores.items()):
        reply = reply_to(library.doc(doc_id), line)
        if reply is not None:
            key = (doc_id, reply)
            scores[key] = max(scores.get(key, 0.0), FOLLOW_WEIGHT * value)
    ranked = sorted(scores, key=lambda key: (-scores[key], key))
    picks: list[tuple[str, int]] = []
    for doc_id, line in ranked:
        for neighbour in library.doc(doc_id).neighbours(line, context):
            if neighbour <= line:  # the entry and the one(s) before it
                picks.append((doc_id, neighbour))
        picks.append((doc_id, line))
    return dedupe(picks)


def feedback_terms(candidates: dict, scores: dict, wanted: set[str], idf) -> list[str]:
    """The ``FEEDBACK_TERMS`` terms with the most summed idf over the ``FEEDBACK_ENTRIES`` best entries."""
    best = sorted(scores, key=lambda key: (-scores[key], key))[:FEEDBACK_ENTRIES]
    weight: dict[str, float] = {}
    for key in best:
        for term in candidates[key][1] - wanted:
            weight[term] = weight.get(term, 0.0) + idf(term)
    return sorted(weight, key=lambda t: (-weight[t], t))[:FEEDBACK_TERMS]


def reply_to(doc: DocLines, line: int) -> int | None:
    """The entry after ``line`` when ``line`` ends with a question and someone else says the next entry."""
    entry = doc.entries[line]
    if not entry.text.rstrip().endswith("?"):
        return None
    after = [n for n in doc.neighbours(line, 1) if n > line]
    if not after:
        return None
    speaker, other = entry.meta.get("speaker"), doc.entries[after[0]].meta.get("speaker")
    return None if speaker and speaker == other else after[0]


def evidence_only(store: Store, index: LibraryIndex, question: str, *, budget: int, **options) -> Retrieval:
    library = Library(store)
    picks = ranked_entries(library, index, question, **options)
    trace = [{"tool": "search", "query": question, "entries": len(picks)}]
    return Retrieval(assemble(library, picks, budget), trace, picks, library)


def interleave(first: list[tuple[str, int]], second: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """One of ``first``, one of ``second``, and so on (duplicates dropped): two rankings, neither ahead."""
    merged = [pick for pair in zip(first, second) for pick in pair]
    shorter = min(len(first), len(second))
    return dedupe(merged + first[shorter:] + second[shorter:])


def dedupe(picks: list[tuple[str, int]]) -> list[tuple[str, int]]:
    seen: set[tuple[str, int]] = set()
    out = []
    for pick in picks:
        if pick not in seen:
            seen.add(pick)
            out.append(pick)
    return out
