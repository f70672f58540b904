#!/usr/bin/env python3
"""Capture of real session files, counted twice: by memcli's parser and by a reading of the file's own
records written here without it (every user and assistant message with text, in order).

    python benchmarks/bench_capture.py FILE... [--json]

Formats read here: Gemini CLI chats (JSON) and pi sessions (JSON lines). Prints, per file, the
records, the turns memcli keeps, the turns the independent reading expects, how many are identical
(speaker and text), and the records memcli counts as ignored.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from memcli.ingest.formats import parse_input


def _texts(content) -> str:
    if isinstance(content, str):
        return content.strip()
    return "\n".join(p["text"].strip() for p in content
                     if p.get("type", "text") == "text" and "text" in p and p["text"].strip())


def expected(path: Path) -> tuple[int, list[tuple[str, str]]]:
    text = path.read_text()
    if path.suffix == ".json":  # a Gemini CLI chat
        messages = json.loads(text)["messages"]
        return len(messages), [("assistant" if m["type"] == "gemini" else "user", _texts(m["content"]))
                               for m in messages if m["type"] in ("user", "gemini") and _texts(m["content"])]
    records = [json.loads(line) for line in text.splitlines() if line.strip()]  # a pi session
    return len(records), [(r["message"]["role"], _texts(r["message"]["content"])) for r in records
                          if r["type"] == "message" and r["message"]["role"] in ("user", "assistant")
                          and _texts(r["message"]["content"])]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = []
    for path in args.files:
        records, wanted = expected(path)
        parsed = parse_input(path.read_bytes(), str(path), default_time="2026-01-01T00:00")
        got = [(t.speaker, t.text) for t in parsed.turns]
        rows.append({"file": path.name, "format": parsed.format, "records": records, "turns": len(got),
                     "expected": len(wanted), "identical": sum(a == b for a, b in zip(got, wanted)),
                     "user": sum(s == "user" for s, _ in got), "ignored": parsed.ignored})
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"{'file':<36} {'format':<8} {'records':>7} {'turns':>6} {'expected':>8} {'identical':>9} {'ignored':>7}")
    for r in rows:
        print(f"{r['file']:<36} {r['format']:<8} {r['records']:>7} {r['turns']:>6} {r['expected']:>8} "
              f"{r['identical']:>9} {r['ignored']:>7}")


if __name__ == "__main__":
    main()
