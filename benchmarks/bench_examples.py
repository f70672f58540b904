#!/usr/bin/env python3
"""Questions a new user asks of the shipped examples, answered as the README's commands answer them.

    python benchmarks/bench_examples.py [--half tune|report] [--json OUT]

Each example is ingested and consolidated into a store of its own (``memcli init``, ``ingest``,
``consolidate``), its vectors computed, and every question asked with the default reader and model
(``memcli ask``). A question is right when the answer holds one of its accepted words (any case), or, for
one memory cannot answer, when it is "I don't know". The questions were written for this suite, about
what each example's lines say (its own ``qa`` list is in ``tests/test_answers.py``), and split in two
halves before any rule was tried on them: rules are chosen on ``tune`` and reported on ``report``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from memcli import Memory
from memcli.semantic import upkeep

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
UNANSWERABLE = None
# (example, half, question, accepted words or UNANSWERABLE); halves alternate in the order written.
QUESTIONS = [
    ("caroline-and-priya.json", "tune", "What did Caroline research?", ["adoption agenc"]),
    ("caroline-and-priya.json", "report", "Which adoption agency did Caroline choose?", ["Open Door"]),
    ("caroline-and-priya.json", "tune", "Which agencies stood out to Caroline?", ["Harbor Light", "Open Door"]),
    ("caroline-and-priya.json", "report", "What is Open Door known for?", ["single parent"]),
    ("caroline-and-priya.json", "tune", "Where did Priya's cousin adopt?", ["Portland"]),
    ("caroline-and-priya.json", "report", "What part scares Caroline the most?", ["home study"]),
    ("caroline-and-priya.json", "tune", "What class did Priya sign up for?", ["pottery"]),
    ("caroline-and-priya.json", "report", "When is Priya's pottery class?", ["Thursday"]),
    ("caroline-and-priya.json", "tune", "What does Priya's first bowl look like?", ["hat"]),
    ("caroline-and-priya.json", "report", "When did Caroline go to the information evening?", ["Tuesday"]),
    ("caroline-and-priya.json", "tune", "How long before Caroline can be matched?", ["six to nine months"]),
    ("caroline-and-priya.json", "report", "Why did Caroline not choose Harbor Light?", ["waiting list"]),
    ("caroline-and-priya.json", "tune", "Who did Caroline tell about the adoption?", ["mom"]),
    ("caroline-and-priya.json", "report", "What did Caroline's mom offer to do?", ["babysit"]),
    ("caroline-and-priya.json", "tune", "How many bowls is Priya making?", ["four"]),
    ("caroline-and-priya.json", "report", "Who are Priya's bowls for?", ["sister"]),
    ("caroline-and-priya.json", "tune", "When did Caroline pass the home study?", ["2024"]),
    ("caroline-and-priya.json", "report", "What comes after the home study for Caroline?", ["parenting course"]),
    ("caroline-and-priya.json", "tune", "What is Caroline hoping to adopt?", ["sibling pair"]),
    ("caroline-and-priya.json", "report", "What car did Caroline buy?", ["minivan"]),
    ("caroline-and-priya.json", "tune", "What did Caroline sell?", ["hatchback"]),
    ("caroline-and-priya.json", "report", "What does Caroline drive now?", ["minivan"]),
    ("caroline-and-priya.json", "tune", "When is Caroline's parenting course?", ["Wednesday"]),
    ("caroline-and-priya.json", "report", "How long is the parenting course?", ["twelve-week", "twelve week"]),
    ("caroline-and-priya.json", "tune", "Which room in Caroline's apartment is empty?", ["spare room"]),
    ("caroline-and-priya.json", "report", "What is Caroline's job?", UNANSWERABLE),
    ("caroline-and-priya.json", "tune", "What is the name of Priya's sister?", UNANSWERABLE),
    ("caroline-and-priya.json", "report", "Which agency did Priya choose?", UNANSWERABLE),
    ("caroline-and-priya.json", "tune", "What pet does Caroline have?", UNANSWERABLE),
    ("caroline-and-priya.json", "report", "What did Priya's sister think of the bowls?", ["loved"]),
    ("chat-messages.json", "tune", "What language is ledgerd written in?", ["Rust"]),
    ("chat-messages.json", "report", "What database does ledgerd run on?", ["Postgres"]),
    ("chat-messages.json", "tune", "How is ledgerd deployed?", ["Kubernetes"]),
    ("chat-messages.json", "report", "What SQL style does the team use?", ["uppercase"]),
    ("chat-messages.json", "tune", "What problem does Sam have with migrations?", ["slow"]),
    ("chat-messages.json", "report", "What does ledgerd deploy with?", ["Kubernetes"]),
    ("chat-messages.json", "tune", "What service does Sam maintain?", ["ledgerd"]),
    ("chat-messages.json", "report", "What cloud provider does ledgerd use?", UNANSWERABLE),
]


def right(accepted: list[str] | None, answer: str, abstained: bool) -> bool:
    if accepted is UNANSWERABLE:
        return abstained
    return not abstained and any(word.lower() in answer.lower() for word in accepted)


def answered(asked: list[tuple]):
    """Each of ``asked`` (rows of :data:`QUESTIONS`) with its answer and the seconds it took: each example
    ingested, consolidated and embedded into a store of its own (a temporary folder), then asked."""
    root = Path(tempfile.mkdtemp(prefix="memcli-examples-"))
    try:
        for example in dict.fromkeys(q[0] for q in asked):
            with Memory(root / example, create=True, cache_dir=root / f"{example}.cache") as memory:
                memory.ingest(EXAMPLES / example, consolidate=False)
                memory.consolidate()
                upkeep.embed(memory.index)
                for q in (q for q in asked if q[0] == example):
                    start = time.perf_counter()
                    result = memory.ask(q[2])
                    yield q, result, time.perf_counter() - start
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--half", choices=["tune", "report"])
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rows = []
    for (example, half, question, accepted), result, seconds in answered(
            [q for q in QUESTIONS if args.half in (None, q[1])]):
        rows.append({"example": example, "half": half, "question": question, "accepted": accepted,
                     "answer": result.answer, "abstained": result.abstained,
                     "right": right(accepted, result.answer, result.abstained),
                     "why": result.to_dict().get("why"), "seconds": seconds})
        print(f"{half:6} {'right' if rows[-1]['right'] else 'WRONG'} {question[:52]:52} -> {result.answer[:60]}",
              flush=True)
    summary = {half: {"questions": len(got), "right": sum(r["right"] for r in got),
                      "median_s": round(statistics.median(r["seconds"] for r in got), 2)}
               for half in ("tune", "report") if (got := [r for r in rows if r["half"] == half])}
    print(json.dumps(summary))
    if args.json:
        args.json.write_text(json.dumps({"summary": summary, "rows": rows}, indent=1))


if __name__ == "__main__":
    sys.exit(main())
