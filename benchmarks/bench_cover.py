#!/usr/bin/env python3
"""Whether the line that answers holds every word of the question: ``extractive.Tuning.cover``, chosen by
cross-validation over the LoCoMo development pair.

    python benchmarks/bench_cover.py [--records R.jsonl] [--grid 0.3 0.35 ...] [--json OUT]

Every question of categories 1-5 of each development conversation is asked as ``memcli eval locomo``
asks it (raw memory, the default reader and answer, ``cover`` off), and for each answer the line it
came from is kept with how well that line holds the question's content word (people's names aside) it
holds least: that word's best MiniLM token match in the line (``Aligned.least``). A ``cover`` of ``c``
turns every answer whose line holds some word less than ``c`` into "I don't know" (``extractive.choose``
does exactly that), so each value of the grid is scored from the records without asking again: F1 on
categories 1-4 ("I don't know" scores 0) and the share of category-5 questions (about what was never
said) answered "I don't know".

The rule on one conversation (as ``benchmarks/bench_answers.py``'s): the most category-5 "I don't know"
among the values whose categories 1-4 F1 is within 0.01 of the F1 with the rule off; ties to the higher
F1, then the lower value. Chosen on each conversation, scored on the other.
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

LOCOMO = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "locomo"
CONVERSATIONS = ("conv-26", "conv-30")
GRID = (0.0, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6)


def record(name: str, out) -> None:
    """Ask every question of ``name`` and write one JSON line each (see the module)."""
    from memcli.eval.locomo import load_conversations
    from memcli.memory import Memory
    from memcli.retrieve import extractive

    chosen: list = []
    original = extractive.choose

    def watching(found, unknown, tuning=extractive.DEFAULT):
        best, why = original(found, unknown, tuning)
        chosen.append(best)
        return best, why

    extractive.choose = watching  # the answer's own decision, seen as it is made
    conversation = load_conversations([LOCOMO / f"{name}.json"], name)[0]
    with tempfile.TemporaryDirectory(prefix="memcli-cover-") as tmp:
        memory = Memory(Path(tmp) / "store", create=True, settings={"search.vectors": "inline"},
                        cache_dir=Path(tmp) / "index")
        memory.ingest(conversation.source, format="locomo", sample=name, consolidate=False, time="2000-01-01T00:00")
        for n, qa in enumerate(conversation.questions):
            chosen.clear()
            asked = memory.ask(qa["question"], keep_evidence=False)
            best = chosen[-1] if chosen and not asked.abstained else None
            out.write(json.dumps({"conversation": name, "index": n, "category": qa.get("category"),
                                  "gold": qa.get("answer", qa.get("adversarial_answer")), "answer": asked.answer,
                                  "abstained": asked.abstained,
                                  "least": None if best is None else round(best.least, 4)}) + "\n")
            print(f"  {name} q{n}", file=sys.stderr, end="\r")
        memory.close()
    extractive.choose = original


def score(rows: list[dict], cover: float) -> dict:
    from memcli.eval.metrics import category_f1
    from memcli.retrieve.answer import UNKNOWN

    f1, unknown = [], []
    for row in rows:
        said = UNKNOWN if row["least"] is not None and row["least"] < cover else row["answer"]
        if row["category"] == 5:
            unknown.append(said == UNKNOWN)
        else:
            f1.append(category_f1(said, row["gold"], row["category"]))
    return {"cover": cover, "f1": round(statistics.mean(f1), 4), "unknown_cat5": round(statistics.mean(unknown), 4),
            "questions": len(f1), "cat5": len(unknown)}


def choose(rows: list[dict], grid) -> dict:
    measured = [score(rows, c) for c in grid]
    off = score(rows, 0.0)["f1"]
    allowed = [m for m in measured if m["f1"] >= off - 0.01]
    return max(allowed, key=lambda m: (m["unknown_cat5"], m["f1"], -m["cover"]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=Path, help="read these records (written by a run without it)")
    parser.add_argument("--write", type=Path, help="where the records go (default: a temporary file)")
    parser.add_argument("--grid", type=float, nargs="+", default=list(GRID))
    parser.add_argument("--json", type=Path, help="write the report here")
    args = parser.parse_args()
    path = args.records
    if path is None:
        path = args.write or Path(tempfile.mkstemp(prefix="memcli-cover-", suffix=".jsonl")[1])
        with path.open("w") as out:
            for name in CONVERSATIONS:
                record(name, out)
        print(f"records: {path}", file=sys.stderr)
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    by = {name: [r for r in rows if r["conversation"] == name] for name in CONVERSATIONS}
    report = {"grid": {name: [score(by[name], c) for c in args.grid] for name in CONVERSATIONS}, "folds": []}
    for train, test in (CONVERSATIONS, CONVERSATIONS[::-1]):
        pick = choose(by[train], args.grid)
        report["folds"].append({"chosen_on": train, "cover": pick["cover"], "train": pick,
                                "test": score(by[test], pick["cover"]), "test_off": score(by[test], 0.0)})
    report["both"] = choose(rows, args.grid)
    report["both_off"] = score(rows, 0.0)
    text = json.dumps(report, indent=1)
    if args.json:
        args.json.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
