"""The hybrid reader (``memcli ask --no-agent``): summary selection, then BM25 partitions.

One model call picks the documents whose catalog summaries look relevant
(from the whole catalog when it is small, else from BM25's candidates); the
deterministic policy then ranks entries with those documents' partitions
added and boosted. With no topic documents (everything still in CURRENT) no
model call is made.
"""

from __future__ import annotations

from memcli.index import LibraryIndex
from memcli.llm.base import CallStats, ChatModel
from memcli.llm.structured import ask_json
from memcli.retrieve.agent_tools import catalog_text
from memcli.retrieve.evidence import assemble
from memcli.retrieve.evidence_reader import ANSWERING, Retrieval, ranked_entries
from memcli.store import CURRENT_ID, Store
from memcli.store.lines import Library
from memcli.terms import terms

SHOWN = 40  # catalog rows the model chooses from
CHOSEN = 5

SELECT_SYSTEM = """You pick documents of a memory library that may hold the answer to a question.
You get the catalog as lines "id (entries): summary". Choose up to 5 ids, most promising first.
Answer with JSON only."""


def select_schema(ids: list[str]) -> dict:
    return {"type": "object",
            "properties": {"relevant_docs": {"type": "array", "maxItems": CHOSEN,
                                             "items": {"type": "string", "enum": ids}}},
            "required": ["relevant_docs"]}


def hybrid(model: ChatModel, store: Store, index: LibraryIndex, question: str, *, budget: int,
           stats: CallStats) -> Retrieval:
    rows = [r for r in index.catalog() if r.id != CURRENT_ID]
    whole = len(rows) <= SHOWN  # the same catalog for every question: a prefix worth keeping
    if not whole:
        wanted = set(index.candidate_docs(terms(question), SHOWN))
        rows = [r for r in rows if r.id in wanted]
    chosen: tuple[str, ...] = ()
    if rows:
        ids = [r.id for r in rows]

        def validate(data: object) -> tuple[str, ...]:
            picked = data["relevant_docs"]  # listed ids only: the schema has checked
            return tuple(dict.fromkeys(picked))[:CHOSEN]

        catalog = f"Catalog:\n{catalog_text(rows, 0, len(rows))}\n\n"
        messages = [{"role": "system", "content": SELECT_SYSTEM},
                    {"role": "user", "content": f"{catalog}Question: {question}"}]
        shared = [[messages[0], {"role": "user", "content": catalog}]] if whole else None
        chosen = ask_json(model, messages, select_schema(ids), validate, step="select", stats=stats,
                          max_tokens=200, shared=shared) or ()
    library = Library(store)
    picks = ranked_entries(library, index, question, prefer=chosen, tuning=ANSWERING)
    trace = [{"tool": "select_docs", "shown": len(rows), "chosen": list(chosen)},
             {"tool": "search", "query": question, "entries": len(picks)}]
    return Retrieval(assemble(library, picks, budget), trace, picks, library)
