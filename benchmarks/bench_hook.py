#!/usr/bin/env python3
"""How long an agent waits for `memcli hook AGENT` at the end of a session (or a Codex turn).

    python benchmarks/bench_hook.py [--runs 10] [--agent claude-code|codex|gemini] [--session FILE]

Each run copies the session file (default: the agent's real sample in tests/samples/; Claude Code's
grown to ``--turns`` turns) and sends the agent's save event (``SessionEnd``; Codex: ``Stop``)
naming it to a fresh process, on a store that
already holds the session (the common case: the hook fires again and again) and on an empty one.
It measures the wall time until the hook process exits: the default (a detached ingest; the hook
answers at once) against ``--wait`` (the ingest before answering, what the hook did before), side by
side in alternating order; medians and the worst run are printed. Background ingests are waited for
between runs, so they do not slow the next one. Run it alone.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PYTHON = [sys.executable]  # --python
SAMPLES = Path(__file__).resolve().parent.parent / "tests" / "samples"
AGENTS = {"claude-code": ("claude-code-session.jsonl", "SessionEnd"), "codex": ("codex-0.125-codemie.jsonl", "Stop"),
          "gemini": ("gemini-cli-yoavf.json", "SessionEnd")}
AGENT = ["claude-code"]  # --agent


def grown(sample: Path, turns: int, out: Path) -> Path:
    """The sample's records repeated with fresh ids until it holds ``turns`` user/assistant text turns."""
    records = [json.loads(line) for line in sample.read_text().splitlines() if line.strip()]
    lines, n = [], 0
    while n < turns:
        for rec in records:
            rec = json.loads(json.dumps(rec))
            if isinstance(rec.get("uuid"), str):
                rec["uuid"] = f"{rec['uuid']}-{len(lines)}"
            if rec.get("type") in ("user", "assistant") and isinstance((rec.get("message") or {}).get("content"), str):
                rec["message"]["content"] += f" (turn {len(lines)})"
                n += 1
            lines.append(json.dumps(rec))
    out.write_text("\n".join(lines) + "\n")
    return out


def run_hook(store: Path, session: Path, wait: bool, env: dict, name: str | None = None) -> float:
    name = name or AGENTS[AGENT[0]][1]
    event = json.dumps({"session_id": "bench", "transcript_path": str(session), "cwd": str(store.parent),
                        "hook_event_name": name}).encode()
    saving = name != "SessionStart"
    command = [PYTHON[0], "-m", "memcli", "--store", str(store), "hook", AGENT[0],
               *(["--json"] if saving else []), *(["--wait"] if wait else [])]
    start = time.perf_counter()
    done = subprocess.run(command, input=event, capture_output=True, env=env)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"hook failed: {done.stderr.decode()[-500:]}")
    reply = json.loads(done.stdout) if saving else {}
    if reply.get("pid"):  # wait for the detached ingest before the next run
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                os.kill(reply["pid"], 0)
            except OSError:
                break
            time.sleep(0.05)
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--agent", choices=sorted(AGENTS), default="claude-code")
    parser.add_argument("--session", type=Path, default=None, help="default: the agent's sample")
    parser.add_argument("--python", default=sys.executable,
                        help="the interpreter of the memcli to measure (an installed, not editable, package)")
    args = parser.parse_args()
    PYTHON[0], AGENT[0] = args.python, args.agent
    sample = args.session or SAMPLES / AGENTS[args.agent][0]
    work = Path(tempfile.mkdtemp(prefix="memcli-bench-hook-"))
    env = {**os.environ, "XDG_CACHE_HOME": str(work / "cache"), "XDG_DATA_HOME": str(work / "data"),
           "MEMCLI_AUTO_CONSOLIDATE": "false"}
    if args.agent == "claude-code":
        session = grown(sample, args.turns, work / "session.jsonl")
    else:
        session = work / sample.name
        shutil.copy(sample, session)
    times: dict[tuple[str, str], list[float]] = {}
    try:
        for run in range(args.runs):
            for wait in ((False, True) if run % 2 == 0 else (True, False)):
                mode = "--wait" if wait else "default"
                for case in ("known session", "new session"):
                    store = work / f"store-{mode}-{case.split()[0]}"
                    if case == "new session":
                        shutil.rmtree(store, ignore_errors=True)
                    elif not store.exists():
                        run_hook(store, session, True, env)
                    times.setdefault((mode, case), []).append(run_hook(store, session, wait, env))
        known = work / "store-default-known"
        for _ in range(args.runs):  # the session's start: what memory holds about the project, printed
            times.setdefault(("SessionStart", "known session"), []).append(
                run_hook(known, session, False, env, "SessionStart"))
        size = f"{args.turns}-turn session" if args.agent == "claude-code" else sample.name
        print(f"{args.agent} hooks, {size}, {args.runs} runs each (seconds until the hook exits)")
        print(f"{'mode':<10} {'case':<14} {'median':>8} {'9th/10':>8} {'worst':>8} {'<=0.1 s':>8}")
        for (mode, case), values in sorted(times.items()):
            ninth = sorted(values)[max(0, int(len(values) * 0.9) - 1)]
            print(f"{mode:<10} {case:<14} {statistics.median(values):>8.3f} {ninth:>8.3f} {max(values):>8.3f} "
                  f"{sum(v <= 0.1 for v in values):>5}/{len(values)}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
