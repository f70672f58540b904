#!/usr/bin/env python3
"""How long an agent waits for what its hooks tell it: `memcli hook claude-code` with a SessionStart event, and with
a UserPromptSubmit event (the prompt's recall).

    python benchmarks/bench_session_start.py [--runs 10] [--sessions 8 200] [--turns 40]

For each size, a store holds that many Claude Code sessions of one project (the real sample in tests/samples/,
grown to ``--turns`` turns, each copy a session of its own a day apart), consolidated as the automatic path
does, its index and vectors built; then each run sends a SessionStart event and a UserPromptSubmit event (a
prompt that comes back to the sessions' work) to fresh `memcli hook` processes, side by side with `memcli
--version` in alternating order (the ratio is what start-up leaves out). Medians and the worst run are printed.
Run it alone.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SAMPLE = Path(__file__).resolve().parent.parent / "tests" / "samples" / "claude-code-session.jsonl"
PROJECT = "/home/dana/kiln"


def session_file(folder: Path, number: int, turns: int) -> Path:
    """The sample's records repeated to ``turns`` text turns, as session ``number`` (its own id, a day later, its
    texts marked with the session and the turn: no two sessions say the same)."""
    records = [json.loads(line) for line in SAMPLE.read_text().splitlines() if line.strip()]
    start = dt.datetime(2025, 1, 1) + dt.timedelta(days=number)
    lines, n = [], 0
    while n < turns:
        for record in records:
            record = {**record, "sessionId": f"session-{number:05d}", "uuid": f"{number}-{n}-{record.get('uuid', '')}"}
            record = json.loads(json.dumps(record))  # its own copy: each session's words its own (a turn number)
            content = (record.get("message") or {}).get("content")
            if isinstance(content, str) and not record.get("isMeta"):
                record["message"]["content"] = f"{content} (session {number}, turn {n})"
            for block in content if isinstance(content, list) else []:
                if isinstance(block, dict) and isinstance(block.get("text"), str):
                    block["text"] = f"{block['text']} (session {number}, turn {n})"
            if "timestamp" in record:
                record["timestamp"] = (start + dt.timedelta(minutes=n)).strftime("%Y-%m-%dT%H:%M:%S.000Z")
            lines.append(json.dumps(record))
            n += record.get("type") in ("user", "assistant")
    path = folder / f"session-{number:05d}.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def timed(argv: list[str], stdin: bytes | None = None) -> float:
    began = time.perf_counter()
    done = subprocess.run(argv, input=stdin, capture_output=True)
    if done.returncode != 0:
        sys.exit(f"{argv}: exit {done.returncode}: {done.stderr.decode()[-500:]}")
    return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--sessions", type=int, nargs="+", default=[8, 200])
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--keep", type=Path, help="build each store in DIR/store-N, or time the one already there")
    args = parser.parse_args()
    from memcli import Memory
    from memcli.semantic import upkeep

    event = json.dumps({"session_id": "now", "cwd": PROJECT, "hook_event_name": "SessionStart"}).encode()
    prompt = json.dumps({"session_id": "now", "cwd": PROJECT, "hook_event_name": "UserPromptSubmit",
                         "prompt": "The upload test fails one run in ten again: was it the shared bucket?"}).encode()
    print("| sessions | entries | session start median (worst) | prompt recall median (worst) | --version median "
          "| ratios |\n|---|---|---|---|---|---|")
    for count in args.sessions:
        folder = args.keep / f"sessions-{count}" if args.keep else Path(tempfile.mkdtemp(prefix="memcli-session-start-"))
        store = folder / "store"
        built = store.exists()
        folder.mkdir(parents=True, exist_ok=True)
        with Memory(store, create=True) as memory:
            for number in range(0 if built else count):
                memory.ingest(session_file(folder, number, args.turns), format="claude-code", project=PROJECT,
                              consolidate=False)
                if number % 100 == 99:  # CURRENT kept small, as the automatic consolidation keeps it
                    memory.consolidate(llm=False)
            if not built:
                memory.consolidate(llm=False)
                upkeep.embed(memory.index)
            entries = sum(1 for doc in memory.store.all_ids() for _ in memory.store.load(doc).doc.entries())
        hook = [sys.executable, "-m", "memcli", "--store", str(store), "hook", "claude-code"]
        if not args.runs:  # --runs 0: the stores built, nothing timed
            print(f"| {count} | {entries} | built in {folder} |")
            continue
        timed(hook, event)  # the index as a later start finds it
        start, recall, version = [], [], []
        for _ in range(args.runs):
            start.append(timed(hook, event))
            recall.append(timed(hook, prompt))
            version.append(timed([sys.executable, "-m", "memcli", "--version"]))
        s, r, v = statistics.median(start), statistics.median(recall), statistics.median(version)
        print(f"| {count} | {entries} | {s * 1000:.0f} ms ({max(start) * 1000:.0f}) | {r * 1000:.0f} ms "
              f"({max(recall) * 1000:.0f}) | {v * 1000:.0f} ms | {s / v:.1f}, {r / v:.1f} |")


if __name__ == "__main__":
    main()
