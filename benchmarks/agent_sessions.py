"""Real multi-session agent transcripts for the agent-recall benchmarks, from a public repository.

The source: palimondo/BookMinder (MIT licence, (c) 2025 Pavol Vaskovic), whose ``claude-dev-log-diary/day-NNN.md``
are console copies of 21 days of one project's Claude Code (and some Gemini CLI) sessions. This script reads them
from a clone (``--repo``: the git directory), splits each day at the agent's start banner into sessions, keeps the
user's prompts and the agent's messages (tool calls and their output left out, as memcli's own session reader does),
dates each day by the commit that added its log, and writes one JSON file (``benchmarks/data/bookminder-sessions.json``,
committed, so the benchmark needs no network): ``{"source", "licence", "sessions": [{"id", "day", "turns": [{"role",
"text", "time"}]}]}``.

    python benchmarks/agent_sessions.py --repo PATH/TO/BookMinder.git
"""

from __future__ import annotations

import argparse
import datetime as dt
import gzip
import json
import re
import subprocess
from pathlib import Path

OUT = Path(__file__).parent / "data" / "bookminder-sessions.json.gz"
BANNERS = ("Welcome to Claude Code", "Tips for getting started")
USER = re.compile(r"^(?:│\s*)?> (.*?)\s*(?:│\s*)?$")
AGENT = re.compile(r"^(?:⏺|✦) (.*)$")
TOOL = re.compile(r"^⏺ [A-Z][\w.:-]*\(")  # a tool call: Read(...), Bash(...), Update(...)
BOX = re.compile(r"^\s*[│╭╰]")


def sessions_of(text: str) -> list[list[dict]]:
    """The sessions of one day's console copy, each a list of ``{"role", "text"}`` turns."""
    sessions: list[list[dict]] = [[]]
    turn = None
    for raw in text.splitlines():
        line = raw.rstrip()
        if any(banner in line for banner in BANNERS):
            if sessions[-1]:
                sessions.append([])
            turn = None
            continue
        if (m := USER.match(line)) and m.group(1).strip():
            turn = {"role": "user", "text": m.group(1).strip()}
            sessions[-1].append(turn)
        elif (m := AGENT.match(line)) and not TOOL.match(line):
            turn = {"role": "assistant", "text": m.group(1).strip()}
            sessions[-1].append(turn)
        elif turn is not None and line.startswith("  ") and not line.lstrip().startswith("⎿"):
            body = line.strip().strip("│").strip() if BOX.match(line) else line.strip()
            if body:
                turn["text"] += " " + body
        elif turn is not None and (not line.strip() or not line.startswith(" ")):
            turn = None
    return [s for s in sessions if any(t["role"] == "user" for t in s) and any(t["role"] == "assistant" for t in s)]


def day_dates(repo: str) -> dict[str, dt.datetime]:
    """Each day log's date: the commit that added it."""
    out = {}
    listing = subprocess.run(["git", "--git-dir", repo, "ls-tree", "--name-only", "HEAD", "claude-dev-log-diary/"],
                             capture_output=True, text=True, check=True).stdout.split()
    for path in listing:
        if m := re.fullmatch(r"claude-dev-log-diary/day-(\d+)\.md", path):
            when = subprocess.run(["git", "--git-dir", repo, "log", "--diff-filter=A", "--format=%aI", "--", path],
                                  capture_output=True, text=True, check=True).stdout.split()[-1]
            out[m.group(1)] = dt.datetime.fromisoformat(when).astimezone(dt.UTC)
    return out


def repeated(turns: list[dict], seen: set[str]) -> bool:
    """A session most of whose prompts an earlier one holds: a console copy pasted twice (day 020 holds its
    scrollback five times)."""
    prompts = [t["text"] for t in turns if t["role"] == "user" and not t["text"].startswith("/")]
    return bool(prompts) and sum(p in seen for p in prompts) >= 0.8 * len(prompts)


def build(repo: str) -> dict:
    sessions, clock, seen = [], None, set()
    for day, added in sorted(day_dates(repo).items()):
        text = subprocess.run(["git", "--git-dir", repo, "show", f"HEAD:claude-dev-log-diary/day-{day}.md"],
                              capture_output=True, text=True, check=True).stdout
        start = added - dt.timedelta(hours=12)  # the day's sessions come before the commit that saved their log
        for n, turns in enumerate(sessions_of(text), 1):
            if repeated(turns, seen):
                continue
            seen.update(t["text"] for t in turns if t["role"] == "user")
            clock = max(start, clock + dt.timedelta(minutes=30)) if clock else start
            for turn in turns:
                turn["time"] = clock.strftime("%Y-%m-%dT%H:%M:%SZ")
                clock += dt.timedelta(minutes=1)
            sessions.append({"id": f"bookminder-d{day}-s{n}", "day": day, "turns": turns})
    return {"source": "https://github.com/palimondo/BookMinder claude-dev-log-diary/day-*.md",
            "licence": "MIT License, Copyright (c) 2025 Pavol Vaskovic", "sessions": sessions}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", required=True, help="the git directory of a BookMinder clone")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    data = build(args.repo)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(  # mtime 0: the same bytes each run
        gzip.compress((json.dumps(data, ensure_ascii=False, indent=0) + "\n").encode(), mtime=0))
    turns = sum(len(s["turns"]) for s in data["sessions"])
    print(f"{len(data['sessions'])} sessions, {turns} turns -> {args.out} ({args.out.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
