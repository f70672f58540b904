#!/usr/bin/env python3
"""KV blocks against re-prefilling: time to first token and prefilled tokens of a chat turn.

    python benchmarks/bench_kv.py [--sizes 512,2048,6000] [--json]

For each memory-context size (tokens of memory in chat's context, from a
store holding LoCoMo conv-26 consolidated with --no-llm), with the default
model, in one process and one run:

- cold turn: empty block store, so the memory is prefilled, then the turn;
- warm turn: the same memory restored from the blocks the cold turn saved;
- resumed session: a session with one earlier exchange, continued in a fresh
  context (memory and history restored) against the same with no blocks.

Time to first token counts everything from an empty context to the first
generated token (memory restore or prefill included). Ratios are cold / warm.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LOCOMO = REPO.parent / "shared" / "data" / "locomo"
QUESTION = "What did we talk about last time?"
FOLLOW_UP = "Tell me more about that."


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="512,2048,6000")
    parser.add_argument("--agreement", type=int, default=20, help="dev questions for composed-mode agreement")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="memcli-bench-kv-"))
    os.environ.update({"XDG_CACHE_HOME": str(work / "cache"), "XDG_CONFIG_HOME": str(work / "config"),
                       "MEMCLI_AUTO_CONSOLIDATE": "false"})
    sys.path.insert(0, str(REPO))
    from memcli.config import Settings
    from memcli.kv import block_store
    from memcli.kv.chat import ChatSession
    from memcli.kv.engine import KVEngine
    from memcli.llm import open_model
    from memcli.paths import Resolved
    from memcli.store import Store

    root = work / "store"
    memcli = [sys.executable, "-m", "memcli", "--store", str(root)]
    subprocess.run([*memcli, "ingest", str(LOCOMO / "conv-26.json"), "--no-auto", "-q"], check=True)
    subprocess.run([*memcli, "consolidate", "--no-llm", "-q"], check=True, stdout=subprocess.DEVNULL)
    store = Store.open(Resolved(root, "bench"))
    cfg = Settings.load(root)
    model = open_model(cfg, kv_sequences=2)
    rows = []
    try:
        for size in [int(s) for s in args.sizes.split(",")]:
            blocks = block_store(store, cfg)

            def session(name: str) -> tuple[ChatSession, float]:
                engine = KVEngine(model, blocks)
                engine.reset()
                talk = ChatSession(engine, store, work / "sessions", name, size, max_tokens=8)
                begin = time.perf_counter()
                talk.start()
                return talk, time.perf_counter() - begin

            def turn(name: str, message: str) -> dict:
                talk, start_s = session(name)
                _, stats = talk.turn(message)
                return {"ttft_s": start_s + stats.ttft_s, "prefilled": talk.start_stats["prefilled_tokens"]
                        + stats.prefilled_tokens, "restored": talk.start_stats["restored_tokens"],
                        "memory_tokens": talk.memory_end, "message_tokens": len(talk.engine.tokenize(message))}

            shutil.rmtree(blocks.root, ignore_errors=True)
            shutil.rmtree(work / "sessions", ignore_errors=True)
            cold = turn(f"cold-{size}", QUESTION)
            warm = turn(f"warm-{size}", QUESTION)
            resumed_warm = turn(f"cold-{size}", FOLLOW_UP)  # the cold session's second turn, all restored
            shutil.rmtree(blocks.root, ignore_errors=True)  # the same resumption with nothing saved
            resumed_cold = turn(f"warm-{size}", FOLLOW_UP)
            rows.append({"size": size, "cold": cold, "warm": warm, "resumed_warm": resumed_warm,
                         "resumed_cold": resumed_cold,
                         "turn_ttft_ratio": round(cold["ttft_s"] / warm["ttft_s"], 1),
                         "resume_ttft_ratio": round(resumed_cold["ttft_s"] / resumed_warm["ttft_s"], 1)})
            print(f"size {size}: done", file=sys.stderr, flush=True)
        agreement = composed_agreement(store, model, blocks, args.agreement) if args.agreement else None
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        print(json.dumps({"turns": rows, "composed": agreement}, indent=2))
        return
    print("| memory tokens | cold turn: prefilled / TTFT | warm turn: prefilled (restored) / TTFT | TTFT ratio "
          "| resumed session cold: prefilled / TTFT | resumed warm: prefilled (restored) / TTFT | ratio |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        c, w, rc, rw = r["cold"], r["warm"], r["resumed_cold"], r["resumed_warm"]
        print(f"| {c['memory_tokens']} | {c['prefilled']} / {c['ttft_s']:.2f} s | {w['prefilled']} ({w['restored']}) / "
              f"{w['ttft_s'] * 1000:.0f} ms | {r['turn_ttft_ratio']}x | {rc['prefilled']} / {rc['ttft_s']:.2f} s | "
              f"{rw['prefilled']} ({rw['restored']}) / {rw['ttft_s'] * 1000:.0f} ms | {r['resume_ttft_ratio']}x |")
    print(f"message: {rows[0]['warm']['message_tokens']} tokens")
    if agreement:
        print(f"composed mode on {agreement['questions']} dev questions ({agreement['docs_mean']:.1f} documents, "
              f"{agreement['tokens_mean']:.0f} tokens of memory each, on average): top-1 next token agrees with a "
              f"full prefill in {agreement['top1']:.0%}, 32 greedy tokens identical in {agreement['greedy32']:.0%}; "
              f"composing took {agreement['compose_s_median'] * 1000:.0f} ms (median) against "
              f"{agreement['prefill_s_median']:.2f} s to prefill")


def composed_agreement(store, model, blocks, n: int) -> dict:
    """Composed documents against a full prefill of the same tokens, on dev questions (conv-26)."""
    import statistics

    from memcli.index import LibraryIndex
    from memcli.kv.context import document_text
    from memcli.kv.engine import KVEngine, Unit
    from memcli.retrieve.answer import ANSWER_SYSTEM
    from memcli.retrieve.policy import evidence_only

    questions = [q for q in json.loads((LOCOMO / "conv-26.json").read_text())["qa"] if q.get("category") in (1, 2, 3, 4)]
    step = max(1, len(questions) // n)
    index = LibraryIndex(store, 160)
    engine = KVEngine(model, blocks)
    header = Unit("header", engine.tokenize(ANSWER_SYSTEM + "\n"))
    results = []
    for qa in questions[::step][:n]:
        docs: list[str] = []
        for item in evidence_only(store, index, qa["question"], budget=2000).evidence:
            if item.doc not in docs and item.doc != "CURRENT":
                docs.append(item.doc)
        units, used = [], 0
        for doc_id in docs:
            label, text = document_text(store, doc_id)
            tokens = engine.tokenize(text)
            if used + len(tokens) > 3000:
                continue
            units.append(Unit(label, tokens))
            used += len(tokens)
            if len(units) == 3:
                break
        tail = engine.tokenize(f"\nQuestion: {qa['question']}\nAnswer:")
        engine.reset()
        engine.compose(header, units)  # makes any missing document blocks (after the header alone)
        engine.reset()
        begin = time.perf_counter()
        engine.compose(header, list(reversed(units)))  # another order: every block moves
        compose_s = time.perf_counter() - begin
        engine.prefill(tail)
        composed = greedy(engine, 32)
        engine.reset()
        begin = time.perf_counter()
        engine.prefill(header.tokens + [t for u in reversed(units) for t in u.tokens])
        prefill_s = time.perf_counter() - begin
        engine.prefill(tail)
        full = greedy(engine, 32)
        results.append({"top1": composed[0] == full[0], "greedy32": composed == full, "docs": len(units),
                        "tokens": used, "compose_s": compose_s, "prefill_s": prefill_s})
    return {"questions": len(results), "top1": statistics.mean(r["top1"] for r in results),
            "greedy32": statistics.mean(r["greedy32"] for r in results),
            "docs_mean": statistics.mean(r["docs"] for r in results),
            "tokens_mean": statistics.mean(r["tokens"] for r in results),
            "compose_s_median": statistics.median(r["compose_s"] for r in results),
            "prefill_s_median": statistics.median(r["prefill_s"] for r in results)}


def greedy(engine, n: int) -> list[int]:
    out = []
    for _ in range(n):
        token = int(engine.last_logits().argmax())
        out.append(token)
        engine.prefill([token])
    return out


if __name__ == "__main__":
    main()
