#!/usr/bin/env python3
"""How much of the LoCoMo development questions' gold evidence a lexical retriever can reach at all.

    python benchmarks/lexical_reach.py [FILE ...] [--json]

For every question (categories 1-4) it checks each gold evidence turn
against the question with memcli's own BM25 terms (lower case, stop words
dropped, inflections folded), leaving out the names of the conversation's
two speakers (they are in half of all turns, so they select nothing):

- **shares a term**: the turn has a term of the question;
- **or a neighbour does**: the turn or the turn just before or after it in
  the conversation has one (what expansion to neighbouring entries and the
  reply-follows-question rule can reach).

A question counts when every one of its gold turns passes. The shares bound
what a ranking built on the question's words finds without luck: a gold turn
that shares no term with the question ("activities" asked, "swimming"
said) is found only through its neighbours, pseudo-relevance feedback or
chance. Compare them with the evidence-only reader's all-evidence recall
(`benchmarks/bench_ask.py`, README "ask"). No store and no model: it takes
a second.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

from memcli.eval.locomo import CATEGORIES, load_conversations
from memcli.eval.metrics import gold_dialog_ids
from memcli.ingest.formats import parse_locomo
from memcli.terms import terms

LOCOMO = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "locomo"
DEFAULT_FILES = [LOCOMO / "conv-26.json", LOCOMO / "conv-30.json"]


def reach(paths: list[Path]) -> dict[str, dict[str, int]]:
    """Per category (and "all"): questions, and how many pass each test."""
    counts: dict[str, Counter] = {}
    for conv in load_conversations(paths, None):
        turns = parse_locomo(conv.data, conv.source, conv.sample_id)
        names = {t for turn in turns for t in terms(turn.speaker or "")}
        order = [turn.ref for turn in turns]
        words = {turn.ref: set(terms(turn.text)) - names for turn in turns}
        position = {ref: at for at, ref in enumerate(order)}
        for qa in conv.questions:
            category = qa.get("category")
            if category not in (1, 2, 3, 4):
                continue
            asked = set(terms(str(qa.get("question", "")))) - names
            gold = gold_dialog_ids(qa.get("evidence") or [])  # an id not in the transcript fails both tests
            shared = all(asked & words.get(ref, set()) for ref in gold)
            nearby = all(ref in position and any(asked & words[n] for n in order[max(0, position[ref] - 1):
                                                                                position[ref] + 2])
                         for ref in gold)
            for key in (CATEGORIES[category], "all"):
                row = counts.setdefault(key, Counter())
                row["questions"] += 1
                row["shares a term"] += shared
                row["or a neighbour does"] += nearby
    return {key: dict(row) for key, row in counts.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("files", nargs="*", type=Path, default=DEFAULT_FILES)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = reach(args.files)
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print("| category | questions | every gold turn shares a term | ... or a neighbouring turn does |")
    print("|---|---|---|---|")
    for key in [*[c for c in CATEGORIES.values() if c in rows], "all"]:
        row = rows[key]
        n = row["questions"]
        print(f"| {key} | {n} | {100 * row['shares a term'] / n:.1f}% | {100 * row['or a neighbour does'] / n:.1f}% |")


if __name__ == "__main__":
    main()
