#!/usr/bin/env python3
"""What the agent hooks recall, on real sessions of one project: the session start and the prompt recall.

    python benchmarks/bench_prompt_recall.py [--bars 6 8 10 12 14 16 18 20 24]

The sessions are a public project's own (``benchmarks/data/bookminder-sessions.json.gz``, from
``benchmarks/agent_sessions.py``: 48 Claude Code and Gemini CLI sessions over 21 days). They are saved in order,
each as a Claude Code transcript, into one project store (consolidated without a model after each day, as the
automatic path does); before each session is saved, memory holds the sessions before it, and:

* the session start (``memcli.session_start.digest`` at ``hook.start_tokens``) is scored by whether it names the
  previous session's request and outcome (cited by their lines), and how many earlier sessions it lists;
* each labelled prompt of the session (``benchmarks/data/bookminder-prompt-labels.json``: the first four real
  requests of each session; whether it comes back to earlier work, and what an earlier line must hold to count)
  is recalled as the prompt hook does (``memcli.prompt_recall``), with every bar in ``--bars``: a prompt that
  comes back scores when a line it is given satisfies its label; a prompt that does not counts as a false recall
  when it is given anything.

The bar is chosen on the tune half (sessions at odd places): the lowest whose false recalls stay within 10% of
that half's unrelated prompts, then the figures of the report half (even places) at that bar are reported.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import sys
import tempfile
from pathlib import Path

from memcli.prompt_recall import CONTEXT_TURNS

DATA = Path(__file__).resolve().parent / "data"
PROJECT = "/Users/palimondo/Developer/BookMinder"


def transcript(folder: Path, session: dict) -> Path:
    """One session as a Claude Code transcript (its id the session's)."""
    lines = []
    for n, turn in enumerate(session["turns"]):
        if turn["role"] == "user":
            message = {"role": "user", "content": turn["text"]}
        else:
            message = {"role": "assistant", "content": [{"type": "text", "text": turn["text"]}]}
        lines.append(json.dumps({"type": turn["role"], "sessionId": session["id"], "uuid": f"{session['id']}-{n}",
                                 "timestamp": turn["time"], "cwd": PROJECT, "message": message}))
    path = folder / f"{session['id']}.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def satisfies(label: str, found, previous: str) -> bool:
    if label == "prev":
        return found.conv == previous
    if label.startswith("session:"):
        return found.conv.startswith(label.removeprefix("session:"))
    return re.search(label, found.text, re.IGNORECASE) is not None


def foreign_prompts(folder: Path) -> list[str]:
    """The user's requests in the real sessions of other projects in tests/samples (Claude Code, Codex, Gemini CLI,
    pi): prompts that nothing in this project's memory is about."""
    from memcli import Memory
    from memcli.store.lines import Library

    samples = Path(__file__).resolve().parent.parent / "tests" / "samples"
    with Memory(folder / "foreign", create=True) as memory:
        for path in sorted(samples.iterdir()):
            if path.suffix in (".json", ".jsonl") and not path.name.startswith(("chatgpt", "claude-ai")):
                memory.ingest(path, consolidate=False)
        library = Library(memory.store)
        return [e.text for e in library.doc("CURRENT").entries.values()
                if e.meta.get("speaker") == "user" and len(e.text.split()) >= 3]


def _context(turns: list[dict], count: int) -> str:
    """The session's last ``count`` turns before a prompt, as the hook reads them from the transcript."""
    return "\n".join(t["text"] for t in turns[-count:]) if count else ""


def score(rows: list[dict], bar: tuple[float, float]) -> dict:
    from memcli.prompt_recall import said

    back = [r for r in rows if r["label"] is not None]
    other = [r for r in rows if r["label"] is None]
    hits = sum(any(satisfies(r["label"], f, r["previous"]) for f in said(r["found"], bar)) for r in back)
    false = sum(bool(said(r["found"], bar)) for r in other)
    return {"back": len(back), "recalled": hits / max(1, len(back)), "unrelated": len(other),
            "false": false / max(1, len(other))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bearings", type=float, nargs="+", default=[0, 1, 1.5, 2, 2.5, 3, 4])
    parser.add_argument("--similarities", type=float, nargs="+", default=[0, 0.3, 0.4, 0.5, 0.6, 0.7])
    parser.add_argument("--context", type=int, default=CONTEXT_TURNS, help="the session's turns before a prompt it reads")
    parser.add_argument("--false-limit", type=float, default=0.10)
    args = parser.parse_args()
    os.environ["MEMCLI_VECTORS"] = "inline"  # computed here, between sessions, not by a job racing the next ingest
    from memcli import Memory
    from memcli.prompt_recall import candidates
    from memcli.session_start import digest

    sessions = json.loads(gzip.decompress((DATA / "bookminder-sessions.json.gz").read_bytes()))["sessions"]
    labels = json.loads((DATA / "bookminder-prompt-labels.json").read_text())["labels"]
    folder = Path(tempfile.mkdtemp(prefix="memcli-prompt-recall-"))
    rows, starts, seen = [], [], set()
    with Memory(folder / "store", create=True) as memory:
        for place, session in enumerate(sessions):
            if place:
                memory.compute_vectors()  # every line's vector, as the background job leaves them
                previous = sessions[place - 1]
                text = digest(memory, None, "BookMinder", memory.settings.hook_start_tokens)
                starts.append({"half": "tune" if place % 2 else "report", "previous": previous["id"],
                               "listed": text.count("\n- "), **_named(memory, text, previous["id"])})
                for n, turn in enumerate(session["turns"]):
                    key = f"{session['id']}#{n}"
                    if key in labels and turn["text"] not in seen:
                        rows.append({"half": "tune" if place % 2 else "report", "key": key, "label": labels[key],
                                     "prompt": turn["text"][:300],
                                     "previous": previous["id"],
                                     "found": candidates(memory, turn["text"], None, session["id"],
                                                         _context(session["turns"][:n], args.context))})
            memory.ingest(transcript(folder, session), format="claude-code", consolidate=False)
            seen.update(t["text"] for t in session["turns"] if t["role"] == "user")
            if place + 1 == len(sessions) or sessions[place + 1]["day"] != session["day"]:
                memory.consolidate(llm=False)
        foreign = [{"half": "foreign", "key": f"foreign#{n}", "label": None, "previous": "", "prompt": text[:300],
                    "found": candidates(memory, text, None, None)} for n, text in enumerate(foreign_prompts(folder))]
    grid = [(b, si) for b in args.bearings for si in args.similarities]
    tune = [r for r in rows if r["half"] == "tune"]
    report_rows = [r for r in rows if r["half"] == "report"]
    fits = [bars for bars in grid if score(tune, bars)["false"] <= args.false_limit]
    chosen = max(fits, key=lambda bars: (score(tune, bars)["recalled"], -score(tune, bars)["false"], bars))
    print("| bearing bar | similarity bar | tune: recalled | tune: false | report: recalled | report: false |")
    print("|---|---|---|---|---|---|")
    for bars in sorted({chosen, *[g for g in grid if sum(a != b for a, b in zip(g, chosen)) <= 1]}):
        t, r = score(tune, bars), score(report_rows, bars)
        mark = " **chosen**" if bars == chosen else ""
        print(f"| {bars[0]:g} | {bars[1]:g}{mark} | {t['recalled']:.0%} | {t['false']:.0%} | {r['recalled']:.0%} | "
              f"{r['false']:.0%} |")
    t, report = score(tune, chosen), score(report_rows, chosen)
    other = score(foreign, chosen)
    print(f"\nprompts of other projects' real sessions (tests/samples), asked of this memory: {other['unrelated']}, "
          f"false recalls {other['false']:.0%} at the chosen bars")
    print(f"\nbars chosen on the tune half (the most recalled with false recalls <= {args.false_limit:.0%}): "
          f"bearing {chosen[0]:g}, similarity {chosen[1]:g} (tune: {t['back']} prompts that come back, "
          f"{t['unrelated']} that do not). Report half: recalled {report['recalled']:.0%} of {report['back']} "
          f"prompts that come back, false recalls {report['false']:.0%} of {report['unrelated']}")
    for half in ("tune", "report"):
        part = [s for s in starts if s["half"] == half]
        print(f"session start, {half} half: {len(part)} starts; the previous session's request named in "
              f"{sum(s['request'] for s in part) / len(part):.0%}, its outcome in {sum(s['outcome'] for s in part) / len(part):.0%}; "
              f"{sum(s['listed'] for s in part) / len(part):.1f} sessions listed on average")
    json.dump({"rows": [{**r, "found": [f.__dict__ for f in r["found"]]} for r in rows + foreign], "starts": starts},
              open(folder / "results.json", "w"), indent=1)
    print(f"details: {folder / 'results.json'}", file=sys.stderr)


def _named(memory, text: str, conv: str) -> dict:
    """Whether a session start's ``text`` names session ``conv``'s request and outcome (cited by the lines the
    session table holds for them as the start was made)."""
    from memcli import session_table

    with memory.store.reading():
        memory.index.refresh()
        row = next((r for r in session_table.newest(memory.index.db, None, 3) if r.conv == conv), None)
    request = bool(row and row.request and f"({row.request[0]}:{row.request[1]})" in text)
    outcome = bool(row and row.outcome and f"({row.outcome[0]}:{row.outcome[1]})" in text)
    return {"request": request, "outcome": outcome}


if __name__ == "__main__":
    main()
