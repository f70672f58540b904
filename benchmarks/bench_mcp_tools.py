#!/usr/bin/env python3
"""What an MCP host waits for: the server's CPU time until it answers the handshake, and each tool's
latency through the official MCP client.

    python benchmarks/bench_mcp_tools.py [--runs 10] [--python PYTHON] [--json]

The handshake: ``--runs`` fresh ``memcli mcp`` processes each get the first request of the official
client (``server/discover``, protocol 2026-07-28) and of an older client (``initialize``, 2025-06-18)
over a pipe; the server's user+system CPU time (from /proc) and the wall time are read the moment its
answer arrives. The first start answers from the answers shipped for the pinned SDK (or, for an
SDK of another version, the SDK answers and its answer is kept); the later starts from the cache
(:mod:`memcli.mcp_start`). Tools: one server, the official client, the store of
the shipped example (ingested, consolidated), each tool called once and then ``--runs`` times
(timed too: the first call warms the index or loads a model); ask: a different question each time, default model and reader, under ``mcp.ask_seconds``); median and
worst. ``--python``: the interpreter of the memcli to measure (an installed, not editable, package).
Run it alone.
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

import anyio

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "caroline-and-priya.json"
QUESTIONS = ["Which adoption agency did Caroline choose?", "What does Priya make in her class?",
             "When did Caroline go to the support group?", "What is Priya's hobby?",
             "Where did Caroline move from?", "What did Priya's students build?",
             "Who is Caroline's mentor?", "What instrument does Priya play?",
             "What did Caroline research?", "What book is Priya reading?"]
ANSWERED = "ask: answered (not I don't know)"
HANDSHAKES = {
    "server/discover": {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {}}}},
    "initialize": {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}},
}


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def handshake(python: str, store: Path, request: dict, env: dict) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one fresh server until its answer to ``request`` arrives."""
    server = subprocess.Popen([python, "-m", "memcli", "--store", str(store), "mcp"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    start = time.perf_counter()
    server.stdin.write((json.dumps(request) + "\n").encode())
    server.stdin.flush()
    answer = json.loads(server.stdout.readline())
    wall = time.perf_counter() - start
    cpu = cpu_seconds(server.pid)
    server.kill()
    server.wait()
    assert answer.get("id") == 1 and "result" in answer, answer
    return cpu, wall


def version_start(python: str, env: dict) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one ``memcli --version``, start to exit: what a start costs at least."""
    start = time.perf_counter()
    proc = subprocess.Popen([python, "-m", "memcli", "--version"], stdout=subprocess.DEVNULL, env=env)
    _, _, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = 0
    return usage.ru_utime + usage.ru_stime, wall


async def tools(python: str, store: Path, runs: int, env: dict) -> dict[str, list[float]]:
    from mcp.client import Client
    from mcp.client.stdio import StdioServerParameters

    calls = {
        "memory_search": lambda n: ("memory_search", {"question": QUESTIONS[n % len(QUESTIONS)]}),
        "grep": lambda n: ("grep", {"pattern": ["Caroline", "Priya", "adopt", "class", "group"][n % 5]}),
        "search": lambda n: ("search", {"query": QUESTIONS[n % len(QUESTIONS)]}),
        "list_docs": lambda n: ("list_docs", {}),
        "read": lambda n: ("read", {"doc": "CURRENT", "start_line": 1, "end_line": 40}),
        "status": lambda n: ("status", {}),
        "remember": lambda n: ("remember", {"text": f"benchmark note number {n} about the staging port"}),
        "ask": lambda n: ("ask", {"question": QUESTIONS[n % len(QUESTIONS)]}),
    }
    out: dict[str, list[float]] = {}
    server = StdioServerParameters(command=python, args=["-m", "memcli", "--store", str(store), "mcp"], env=env)
    async with Client(server) as client:
        for name, call in calls.items():
            tool, args = call(runs)
            start = time.perf_counter()
            await client.call_tool(tool, args)  # the first call (warms the index, loads a model)
            out[f"{name} (first)"] = [time.perf_counter() - start]
            for n in range(runs):
                tool, args = call(n)
                start = time.perf_counter()
                result = await client.call_tool(tool, args)
                out.setdefault(name, []).append(time.perf_counter() - start)
                if result.is_error:
                    raise SystemExit(f"{tool} failed: {result.content}")
                if name == "ask":
                    found = result.structured_content or {}
                    out.setdefault("ask (past the limit)", [])
                    out.setdefault("ask (answered)", [])
                    if found.get("answer") is None:
                        out["ask (past the limit)"].append(1.0)
                    elif "don't know" not in found["answer"]:
                        out["ask (answered)"].append(1.0)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="memcli-bench-mcp-tools-"))
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("MEMCLI_")},
           "XDG_CACHE_HOME": str(work / "cache"), "XDG_CONFIG_HOME": str(work / "config"),
           "XDG_DATA_HOME": str(work / "data")}
    store = work / "store"
    subprocess.run([args.python, "-m", "memcli", "--store", str(store), "ingest", str(EXAMPLE), "-q"], check=True,
                   env=env)
    report: dict = {"handshake": {}, "tools": {}}
    versions = [version_start(args.python, env) for _ in range(args.runs)]
    version_wall = statistics.median(w for _, w in versions)
    report["memcli --version"] = {"cpu median s": round(statistics.median(c for c, _ in versions), 3),
                                  "wall median s": round(version_wall, 3)}
    for method, request in HANDSHAKES.items():
        first = handshake(args.python, store, request, env)
        later = [handshake(args.python, store, request, env) for _ in range(args.runs)]
        report["handshake"][method] = {
            "first start (cpu s, wall s)": [round(first[0], 3), round(first[1], 3)],
            "later starts: cpu median s": round(statistics.median(c for c, _ in later), 3),
            "later starts: cpu worst s": round(max(c for c, _ in later), 3),
            "later starts: wall median s": round(statistics.median(w for _, w in later), 3),
            "later starts: wall median / --version": round(statistics.median(w for _, w in later) / version_wall, 2)}
    timings = anyio.run(tools, args.python, store, args.runs, env)
    asks = len(timings.pop("ask (past the limit)", []))
    answered = len(timings.pop("ask (answered)", []))
    for name, values in timings.items():
        if not name.endswith("(first)"):
            report["tools"][name] = {"first call s": round(timings[f"{name} (first)"][0], 3),
                                     "median s": round(statistics.median(values), 3), "worst s": round(max(values), 3)}
    report["ask answered past mcp.ask_seconds (evidence instead)"] = f"{asks}/{args.runs}"
    report[ANSWERED] = f"{answered}/{args.runs}"
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print("memcli --version: " + ", ".join(f"{k} {v}" for k, v in report["memcli --version"].items()))
    for method, row in report["handshake"].items():
        print(f"{method}: " + ", ".join(f"{k} {v}" for k, v in row.items()))
    print(f"{'tool':<14} {'first s':>9} {'median s':>9} {'worst s':>9}")
    for name, row in report["tools"].items():
        print(f"{name:<14} {row['first call s']:>9.3f} {row['median s']:>9.3f} {row['worst s']:>9.3f}")
    print(f"ask past its time limit: {report['ask answered past mcp.ask_seconds (evidence instead)']}; "
          f"{report.get(ANSWERED)} answered (not I don't know)")


if __name__ == "__main__":
    main()
