#!/usr/bin/env python3
"""Choose the evidence ranking's constants by cross-validation over the LoCoMo development pair.

    python benchmarks/tune_evidence.py [--budgets 500,2000,4000] [--json OUT]

Both conversations are ingested (raw memory) and consolidated deterministically (consolidated
memory) in temporary stores. For every candidate :class:`memcli.retrieve.policy.Tuning` in the
grid, all-evidence recall is measured per conversation (categories 1-4, both memories, the
budgets given). Cross-validation: the tuning with the best mean recall on one conversation is
chosen and scored on the other, both ways; the printout gives both directions, the grid's
best, words alone (``semantic_weight`` 0, no coverage rule) and the tuning that is best on the
two together (what ships). The question's words and vectors are computed once per question;
only the fusion and the coverage rule run per tuning.
"""

from __future__ import annotations

import argparse
import itertools
import json
import shutil
import sys
import tempfile
import time
from functools import cache
from pathlib import Path

from memcli.eval.locomo import CATEGORIES, load_conversations, select
from memcli.eval.metrics import evidence_recall, gold_dialog_ids
from memcli.index import terms
from memcli.memory import Memory
from memcli.retrieve.evidence import Library, assemble
from memcli.retrieve.policy import Tuning, cover_sessions, dedupe, fuse, lexical_scores
from memcli.tokens import count_tokens

LOCOMO = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "locomo"
FILES = [LOCOMO / "conv-26.json", LOCOMO / "conv-30.json"]
GRID = {  # each axis: alternatives, every combination is tried
    "semantic signal": [{"semantic_weight": 0.0},
                        {"fusion": "score", "semantic_weight": 0.25, "semantic_pool": 30},
                        {"fusion": "score", "semantic_weight": 0.5, "semantic_pool": 30},
                        {"fusion": "score", "semantic_weight": 0.75, "semantic_pool": 30},
                        {"fusion": "score", "semantic_weight": 1.0, "semantic_pool": 30},
                        {"fusion": "rank", "semantic_weight": 0.3, "semantic_pool": 30},
                        {"fusion": "rank", "semantic_weight": 0.7, "semantic_pool": 30},
                        {"fusion": "rank", "semantic_weight": 1.0, "semantic_pool": 30}],
    "session coverage": [{"session_decay": 1.0}, {"session_decay": 0.5, "session_free": 8},
                         {"session_decay": 0.7, "session_free": 4}],
    "compact evidence": [{"compact": False}, {"compact": True}],
}


def grid() -> list[Tuning]:
    return [Tuning(**{k: v for part in parts for k, v in part.items()}) for parts in itertools.product(*GRID.values())]


def prepared(conv, memory_kind: str, work: Path) -> list[dict]:
    """Per question: its gold ids, category, terms, lexical scores and cosine similarities, and the library."""
    memory = Memory(work / "store", create=True, cache_dir=work / "index", settings={"search.semantic": True})
    memory.ingest(conv.source, format="locomo", sample=conv.sample_id, consolidate=False, time="2000-01-01T00:00")
    if memory_kind == "consolidated":
        memory.consolidate(llm=False)
    index = memory.index
    out = []
    for _, qa in select(conv.questions, {1, 2, 3, 4}, None):
        library = Library(memory.store)
        out.append({"category": qa["category"], "terms": frozenset(terms(qa["question"])), "gold": gold_dialog_ids(qa.get("evidence", [])), "library": library,
                    "lexical": lexical_scores(library, index, qa["question"]),
                    "similar": index.similarities(qa["question"])})
    memory.close()
    return out


@cache
def count(text: str) -> int:
    """memcli's token estimate, remembered (the same lines are costed for every tuning)."""
    return count_tokens(text)


