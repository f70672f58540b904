#!/usr/bin/env python3
"""What the semantic signal costs: embedding a conversation, and evidence-only per question with
the signal on and off, side by side in one run.

    python benchmarks/bench_evidence.py [--json]

Both LoCoMo development conversations are ingested into one store (788 turns, more than the
700 the issue names). Measured:

- ``embed``: the entries' vectors computed from nothing (an empty cache), as the first question
  after an ingest does; then again with the cache warm (nothing to compute).
- ``per question``: evidence-only for all 233 development questions in one process (a held
  ``Memory``, as the MCP server and the Python API run), the semantic signal on and off in turn
  for each question; medians and the 95th percentile.
- ``process``: ``memcli ask --evidence-only`` as a process (a new process, its caches filled) on and
  off, 10 questions each.

Run it alone on the machine: it measures time.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from memcli.eval.locomo import load_conversations, select
from memcli.memory import Memory

os.environ.setdefault("MEMCLI_VECTORS", "inline")  # questions rank with every vector, not a job's progress

REPO = Path(__file__).resolve().parent.parent
LOCOMO = REPO.parent / "shared" / "data" / "locomo"
FILES = [LOCOMO / "conv-26.json", LOCOMO / "conv-30.json"]


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    conversations = load_conversations(FILES, None)
    questions = [qa["question"] for conv in conversations for _, qa in select(conv.questions, {1, 2, 3, 4}, None)]
    report: dict = {}
    with tempfile.TemporaryDirectory(prefix="memcli-bench-evidence-") as work:
        root = Path(work)
        store = root / "store"
        on = Memory(store, create=True, cache_dir=root / "cache-on", settings={"search.semantic": True})
        for conv in conversations:
            on.ingest(conv.source, format="locomo", sample=conv.sample_id, consolidate=False)
        entries = sum(1 for d in on.store.all_ids() for _ in on.store.load(d).doc.entries())
        first = on.embed()
        again = on.embed()
        report["embed"] = {"entries": entries, "cold_s": round(first, 2), "warm_s": round(again, 4)}
        off = Memory(store, cache_dir=root / "cache-off", settings={"search.semantic": False})
        on.ask("warm-up", reader="evidence-only")
        off.ask("warm-up", reader="evidence-only")
        times: dict[str, list[float]] = {"on": [], "off": []}
        for question in questions:
            for name, memory in (("on", on), ("off", off)):
                start = time.perf_counter()
                memory.ask(question, reader="evidence-only")
                times[name].append(time.perf_counter() - start)
        report["per_question_ms"] = {name: {"median": round(1000 * statistics.median(v), 1),
                                            "p95": round(1000 * percentile(v, 0.95), 1), "questions": len(v)}
                                     for name, v in times.items()}
        on.close()
        off.close()
        env = dict(os.environ, MEMCLI_CACHE=str(root / "cache-process"))
        process: dict[str, list[float]] = {"on": [], "off": []}
        for name in ("on", "off"):  # the process cache's first fill (model files, vectors) is not timed
            subprocess.run([sys.executable, "-m", "memcli", "--store", str(store), "ask", "warm-up", "--evidence-only"],
                           check=True, capture_output=True,
                           env=dict(env, MEMCLI_SEMANTIC="true" if name == "on" else "false"))
        for question in questions[:10]:
            for name in ("on", "off"):
                start = time.perf_counter()
                subprocess.run([sys.executable, "-m", "memcli", "--store", str(store), "ask", question,
                                "--evidence-only", "--json"], check=True, capture_output=True,
                               env=dict(env, MEMCLI_SEMANTIC="true" if name == "on" else "false"))
                process[name].append(time.perf_counter() - start)
        report["process_ms"] = {name: round(1000 * statistics.median(v), 1) for name, v in process.items()}
    if args.json:
        print(json.dumps(report, indent=2))
        return
    e = report["embed"]
    print(f"embedding {e['entries']} entries from an empty cache: {e['cold_s']} s; again (cache warm): {e['warm_s']} s")
    for name, row in report["per_question_ms"].items():
        print(f"evidence-only in process, semantic {name}: median {row['median']} ms, p95 {row['p95']} ms "
              f"over {row['questions']} questions")
    print(f"memcli ask --evidence-only as a process: semantic on {report['process_ms']['on']} ms, "
          f"off {report['process_ms']['off']} ms (median of 10)")


if __name__ == "__main__":
    main()
