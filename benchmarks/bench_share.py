#!/usr/bin/env python3
"""What sharing a store through git costs: a commit a change, and a sync.

    python benchmarks/bench_share.py [--sessions 19]

The development conversations' sessions, one ingest each (then one
consolidation), into a plain store and into a shared one side by side, in
one process (Memory's API, deterministic consolidation): the time of each
ingest and consolidation in both, so the difference is the commit. Then two
clones of a bare repository each ingest half the sessions and consolidate,
and sync one after the other: the time of each sync (fetch, the entry merge,
the whole-store pass, the commit, the push) and what it had to do.
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

REPO = Path(__file__).resolve().parent.parent
LOCOMO = REPO.parent / "shared" / "data" / "locomo"


def sessions(limit: int) -> list[list[dict]]:
    out = []
    for name in ("conv-26", "conv-30"):
        conv = json.loads((LOCOMO / f"{name}.json").read_text())
        for i in range(1, limit + 1):
            if f"session_{i}" in conv:
                out.append([{"speaker": t["speaker"], "text": t["text"], "id": f"{name}-{i}-{n}"}
                            for n, t in enumerate(conv[f"session_{i}"])])
    return out


def git(where: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(where), *args], check=True, capture_output=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=19, help="sessions taken from each conversation")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="memcli-bench-share-"))
    os.environ.update({"XDG_CACHE_HOME": str(work / "cache"), "MEMCLI_AUTO_CONSOLIDATE": "false",
                       "MEMCLI_VECTORS": "inline"})
    sys.path.insert(0, str(REPO))
    from memcli import Memory

    pool = sessions(args.sessions)
    files = []
    for n, turns in enumerate(pool):
        path = work / f"session-{n}.json"
        path.write_text(json.dumps(turns))
        files.append(path)

    # a commit a change: the same ingests into a plain and a shared store, interleaved
    stores = {}
    for kind in ("plain", "shared"):
        folder = work / kind
        folder.mkdir()
        git(folder, "init", "-q")
        Memory.init(folder)
        memory = Memory(folder / ".memcli")
        if kind == "shared":
            memory.share()
        stores[kind] = memory
    took: dict[str, list[float]] = {"plain": [], "shared": []}
    for path in files:
        for kind, memory in stores.items():
            begin = time.perf_counter()
            memory.ingest(path, consolidate=False)
            took[kind].append(time.perf_counter() - begin)
    consolidated = {}
    for kind, memory in stores.items():
        begin = time.perf_counter()
        memory.consolidate(llm=False)
        consolidated[kind] = time.perf_counter() - begin
    entries = sum(len(s) for s in pool)

    # two clones, half the sessions each, one consolidation each, then sync after sync
    remote = work / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    git(work, "clone", "-q", str(remote), "a")
    Memory.init(work / "a")
    Memory(work / "a" / ".memcli").share()
    a = Memory(work / "a" / ".memcli")
    a.sync()
    git(work, "clone", "-q", str(remote), "b")
    b = Memory(work / "b" / ".memcli")
    for memory, half in ((a, files[0::2]), (b, files[1::2])):
        for path in half:
            memory.ingest(path, consolidate=False)
        memory.consolidate(llm=False)
    syncs = []
    for name, memory in (("a", a), ("b", b), ("a", a)):
        begin = time.perf_counter()
        result = memory.sync()
        syncs.append((name, time.perf_counter() - begin, result))

    print(f"{len(files)} sessions, {entries} entries, {stores['shared'].docs().total - 1} documents "
          "after one consolidation")
    print()
    print("| store | ingest a session (median, max) | one consolidation of everything |")
    print("|---|---|---|")
    for kind in ("plain", "shared"):
        times = took[kind]
        print(f"| {kind} | {statistics.median(times) * 1000:.0f} ms, {max(times) * 1000:.0f} ms "
              f"| {consolidated[kind]:.2f} s |")
    print()
    print("| sync | time | commits merged | entries held twice kept once | pushed |")
    print("|---|---|---|---|---|")
    for name, seconds, result in syncs:
        print(f"| {name} | {seconds * 1000:.0f} ms | {result.merged} | {result.duplicates} | {result.pushed} |")


if __name__ == "__main__":
    main()