def recall(questions: list[dict], tuning: Tuning, budget: int, category: int | None = None) -> float:
    hits = total = 0
    for q in questions:
        if category is not None and q["category"] != category:
            continue
        scores = fuse(q["lexical"], q["similar"], tuning)
        picks = dedupe(cover_sessions(q["library"], scores, tuning.session_decay, tuning.session_free))
        evidence = assemble(q["library"], picks, budget, count, q["terms"] if tuning.compact else frozenset())
        hits += evidence_recall(q["gold"], {r for e in evidence for r in e.refs})[0]
        total += 1
    return hits / total if total else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--budgets", default="500,2000,4000")
    parser.add_argument("--choose-budget", type=int, default=2000, help="the budget the choice is made at")
    parser.add_argument("--json", type=Path, help="write every tuning's recalls here")
    args = parser.parse_args()
    budgets = [int(b) for b in args.budgets.split(",")]
    conversations = load_conversations(FILES, None)
    data: dict[str, dict[str, list[dict]]] = {}
    work = Path(tempfile.mkdtemp(prefix="memcli-tune-"))
    try:
        for conv in conversations:
            name = Path(conv.source).stem
            data[name] = {}
            for kind in ("raw", "consolidated"):
                started = time.perf_counter()
                data[name][kind] = prepared(conv, kind, work / f"{name}-{kind}")
                print(f"{name} {kind}: {len(data[name][kind])} questions prepared in "
                      f"{time.perf_counter() - started:.1f} s", file=sys.stderr)
        names = list(data)
        table = []
        choose = args.choose_budget
        for tuning in grid():
            row = {"tuning": tuning.__dict__}
            for name in names:
                row[f"{name}@{choose}"] = recall(data[name]["raw"] + data[name]["consolidated"], tuning, choose)
            table.append(row)

        def complete(row: dict) -> dict:
            """The row's recall at every budget, by memory and by category (for the report)."""
            tuning = Tuning(**row["tuning"])
            for name in names:
                for budget in budgets:
                    both = data[name]["raw"] + data[name]["consolidated"]
                    row[f"{name}@{budget}"] = recall(both, tuning, budget)
                    for kind in ("raw", "consolidated"):
                        for category, label in CATEGORIES.items():
                            if category <= 4:
                                row[f"{name}/{kind}/{label}@{budget}"] = recall(data[name][kind], tuning, budget, category)
                        row[f"{name}/{kind}/all@{budget}"] = recall(data[name][kind], tuning, budget)
            return row

        def best_on(chosen: list[str]) -> dict:
            return max(table, key=lambda r: (round(sum(r[f"{n}@{choose}"] for n in chosen), 9),
                                             -r["tuning"]["semantic_weight"], r["tuning"]["session_decay"],
                                             -r["tuning"]["compact"]))  # ties: the simpler ranking

        report = {"budgets": budgets, "choose_budget": choose, "grid": GRID, "directions": [], "table": table}
        words = complete(next(r for r in table if r["tuning"]["semantic_weight"] == 0
                              and r["tuning"]["session_decay"] == 1 and not r["tuning"]["compact"]))
        print(f"\nall-evidence recall at {choose} tokens (raw and consolidated memory together)")
        print("words alone: " + ", ".join(f"{n} {words[f'{n}@{choose}']:.3f}" for n in names))
        for chosen_on, scored_on in ((names[0], names[1]), (names[1], names[0])):
            best = complete(best_on([chosen_on]))
            direction = {"chosen_on": chosen_on, "scored_on": scored_on, "tuning": best["tuning"],
                         "chosen_recall": best[f"{chosen_on}@{choose}"], "held_out_recall": best[f"{scored_on}@{choose}"],
                         "held_out_words_alone": words[f"{scored_on}@{choose}"],
                         "held_out_oracle": max(r[f"{scored_on}@{choose}"] for r in table)}
            report["directions"].append(direction)
            print(f"chosen on {chosen_on} ({direction['chosen_recall']:.3f}): {best['tuning']} -> "
                  f"{scored_on} {direction['held_out_recall']:.3f} (words alone {direction['held_out_words_alone']:.3f}, "
                  f"grid's best there {direction['held_out_oracle']:.3f})")
        both = complete(best_on(names))
        report["shipped"] = both["tuning"]
        print(f"best on both: {both['tuning']}: " + ", ".join(
            f"{n}@{b} {both[f'{n}@{b}']:.3f}" for n in names for b in budgets))
        if args.json:
            args.json.write_text(json.dumps(report, indent=1))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
