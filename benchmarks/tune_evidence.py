#!/usr/bin/env python3
"""Choose the evidence ranking's constants by cross-validation over the LoCoMo development pair.

    python benchmarks/tune_evidence.py [--budgets 500,2000,4000] [--choose-budget 500,2000,4000]
                                       [--measure recall|shown] [--json OUT]

Both conversations are ingested (raw memory) and consolidated deterministically (consolidated
memory) in temporary stores. For every candidate :class:`memcli.retrieve.evidence_reader.Tuning` in the
grid (every combination of the alternatives of each axis), all-evidence recall is measured per
conversation at ``--choose-budget`` (the mean over those budgets; categories 1-4, both memories together);
with ``--measure shown``, the share of the gold answer's words the evidence shows in its gold entries
(:func:`memcli.eval.metrics.answer_shown`; categories 1, 3 and 4), which also counts what compact
evidence leaves out of an entry it cites. Cross-validation:
the tuning with the best recall on one conversation is chosen and scored on the other, both
ways (ties go to the simpler ranking); the printout gives both directions, with their recall at
every budget, the grid's best and words alone (``semantic_weight`` 0, no coverage rule).

What ships: axis by axis, the alternative both directions chose; where the two directions
choose differently, the axis keeps what memcli ships now (``policy.DEFAULT``): two
conversations do not tell such alternatives apart. The tuning best on the two together is
printed too. The question's words and vectors are computed once per question; only the
fusion, the coverage rule and the rendering run per tuning.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import sys
import tempfile
import time
from functools import cache
from pathlib import Path

from memcli.eval.locomo import CATEGORIES, WORDED, gold_texts, load_conversations, select
from memcli.eval.metrics import answer_shown, evidence_recall, gold_dialog_ids
from memcli.memory import Memory
from memcli.retrieve.evidence import WHOLE, assemble
from memcli.retrieve.evidence_reader import DEFAULT, Tuning, dedupe, focus, rank_candidates, signals
from memcli.store.lines import Library
from memcli.tokens import count_tokens

os.environ.setdefault("MEMCLI_VECTORS", "inline")  # questions rank with every vector, not a job's progress

LOCOMO = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "locomo"
FILES = [LOCOMO / "conv-26.json", LOCOMO / "conv-30.json"]
GRID = {  # each axis: alternatives, every combination is tried
    "semantic signal": [{"semantic_weight": 0.0},
                        {"fusion": "score", "semantic_weight": 0.25},
                        {"fusion": "score", "semantic_weight": 0.5},
                        {"fusion": "score", "semantic_weight": 0.75},
                        {"fusion": "score", "semantic_weight": 1.0},
                        {"fusion": "rank", "semantic_weight": 0.3},
                        {"fusion": "rank", "semantic_weight": 0.7},
                        {"fusion": "rank", "semantic_weight": 1.0}],
    "semantic pool": [{"semantic_pool": 30}, {"semantic_pool": 100}, {"semantic_pool": 400}, {"semantic_pool": 1000}],
    "session coverage": [{"session_decay": 1.0}, {"session_decay": 0.5, "session_free": 8},
                         {"session_decay": 0.7, "session_free": 4}],
    "compact evidence": [{"compact": False}, {"compact": True},
                         {"compact": True, "closest_sentence": True},
                         {"compact": True, "closest_sentence": True, "whole_share": 0.25},
                         {"compact": True, "closest_sentence": True, "whole_share": 0.5},
                         {"compact": True, "closest_sentence": True, "whole_share": 0.75}],
    "set selection": [{"diversity": 0.0}, {"diversity": 0.35, "diversity_pool": 100},
                      {"diversity": 0.75, "diversity_pool": 100}, {"diversity": 1.0, "diversity_pool": 100}],
    "own lines": [{"others": 1.0}, {"others": 0.8}, {"others": 0.6}, {"others": 0.4}, {"others": 0.2}],
    "vector feedback": [{"feedback_entries": 0}, {"feedback_entries": 5, "feedback_weight": 0.5},
                        {"feedback_entries": 5, "feedback_weight": 1.0}, {"feedback_entries": 10, "feedback_weight": 0.5}],
}


def grid(vary: set[str] | None = None) -> list[tuple[tuple[int, ...], Tuning]]:
    """Every combination: (the alternative taken on each axis, the tuning); ``vary``: only these axes take
    each of their alternatives, the others what ships."""
    axes = [list(enumerate(axis)) if vary is None or name in vary
            else [(alternative_of(DEFAULT, axis), axis[alternative_of(DEFAULT, axis)])]
            for name, axis in GRID.items()]
    return [(tuple(at for at, _ in parts), Tuning(question_map=DEFAULT.question_map,
                                                  **{k: v for _, part in parts for k, v in part.items()}))
            for parts in itertools.product(*axes)]


def alternative_of(tuning: Tuning, axis: list[dict]) -> int:
    """Which alternative of ``axis`` ``tuning`` takes (the keys the axis sets, at their values)."""
    keys = {key for alternative in axis for key in alternative}
    plain = Tuning()
    for at, alternative in enumerate(axis):
        if all(getattr(tuning, key) == alternative.get(key, getattr(plain, key)) for key in keys):
            return at
    raise SystemExit(f"the shipped tuning {tuning} is not in the grid's axis {axis}")


def prepared(conv, memory_kind: str, work: Path, memories: list[Memory]) -> list[dict]:
    """Per question: its gold ids, category, terms, lexical scores and cosine similarities, and the
    library; the memory stays open (in ``memories``) for compact evidence's sentence vectors."""
    memory = Memory(work / "store", create=True, cache_dir=work / "index", settings={"search.semantic": True})
    memory.ingest(conv.source, format="locomo", sample=conv.sample_id, consolidate=False, time="2000-01-01T00:00")
    if memory_kind == "consolidated":
        memory.consolidate(llm=False)
    index = memory.index
    out = []
    for _, qa in select(conv.questions, {1, 2, 3, 4}, None):
        library = Library(memory.store)
        lexical, similar, named = signals(library, index, qa["question"], DEFAULT)  # as ranked_entries ranks
        out.append({"category": qa["category"], "question": qa["question"], "index": index, "answer": qa.get("answer"),
                    "gold": gold_dialog_ids(qa.get("evidence", [])), "library": library,
                    "lexical": lexical, "similar": similar, "named": named})
    memories.append(memory)
    return out


