#!/usr/bin/env python3
"""`memcli ask` on the LoCoMo development conversations: evidence recall, answer F1, tokens and time.

    python benchmarks/bench_ask.py [--budget 2000] [--memory raw,consolidated]
                                   [--modes evidence-only,no-agent,agent] [--questions 8] [--json]

For each conversation and memory kind: a fresh store, ingest (no automatic
consolidation), for "consolidated" also `memcli consolidate --no-llm`. Then:

- evidence-only: every non-adversarial question, no model;
- no-agent and agent: the first ``--questions`` questions of each
  conversation, taken round-robin over the four categories (the default model
  needs 30-60 s per question on 2 cores), answered by the configured model;
- gold: the same sampled questions answered from exactly their gold evidence
  turns (the model's ceiling, measured in the same run).

All-evidence recall: every gold dialog id is among the refs of the returned
evidence. F1 is LoCoMo's token F1 with its per-category rules
(memcli.eval.metrics).
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
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LOCOMO = REPO.parent / "shared" / "data" / "locomo"
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}


def sample(questions: list[dict], n: int) -> list[dict]:
    """The first ``n`` questions taken round-robin over categories 1-4, in file order within each."""
    by_cat = {c: [q for q in questions if q.get("category") == c] for c in CATEGORIES}
    out: list[dict] = []
    while len(out) < n and any(by_cat.values()):
        for c in CATEGORIES:
            if by_cat[c] and len(out) < n:
                out.append(by_cat[c].pop(0))
    return out


class Tally:
    """Per-category accumulators for one (memory, mode) row."""

    def __init__(self):
        self.rows: dict[str, list[dict]] = defaultdict(list)

    def add(self, category: int, **values) -> None:
        for key in (category, "all"):
            self.rows[str(key)].append(values)

    def mean(self, key: str, field: str) -> float | None:
        values = [r[field] for r in self.rows.get(key, []) if r.get(field) is not None]
        return statistics.mean(values) if values else None

    def summary(self) -> dict:
        out = {}
        for key, rows in self.rows.items():
            out[key] = {"questions": len(rows), **{f: round(self.mean(key, f), 4) for f in rows[0]
                                                      if self.mean(key, f) is not None}}
        return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--budget", type=int, default=2000)
    parser.add_argument("--memory", default="raw,consolidated")
    parser.add_argument("--modes", default="evidence-only,no-agent,agent")
    parser.add_argument("--questions", type=int, default=8, help="sampled questions per conversation (model modes)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    memories = args.memory.split(",")
    modes = args.modes.split(",")
    work = Path(tempfile.mkdtemp(prefix="memcli-bench-ask-"))
    os.environ.update({"XDG_CACHE_HOME": str(work / "cache"), "XDG_CONFIG_HOME": str(work / "config"),
                       "MEMCLI_AUTO_CONSOLIDATE": "false"})
    sys.path.insert(0, str(REPO))
    from memcli.config import Settings
    from memcli.eval.metrics import category_f1, evidence_recall, gold_dialog_ids
    from memcli.index import LibraryIndex
    from memcli.llm.base import CallStats
    from memcli.paths import Resolved
    from memcli.retrieve.agent import Agent
    from memcli.retrieve.answer import answer
    from memcli.retrieve.evidence import Library, assemble
    from memcli.retrieve.hybrid import hybrid
    from memcli.retrieve.policy import evidence_only
    from memcli.store import Store

    tallies: dict[tuple[str, str], Tally] = defaultdict(Tally)
    stores: dict[tuple[str, str], tuple] = {}
    model = None
    try:
        for name in ("conv-26.json", "conv-30.json"):
            for memory in memories:
                root = work / f"{name}-{memory}"
                memcli = [sys.executable, "-m", "memcli", "--store", str(root)]
                subprocess.run([*memcli, "ingest", str(LOCOMO / name), "--no-auto", "-q"], check=True,
                               capture_output=True)
                if memory == "consolidated":
                    subprocess.run([*memcli, "consolidate", "--no-llm", "-q"], check=True, capture_output=True)
                store = Store.open(Resolved(root, "bench"))
                stores[name, memory] = (store, LibraryIndex(store, Settings.load(root).search_partition_tokens))
        questions = {name: [q for q in json.loads((LOCOMO / name).read_text())["qa"] if q.get("category") in CATEGORIES]
                     for name in ("conv-26.json", "conv-30.json")}

        if "evidence-only" in modes:  # every question, no model (token counts by memcli's estimate)
            for (name, memory), (store, index) in stores.items():
                for qa in questions[name]:
                    start = time.perf_counter()
                    found = evidence_only(store, index, qa["question"], budget=args.budget)
                    seconds = time.perf_counter() - start
                    all_in, part = evidence_recall(gold_dialog_ids(qa["evidence"]),
                                                   {r for e in found.evidence for r in e.refs})
                    tallies[memory, "evidence-only"].add(qa["category"], recall=float(all_in), partial=part,
                                                         evidence_tokens=sum(e.tokens for e in found.evidence),
                                                         seconds=seconds)

        model_modes = [m for m in modes if m in ("no-agent", "agent")]
        if model_modes:
            from memcli.llm import open_model

            model = open_model(Settings.load(None))
            for name in ("conv-26.json", "conv-30.json"):
                picked = sample(questions[name], args.questions)
                gold_store, _ = stores[name, memories[0]]
                for qa in picked:  # the ceiling: exactly the gold turns
                    library = Library(gold_store)
                    wanted = gold_dialog_ids(qa["evidence"])
                    lines = [(doc_id, n) for doc_id in gold_store.all_ids()
                             for n, e in library.doc(doc_id).entries.items() if set((e.ref or "").split(";")) & wanted]
                    stats = CallStats()
                    start = time.perf_counter()
                    reply = answer(model, qa["question"], assemble(library, lines, 10 ** 6), stats)
                    tallies["gold", "gold"].add(qa["category"], f1=category_f1(reply, qa.get("answer"), qa["category"]),
                                                prompt=stats.prompt_tokens, seconds=time.perf_counter() - start)
                for memory in memories:
                    store, index = stores[name, memory]
                    for mode in model_modes:
                        for qa in picked:
                            stats = CallStats()
                            start = time.perf_counter()
                            if mode == "agent":
                                found = Agent(model, store, index, budget=args.budget).run(qa["question"], stats)
                                rounds = len(found.rounds)
                            else:
                                found = hybrid(model, store, index, qa["question"], budget=args.budget, stats=stats)
                                rounds = 0
                            evidence = found.evidence
                            reply = answer(model, qa["question"], evidence, stats)
                            all_in, part = evidence_recall(gold_dialog_ids(qa["evidence"]),
                                                           {r for e in evidence for r in e.refs})
                            tallies[memory, mode].add(
                                qa["category"], recall=float(all_in), partial=part,
                                f1=category_f1(reply, qa.get("answer"), qa["category"]),
                                evidence_tokens=sum(e.tokens for e in evidence), prompt=stats.prompt_tokens,
                                prefilled=stats.prefilled_tokens, generated=stats.completion_tokens,
                                rounds=rounds, seconds=time.perf_counter() - start)
                            print(f"{name} {memory} {mode}: {qa['question'][:60]!r} -> {reply!r:.80} "
                                  f"({time.perf_counter() - start:.0f} s)", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    result = {"budget": args.budget, "questions_per_conversation": args.questions,
              "model": model.describe() if model else None,
              "rows": {f"{memory}/{mode}": tally.summary() for (memory, mode), tally in tallies.items()}}
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"| memory | mode | questions | all-evidence recall | {' | '.join(CATEGORIES.values())} "
          f"| F1 | evidence tokens | prompt / prefilled / generated tokens | rounds | s per question |")
    print("|---|---|---|---|" + "---|" * len(CATEGORIES) + "---|---|---|---|---|")
    for (memory, mode), tally in tallies.items():
        s = tally.summary()

        def cell(key: str, field: str, pct: bool = True) -> str:
            value = s.get(key, {}).get(field)
            return "-" if value is None else f"{value:.1%}" if pct else f"{value:.3f}"

        tokens = " / ".join("-" if s["all"].get(f) is None else f"{s['all'][f]:.0f}"
                            for f in ("prompt", "prefilled", "generated"))
        print(f"| {memory} | {mode} | {s['all']['questions']} | {cell('all', 'recall')} | "
              + " | ".join(cell(str(c), "recall") for c in CATEGORIES)
              + f" | {cell('all', 'f1', False)} | {cell('all', 'evidence_tokens', False).split('.')[0]} | {tokens} | "
              f"{cell('all', 'rounds', False)} | {s['all']['seconds']:.2f} |")


if __name__ == "__main__":
    main()
