#!/usr/bin/env python3
"""The restatement rule on every suite: each time an answer is replaced by a later line that restates it
(:func:`memcli.retrieve.extractive.restated`), whether the answer got better, worse or neither, and what
might tell the two apart.

    python benchmarks/bench_restated.py [--examples] [--updates SUITE ...] [--locomo FILE ...] [--json OUT]

``--examples``: the questions of ``bench_examples.py`` (right: an accepted word); ``--updates``: suites in
``bench_updates.py``'s format, both halves, every kind but never-mentioned (right: the value, judged as that
script judges it); ``--locomo``: LoCoMo conversations, categories 1-5 (the answer's F1 against the gold). Each
restatement is judged by its two spans, the answer before and after. For each suite it prints how many got
better / worse / stayed, and for the better and the worse: the two spans' cosine (MiniLM), the score the
later span gives up (:func:`memcli.retrieve.extractive.score`) and the entry alignment it gives up.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

import bench_examples
import bench_updates

from memcli.eval.locomo import evaluate
from memcli.eval.metrics import category_f1
from memcli.retrieve import extractive

EVENTS: list[dict] = []
_ASKED: dict = {}


def _recording() -> None:
    """Record each restatement :func:`extractive.extract` makes (the question from ``candidates``)."""
    restated, candidates = extractive.restated, extractive.candidates

    def asked(question, *args, **kwargs):
        _ASKED["question"] = question
        return candidates(question, *args, **kwargs)

    def recorded(best, found, encode, tuning=extractive.DEFAULT, *args, **kwargs):
        later = restated(best, found, encode, tuning, *args, **kwargs)
        if later is not None:
            spans = encode([best.text, later.text])
            EVENTS.append({"question": _ASKED.get("question"), "best": best.text, "later": later.text,
                           "cosine": float(spans[0] @ spans[1]),
                           "score_given_up": extractive.score(best, tuning) - extractive.score(later, tuning),
                           "alignment_given_up": best.aligned - later.aligned})
        return later

    extractive.candidates, extractive.restated = asked, recorded


def _judged(events: list[dict], judge) -> list[dict]:
    for e in events:
        before, after = judge(e["question"], e["best"]), judge(e["question"], e["later"])
        e["effect"] = "better" if after > before else "worse" if after < before else "same"
    return events


def examples() -> list[dict]:
    start, accepted = len(EVENTS), {q[2]: q[3] for q in bench_examples.QUESTIONS}
    for _ in bench_examples.answered(bench_examples.QUESTIONS):
        pass
    return _judged(EVENTS[start:], lambda q, text: float(accepted.get(q) is not None and bench_examples.right(
        accepted[q], text, False)))


def updates(suite: Path) -> list[dict]:
    questions = [q for q in map(json.loads, open(suite / "questions.jsonl")) if q["kind"] != "unmentioned"]
    root, out = Path(tempfile.mkdtemp(prefix="restated-")), []
    try:
        memories = bench_updates.build(suite, root, sorted({q["conv"] for q in questions}))
        for q in questions:
            start = len(EVENTS)
            memories[q["conv"]].ask(q["question"], **bench_updates.dated(q))
            values = [q["answer"], *q["stale"]]
            out += _judged(EVENTS[start:], lambda _, text, q=q, values=values: float(
                bench_updates.holds(text, q["answer"], values, q.get("keys"))))
    finally:
        for memory in locals().get("memories", {}).values():
            memory.close()
        shutil.rmtree(root, ignore_errors=True)
    return out


def locomo(files: list[Path]) -> list[dict]:
    start = len(EVENTS)
    with tempfile.TemporaryDirectory() as folder:
        rows = Path(folder) / "rows.jsonl"
        evaluate(files, categories={1, 2, 3, 4, 5}, out_path=rows)
        gold = {r["question"]: (r["gold"], r["category"]) for r in map(json.loads, open(rows))}
    return _judged(EVENTS[start:], lambda q, text: category_f1(text, *gold[q]) if q in gold else 0.0)


def summary(events: list[dict]) -> dict:
    out = {effect: sum(e["effect"] == effect for e in events) for effect in ("better", "worse", "same")}
    for effect in ("better", "worse"):
        some = [e for e in events if e["effect"] == effect]
        for measure in ("cosine", "score_given_up", "alignment_given_up"):
            values = [e[measure] for e in some]
            out[f"{effect} {measure}"] = [round(min(values), 2), round(max(values), 2)] if values else None
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", action="store_true")
    parser.add_argument("--updates", type=Path, nargs="+", default=[], metavar="SUITE")
    parser.add_argument("--locomo", type=Path, nargs="+", default=[], metavar="FILE")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if not (args.examples or args.updates or args.locomo):
        parser.error("name at least one suite: --examples, --updates SUITE or --locomo FILE")
    _recording()
    suites = {}
    if args.examples:
        suites["examples"] = examples()
    for suite in args.updates:
        suites[str(suite)] = updates(suite)
    if args.locomo:
        suites["locomo"] = locomo(args.locomo)
    report = {name: summary(events) for name, events in suites.items()}
    for name, got in report.items():
        print(f"{name}: {json.dumps(got)}")
    if args.json:
        args.json.write_text(json.dumps({"summary": report, "events": suites}, indent=1) + "\n")


if __name__ == "__main__":
    sys.exit(main())
