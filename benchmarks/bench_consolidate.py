#!/usr/bin/env python3
"""Consolidation benchmark: conv-26 with the default model and with --no-llm, flush cost as the
library grows, and kill-and-recover trials.

    python benchmarks/bench_consolidate.py [--skip-model] [--kill-trials 100] [--json]

Each part runs the real ``memcli`` command in a subprocess and reads its
``--json`` report; conservation is checked independently by reading every
document of the store afterwards.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LOCOMO = REPO.parent / "shared" / "data" / "locomo"
sys.path.insert(0, str(REPO))

from memcli.paths import Resolved  # noqa: E402
from memcli.store import Store  # noqa: E402
from memcli.store.format import parse_document  # noqa: E402

MEMCLI = [sys.executable, "-m", "memcli"]


def run(args: list, env: dict, check: bool = True) -> dict | None:
    proc = subprocess.run([*MEMCLI, *map(str, args)], capture_output=True, env=env)
    if check and proc.returncode != 0:
        raise SystemExit(f"memcli {' '.join(map(str, args))} failed:\n{proc.stderr.decode()}")
    return json.loads(proc.stdout) if proc.stdout.strip().startswith(b"{") else None


def store_seqs(root: Path) -> Counter:
    store = Store.open(Resolved(root, "bench"))
    seqs: Counter = Counter()
    for doc_id in store.all_ids():
        seqs.update(e.seq for _, e in parse_document(store.doc_path(doc_id).read_text()).entries())
    return seqs


def conv26(work: Path, env: dict, llm: bool) -> dict:
    root = work / ("conv26-llm" if llm else "conv26-nollm")
    run(["--store", root, "ingest", LOCOMO / "conv-26.json", "--no-auto", "--json"], env)
    before = store_seqs(root)
    start = time.perf_counter()
    report = run(["--store", root, "consolidate", "--json", *([] if llm else ["--no-llm"])], env)
    wall = time.perf_counter() - start
    after = store_seqs(root)
    sizes = sorted(d["tokens"] for d in report["documents"])
    return {
        "mode": "default model" if llm else "--no-llm", "wall_s": round(wall, 1),
        "flushes": len(report["flushes"]), "calls": report["calls"]["calls"],
        "tokens_in": report["calls"]["prompt_tokens"], "tokens_out": report["calls"]["completion_tokens"],
        "rejected": report["calls"]["invalid"], "fallbacks": report["calls"]["fallbacks"],
        "deterministic_redos": sum(f["deterministic_redo"] for f in report["flushes"]),
        "documents": len(sizes), "doc_tokens_min": sizes[0], "doc_tokens_median": int(statistics.median(sizes)),
        "doc_tokens_max": sizes[-1], "entries": sum(before.values()),
        "seqs_conserved": before == after,
    }


def growth(work: Path, env: dict, flushes: int, flush_tokens: int) -> dict:
    """Per-flush cost while the two dev conversations fill the library, and the same
    content of flush N replayed into an empty library (same run, same machine state)."""
    from memcli.store.format import parse_entry

    env = {**env, "MEMCLI_CONSOLIDATE_TOKENS": str(flush_tokens)}
    root = work / "growth"
    run(["--store", root, "ingest", LOCOMO / "conv-26.json", "--no-auto", "--json"], env)
    run(["--store", root, "ingest", LOCOMO / "conv-30.json", "--no-auto", "--json"], env)
    raw_current = (root / "CURRENT.md").read_text()
    report = run(["--store", root, "consolidate", "--no-llm", "--json"], env)
    times = [f["seconds"] for f in report["flushes"]][:flushes]
    last = report["flushes"][len(times) - 1]
    # replay flush N's entries alone, into an empty library
    replay = work / "growth-replay"
    run(["--store", replay, "init", "--json"], env)
    doc = parse_document(raw_current)
    keep = [line for line in doc.body
            if not parse_entry(line) or last["first_seq"] <= parse_entry(line).seq <= last["last_seq"]]
    doc.body = keep
    (replay / "CURRENT.md").write_text(doc.render())
    alone = run(["--store", replay, "consolidate", "--no-llm", "--json"], env)
    empty_s = sum(f["seconds"] for f in alone["flushes"])
    return {"flush_tokens": flush_tokens, "flushes": len(times),
            "library_docs_after": len(report["documents"]),
            "flush_1_s": times[0], "flush_n_s": times[-1], "ratio_n_over_1": round(times[-1] / times[0], 2),
            "flush_n_into_empty_library_s": empty_s, "ratio_grown_over_empty": round(times[-1] / empty_s, 2),
            "all_s": times}


def kill_trials(work: Path, env: dict, trials: int) -> dict:
    template = work / "kill-template"
    run(["--store", template, "ingest", LOCOMO / "conv-30.json", "--no-auto", "--json"], env)
    expected = store_seqs(template)
    env = {**env, "MEMCLI_CONSOLIDATE_TOKENS": "1500", "MEMCLI_TEST_COMMIT_PAUSE": "0.01",
           "PYTHONPATH": str(REPO / "tests" / "shims")}  # the pause is a test hook (tests/shims/sitecustomize.py)
    timing = work / "kill-timing"
    shutil.copytree(template, timing)
    start = time.perf_counter()
    run(["--store", timing, "consolidate", "--no-llm"], env)
    duration = time.perf_counter() - start
    rng = random.Random(2026)
    lost = duplicated = killed = broken = 0
    for trial in range(trials):
        root = work / f"kill-{trial}"
        shutil.copytree(template, root)
        proc = subprocess.Popen([*MEMCLI, "--store", str(root), "consolidate", "--no-llm"], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.2, duration))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        killed += proc.returncode == -signal.SIGKILL
        run(["--store", root, "status", "--json"], env)  # any command recovers
        try:
            seqs = store_seqs(root)
        except Exception:  # a document that does not parse
            broken += 1
            continue
        lost += sum((expected - seqs).values())
        duplicated += sum((seqs - expected).values())
        shutil.rmtree(root)
    return {"trials": trials, "killed_mid_run": killed, "entries_lost": lost, "entries_duplicated": duplicated,
            "unparseable_stores": broken, "entries_per_store": sum(expected.values()),
            "uninterrupted_run_s": round(duration, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--skip-model", action="store_true", help="skip the default-model run (slow on a CPU)")
    parser.add_argument("--kill-trials", type=int, default=100)
    parser.add_argument("--flushes", type=int, default=20)
    parser.add_argument("--flush-tokens", type=int, default=2500)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="memcli-bench-consolidate-"))
    env = {**os.environ, "XDG_CACHE_HOME": str(work / "cache"), "XDG_CONFIG_HOME": str(work / "config"),
           "MEMCLI_AUTO_CONSOLIDATE": "false"}
    results: dict = {}
    try:
        results["conv26"] = [conv26(work, env, llm=False)]
        if not args.skip_model:
            results["conv26"].append(conv26(work, env, llm=True))
        results["growth"] = growth(work, env, args.flushes, args.flush_tokens)
        results["kill"] = kill_trials(work, env, args.kill_trials)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print("| mode | wall | flushes | model calls | tokens in / out | rejected answers | documents | "
          "doc tokens min / median / max | seqs conserved |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in results["conv26"]:
        print(f"| {r['mode']} | {r['wall_s']} s | {r['flushes']} | {r['calls']} | {r['tokens_in']} / {r['tokens_out']} | "
              f"{r['rejected']} | {r['documents']} | {r['doc_tokens_min']} / {r['doc_tokens_median']} / "
              f"{r['doc_tokens_max']} | {r['entries']} of {r['entries']}: {r['seqs_conserved']} |")
    g = results["growth"]
    print(f"\nflush cost as the library grows ({g['flush_tokens']}-token flushes, --no-llm): flush 1 "
          f"{g['flush_1_s']:.2f} s, flush {g['flushes']} {g['flush_n_s']:.2f} s (ratio {g['ratio_n_over_1']}); "
          f"flush {g['flushes']}'s entries alone into an empty library {g['flush_n_into_empty_library_s']:.2f} s "
          f"(grown/empty {g['ratio_grown_over_empty']}); {g['library_docs_after']} documents at the end")
    k = results["kill"]
    print(f"kill-and-recover: {k['trials']} trials ({k['killed_mid_run']} killed mid-run), "
          f"{k['entries_lost']} entries lost, {k['entries_duplicated']} duplicated, "
          f"{k['unparseable_stores']} stores with a document that does not parse")


if __name__ == "__main__":
    main()
