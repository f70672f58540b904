#!/usr/bin/env python3
"""The first question after a long ingest: how long it waits for the entries' vectors.

    python benchmarks/bench_cold.py [--runs N]

For each run and each ``search.vectors`` mode (side by side, in turn), a fresh store ingests LoCoMo conv-26
(419 turns) with ``memcli ingest``, then ``memcli ask --evidence-only --json`` is run as a process at once:

- ``inline``: the question computes every missing vector first (memcli before the background job);
- ``background``: the ingest started the vectors job; the question ranks what is not embedded yet by its
  words. Also timed: until the job reports every vector done, and the same question once it has.
- ``background, model unpacked``: the same on a machine where memcli has run before: the embedding model is
  already copied out of its package into the cache (each run above starts from an empty cache, so there
  the job and the question both unpack it first, about 0.5 s each).

Prints one JSON report: medians over the runs.
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

CONV = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "locomo" / "conv-26.json"
QUESTION = "What did Caroline research?"


def memcli(store: Path, env: dict, *args) -> tuple[float, dict]:
    begin = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "memcli", "--store", str(store), *map(str, args), "--json"],
                          capture_output=True, text=True, env=env)
    took = time.perf_counter() - begin
    if done.returncode not in (0, 1):
        raise SystemExit(f"memcli {' '.join(map(str, args))} failed: {done.stderr}")
    return took, json.loads(done.stdout)


def unpacked(cache: str) -> str:
    """``cache`` with the embedding model copied out of its package, as any earlier use of memcli leaves it."""
    subprocess.run([sys.executable, "-c", "from memcli.semantic.encoder import model_files; model_files()"],
                   check=True, env={**os.environ, "XDG_CACHE_HOME": cache})
    return cache


def run(mode: str, warm: bool = False) -> dict:
    """One fresh store ingesting and asked at once, with an empty cache or (``warm``) one holding the model."""
    with tempfile.TemporaryDirectory(prefix="memcli-cold-") as tmp:
        cache = unpacked(f"{tmp}/cache") if warm else f"{tmp}/cache"
        env = {**os.environ, "MEMCLI_VECTORS": mode, "XDG_CACHE_HOME": cache, "MEMCLI_AUTO_CONSOLIDATE": "false"}
        store = Path(tmp) / "store"
        ingest, _ = memcli(store, env, "ingest", CONV, "--sample", "conv-26")
        first, asked = memcli(store, env, "ask", QUESTION, "--evidence-only")
        out = {"ingest_s": ingest, "first_question_s": first, "unembedded": asked.get("unembedded", 0)}
        if mode == "background":
            begin = time.perf_counter()
            while True:
                _, status = memcli(store, env, "status")
                if status["vectors"]["missing"] == 0 and (status["vectors"]["job"] or {}).get("state") != "running":
                    break
                time.sleep(0.5)
            out["vectors_ready_after_question_s"] = time.perf_counter() - begin
            out["job_s"] = (status["vectors"]["job"] or {}).get("seconds")
            out["question_with_vectors_s"], again = memcli(store, env, "ask", QUESTION, "--evidence-only")
            out["unembedded_after"] = again.get("unembedded", 0)
        return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    kinds = {"inline": ("inline", False), "background": ("background", False),
             "background, model unpacked": ("background", True)}
    runs: dict[str, list[dict]] = {kind: [] for kind in kinds}
    for n in range(args.runs):
        for mode in runs:
            runs[mode].append(run(*kinds[mode]))
            print(f"run {n + 1} {mode}: {runs[mode][-1]}", file=sys.stderr)
    report = {mode: {key: round(statistics.median(r[key] for r in rows), 3) for key in rows[0]
                     if isinstance(rows[0][key], (int, float))} for mode, rows in runs.items()}
    report["runs"] = args.runs
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
