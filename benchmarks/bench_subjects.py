#!/usr/bin/env python3
"""How far documents that follow a subject across sessions can bring multi-hop evidence together.

    python benchmarks/bench_subjects.py [--cap TOKENS] [--json]

Issue 51 asks that a later session's block about an existing document's subject join that document, so
that the development questions whose gold turns are two or more find them in clearly fewer documents
than sessions (evidence locality <= 1.6 documents a question). This measures the best such filing can
do before it is built into consolidation. Each development conversation (conv-26, conv-30) is ingested
and cut into the blocks deterministic consolidation files (``deterministic_blocks``, about ``M`` tokens
each). Blocks are filed in order: a block joins the document whose blocks' centroid is most similar to
it, when the similarity clears ``t`` and the document has room (``--cap`` tokens: the size a document
is split back down to, half the 5,000-token split limit), else it starts a new document. Similarity is
the cosine of tf-idf vectors (the words) or of MiniLM sentence vectors averaged over the block (the
meaning). ``t`` is chosen on one conversation and reported on the other (both ways). Reported beside
them: one document per session and, as the floor no filing by subject reaches, the same number of
documents cut from the conversation in order (consecutive blocks).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np

from memcli.consolidate.draft import deterministic_blocks
from memcli.consolidate.lexical import term_counts, tfidf
from memcli.memory import Memory
from memcli.semantic.encoder import Encoder
from memcli.store import CURRENT_ID
from memcli.tokens import count_tokens

os.environ.setdefault("MEMCLI_VECTORS", "inline")
LOCOMO = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "locomo"
CONVERSATIONS = ("conv-26", "conv-30")
THRESHOLDS = {"words": (0.05, 0.1, 0.15, 0.2, 0.25), "meaning": (0.4, 0.5, 0.6, 0.7, 0.8)}
BLOCKS = (250, 500)


def load(tmp: Path, conv: str):
    memory = Memory(tmp / conv / "store", create=True, cache_dir=tmp / "cache", settings={"consolidate.auto": False})
    memory.ingest(LOCOMO / f"{conv}.json", consolidate=False, format="locomo", sample=conv)
    entries = [e for _, e in memory.store.load(CURRENT_ID).doc.entries()]
    data = json.loads((LOCOMO / f"{conv}.json").read_text())
    data = data[0] if isinstance(data, list) else data
    golds = [[g for g in qa.get("evidence", []) if isinstance(g, str)] for qa in data["qa"]]
    return entries, [g for g in golds if len(g) >= 2]


def unit(v):
    if isinstance(v, dict):
        n = math.sqrt(sum(x * x for x in v.values())) or 1.0
        return {k: x / n for k, x in v.items()}
    return v / (np.linalg.norm(v) or 1.0)


def plus(a, b):
    if isinstance(a, dict):
        out = dict(a)
        for k, x in b.items():
            out[k] = out.get(k, 0.0) + x
        return out
    return a + b


def dot(a, b) -> float:
    if isinstance(a, dict):
        return sum(x * b.get(k, 0.0) for k, x in a.items())
    return float(a @ b)


def locality(where: dict[str, int], golds: list[list[str]]) -> float:
    return statistics.mean(len({where[g] for g in gold if g in where}) or 1 for gold in golds)


def filed(blocks, vectors, threshold: float, cap: int) -> tuple[dict[str, int], int]:
    centroids, sizes, where = [], [], {}
    for block, vector in zip(blocks, vectors):
        cost = sum(count_tokens(e.text) + 12 for e in block.entries)  # an entry's line: text and signature
        best = max(((dot(vector, unit(c)), d) for d, c in enumerate(centroids) if sizes[d] + cost <= cap),
                   default=(-1.0, None))
        if best[1] is not None and best[0] >= threshold:
            doc = best[1]
            centroids[doc], sizes[doc] = plus(centroids[doc], vector), sizes[doc] + cost
        else:
            doc = len(centroids)
            centroids.append(vector)
            sizes.append(cost)
        for e in block.entries:
            where[e.meta.get("ref")] = doc
    return where, len(centroids)


def in_order(blocks, documents: int) -> dict[str, int]:
    """The same number of documents, cut from the conversation in order (equal shares of tokens)."""
    costs = [sum(count_tokens(e.text) for e in b.entries) for b in blocks]
    share, where, done = sum(costs) / documents, {}, 0
    for block, cost in zip(blocks, costs):
        for e in block.entries:
            where[e.meta.get("ref")] = min(int(done // share), documents - 1)
        done += cost
    return where


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cap", type=int, default=2500, help="a document's size at most (tokens)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    encoder = Encoder()
    with tempfile.TemporaryDirectory(prefix="memcli-subjects-") as tmp:
        data = {conv: load(Path(tmp), conv) for conv in CONVERSATIONS}
    every = [e for entries, _ in data.values() for e in entries]
    df = Counter(t for e in every for t in set(term_counts([e.text])))
    idf = lambda t: math.log((len(every) + 1) / (df.get(t, 0) + 1)) + 1  # noqa: E731
    meaning = {}
    for conv, (entries, _) in data.items():
        for e, v in zip(entries, encoder.encode([e.text for e in entries])):
            meaning[(conv, e.seq)] = unit(v)
    rows = []
    for size in BLOCKS:
        cut = {conv: deterministic_blocks(entries, idf, size) for conv, (entries, _) in data.items()}
        for kind, thresholds in THRESHOLDS.items():
            vectors = {conv: [unit(tfidf(term_counts([e.text for e in b.entries]), idf)) if kind == "words"
                              else unit(np.mean([meaning[(conv, e.seq)] for e in b.entries], axis=0)) for b in blocks]
                       for conv, blocks in cut.items()}
            scores = {conv: {t: filed(cut[conv], vectors[conv], t, args.cap) for t in thresholds} for conv in data}
            for tune, report in (CONVERSATIONS, CONVERSATIONS[::-1]):
                golds = {conv: data[conv][1] for conv in data}
                chosen = min(thresholds, key=lambda t: (locality(scores[tune][t][0], golds[tune]), t))
                where, documents = scores[report][chosen]
                rows.append({"block_tokens": size, "similarity": kind, "tuned_on": tune, "reported_on": report,
                             "threshold": chosen, "documents": documents,
                             "locality": round(locality(where, golds[report]), 3),
                             "in_order_same_documents": round(locality(in_order(cut[report], documents),
                                                                       golds[report]), 3),
                             "one_per_session": round(statistics.mean(len({g.split(":")[0] for g in gold})
                                                                      for gold in golds[report]), 3)})
    if args.json:
        print(json.dumps({"cap_tokens": args.cap, "rows": rows}, indent=1))
        return 0
    print(f"cap {args.cap} tokens a document; locality = mean documents holding a multi-turn question's gold")
    print("blocks  similarity  tuned->reported     t     docs  locality  in-order  per-session")
    for r in rows:
        print(f"{r['block_tokens']:>6}  {r['similarity']:<10}  {r['tuned_on']}->{r['reported_on']}  {r['threshold']:<5} "
              f"{r['documents']:>5}  {r['locality']:>8}  {r['in_order_same_documents']:>8}  {r['one_per_session']:>11}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
