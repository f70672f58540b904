#!/usr/bin/env python3
"""When the default answer says "I don't know" on the knowledge-update suite: the support rule
(no line of the person's holds a word of the question, nor its meaning: the mean token match of its words,
``extractive.Tuning.held``, or the whole line's cosine with the question, ``Tuning.near``) and the model's
margin (``Tuning.margin``; ``Tuning.when_margin`` for a question that asks when), scored from one run per
half of the suite.

    python benchmarks/updates_suite.py /tmp/ku
    python benchmarks/bench_update_abstain.py /tmp/ku [--json OUT]

Every question is asked as ``benchmarks/bench_updates.py`` asks it, with both rules off, and for each
answer are kept: whether a line of the person's read holds a word of the question, the best mean token
match of the question's words in one of those lines (``Aligned.held``), the best cosine of one of them with
the question's meaning (``Aligned.near``), and by how much the model found
"I don't know" likelier than the chosen candidate (``extractive.doubt``). A rule turns an answer into
"I don't know" exactly as :func:`memcli.retrieve.extractive.candidates` and ``choose`` do, so every
combination of :data:`GRID` is scored from the records without asking again: per half, the share right of
the current-value, as-of and never-mentioned questions, and their mean. The margin itself is chosen on the
LoCoMo development pair (``benchmarks/bench_cover.py --rule margin``); this shows what it costs here.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import shutil
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

from bench_updates import build, dated, holds  # beside this script

from memcli.retrieve import extractive
from memcli.retrieve.answer import UNKNOWN

GRID = {"held": [0.0, 0.4, 0.42, 0.44, 0.46, 0.48], "near": [0.0, 0.25, 0.27, 0.28, 0.29, 0.3, 0.32, 0.35],
        "margin": [math.inf, 1.0, 1.5, 2.0, 3.0, 4.0], "when_margin": ["as margin", math.inf]}
KINDS = ("current", "as_of", "unmentioned")


def record(suite: Path) -> list[dict]:
    """Each question of the suite asked with the support rule and the margin off, with what they read."""
    questions = [json.loads(line) for line in open(suite / "questions.jsonl")]
    seen: dict = {}
    supported, choose = extractive.supported, extractive.choose

    def watching_support(entries, lines, wanted, names, tuning, aligned, library):
        seen["words"] = supported(entries, lines, wanted, names, replace(tuning, held=0.0, near=0.0), aligned,
                                  library)
        lowered = {name.lower() for name in names}
        seen["held"] = max(((aligned.held(pick, lowered) or 0.0) for pick in lines), default=0.0) \
            if aligned is not None else 0.0
        seen["near"] = max((aligned.near.get(pick, -1.0) for pick in lines), default=-1.0) \
            if aligned is not None else -1.0
        return True

    def watching_choice(found, unknown, tuning=extractive.DEFAULT):
        best, why = choose(found, unknown, replace(tuning, margin=math.inf))
        seen["gap"] = None if best is None else extractive.doubt(best, unknown, tuning)
        return best, why

    root = Path(tempfile.mkdtemp(prefix="ku-abstain-"))
    rows = []
    extractive.supported, extractive.choose = watching_support, watching_choice
    try:
        memories = build(suite, root, sorted({q["conv"] for q in questions}))
        for q in questions:
            seen.clear()
            result = memories[q["conv"]].ask(q["question"], **dated(q))
            rows.append({**q, "got": result.answer, "abstained": result.abstained,
                         "when": extractive.asks_when(q["question"]), "words": seen.get("words", True),
                         "held": seen.get("held", 1.0), "near": seen.get("near", 1.0), "gap": seen.get("gap")})
            print(f"  {len(rows)} / {len(questions)}", file=sys.stderr, end="\r")
        for memory in memories.values():
            memory.close()
    finally:
        extractive.supported, extractive.choose = supported, choose
        shutil.rmtree(root, ignore_errors=True)
    return rows


def said(row: dict, held: float, near: float, margin: float, when_margin) -> str:
    """The answer under these rules (see the module)."""
    if row["abstained"]:  # for another reason: no candidates, or the best line is someone else's
        return UNKNOWN
    if not row["words"] and not (held > 0 and row["held"] >= held) and not (near > 0 and row["near"] >= near):
        return UNKNOWN
    bound = margin if when_margin == "as margin" or not row["when"] else when_margin
    return UNKNOWN if row["gap"] is not None and row["gap"] > bound else row["got"]


def right(row: dict, answer: str) -> bool:
    if row["kind"] == "unmentioned":
        return answer == UNKNOWN
    return answer != UNKNOWN and holds(answer, row["answer"], [row["answer"], *row["stale"]], row.get("keys"))


def score(rows: list[dict], held: float, near: float, margin: float, when_margin) -> dict:
    out: dict = {"held": held, "near": near, "margin": margin, "when_margin": when_margin}
    for half in ("tune", "report"):
        shares = {}
        for kind in KINDS:
            some = [r for r in rows if r["half"] == half and r["kind"] == kind]
            if some:  # a suite may have no question of a kind (or no tune half)
                hits = sum(right(r, said(r, held, near, margin, when_margin)) for r in some)
                shares[kind] = round(hits / len(some), 3)
        out[half] = {**shares, "mean": round(sum(shares.values()) / len(shares), 3) if shares else None}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("suite", type=Path)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rows = record(args.suite)
    scored = [score(rows, *combo) for combo in itertools.product(*GRID.values())]
    print("held  near  margin  when   | tune: current as_of unmentioned mean | report: current as_of unmentioned mean")
    for s in scored:
        print(f"{s['held']:<5} {s['near']:<5} {s['margin']:<7} {str(s['when_margin']):<6} | "
              + " | ".join(" ".join("  -  " if s[h].get(k) is None else f"{s[h][k]:.3f}" for k in (*KINDS, "mean"))
                           for h in ("tune", "report")))
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "grid": scored}, indent=1) + "\n")


if __name__ == "__main__":
    main()
