#!/usr/bin/env python3
"""Composition that checks itself (``kv.compose_check``): how sure a composed context is of the answer's
first token, whether it agrees with a full prefill, and what repairing the unsure ones costs.

    python benchmarks/bench_compose_check.py [--questions 20] [--budget 600] [--grid 0 0.05 ...] [--json OUT]
    MEMCLI_MODEL=$(../shared/tools/reference-model) python benchmarks/bench_compose_check.py ...

Each development conversation (conv-26, conv-30) is ingested raw (its memory units are CURRENT's day
windows). For ``--questions`` questions a conversation, spread evenly over categories 1-4, the
text-ranked units within ``--budget`` tokens (600, ask.answer_context: what ``ask --kv-compose`` reads for a
generated answer; 2000, ask.budget: for the extractive answer, :func:`memcli.kv.composed_ask.units_context`) are
read twice, as ``ask --kv-compose`` reads them (each unit's block made beforehand, so placing is timed,
not making):

- full prefill: the instructions restored, the units and the question prefilled (what the evidence
  reader's answer costs), its first-token choice and margin (top probability less the second);
- composed: the units placed from their blocks, the question prefilled, its first token and margin.

Both answer with the extractive answer over their context (``composed_answer``); the first token and the
answer are compared. For each ``kv.compose_check`` value of the grid, a question whose composed margin is
under it is repaired (a full prefill after the composed one: both costs counted): top-1 agreement, answer
agreement, the share repaired, median prefilled tokens, mean time to first token and its ratio to a full
prefill's. The rule on one conversation: the smallest value whose top-1 agreement is at least 90% (none:
the most agreeing, then the smaller); chosen on each conversation, reported on the other.
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

os.environ.setdefault("MEMCLI_VECTORS", "inline")

REPO = Path(__file__).resolve().parent.parent
LOCOMO = REPO.parent / "shared" / "data" / "locomo"
CONVERSATIONS = ("conv-26", "conv-30")
GRID = (0.0, 0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5)
TARGET = 0.9


def measure(model, work: Path, name: str, questions: int, budget: int) -> list[dict]:
    from memcli import Memory
    from memcli.eval.locomo import load_conversations
    from memcli.eval.metrics import category_f1
    from memcli.kv import block_store
    from memcli.kv.composed_ask import ComposedPrompt, composed_answer, margin
    from memcli.kv.engine import KVEngine, Unit
    from memcli.kv.units import Units, fill
    from memcli.llm.base import CallStats
    from memcli.retrieve.ask import AskResult
    from memcli.retrieve.evidence_reader import DEFAULT, ranked_entries
    from memcli.store.lines import Library

    root = work / name
    subprocess.run([sys.executable, "-m", "memcli", "--store", str(root), "ingest", str(LOCOMO / f"{name}.json"),
                    "--no-auto", "-q"], check=True)
    memory = Memory(str(root))
    memory.embed()
    store, index = memory.store, memory.index
    engine = KVEngine(model, block_store(store, memory.settings))
    prompt = ComposedPrompt(engine)
    count = lambda text: len(engine.tokenize(text))  # noqa: E731
    conversation = load_conversations([LOCOMO / f"{name}.json"], name)[0]
    asked = [qa for qa in conversation.questions if qa.get("category") in (1, 2, 3, 4)]
    step = max(1, len(asked) // questions)
    rows = []
    for qa in asked[::step][:questions]:
        question = qa["question"]
        library = Library(store)
        chosen = fill(Units(library).ranked(ranked_entries(library, index, question, tuning=DEFAULT)), budget, count)
        if not chosen:
            continue
        placed = [Unit(u.label, engine.tokenize(u.text)) for u in reversed(chosen)]
        engine.composed_blocks(prompt.prefix, placed)  # made beforehand: a composed ask places them
        tail = prompt.tail(question)
        evidence = [e for u in chosen for e in u.evidence]
        row = {"conversation": name, "category": qa["category"], "question_tokens": count(question),
               "memory_tokens": sum(len(u.tokens) for u in placed), "units": len(placed)}
        for way in ("full", "composed"):
            engine.reset()
            before = engine.stats.prefilled
            begin = time.perf_counter()
            if way == "full":
                engine.load_chain([prompt.prefix])
                engine.prefill([t for u in placed for t in u.tokens] + tail)
            else:
                engine.compose(prompt.prefix, placed)
                engine.prefill(tail)
            logits = engine.last_logits()
            ttft = time.perf_counter() - begin
            prefilled = engine.stats.prefilled - before
            result = AskResult(question=question, mode="evidence", answer=None, evidence=evidence, read=evidence)
            composed_answer(engine, engine.context_tokens(), store, index, question, result, CallStats())
            row[way] = {"first": int(logits.argmax()), "margin": round(margin(logits), 4), "ttft_s": round(ttft, 4),
                        "prefilled": prefilled, "answer": result.answer,
                        "f1": round(category_f1(result.answer, qa.get("answer"), qa["category"]), 4)}
        row["top1"] = row["full"]["first"] == row["composed"]["first"]
        row["same_answer"] = row["full"]["answer"] == row["composed"]["answer"]
        rows.append(row)
        print(f"  {name}: {len(rows)} questions", file=sys.stderr, end="\r")
    memory.close()
    return rows


def at(rows: list[dict], check: float) -> dict:
    """What ``kv.compose_check`` = ``check`` gives on ``rows``."""
    fixed = [r["composed"]["margin"] < check for r in rows]
    prefilled = [r["composed"]["prefilled"] + (r["full"]["prefilled"] if f else 0) for r, f in zip(rows, fixed)]
    ttft = [r["composed"]["ttft_s"] + (r["full"]["ttft_s"] if f else 0.0) for r, f in zip(rows, fixed)]
    full_ttft = statistics.mean(r["full"]["ttft_s"] for r in rows)
    return {"check": check, "questions": len(rows),
            "top1_agrees": round(statistics.mean(f or r["top1"] for r, f in zip(rows, fixed)), 4),
            "answer_agrees": round(statistics.mean(f or r["same_answer"] for r, f in zip(rows, fixed)), 4),
            "f1": round(statistics.mean(r["full" if f else "composed"]["f1"] for r, f in zip(rows, fixed)), 4),
            "repaired": round(statistics.mean(fixed), 4), "prefilled_median": statistics.median(prefilled),
            "question_tokens_median": statistics.median(r["question_tokens"] for r in rows),
            "ttft_mean_s": round(statistics.mean(ttft), 4), "full_ttft_mean_s": round(full_ttft, 4),
            "sooner": round(full_ttft / statistics.mean(ttft), 2)}


def choose(rows: list[dict], grid) -> float:
    scored = [at(rows, c) for c in grid]
    enough = [s for s in scored if s["top1_agrees"] >= TARGET]
    if enough:
        return min(s["check"] for s in enough)
    return max(scored, key=lambda s: (s["top1_agrees"], -s["check"]))["check"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--questions", type=int, default=20, help="questions a conversation")
    parser.add_argument("--budget", type=int, default=600, help="tokens of units (600: a generated answer's; 2000: the extractive answer's)")
    parser.add_argument("--grid", type=float, nargs="+", default=list(GRID))
    parser.add_argument("--records", type=Path, help="score these rows (written by --json) without the model")
    parser.add_argument("--json", type=Path, help="write the rows and the report here")
    args = parser.parse_args()
    if args.records:
        rows = json.loads(args.records.read_text())["rows"]
    else:
        from memcli.config import Settings
        from memcli.llm import open_model

        work = Path(tempfile.mkdtemp(prefix="memcli-compose-check-"))
        os.environ.update({"XDG_CACHE_HOME": str(work / "cache"), "XDG_CONFIG_HOME": str(work / "config"),
                           "MEMCLI_AUTO_CONSOLIDATE": "false"})
        model = open_model(Settings.load(None), kv_sequences=2)
        rows = [row for name in CONVERSATIONS for row in measure(model, work, name, args.questions, args.budget)]
    by = {name: [r for r in rows if r["conversation"] == name] for name in CONVERSATIONS}
    report = {"grid": [at(rows, c) for c in args.grid], "folds": []}
    for tune, test in (CONVERSATIONS, CONVERSATIONS[::-1]):
        check = choose(by[tune], args.grid)
        report["folds"].append({"chosen_on": tune, "check": check, "test": at(by[test], check)})
    report["both"] = choose(rows, args.grid)
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "report": report}, indent=1) + "\n")
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
