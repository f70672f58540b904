#!/usr/bin/env python3
"""Choose deterministic consolidation's routing (or merging) threshold by cross-validation over the development pair.

    python benchmarks/tune_topics.py [--setting route|merge] [--grid 0.1 0.15 0.2 0.25 0.3] [--baseline V]

A block of a session goes into the in-scope document whose vocabulary is most like its own when their
cosine clears ``consolidate.route_similarity``, else it starts a new document: the threshold decides
how much of a subject gathers across sessions. ``--setting merge`` tunes
``consolidate.merge_similarity`` instead: how alike (the cosine of the tf-idf vectors of what merging
compares) two documents under the merge limit must be to become one. For each value and each development conversation alone,
the conversation is ingested and consolidated (``--no-llm``), and measured:

- evidence locality: for its questions with two or more gold turns, the mean number of documents holding
  them (one document per session would give the number of sessions they come from);
- all-evidence recall of its category 1-4 questions at 500 / 2,000 / 4,000 tokens (evidence reader);
- documents and the largest document's size.

The rule, chosen on one conversation and scored on the other: the lowest locality among the values whose
mean recall over the three budgets is not below the baseline's (``--baseline``: the value before this
tuning, 0.25, set by hand) on the chosen-on conversation (ties: the higher threshold, fewer merges).
What ships: of the two folds' choices, the one whose questions' gold turns sit in the fewest documents
over both conversations (ties: the higher value). Prints one JSON report.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("MEMCLI_VECTORS", "inline")

REPO = Path(__file__).resolve().parent.parent
LOCOMO = REPO.parent / "shared" / "data" / "locomo"
BUDGETS = (500, 2000, 4000)


def measure(name: str, setting: str, threshold: float, cache: Path) -> dict:
    from memcli.eval.locomo import load_conversations
    from memcli.eval.metrics import evidence_recall, gold_dialog_ids
    from memcli.memory import Memory

    path = LOCOMO / f"{name}.json"
    conversation = load_conversations([path], name)[0]
    with tempfile.TemporaryDirectory(prefix="memcli-tune-topics-") as tmp:
        memory = Memory(Path(tmp) / "store", create=True, cache_dir=cache / name,
                        settings={"consolidate.auto": False, f"consolidate.{setting}_similarity": threshold})
        memory.ingest(path, format="locomo", sample=name, consolidate=False)
        memory.consolidate(llm=False)
        where, sizes = {}, []
        for doc_id in memory.store.doc_ids():
            doc = memory.store.load(doc_id).doc
            sizes.append(int(doc.meta.get("token_count") or 0))
            for _, entry in doc.entries():
                where[entry.meta.get("ref")] = doc_id
        located, sessions = [], []
        recall: dict[int, list[float]] = {b: [] for b in BUDGETS}
        for qa in conversation.questions:
            gold = [g for g in qa.get("evidence", []) if isinstance(g, str)]
            if len(gold) >= 2 and (held := {where.get(g) for g in gold} - {None}):
                located.append(len(held))
                sessions.append(len({g.split(":")[0] for g in gold}))
            if qa.get("category") in (1, 2, 3, 4):
                wanted = gold_dialog_ids(qa.get("evidence", []))
                for budget in BUDGETS:
                    asked = memory.ask(qa["question"], reader="evidence-only", budget=budget)
                    recall[budget].append(evidence_recall(wanted, {r for e in asked.evidence for r in e.refs})[0])
        memory.close()
    return {"locality": round(statistics.mean(located), 3), "sessions": round(statistics.mean(sessions), 3),
            "multi_turn_questions": len(located), "documents_holding": sum(located),
            "recall": [round(statistics.mean(recall[b]), 4) for b in BUDGETS],
            "documents": len(sizes), "largest_tokens": max(sizes)}


def choose(rows: dict[float, dict], baseline: float) -> float:
    floor = statistics.mean(rows[baseline]["recall"])
    allowed = [t for t, row in rows.items() if statistics.mean(row["recall"]) >= floor]
    return min(allowed, key=lambda t: (rows[t]["locality"], -t))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--setting", choices=("route", "merge"), default="route")
    parser.add_argument("--grid", type=float, nargs="+", default=[0.1, 0.15, 0.2, 0.25, 0.3])
    parser.add_argument("--baseline", type=float, default=0.25, help="the value whose recall a choice keeps")
    args = parser.parse_args()
    grid = sorted(set(args.grid) | {args.baseline})
    names = ("conv-26", "conv-30")
    with tempfile.TemporaryDirectory(prefix="memcli-tune-cache-") as cache:
        rows = {name: {} for name in names}
        for threshold in grid:
            for name in names:
                rows[name][threshold] = measure(name, args.setting, threshold, Path(cache))
                print(f"{name} {args.setting} {threshold}: {rows[name][threshold]}", file=sys.stderr)
    report = {"setting": args.setting, "baseline": args.baseline, "rows": {n: {str(t): r for t, r in rows[n].items()} for n in names},
              "folds": []}
    for train, test in (names, names[::-1]):
        chosen = choose(rows[train], args.baseline)
        report["folds"].append({"chosen_on": train, "threshold": chosen, "train": rows[train][chosen],
                                "test": rows[test][chosen], "test_baseline": rows[test][args.baseline]})
    chosen = {fold["threshold"] for fold in report["folds"]}
    report["ships"] = min(chosen, key=lambda t: (sum(rows[n][t]["documents_holding"] for n in names), -t))
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
