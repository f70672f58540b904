#!/usr/bin/env python3
"""Public dialogue QA sets asked of memory: each dialogue a memory of its own, each question asked as ``memcli ask`` asks.

    python benchmarks/bench_dialogues.py ../shared/data/qa/molweni_dev.json.gz ../shared/data/qa/friendsqa_dev.json.gz [--limit N] [--json OUT]

``memcli eval qa`` scores the reader alone on a passage; this scores the whole answer path on chats of
other kinds than the development conversations, none of whose constants were chosen on them: a dialogue
(Molweni, FriendsQA: ``memcli.qa.sets``) is ingested as ``speaker: text`` messages a minute apart into a
store of its own (a temporary folder, its index too), its vectors computed, and every question of it
asked with the default profile (``Memory.ask``: the ranking, the reader, the person rule, "I don't know").
Scores are SQuAD's (``memcli.eval.qa.scores``): F1 against the best gold answer, a question with no answer
scoring 1 when the answer is "I don't know". Reported per file and per half of its dialogues (alternating,
in a seeded order), with the answerable questions' F1 and the unanswerable ones answered "I don't know".
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from memcli import Memory
from memcli.eval.qa import scores
from memcli.qa.sets import Example, load
from memcli.semantic import upkeep


def messages(example: Example, day: int) -> list[dict]:
    """The dialogue's ``speaker: text`` lines as chat messages a minute apart on one day."""
    out = []
    for k, line in enumerate(example.context.split("\n")):
        speaker, _, text = line.partition(": ")
        if text.strip():
            out.append({"role": "user", "name": speaker.strip() or "someone", "content": text,
                        "timestamp": f"2024-03-{1 + day % 28:02d}T{10 + k // 60:02d}:{k % 60:02d}:00Z"})
    return out


def asked(path: Path, limit: int | None, root: Path):
    """Each question of ``path`` (of its first ``limit`` dialogues, in a seeded order) with its dialogue's
    half, answer, whether it abstained, and seconds."""
    _, examples = load(path)
    root.mkdir(parents=True, exist_ok=True)
    dialogues: dict[str, list[Example]] = {}
    for example in examples:
        dialogues.setdefault(example.group, []).append(example)
    order = list(dialogues)
    random.Random(7).shuffle(order)
    for d, group in enumerate(order[:limit]):
        source = root / f"{path.stem}-{d}.json"
        source.write_text(json.dumps({"messages": messages(dialogues[group][0], d)}))
        with Memory(root / f"{path.stem}-{d}", create=True, cache_dir=root / f"{path.stem}-{d}-index") as memory:
            memory.ingest(source, consolidate=False)
            upkeep.embed(memory.index)
            for example in dialogues[group]:
                start = time.perf_counter()
                result = memory.ask(example.question, keep_evidence=False)
                yield d % 2, example, result.answer, result.abstained, time.perf_counter() - start
        print(f"\r{path.name}: {d + 1} dialogues", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)


def summary(rows: list[dict]) -> dict:
    mean = lambda xs: round(sum(xs) / len(xs), 4) if xs else None  # noqa: E731
    answerable = [r for r in rows if r["answers"]]
    unanswerable = [r for r in rows if not r["answers"]]
    return {"questions": len(rows), "f1": mean([r["f1"] for r in rows]),
            "answerable_f1": mean([r["f1"] for r in answerable]),
            "no_answer_right": f"{sum(r['abstained'] for r in unanswerable)} of {len(unanswerable)}",
            "answered": mean([not r["abstained"] for r in rows]),
            "median_s": round(statistics.median(r["seconds"] for r in rows), 3) if rows else None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", type=Path, nargs="+")
    parser.add_argument("--limit", type=int, help="only this many dialogues of each file (seeded)")
    parser.add_argument("--json", type=Path, help="write the summaries and every question's answer here")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="memcli-dialogues-"))
    report, every = {}, []
    try:
        for path in args.files:
            rows = []
            for half, example, answer, abstained, seconds in asked(path, args.limit, root):
                said = "" if abstained else answer
                rows.append({"file": path.name, "half": half, "question": example.question, "answers": example.answers,
                             "answer": answer, "abstained": abstained, "f1": scores(said, example.answers)[1],
                             "seconds": seconds})
            report[path.name] = {"all": summary(rows), **{f"half {h + 1}": summary([r for r in rows if r["half"] == h])
                                                          for h in (0, 1)}}
            print(json.dumps({path.name: report[path.name]}), flush=True)
            every += rows
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps({"summary": report, "rows": every}, indent=1))


if __name__ == "__main__":
    sys.exit(main())
