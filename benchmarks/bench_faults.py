#!/usr/bin/env python3
"""Fault-injection figures for docs/reliability.md: interrupts at every step of a commit, signals at
random moments, hostile manifests. Prints how many trials, and entries lost, duplicated, documents
that do not parse and files changed outside the store (all must be 0).

    python benchmarks/bench_faults.py [--signal-trials 60] [--background-trials 20] [--json]

Injected faults run in this process on the example conversation consolidated in small flushes; the
signal trials run the real ``memcli consolidate --no-llm`` on LoCoMo conv-30 in a subprocess; the
background trials kill the consolidation an ingest of conv-30 started while conv-26 is ingested.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LOCOMO = REPO.parent / "shared" / "data" / "locomo"
sys.path.insert(0, str(REPO))

from memcli import Memory  # noqa: E402
from memcli.consolidate import job  # noqa: E402
from memcli.errors import StoreError, StoreWriteError  # noqa: E402
from memcli.store import atomic  # noqa: E402
from memcli.store.census import outside_snapshot, seq_counts  # noqa: E402

os.environ.setdefault("MEMCLI_VECTORS", "inline")  # questions rank with every vector, not a job's progress

SMALL_FLUSHES = {"consolidate.threshold_tokens": 400}


def damage(expected: Counter, found: Counter) -> tuple[int, int]:
    """(entries lost, entries duplicated) of ``found`` against ``expected`` (each seq once)."""
    lost = sum(1 for seq in expected if found.get(seq, 0) == 0)
    duplicated = sum(count - 1 for count in found.values() if count > 1)
    return lost, duplicated


class Step:
    """Makes the ``at``-th staged write, manifest write or rename of a commit raise ``error``."""

    def __init__(self, at: int, error: BaseException | None):
        self.at, self.error, self.n = at, error, 0
        self.replace, self.write = os.replace, atomic.write_file_synced

    def wrap(self, real):
        def run(*args, **kwargs):
            self.n += 1
            if self.n == self.at and self.error is not None:
                raise self.error
            return real(*args, **kwargs)
        return run

    def __enter__(self):
        atomic.os.replace, atomic.write_file_synced = self.wrap(self.replace), self.wrap(self.write)
        return self

    def __exit__(self, *exc):
        atomic.os.replace, atomic.write_file_synced = self.replace, self.write


def injected(work: Path) -> dict:
    template = work / "template"
    Memory(template, create=True).ingest(REPO / "examples" / "caroline-and-priya.json", consolidate=False)
    expected = seq_counts(template)
    counting = work / "count"
    shutil.copytree(template, counting)
    with Step(0, None) as step:
        Memory(counting, settings=SMALL_FLUSHES).consolidate(llm=False)
    steps = step.n
    errors = [KeyboardInterrupt(), OSError(errno.ENOSPC, "No space left on device"),
              OSError(errno.EROFS, "Read-only file system"), OSError(errno.EACCES, "Permission denied")]
    totals = Counter()
    outside = outside_snapshot(template)
    for at in range(1, steps + 1):
        for error in errors:
            root = work / "trial"
            shutil.copytree(template, root)
            try:
                with Step(at, error):
                    Memory(root, settings=SMALL_FLUSHES).consolidate(llm=False)
            except (KeyboardInterrupt, StoreWriteError):
                totals["interrupted"] += 1
            Memory(root).docs()
            lost, duplicated = damage(expected, seq_counts(root))
            totals["trials"] += 1
            totals["lost"] += lost
            totals["duplicated"] += duplicated
            totals["left pending"] += any((root / atomic.TXN_DIR).iterdir())
            shutil.rmtree(root)
    totals["outside changed"] = int(outside_snapshot(template) != outside)
    return {"steps per consolidation": steps, "error kinds": len(errors), **totals}


def signals(work: Path, trials: int) -> dict:
    template = work / "conv30"
    memcli = [sys.executable, "-m", "memcli"]
    subprocess.run([*memcli, "--store", str(template), "ingest", str(LOCOMO / "conv-30.json"), "--no-auto", "-q"],
                   check=True, stdout=subprocess.DEVNULL)
    expected = seq_counts(template)
    env = {**os.environ, "MEMCLI_CONSOLIDATE_TOKENS": "1500", "MEMCLI_TEST_COMMIT_PAUSE": "0.01",
           "PYTHONPATH": str(REPO / "tests" / "shims")}  # the pause is a test hook (tests/shims/sitecustomize.py)
    timing = work / "timing"
    shutil.copytree(template, timing)
    start = time.monotonic()
    subprocess.run([*memcli, "--store", str(timing), "consolidate", "--no-llm", "-q"], env=env, check=True,
                   stdout=subprocess.DEVNULL)
    duration = time.monotonic() - start
    rng = random.Random(2026)
    kinds = [signal.SIGINT, signal.SIGTERM, signal.SIGKILL]
    totals = Counter()
    for trial in range(trials):
        root = work / "signal"
        shutil.copytree(template, root)
        proc = subprocess.Popen([*memcli, "--store", str(root), "consolidate", "--no-llm", "-q"], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.2, duration))
        kind = kinds[trial % len(kinds)]
        proc.send_signal(kind)
        totals[f"{kind.name} interrupted" if proc.wait() != 0 else f"{kind.name} finished first"] += 1
        Memory(root).docs()
        lost, duplicated = damage(expected, seq_counts(root))
        totals["trials"] += 1
        totals["lost"] += lost
        totals["duplicated"] += duplicated
        shutil.rmtree(root)
    return {"entries": sum(expected.values()), "uninterrupted s": round(duration, 2), **totals}


def background(work: Path, trials: int) -> dict:
    """SIGKILL of the background consolidation an ingest started, at a random moment, while a second
    ingest (another conversation) writes to the same store."""
    memcli = [sys.executable, "-m", "memcli"]
    env = {**os.environ, "MEMCLI_AUTO_CONSOLIDATE": "true", "MEMCLI_CONSOLIDATE_TOKENS": "1500",
           "MEMCLI_CONSOLIDATE_BACKGROUND": "always", "MEMCLI_TEST_COMMIT_PAUSE": "0.01",
           "PYTHONPATH": str(REPO / "tests" / "shims")}  # the pause is a test hook (tests/shims/sitecustomize.py)
    reference = work / "reference"
    for conv in ("conv-30", "conv-26"):
        subprocess.run([*memcli, "--store", str(reference), "ingest", str(LOCOMO / f"{conv}.json"), "--no-auto",
                        "-q"], check=True, stdout=subprocess.DEVNULL)
    expected = sum(seq_counts(reference).values())
    start = time.monotonic()
    subprocess.run([*memcli, "--store", str(work / "background-timing"), "ingest", str(LOCOMO / "conv-30.json"),
                    "-q"],
                   env=env, check=True, stdout=subprocess.DEVNULL)
    Memory(work / "background-timing").wait_for_consolidation()
    duration = time.monotonic() - start
    rng = random.Random(2027)
    totals = Counter()
    for _ in range(trials):
        root = work / "background"
        subprocess.run([*memcli, "--store", str(root), "ingest", str(LOCOMO / "conv-30.json"), "-q"], env=env,
                       check=True, stdout=subprocess.DEVNULL)
        pid = (job.running(root) or {}).get("pid")
        second = subprocess.Popen([*memcli, "--store", str(root), "ingest", str(LOCOMO / "conv-26.json"),
                                   "--no-auto", "-q"], env=env, stdout=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.0, duration))
        if job.running(root) is not None and isinstance(pid, int):
            os.kill(pid, signal.SIGKILL)
            totals["killed"] += 1
        else:
            totals["finished first"] += 1
        second.wait()
        while job.running(root) is not None:
            time.sleep(0.05)
        Memory(root).docs()
        found = seq_counts(root)
        totals["trials"] += 1
        totals["lost"] += expected - len(found)
        totals["duplicated"] += sum(n - 1 for n in found.values() if n > 1)
        totals["second ingest failed"] += int(second.returncode != 0)
        shutil.rmtree(root)
    return {"entries": expected, "uninterrupted s": round(duration, 2), **totals}


def manifests(work: Path) -> dict:
    template = work / "template"
    outside = work / "outside"
    outside.mkdir()
    (outside / "victim.txt").write_text("keep me")
    before = outside_snapshot(outside)
    crafted = [[{"op": "write", "path": "../outside/evil.txt", "staged": "00000.stage"}],
               [{"op": "delete", "path": str(outside / "victim.txt")}],
               [{"op": "delete", "path": "docs/../../outside/victim.txt"}],
               [{"op": "write", "path": "CURRENT.md", "staged": "../../outside/victim.txt"}],
               [{"op": "write", "path": "/etc/cron.d/evil", "staged": "00000.stage"}]]
    refused = 0
    for ops in crafted:
        root = work / "manifest"
        shutil.copytree(template, root)
        (root / atomic.TXN_DIR).mkdir(exist_ok=True)
        (root / atomic.TXN_DIR / "00000.stage").write_text("pwned")
        (root / atomic.TXN_DIR / atomic.MANIFEST).write_text(json.dumps({"ops": ops}))
        try:
            Memory(root).docs()
        except StoreError:
            refused += 1
        shutil.rmtree(root)
    return {"trials": len(crafted), "refused": refused,
            "outside changed": int(outside_snapshot(outside) != before or Path("/etc/cron.d/evil").exists())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--signal-trials", type=int, default=60)
    parser.add_argument("--background-trials", type=int, default=20)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="memcli-bench-faults-"))
    os.environ.update({"XDG_CACHE_HOME": str(work / "cache"), "XDG_CONFIG_HOME": str(work / "config"),
                       "MEMCLI_AUTO_CONSOLIDATE": "false"})
    try:
        report = {"injected faults": injected(work), "hostile manifests": manifests(work),
                  "signals": signals(work, args.signal_trials),
                  "background": background(work, args.background_trials)}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        print(json.dumps(report, indent=2))
        return
    for part, figures in report.items():
        print(f"{part}: " + ", ".join(f"{k} {v}" for k, v in figures.items()))


if __name__ == "__main__":
    main()
