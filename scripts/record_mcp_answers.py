#!/usr/bin/env python3
"""Record the MCP SDK's answers to a host's first request into memcli/mcp_answers.json.

    python scripts/record_mcp_answers.py [--check]

For each handshake the installed SDK speaks (``initialize`` at protocol 2024-11-05, 2025-03-26,
2025-06-18 and 2025-11-25; ``server/discover`` at 2026-07-28) a real ``memcli mcp`` is started with an
empty cache folder and asked; the answer its SDK gives (the one :mod:`memcli.mcp_start` keeps in the
cache) is recorded, after checking that ``--read-only`` and ``--no-ask`` get the same one. Run it after
changing the pinned ``mcp`` version in constraints.txt (or the server's instructions). ``--check``
writes nothing and exits 1 when the shipped file differs from what the SDK answers now.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SHIPPED = REPO / "memcli" / "mcp_answers.json"
INITIALIZE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
DISCOVER_VERSIONS = ("2026-07-28",)


def request(method: str, version: str) -> dict:
    if method == "initialize":
        params = {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "record", "version": "1"}}
    else:
        params = {"_meta": {"io.modelcontextprotocol/protocolVersion": version,
                            "io.modelcontextprotocol/clientInfo": {"name": "record", "version": "1"},
                            "io.modelcontextprotocol/clientCapabilities": {}}}
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}


def sdk_answer(message: dict, flags: list[str]) -> dict:
    """The SDK's own answer to ``message``, as a fresh server records it in its empty cache."""
    with tempfile.TemporaryDirectory() as work:
        env = {**{k: v for k, v in os.environ.items() if not k.startswith("MEMCLI_")},
               "XDG_CACHE_HOME": f"{work}/cache", "XDG_DATA_HOME": f"{work}/data", "XDG_CONFIG_HOME": f"{work}/config"}
        cache = Path(work) / "cache" / "memcli" / "mcp-initialize.json"
        subprocess.run([sys.executable, "-m", "memcli", "--store", f"{work}/store", "init", "-q"], check=True, env=env,
                       stdout=subprocess.DEVNULL)
        server = subprocess.Popen([sys.executable, "-m", "memcli", "--store", f"{work}/store", "mcp", *flags],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
        try:
            server.stdin.write((json.dumps(message) + "\n").encode())
            server.stdin.flush()
            json.loads(server.stdout.readline())
            deadline = time.monotonic() + 60
            while not cache.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            (kept,) = json.loads(cache.read_text()).values()
            return json.loads(kept["answer"])["result"]  # the bytes the SDK wrote, kept for this very line
        finally:
            server.kill()
            server.wait()


def record() -> dict:
    from memcli.mcp_start import sdk_version

    answers = {}
    for method, versions in (("initialize", INITIALIZE_VERSIONS), ("server/discover", DISCOVER_VERSIONS)):
        for version in versions:
            message = request(method, version)
            found = [sdk_answer(message, flags) for flags in ([], ["--read-only"], ["--no-ask"])]
            if any(answer != found[0] for answer in found):
                raise SystemExit(f"{method} {version}: the answer depends on the flags; not recorded")
            answers[f"{method} {version}"] = found[0]
    return {"sdk": sdk_version(), "answers": answers}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    now = record()
    if args.check:
        shipped = json.loads(SHIPPED.read_text())
        print("same" if shipped == now else "differs")
        raise SystemExit(0 if shipped == now else 1)
    SHIPPED.write_text(json.dumps(now, indent=1, ensure_ascii=False) + "\n")
    print(f"{SHIPPED}: {len(now['answers'])} answers of mcp {now['sdk']}")


if __name__ == "__main__":
    main()
