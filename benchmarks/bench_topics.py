#!/usr/bin/env python3
"""What deterministic consolidation files: scope purity, evidence locality, titles and summaries.

    python benchmarks/bench_topics.py [--split N]

One store ingests both development conversations (conv-26, conv-30), the shipped example and the real
agent sessions in tests/samples (Codex, Claude Code), then ``memcli consolidate --no-llm`` files them
together. Reported:

- scope purity: the share of documents whose entries come from one conversation, or whose conversations
  share a speaker (a session's user and assistant count as one party, the store's owner);
- evidence locality: for the development questions whose gold turns are two or more, the mean number of
  documents holding them, against the number of sessions they come from (one document per session);
- title quality: the share of titles whose words are all among their document's 12 most distinctive terms
  (tf-idf against the library) and that hold no stop-word, markup or private-use character;
- summary faithfulness: the share of summaries each of whose sentences is a sentence of an entry;
- documents, their sizes in tokens, and the consolidation time.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from memcli.memory import Memory
from memcli.store.lines import sentences
from memcli.terms import STOPWORDS, stem, terms

os.environ.setdefault("MEMCLI_VECTORS", "inline")
ROLES = {"user", "assistant"}  # a session's roles: one party, the store's owner

REPO = Path(__file__).resolve().parent.parent
LOCOMO = REPO.parent / "shared" / "data" / "locomo"
SOURCES = [(LOCOMO / "conv-26.json", {"format": "locomo", "sample": "conv-26"}),
           (LOCOMO / "conv-30.json", {"format": "locomo", "sample": "conv-30"}),
           (REPO / "examples" / "caroline-and-priya.json", {}),
           (REPO / "tests" / "samples" / "codex-0.125-codemie.jsonl", {}),
           (REPO / "tests" / "samples" / "claude-code-2.0.76-codemie.jsonl", {})]


def documents(memory: Memory) -> dict[str, dict]:
    out = {}
    for doc_id in memory.store.doc_ids():
        doc = memory.store.load(doc_id).doc
        lines = [line for _, line in doc.lines()]
        out[doc_id] = {"entries": [e for _, e in doc.entries()], "summary": str(doc.meta.get("summary") or ""),
                       "title": next((line[2:].strip() for line in lines if line.startswith("# ")), ""),
                       "tokens": int(doc.meta.get("token_count") or 0)}
    return out


def party(speaker: str | None) -> str | None:
    return "owner" if speaker in ROLES else speaker


def pure(doc: dict) -> bool:
    convs: dict[str, set] = {}
    for e in doc["entries"]:
        convs.setdefault(e.meta.get("conv") or "", set()).add(party(e.meta.get("speaker")))
    if len(convs) <= 1:
        return True
    groups = list(convs.values())
    return all(groups[0] & g for g in groups[1:])


def title_ok(doc: dict, df: Counter, n_docs: int) -> bool:
    title = doc["title"]
    if re.search(r"[<>\[\]{}`|\ue000-\uf8ff]", title):
        return False
    words = [w for w in re.findall(r"[A-Za-z][A-Za-z'-]+", re.sub(r"\(.*?\)", "", title))]
    if not words or any(w.lower() in STOPWORDS for w in words):
        return False
    counts = Counter(t for e in doc["entries"] for t in terms(e.text))
    top = {t for t, _ in sorted(counts.items(), key=lambda tc: -(1 + math.log(tc[1])) * math.log(n_docs / df[tc[0]]))[:12]}
    return all(stem(w.lower()) in top for w in words)


def faithful(doc: dict) -> bool:
    """Whether the summary is made of whole sentences of the document's entries (each taken out of it,
    longest first, leaves nothing)."""
    own = {" ".join(s.split()) for e in doc["entries"] for s in sentences(" ".join(e.text.split()))}
    rest = " ".join(doc["summary"].split())
    if not rest:
        return False
    for sentence in sorted(own, key=len, reverse=True):
        if len(sentence.split()) > 3 or sentence == rest:
            rest = rest.replace(sentence, " ")
    return not rest.strip()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--split", type=int, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="memcli-topics-") as tmp:
        memory = Memory(Path(tmp) / "store", create=True, cache_dir=Path(tmp) / "cache",
                        settings={"consolidate.auto": False})
        for path, options in SOURCES:
            memory.ingest(path, consolidate=False, **options)
        begin = time.perf_counter()
        memory.consolidate(llm=False, split=args.split)
        took = time.perf_counter() - begin
        docs = documents(memory)
        where = {}  # (conv, dialogue id) -> document
        for doc_id, doc in docs.items():
            for e in doc["entries"]:
                where[(e.meta.get("conv"), e.meta.get("ref"))] = doc_id
        located, sessions = [], []
        for path, options in SOURCES[:2]:
            data = json.loads(path.read_text())
            for qa in (data[0] if isinstance(data, list) else data)["qa"]:
                gold = [g for g in qa.get("evidence", []) if isinstance(g, str)]
                if len(gold) < 2:
                    continue
                held = {where.get((options["sample"], g)) for g in gold} - {None}
                if held:
                    located.append(len(held))
                    sessions.append(len({g.split(":")[0] for g in gold}))
        df = Counter(t for doc in docs.values() for t in {t for e in doc["entries"] for t in terms(e.text)})
        sizes = [doc["tokens"] for doc in docs.values()]
        report = {
            "documents": len(docs), "consolidation_s": round(took, 2),
            "scope_purity": round(sum(pure(d) for d in docs.values()) / len(docs), 3),
            "evidence_locality": {"questions": len(located), "documents_mean": round(statistics.mean(located), 3),
                                  "sessions_mean": round(statistics.mean(sessions), 3)},
            "title_quality": round(sum(title_ok(d, df, len(docs)) for d in docs.values()) / len(docs), 3),
            "summary_faithfulness": round(sum(faithful(d) for d in docs.values()) / len(docs), 3),
            "size_tokens": {"median": statistics.median(sizes), "max": max(sizes)},
            "examples": [{"id": i, "title": d["title"], "summary": d["summary"][:160]}
                         for i, d in list(docs.items())[:6]],
        }
        memory.close()
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
