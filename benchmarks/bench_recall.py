#!/usr/bin/env python3
"""Evidence recall of `memcli ask --evidence-only` on the LoCoMo development conversations.

    python benchmarks/bench_recall.py [--budget 2000] [--memory raw|consolidated] [--json]

For each conversation: a fresh store, ingest (no automatic consolidation),
optionally `memcli consolidate --no-llm`, then every non-adversarial question
through the evidence policy. A question counts as recalled when every gold
evidence dialog id is among the refs of the returned evidence (all-evidence
recall), reported by category; tokens and time per question too.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LOCOMO = REPO.parent / "shared" / "data" / "locomo"
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}


def gold_ids(evidence: list) -> set[str]:
    """Dialog ids of a question's evidence; malformed entries ("D8:6; D9:17", spaces) tolerated."""
    return {m for item in evidence for m in re.findall(r"D\d+:\d+", str(item))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--budget", type=int, default=2000)
    parser.add_argument("--memory", choices=["raw", "consolidated"], default="raw")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="memcli-bench-recall-"))
    os.environ.update({"XDG_CACHE_HOME": str(work / "cache"), "XDG_CONFIG_HOME": str(work / "config"),
                       "MEMCLI_AUTO_CONSOLIDATE": "false"})
    sys.path.insert(0, str(REPO))
    from memcli.config import Settings
    from memcli.index import LibraryIndex
    from memcli.paths import Resolved
    from memcli.retrieve.policy import evidence_only
    from memcli.store import Store

    total, hit, partial = Counter(), Counter(), Counter()
    tokens, seconds = [], []
    try:
        for name in ("conv-26.json", "conv-30.json"):
            root = work / name
            memcli = [sys.executable, "-m", "memcli", "--store", str(root)]
            subprocess.run([*memcli, "ingest", str(LOCOMO / name), "--no-auto", "-q"], check=True,
                           capture_output=True)
            if args.memory == "consolidated":
                subprocess.run([*memcli, "consolidate", "--no-llm", "-q"], check=True, capture_output=True)
            store = Store.open(Resolved(root, "bench"))
            index = LibraryIndex(store, Settings.load(root).search_partition_tokens)
            for qa in json.loads((LOCOMO / name).read_text())["qa"]:
                category = qa.get("category")
                if category not in CATEGORIES:
                    continue
                gold = gold_ids(qa["evidence"])
                start = time.perf_counter()
                found = evidence_only(store, index, qa["question"], budget=args.budget)
                seconds.append(time.perf_counter() - start)
                refs = {r for item in found.evidence for r in item.refs}
                tokens.append(sum(item.tokens for item in found.evidence))
                for key in (category, "all"):
                    total[key] += 1
                    hit[key] += gold <= refs
                    partial[key] += len(gold & refs) / len(gold) if gold else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result = {
        "budget": args.budget, "memory": args.memory,
        "all_evidence_recall": {str(k): round(hit[k] / total[k], 4) for k in total},
        "partial_recall": {str(k): round(partial[k] / total[k], 4) for k in total},
        "questions": {str(k): total[k] for k in total},
        "evidence_tokens_mean": round(statistics.mean(tokens), 1),
        "seconds_per_question_median": round(statistics.median(seconds), 4),
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"| memory | budget | all | {' | '.join(f'{CATEGORIES[c]} ({c})' for c in CATEGORIES)} |")
    print("|---|---|---|" + "---|" * len(CATEGORIES))
    cells = [f"{hit[c] / total[c]:.1%} ({hit[c]}/{total[c]})" for c in CATEGORIES]
    print(f"| {args.memory} | {args.budget} | {hit['all'] / total['all']:.1%} ({hit['all']}/{total['all']}) | "
          + " | ".join(cells) + " |")
    print(f"evidence tokens per question (mean): {result['evidence_tokens_mean']}; "
          f"retrieval time per question (median): {result['seconds_per_question_median'] * 1000:.0f} ms")


if __name__ == "__main__":
    main()
