#!/usr/bin/env python3
"""Evidence on chats of another kind than LoCoMo's: a user with an assistant, facts that change.

    python benchmarks/bench_evidence_updates.py SUITE_DIR [--budgets 100,200,500] [--vary AXIS] [--json OUT]

``SUITE_DIR`` is what ``benchmarks/updates_suite.py`` writes (one user-assistant chat a person, and
``questions.jsonl``). All the chats go into one store, as one user's memory of many people; for each
question whose value memory holds (the current value, asked in the present or the past tense, and the
value "as of" a day), the share whose ``ask --evidence-only`` evidence within each budget shows a line
stating the asked value (as the evidence shows it: compact evidence shows part of an entry), by half of
the suite (``tune``, ``report``). The budgets are small because the chats are: 50 messages, some 700
tokens each, so at 500 tokens nearly everything fits.

Every alternative of one of ``tune_evidence.py``'s axes (``--vary``, "set selection" unless told) is
scored with the rest as shipped, so the axis is chosen on two kinds of conversation: LoCoMo's two friends
(``tune_evidence.py``) and these (the tune half; the report half is the held-out figure).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_updates import dated, holds
from tune_evidence import GRID

from memcli.memory import Memory
from memcli.retrieve.evidence_reader import DEFAULT, Tuning, evidence_only

os.environ.setdefault("MEMCLI_VECTORS", "inline")  # every vector before the first question


def shown_texts(got) -> list[str]:
    """The entries as the evidence shows them (one line an entry)."""
    return [line for evidence in got.evidence for line in evidence.text.split("\n")]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("suite", type=Path)
    parser.add_argument("--budgets", default="100,200,500")
    parser.add_argument("--vary", choices=list(GRID), default="set selection")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    budgets = [int(b) for b in args.budgets.split(",")]
    questions = [json.loads(line) for line in (args.suite / "questions.jsonl").read_text().splitlines() if line]
    questions = [q for q in questions if q["kind"] in ("current", "past", "as_of")]  # not the time in the words
    # (dated, before: what ask reads from a question's words, which this ranking-only measure does not)
    work = Path(tempfile.mkdtemp(prefix="memcli-evidence-updates-"))
    try:
        memory = Memory(work / "store", create=True, cache_dir=work / "cache",
                        settings={"consolidate.auto": False, "search.semantic": True})
        for path in sorted(args.suite.glob("*.json")):
            memory.ingest(path, consolidate=False)
        rows = []
        axis = GRID[args.vary]
        plain = {key: getattr(Tuning(), key) for alternative in axis for key in alternative}
        for alternative in axis:
            tuning = replace(DEFAULT, **{**plain, **alternative})
            row = {"alternative": alternative, "ships": tuning == DEFAULT}
            for budget in budgets:
                for half in ("tune", "report"):
                    asked = [q for q in questions if q["half"] == half]
                    found = 0
                    for q in asked:
                        values = [q["answer"], *q["stale"]]
                        got = evidence_only(memory.store, memory.index, q["question"], budget=budget, tuning=tuning,
                                            **dated(q))
                        found += any(holds(t, q["answer"], values, q.get("keys")) for t in shown_texts(got))
                    row[f"{half}@{budget}"] = round(found / len(asked), 3)
            rows.append(row)
            print(f"{json.dumps(alternative):55s} " + "  ".join(
                f"{b}: tune {row[f'tune@{b}']:.3f} report {row[f'report@{b}']:.3f}" for b in budgets)
                + ("  (ships)" if row["ships"] else ""), flush=True)
        print(f"{len(questions)} questions ({sum(q['half'] == 'tune' for q in questions)} in the tune half)")
        if args.json:
            args.json.write_text(json.dumps({"budgets": budgets, "rows": rows}, indent=1))
        memory.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