@cache
def count(text: str) -> int:
    """memcli's token estimate, remembered (the same lines are costed for every tuning)."""
    return count_tokens(text)


MEASURE = ["recall"]  # what recall() measures: "recall" (all gold entries in the evidence) or "shown" (--measure)


def recall(questions: list[dict], tuning: Tuning, budget: int, category: int | None = None) -> float:
    """The mean of :data:`MEASURE` over ``questions`` (of ``category``) at ``budget`` tokens."""
    hits = total = 0.0
    for q in questions:
        if category is not None and q["category"] != category:
            continue
        if MEASURE[0] == "shown" and (q["category"] not in WORDED or not q["gold"]):
            continue
        picks = dedupe(rank_candidates(q["library"], q["lexical"], q["similar"], tuning, q["named"])[0])
        shown = focus(q["index"], q["question"], tuning, budget) if tuning.compact else WHOLE
        evidence = assemble(q["library"], picks, budget, count, shown)
        if MEASURE[0] == "shown":
            share = answer_shown(q["answer"], gold_texts(q["library"], evidence, q["gold"]))
            if share is None:
                continue
            hits += share
        else:
            hits += evidence_recall(q["gold"], {r for e in evidence for r in e.refs})[0]
        total += 1
    return hits / total if total else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--budgets", default="500,2000,4000")
    parser.add_argument("--choose-budget", default="500,2000,4000",
                        help="the budgets the choice is made at (the mean of their recalls)")
    parser.add_argument("--json", type=Path, help="write every tuning's recalls here")
    parser.add_argument("--measure", choices=["recall", "shown"], default="recall",
                        help="what the choice is made by: all-evidence recall, or the share of the answer's words "
                             "the evidence shows in its gold entries")
    parser.add_argument("--vary", action="append", choices=list(GRID),
                        help="only this axis takes each of its alternatives (repeatable; default: every axis)")
    args = parser.parse_args()
    budgets = [int(b) for b in args.budgets.split(",")]
    MEASURE[0] = args.measure
    conversations = load_conversations(FILES, None)
    data: dict[str, dict[str, list[dict]]] = {}
    work = Path(tempfile.mkdtemp(prefix="memcli-tune-"))
    memories: list[Memory] = []
    try:
        for conv in conversations:
            name = Path(conv.source).stem
            data[name] = {}
            for kind in ("raw", "consolidated"):
                started = time.perf_counter()
                data[name][kind] = prepared(conv, kind, work / f"{name}-{kind}", memories)
                print(f"{name} {kind}: {len(data[name][kind])} questions prepared in "
                      f"{time.perf_counter() - started:.1f} s", file=sys.stderr)
        names = list(data)
        table = []
        chooses = [int(b) for b in args.choose_budget.split(",")]
        choose = "/".join(map(str, chooses))
        for choice, tuning in grid(set(args.vary) if args.vary else None):
            row = {"tuning": tuning.__dict__, "choice": choice}
            for name in names:
                both = data[name]["raw"] + data[name]["consolidated"]
                row[f"{name}@{choose}"] = sum(recall(both, tuning, b) for b in chooses) / len(chooses)
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
                row[f"{name}@{choose}"] = sum(row[f"{name}@{b}"] if b in budgets else
                                              recall(data[name]["raw"] + data[name]["consolidated"], tuning, b)
                                              for b in chooses) / len(chooses)
            return row

        def best_on(chosen: list[str]) -> dict:
            return max(table, key=lambda r: (round(sum(r[f"{n}@{choose}"] for n in chosen), 9),
                                             -r["tuning"]["semantic_weight"], r["tuning"]["session_decay"],
                                             -r["tuning"]["compact"], -r["tuning"]["closest_sentence"],
                                             -r["tuning"]["diversity"], -r["tuning"]["feedback_entries"]))  # ties: the simpler

        def at(row: dict, name: str) -> str:
            return "/".join(f"{row[f'{name}@{b}']:.3f}" for b in budgets)

        report = {"budgets": budgets, "choose_budget": choose, "grid": GRID, "directions": [], "table": table}
        words = complete({"tuning": Tuning().__dict__})  # the words alone, no rule
        print(f"\n{'all-evidence recall' if args.measure == 'recall' else 'answer shown'}, raw and consolidated memory together; chosen at {choose} tokens; "
              f"figures at {'/'.join(map(str, budgets))}")
        print("words alone: " + ", ".join(f"{n} {at(words, n)}" for n in names))
        chosen = []
        for chosen_on, scored_on in ((names[0], names[1]), (names[1], names[0])):
            best = complete(best_on([chosen_on]))
            chosen.append(best)
            direction = {"chosen_on": chosen_on, "scored_on": scored_on, "tuning": best["tuning"],
                         "chosen_recall": best[f"{chosen_on}@{choose}"], "held_out_recall": best[f"{scored_on}@{choose}"],
                         "held_out_words_alone": words[f"{scored_on}@{choose}"],
                         "held_out_oracle": max(r[f"{scored_on}@{choose}"] for r in table),
                         "held_out_by_budget": {b: best[f"{scored_on}@{b}"] for b in budgets}}
            report["directions"].append(direction)
            print(f"chosen on {chosen_on} ({at(best, chosen_on)}): {best['tuning']} -> {scored_on} {at(best, scored_on)} "
                  f"(at {choose}: words alone {direction['held_out_words_alone']:.3f}, "
                  f"grid's best there {direction['held_out_oracle']:.3f})")
        shipped = []
        for axis_at, (axis, alternatives) in enumerate(GRID.items()):
            picks = {row["choice"][axis_at] for row in chosen}
            if len(picks) == 1:
                shipped.append(picks.pop())
                print(f"{axis}: both directions chose {alternatives[shipped[-1]]}")
            else:
                shipped.append(alternative_of(DEFAULT, alternatives))
                print(f"{axis}: the directions differ; kept what ships, {alternatives[shipped[-1]]}")
        ships = complete(next(r for r in table if r["choice"] == tuple(shipped)))
        report["shipped"] = ships["tuning"]
        print(f"ships: {ships['tuning']}: " + ", ".join(f"{n} {at(ships, n)}" for n in names))
        both = complete(best_on(names))
        report["best_on_both"] = both["tuning"]
        print(f"best on both together: {both['tuning']}: " + ", ".join(f"{n} {at(both, n)}" for n in names))
        if args.json:
            args.json.write_text(json.dumps(report, indent=1))
    finally:
        for memory in memories:
            memory.close()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
