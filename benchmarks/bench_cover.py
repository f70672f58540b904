#!/usr/bin/env python3
"""When the extractive answer abstains: ``extractive.Tuning.cover`` (whether the line that answers holds every
word of the question), ``extractive.Tuning.margin`` (how much likelier the model may find "I don't know"
than the best candidate) and ``extractive.Tuning.whose`` (how much better a line of someone else's may hold
the question than the person's own lines), each chosen by cross-validation over the LoCoMo development pair.

    python benchmarks/bench_cover.py [--rule cover|margin|whose] [--records R.jsonl] [--grid ...] [--json OUT]

Every question of categories 1-5 of each development conversation is asked as ``memcli eval locomo``
asks it (raw memory, the default reader and answer, with the three rules off), and for each answer the line it
came from is kept with how well that line holds the question's content word (people's names aside) it
holds least: that word's best MiniLM token match in the line (``Aligned.least``), and by how much the
model found "I don't know" likelier than the chosen candidate (the difference of their mean
log-probabilities, ``gap``), and for a question naming one person, how much better a line of someone else's
holds it than theirs do (``extractive.someone_elses``, ``lead``; the rule off while asking). A ``cover`` of
``c`` turns every answer whose line holds some word less than ``c`` into "I don't know", a ``margin`` of
``m`` every answer whose gap is more than ``m`` (``extractive.choose`` does exactly that), a ``whose`` of
``w`` every answer whose lead is more than ``w`` (``extractive.candidates``), so each value of the grid is
scored from the records without asking again, the other rules at their shipped values: F1 on categories
1-4 ("I don't know" scores 0) and the share of category-5 questions (about what was never said) answered
"I don't know".

The rule on one conversation (as ``benchmarks/bench_answers.py``'s): the most category-5 "I don't know"
among the values whose categories 1-4 F1 is within 0.01 of the F1 with the rule off; ties to the higher
F1, then the value that abstains less. Chosen on each conversation, scored on the other.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

os.environ.setdefault("MEMCLI_VECTORS", "inline")

LOCOMO = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "locomo"
CONVERSATIONS = ("conv-26", "conv-30")
GRIDS = {"cover": (0.0, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6),
         "margin": (math.inf, 6.0, 5.0, 4.0, 3.5, 3.0, 2.5, 2.0, 1.5, 1.0, 0.5, 0.0),
         "whose": (math.inf, 0.3, 0.2, 0.15, 0.1, 0.075, 0.05, 0.04, 0.03, 0.02, 0.01, 0.0, -0.025, -0.05)}
OFF = {"cover": 0.0, "margin": math.inf, "whose": math.inf}


def record(name: str, out) -> None:
    """Ask every question of ``name`` and write one JSON line each (see the module)."""
    from memcli.eval.locomo import load_conversations
    from memcli.memory import Memory
    from memcli.retrieve import extractive

    chosen: list = []
    leads: list = []
    original, elses = extractive.choose, extractive.someone_elses

    def watching(found, unknown, tuning=extractive.DEFAULT):
        best, why = original(found, unknown, replace(tuning, cover=OFF["cover"], margin=OFF["margin"]))
        chosen.append((best, None if best is None else extractive.doubt(best, unknown, tuning)))
        return best, why

    def leading(*args):
        lead = elses(*args)
        leads.append(None if lead is None else lead[0])
        return None  # the rule off: the answer as it would be without it

    extractive.choose = watching  # the answer's own decision, seen as it is made
    extractive.someone_elses = leading
    conversation = load_conversations([LOCOMO / f"{name}.json"], name)[0]
    with tempfile.TemporaryDirectory(prefix="memcli-cover-") as tmp:
        memory = Memory(Path(tmp) / "store", create=True, settings={"search.vectors": "inline"},
                        cache_dir=Path(tmp) / "index")
        memory.ingest(conversation.source, format="locomo", sample=name, consolidate=False, time="2000-01-01T00:00")
        for n, qa in enumerate(conversation.questions):
            chosen.clear()
            leads.clear()
            asked = memory.ask(qa["question"], keep_evidence=False)
            best, gap = chosen[-1] if chosen and not asked.abstained else (None, None)
            lead = leads[-1] if leads and not asked.abstained else None
            out.write(json.dumps({"conversation": name, "index": n, "category": qa.get("category"),
                                  "gold": qa.get("answer", qa.get("adversarial_answer")), "answer": asked.answer,
                                  "abstained": asked.abstained, "when": extractive.asks_when(qa["question"]),
                                  "least": None if best is None else round(best.least, 4),
                                  "gap": None if gap is None else round(gap, 4),
                                  "lead": None if lead is None else round(lead, 4)}) + "\n")
            print(f"  {name} q{n}", file=sys.stderr, end="\r")
        memory.close()
    extractive.choose, extractive.someone_elses = original, elses


def refused(row: dict, rule: str, value: float) -> bool:
    """Whether the rule at ``value`` turns the row's answer into "I don't know" (the other rules at their
    shipped values; a question that asks when at the shipped ``when_margin``, as ``extractive.extract`` does)."""
    from memcli.retrieve.extractive import DEFAULT

    shipped = {"cover": DEFAULT.cover, "margin": DEFAULT.margin,
               "whose": math.inf if DEFAULT.whose is None else DEFAULT.whose}
    shipped[rule] = value
    cover, margin, whose = shipped["cover"], shipped["margin"], shipped["whose"]
    if row.get("when"):  # a question that asks when is held to its own margin (extractive.Tuning.when_margin)
        margin = DEFAULT.when_margin
    return (row["least"] is not None and row["least"] < cover) or (row.get("gap") is not None and row["gap"] > margin) \
        or (row.get("lead") is not None and row["lead"] > whose)


def score(rows: list[dict], rule: str, value: float) -> dict:
    from memcli.eval.metrics import category_f1
    from memcli.retrieve.answer import UNKNOWN

    f1, unknown = [], []
    for row in rows:
        said = UNKNOWN if refused(row, rule, value) else row["answer"]
        if row["category"] == 5:
            unknown.append(said == UNKNOWN)
        else:
            f1.append(category_f1(said, row["gold"], row["category"]))
    return {rule: value, "f1": round(statistics.mean(f1), 4), "unknown_cat5": round(statistics.mean(unknown), 4),
            "questions": len(f1), "cat5": len(unknown)}


def choose(rows: list[dict], rule: str, grid) -> dict:
    measured = [score(rows, rule, v) for v in grid]
    off = score(rows, rule, OFF[rule])["f1"]
    allowed = [m for m in measured if m["f1"] >= off - 0.01]
    lenient = 1 if rule == "cover" else -1  # ties: the value that abstains less (a higher margin or whose)
    return max(allowed, key=lambda m: (m["unknown_cat5"], m["f1"], -lenient * m[rule]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=Path, help="read these records (written by a run without it)")
    parser.add_argument("--write", type=Path, help="where the records go (default: a temporary file)")
    parser.add_argument("--rule", choices=sorted(GRIDS), default="cover")
    parser.add_argument("--grid", type=float, nargs="+", help="the values to score (default: the rule's grid)")
    parser.add_argument("--json", type=Path, help="write the report here")
    args = parser.parse_args()
    rule, grid = args.rule, args.grid or list(GRIDS[args.rule])
    path = args.records
    if path is None:
        path = args.write or Path(tempfile.mkstemp(prefix="memcli-cover-", suffix=".jsonl")[1])
        with path.open("w") as out:
            for name in CONVERSATIONS:
                record(name, out)
        print(f"records: {path}", file=sys.stderr)
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    by = {name: [r for r in rows if r["conversation"] == name] for name in CONVERSATIONS}
    report = {"rule": rule, "grid": {name: [score(by[name], rule, v) for v in grid] for name in CONVERSATIONS},
              "folds": []}
    for train, test in (CONVERSATIONS, CONVERSATIONS[::-1]):
        pick = choose(by[train], rule, grid)
        report["folds"].append({"chosen_on": train, rule: pick[rule], "train": pick,
                                "test": score(by[test], rule, pick[rule]), "test_off": score(by[test], rule, OFF[rule])})
    report["both"] = choose(rows, rule, grid)
    report["both_off"] = score(rows, rule, OFF[rule])
    text = json.dumps(report, indent=1)
    if args.json:
        args.json.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
