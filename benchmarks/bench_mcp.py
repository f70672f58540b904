#!/usr/bin/env python3
"""memory_search through the MCP server against the same question through `memcli ask --evidence-only`
as a process, side by side in one run.

    python benchmarks/bench_mcp.py [--questions 20] [--json]

A store holding LoCoMo conv-26 (ingested, consolidated as `ingest` does by default); the first
``--questions`` questions of the conversation, each asked both ways in turn (the server's first
call, which warms its index, is left out). Prints the median latency of each and their ratio.
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
CONV = REPO.parent / "shared" / "data" / "locomo" / "conv-26.json"


async def measure(store: Path, questions: list[str]) -> dict:
    from mcp.client import Client
    from mcp.client.stdio import StdioServerParameters

    server = StdioServerParameters(command=sys.executable, args=["-m", "memcli", "--store", str(store), "mcp"],
                                   env=dict(os.environ))
    over_mcp, as_process = [], []
    async with Client(server) as client:
        await client.call_tool("memory_search", {"question": "warm-up"})
        for question in questions:
            start = time.perf_counter()
            result = await client.call_tool("memory_search", {"question": question})
            over_mcp.append(time.perf_counter() - start)
            assert not result.is_error, result.content
            start = time.perf_counter()
            subprocess.run([sys.executable, "-m", "memcli", "--store", str(store), "ask", question, "--evidence-only",
                            "--json"], check=True, capture_output=True)
            as_process.append(time.perf_counter() - start)
    mcp_ms, cli_ms = statistics.median(over_mcp) * 1000, statistics.median(as_process) * 1000
    return {"questions": len(questions), "mcp_median_ms": round(mcp_ms, 1), "cli_median_ms": round(cli_ms, 1),
            "speedup": round(cli_ms / mcp_ms, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--questions", type=int, default=20)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="memcli-bench-mcp-"))
    os.environ.update({"XDG_CACHE_HOME": str(work / "cache"), "XDG_CONFIG_HOME": str(work / "config")})
    for key in [k for k in os.environ if k.startswith("MEMCLI_")]:
        del os.environ[key]
    store = work / "store"
    subprocess.run([sys.executable, "-m", "memcli", "--store", str(store), "ingest", str(CONV), "-q"], check=True,
                   stdout=subprocess.DEVNULL)
    data = json.loads(CONV.read_text())
    questions = [q["question"] for q in data["qa"] if q.get("category") != 5][:args.questions]
    report = anyio.run(measure, store, questions)
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"memory_search over MCP: median {report['mcp_median_ms']} ms; `memcli ask --evidence-only` as a "
          f"process: median {report['cli_median_ms']} ms; {report['speedup']}x ({report['questions']} questions)")


if __name__ == "__main__":
    main()
