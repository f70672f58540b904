#!/usr/bin/env python3
"""Seconds a question: `memcli ask` (memcli's reader) against `memcli ask --evidence-only`, side by side.

    python benchmarks/bench_ask_speed.py [--questions 20] [--json]

A store of LoCoMo's conv-26 (raw memory, its vectors computed first) is asked ``--questions`` of the file's
questions (every n-th, so all categories come), each as a fresh process of each kind in turn (the two kinds
alternate, so both see the same machine), and the same questions in one process (``Memory.ask``, after a
first question that loads what a process loads once). Prints the medians and the ratio of ask to evidence-only.
Run it alone: another job on the machine's two cores moves every figure.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from memcli import Memory
from memcli.semantic import upkeep

LOCOMO = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "conv-26.json"


def timed(argv: list[str]) -> float:
    began = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, stdin=subprocess.DEVNULL)
    if done.returncode not in (0, 1):
        sys.exit(f"{' '.join(argv[:6])}...: exit {done.returncode}: {done.stderr.decode()[-500:]}")
    return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--questions", type=int, default=20)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    qa = json.loads(LOCOMO.read_text())["qa"]
    questions = [q["question"] for q in qa[::max(len(qa) // args.questions, 1)]][:args.questions]
    store = Path(tempfile.mkdtemp(prefix="memcli-ask-speed-")) / "store"
    with Memory(store, create=True) as memory:
        memory.ingest(LOCOMO, consolidate=False)
        upkeep.embed(memory.index)
        memory.ask(questions[0])  # the index and the vectors' snapshot as a later process finds them
        inside = {"ask": [], "evidence-only": []}
        for q in questions:
            for kind in inside:
                began = time.perf_counter()
                memory.ask(q, reader="evidence-only" if kind == "evidence-only" else None)
                inside[kind].append(time.perf_counter() - began)
    base = [sys.executable, "-m", "memcli", "--store", str(store), "ask"]
    process = {"ask": [], "evidence-only": []}
    for q in questions:
        process["ask"].append(timed([*base, q]))
        process["evidence-only"].append(timed([*base, q, "--evidence-only"]))
    out = {"questions": len(questions)}
    for name, runs in (("process", process), ("in_process", inside)):
        ask, evidence = statistics.median(runs["ask"]), statistics.median(runs["evidence-only"])
        out[name] = {"ask_median_s": round(ask, 3), "evidence_only_median_s": round(evidence, 3),
                     "ratio": round(ask / evidence, 2)}
    if args.json:
        print(json.dumps(out))
        return
    print(f"{len(questions)} questions of conv-26, raw memory")
    print("| run as | ask median | --evidence-only median | ratio |\n|---|---|---|---|")
    for name in ("process", "in_process"):
        row = out[name]
        print(f"| {name.replace('_', ' ')} | {row['ask_median_s']:.3f} s | {row['evidence_only_median_s']:.3f} s | "
              f"{row['ratio']:.2f} |")


if __name__ == "__main__":
    main()
