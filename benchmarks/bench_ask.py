#!/usr/bin/env python3
"""`memcli ask` on the LoCoMo development conversations, every mode and memory kind side by side.

    python benchmarks/bench_ask.py [--questions 8] [--budget 2000] [--answer-context TOKENS] [--out-dir DIR] [--json]

A driver around `memcli eval locomo` (one place for the scoring): for both
development conversations it runs

- evidence-only on every question, for raw and consolidated (`--no-llm`) memory;
- ask, no-agent, bm25-turns, full-context and oracle on a sample of
  ``--questions`` questions per conversation (round-robin over the four
  categories; the default model needs tens of seconds per question on 2 cores),
  ask and no-agent for both memory kinds,

and prints one table: all-evidence recall by category, answer F1, evidence
tokens, tokens the answer read, prompt, prefilled and restored (KV blocks)
tokens, and seconds per question. JSONL records are kept
in ``--out-dir`` (a rerun with the same directory resumes).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LOCOMO = REPO.parent / "shared" / "data" / "locomo"
FILES = [str(LOCOMO / "conv-26.json"), str(LOCOMO / "conv-30.json")]
CATEGORIES = {"1": "multi-hop", "2": "temporal", "3": "open-domain", "4": "single-hop"}


def runs(questions: int) -> list[tuple[str, str, list[str]]]:
    """(mode, memory, extra arguments) in the order they run."""
    sampled = ["--questions", str(questions)]
    out = [("evidence-only", memory, []) for memory in ("raw", "consolidated")]
    out += [("oracle", "raw", sampled), ("bm25-turns", "raw", sampled), ("full-context", "raw", sampled)]
    out += [(mode, memory, sampled) for memory in ("raw", "consolidated") for mode in ("no-agent", "ask")]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--questions", type=int, default=8, help="sampled questions per conversation (model modes)")
    parser.add_argument("--budget", type=int, default=2000)
    parser.add_argument("--answer-context", type=int, default=None,
                        help="evidence tokens the answer reads (default: ask.answer_context; 0: all)")
    parser.add_argument("--out-dir", type=Path, default=None)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    out_dir = args.out_dir or Path(tempfile.mkdtemp(prefix="memcli-bench-ask-"))
    out_dir.mkdir(parents=True, exist_ok=True)
    rows = []
    for mode, memory, extra in runs(args.questions):
        records = out_dir / f"{mode}-{memory}.jsonl"
        command = [sys.executable, "-m", "memcli", "eval", "locomo", *FILES, "--mode", mode, "--memory", memory,
                   "--budget", str(args.budget), "--out", str(records), "--resume", "--json", *extra]
        if args.answer_context is not None:
            command += ["--answer-context", str(args.answer_context)]
        if memory == "consolidated":
            command.append("--no-llm")
        print(f"running {mode} on {memory} memory ...", file=sys.stderr, flush=True)
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"{' '.join(command)} failed:\n{done.stderr}")
        rows.append(json.loads(done.stdout))
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    categories = " | ".join(f"{v} ({k})" for k, v in CATEGORIES.items())
    print(f"| mode | memory | questions | all-evidence recall | {categories} | F1 | evidence tokens | read tokens"
          " | prompt tokens | prefilled tokens | restored tokens | s per question |")
    print("|---|---|---|---|" + "---|" * len(CATEGORIES) + "---|---|---|---|---|---|---|")
    for row in rows:
        s = row["summary"]

        def pct(key: str) -> str:
            cell = s.get(key)
            return "-" if not cell else f"{cell['recall_all']:.1%}"

        f1 = s["all"]["f1"]
        print(f"| {row['mode']} | {row['memory']} | {s['all']['questions']} | {pct('all')} | "
              + " | ".join(pct(k) for k in CATEGORIES)
              + f" | {'-' if f1 is None else f'{f1:.3f}'} | {s['all']['evidence_tokens']:.0f} | "
              f"{s['all'].get('read_tokens') or 0:.0f} | "
              f"{s['all']['prompt_tokens']:.0f} | {s['all']['prefilled_tokens']:.0f} | "
              f"{s['all'].get('restored_tokens') or 0:.0f} | {s['all']['latency_s']:.2f} |")
    print(f"records: {out_dir}", file=sys.stderr)


if __name__ == "__main__":
    main()
