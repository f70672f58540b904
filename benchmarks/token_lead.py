#!/usr/bin/env python3
"""Gold entry first: the measurement issue 48's target came from, redone beside what ``ask`` reads.

    python benchmarks/token_lead.py [--json OUT]

On the LoCoMo development pair, every question of categories 1-4:

- **the issue's lead** (no store, no model): BM25 over the raw turns (``speaker: text``, memcli's terms),
  its 20 best; of the questions with a gold turn among them, how often BM25's first is gold and how often
  the token-level alignment's first is (each question word's best MiniLM token match in the turn, averaged:
  ``memcli.semantic.alignment.align``, the shipped weights);
- **what ask reads** (raw memory, ``Memory.ask`` as ``memcli eval`` asks, the default model): of the
  questions with a gold line among the entries the answer reads, how often the first of them in the readers'
  order is gold, and how often the first by the same alignment is.

Each share is given of the questions it counts and of all the questions, since the two ways read different
lines: the lead's 20 turns hold a gold turn for fewer questions than what ask reads.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("MEMCLI_VECTORS", "inline")

LOCOMO = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "locomo"
CONVERSATIONS = ("conv-26", "conv-30")
TOP = 20


def share(hits: int, of: int) -> float:
    return round(hits / of, 4) if of else 0.0


def lead(aligner, data: dict) -> dict:
    """The issue's measurement on one conversation (see the module)."""
    from rank_bm25 import BM25Okapi

    from memcli.eval.metrics import gold_dialog_ids
    from memcli.semantic.alignment import align
    from memcli.terms import terms

    turns = [t for key, value in data.items() if re.fullmatch(r"session_\d+", key) for t in value]
    texts = [f"{t['speaker']}: {t['text']}" for t in turns]
    bm25 = BM25Okapi([terms(text) or ["_"] for text in texts])
    lines = aligner.lines(texts)
    out = {"questions": 0, "gold_in_top": 0, "bm25_first": 0, "aligned_first": 0}
    for qa in data["qa"]:
        if qa.get("category") == 5:
            continue
        out["questions"] += 1
        gold = gold_dialog_ids(qa.get("evidence", []))
        scores = bm25.get_scores(terms(qa["question"]))
        top = sorted(range(len(texts)), key=lambda i: -scores[i])[:TOP]
        if not any(turns[i]["dia_id"] in gold for i in top):
            continue
        out["gold_in_top"] += 1
        asked = aligner.question(qa["question"])
        content = asked.content()
        best = max(top, key=lambda i: align(asked, lines[i], content).score)  # ties: BM25's order
        out["bm25_first"] += turns[top[0]]["dia_id"] in gold
        out["aligned_first"] += turns[best]["dia_id"] in gold
    return out


def read_first(name: str) -> dict:
    """What ask reads on one conversation (see the module)."""
    from memcli.eval.locomo import load_conversations
    from memcli.eval.metrics import gold_dialog_ids
    from memcli.memory import Memory
    from memcli.retrieve import extractive

    seen: list = []
    original = extractive.candidates

    def watching(question, library, read, order, tuning=extractive.DEFAULT, aligned=None):
        seen.append((library, aligned))
        return original(question, library, read, order, tuning, aligned)

    extractive.candidates = watching
    conversation = load_conversations([LOCOMO / f"{name}.json"], name)[0]
    out = {"questions": 0, "gold_read": 0, "readers_first": 0, "aligned_first": 0}
    try:
        with tempfile.TemporaryDirectory(prefix="memcli-lead-") as tmp, \
                Memory(Path(tmp) / "store", create=True, settings={"search.vectors": "inline"},
                       cache_dir=Path(tmp) / "index") as memory:
            memory.ingest(conversation.source, format="locomo", sample=name, consolidate=False,
                          time="2000-01-01T00:00")
            for n, qa in enumerate(conversation.questions):
                if qa.get("category") == 5:
                    continue
                out["questions"] += 1
                seen.clear()
                memory.ask(qa["question"], keep_evidence=False)
                if not seen or seen[0][1] is None or not seen[0][1].order:
                    continue
                library, aligned = seen[0]
                gold = gold_dialog_ids(qa.get("evidence", []))

                def is_gold(pick) -> bool:
                    return bool(set((library.doc(pick[0]).entries[pick[1]].ref or "").split(";")) & gold)

                if not any(is_gold(pick) for pick in aligned.order):
                    continue
                out["gold_read"] += 1
                out["readers_first"] += is_gold(aligned.order[0])
                out["aligned_first"] += is_gold(max(aligned.order, key=lambda p: aligned.alignments[p].score))
                print(f"  {name} q{n}", file=sys.stderr, end="\r")
    finally:
        extractive.candidates = original
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", type=Path, help="write the report here")
    args = parser.parse_args()
    from memcli.memory import Memory

    with tempfile.TemporaryDirectory(prefix="memcli-lead-") as tmp, Memory(Path(tmp) / "s", create=True) as memory:
        aligner = memory.index.aligner()
        leads = {name: lead(aligner, json.loads((LOCOMO / f"{name}.json").read_text())) for name in CONVERSATIONS}
    reads = {name: read_first(name) for name in CONVERSATIONS}
    report: dict = {"lead": leads, "read": reads}
    total = {key: sum(part[key] for part in leads.values()) for key in leads[CONVERSATIONS[0]]}
    read = {key: sum(part[key] for part in reads.values()) for key in reads[CONVERSATIONS[0]]}
    report["both"] = {
        "lead": {**total, "bm25_first_of_counted": share(total["bm25_first"], total["gold_in_top"]),
                 "aligned_first_of_counted": share(total["aligned_first"], total["gold_in_top"]),
                 "aligned_first_of_all": share(total["aligned_first"], total["questions"])},
        "read": {**read, "readers_first_of_counted": share(read["readers_first"], read["gold_read"]),
                 "aligned_first_of_counted": share(read["aligned_first"], read["gold_read"]),
                 "readers_first_of_all": share(read["readers_first"], read["questions"]),
                 "aligned_first_of_all": share(read["aligned_first"], read["questions"])}}
    text = json.dumps(report, indent=1)
    if args.json:
        args.json.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
