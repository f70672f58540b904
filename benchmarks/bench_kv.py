#!/usr/bin/env python3
"""KV blocks against re-prefilling: chat turns, and ask on composed memory (ask --kv-compose).

    python benchmarks/bench_kv.py [--sizes 512,2048,6000] [--composed 15] [--recompute 0,32,64,128]
                                  [--alternate 10] [--json]

For each memory-context size (tokens of memory in chat's context, from a
store holding LoCoMo conv-26 consolidated with --no-llm), with the default
model, in one process and one run:

- cold turn: empty block store, so the memory is prefilled, then the turn;
- warm turn: the same memory restored from the blocks the cold turn saved
  (the median of 5 new sessions);
- resumed session: a session with one earlier exchange, continued in a fresh
  context (memory and history restored) against the same with no blocks;
- with ``--alternate N``: N pairs of a cold turn (blocks emptied first) and
  a warm turn, each pair's ratio, the median and the minimum.

Time to first token counts everything from an empty context to the first
generated token (memory restore or prefill included). Ratios are cold / warm;
the warm turn's start (its memory restored from blocks) is printed too.

Then ``ask --kv-compose`` on both development conversations, each ingested raw
(no consolidation: its memory units are CURRENT's day windows), every unit's
block made first:

- unit selection: all-evidence recall at 2,000 tokens of the units chosen by
  the text ranking, by latent selection (the model's retrieval heads, found
  first: their time is printed), by the two fused, and in a random order
  (chance), over every question of categories 1-4;
- composed against a full prefill, on ``--composed`` questions per
  conversation: the text-ranked units within 2,000 tokens, placed as ask
  places them, for each ``--recompute`` value; the full prefill restores
  the instructions and prefills the same units and question (what ask
  re-reading its evidence costs). Top-1 next token and 32 greedy tokens
  compared; prefilled tokens and time to first token of each.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("MEMCLI_VECTORS", "inline")  # questions rank with every vector, not a job's progress

REPO = Path(__file__).resolve().parent.parent
LOCOMO = REPO.parent / "shared" / "data" / "locomo"
QUESTION = "What did we talk about last time?"
FOLLOW_UP = "Tell me more about that."
WARM_TURNS = 5


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="512,2048,6000")
    parser.add_argument("--composed", type=int, default=15,
                        help="questions per development conversation for ask --kv-compose against a full prefill")
    parser.add_argument("--recompute", default="0,32,64,128", help="kv.compose_recompute values compared")
    parser.add_argument("--alternate", type=int, default=0, metavar="N",
                        help="N alternating cold / warm turn pairs at each size (every cold turn starts from an "
                             "empty block store): each pair's ratio, their median and minimum")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="memcli-bench-kv-"))
    os.environ.update({"XDG_CACHE_HOME": str(work / "cache"), "XDG_CONFIG_HOME": str(work / "config"),
                       "MEMCLI_AUTO_CONSOLIDATE": "false"})
    sys.path.insert(0, str(REPO))
    from memcli.config import Settings
    from memcli.kv import block_store
    from memcli.kv.chat_session import ChatSession
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
        for size in [int(s) for s in args.sizes.split(",") if s.strip()]:
            blocks = block_store(store, cfg)

            def session(name: str) -> tuple[ChatSession, float]:
                engine = KVEngine(model, blocks)
                engine.reset()
                talk = ChatSession(engine, store, work / "sessions", name, size, max_tokens=8,
                                   units_dir=work / "units")
                begin = time.perf_counter()
                talk.start()
                return talk, time.perf_counter() - begin

            def turn(name: str, message: str) -> dict:
                talk, start_s = session(name)
                _, stats = talk.turn(message)
                return {"ttft_s": start_s + stats.ttft_s, "start_s": start_s, "prefilled": talk.start_stats["prefilled_tokens"]
                        + stats.prefilled_tokens, "restored": talk.start_stats["restored_tokens"],
                        "memory_tokens": talk.memory_end, "message_tokens": len(talk.engine.tokenize(message))}

            shutil.rmtree(blocks.root, ignore_errors=True)
            shutil.rmtree(work / "sessions", ignore_errors=True)
            shutil.rmtree(work / "units", ignore_errors=True)
            cold = turn(f"cold-{size}", QUESTION)
            warms = sorted((turn(f"warm-{size}-{i}", QUESTION) for i in range(WARM_TURNS)), key=lambda t: t["ttft_s"])
            warm = warms[len(warms) // 2]  # the median of new sessions over the same restored memory
            resumed_warm = turn(f"cold-{size}", FOLLOW_UP)  # the cold session's second turn, all restored
            shutil.rmtree(blocks.root, ignore_errors=True)  # the same resumption with nothing saved
            resumed_cold = turn(f"warm-{size}-0", FOLLOW_UP)
            rows.append({"size": size, "cold": cold, "warm": warm, "resumed_warm": resumed_warm,
                         "resumed_cold": resumed_cold,
                         "turn_ttft_ratio": round(cold["ttft_s"] / warm["ttft_s"], 1),
                         "resume_ttft_ratio": round(resumed_cold["ttft_s"] / resumed_warm["ttft_s"], 1)})
            if args.alternate:
                rows[-1]["alternating"] = alternating(turn, blocks.root, size, args.alternate)
            print(f"size {size}: done", file=sys.stderr, flush=True)
        composed = composed_ask_rows(model, work, args.composed, [int(r) for r in args.recompute.split(",")]) \
            if args.composed else None
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        print(json.dumps({"turns": rows, "composed": composed}, indent=2, default=str))
        return
    if rows:
        print("| memory tokens | cold turn: prefilled / TTFT | warm turn: prefilled (restored) / TTFT | TTFT ratio "
              "| resumed session cold: prefilled / TTFT | resumed warm: prefilled (restored) / TTFT | ratio |")
        print("|---|---|---|---|---|---|---|")
        for r in rows:
            c, w, rc, rw = r["cold"], r["warm"], r["resumed_cold"], r["resumed_warm"]
            print(f"| {c['memory_tokens']} | {c['prefilled']} / {c['ttft_s']:.2f} s | {w['prefilled']} ({w['restored']}) / "
                  f"{w['ttft_s'] * 1000:.0f} ms | {r['turn_ttft_ratio']}x | {rc['prefilled']} / {rc['ttft_s']:.2f} s | "
                  f"{rw['prefilled']} ({rw['restored']}) / {rw['ttft_s'] * 1000:.0f} ms | {r['resume_ttft_ratio']}x |")
        print(f"message: {rows[0]['warm']['message_tokens']} tokens; warm turn's start (memory restored): "
              + ", ".join(f"{r['warm']['start_s'] * 1000:.1f} ms at {r['warm']['memory_tokens']}" for r in rows))
    for r in rows:
        if r.get("alternating"):
            print_alternating(r["size"], r["alternating"])
    if composed:
        print_composed(composed)


def alternating(turn, blocks_root: Path, size: int, pairs: int) -> list[dict]:
    """``pairs`` cold turns (the block store emptied first) each followed by a warm turn in a new session
    over the blocks that cold turn saved: side by side, so both see the same machine."""
    out = []
    for i in range(pairs):
        shutil.rmtree(blocks_root, ignore_errors=True)
        cold = turn(f"alt-cold-{size}-{i}", QUESTION)
        warm = turn(f"alt-warm-{size}-{i}", QUESTION)
        out.append({"cold_s": cold["ttft_s"], "warm_s": warm["ttft_s"], "warm_start_s": warm["start_s"],
                    "warm_prefilled": warm["prefilled"], "warm_restored": warm["restored"],
                    "ratio": cold["ttft_s"] / warm["ttft_s"]})
        print(f"pair {i + 1}/{pairs}: {out[-1]['ratio']:.1f}x", file=sys.stderr, flush=True)
    return out


def print_alternating(size: int, pairs: list[dict]) -> None:
    import statistics

    ratios = [p["ratio"] for p in pairs]
    print()
    print(f"alternating cold / warm turns at {size} memory tokens ({len(pairs)} pairs):")
    print("| pair | cold TTFT | warm TTFT (of it: memory restored) | warm prefilled (restored) | ratio |")
    print("|---|---|---|---|---|")
    for i, p in enumerate(pairs, 1):
        print(f"| {i} | {p['cold_s']:.2f} s | {p['warm_s'] * 1000:.0f} ms ({p['warm_start_s'] * 1000:.0f} ms) "
              f"| {p['warm_prefilled']} ({p['warm_restored']}) | {p['ratio']:.1f}x |")
    print(f"median {statistics.median(ratios):.1f}x, minimum {min(ratios):.1f}x; "
          f"{sum(r >= 100 for r in ratios)} of {len(ratios)} at 100x or more")


def print_composed(c: dict) -> None:
    import statistics

    median = statistics.median
    print()
    for b in c["blocks"]:
        print(f"{b['conversation']}: {b['units']} memory units, {b['tokens']} tokens, blocks made in {b['seconds']} s")
    print()
    print(f"retrieval heads found in {c['heads_s']} s")
    print("| units chosen by | all-evidence recall at 2,000 tokens | ranking time per question (median) |")
    print("|---|---|---|")
    for way, hits in c["recall"].items():
        took = "-" if way == "random" else f"{median(c['selection_s'][way]) * 1000:.0f} ms"
        print(f"| {way} | {sum(hits) / len(hits):.1%} ({len(hits)} questions) | {took} |")
    rows = c["agreement"]
    print()
    print(f"{len(rows)} questions, {median(r['memory_tokens'] for r in rows):.0f} memory tokens "
          f"({median(r['units'] for r in rows):.0f} units) each (median); full prefill TTFT median "
          f"{median(r['full_ttft_s'] for r in rows):.2f} s")
    print()
    print("| recompute | top-1 agrees | 32 greedy tokens agree | prefilled tokens (median, max) | prefilled - question "
          "tokens (max) | TTFT (median) | TTFT ratio full / composed (median) |")
    print("|---|---|---|---|---|---|---|")
    for r in rows[0]["composed"]:
        got = [row["composed"][r] for row in rows]
        ratios = [row["full_ttft_s"] / row["composed"][r]["ttft_s"] for row in rows]
        over = max(row["composed"][r]["prefilled"] - row["question_tokens"] for row in rows)
        print(f"| {r} | {sum(g['top1'] for g in got) / len(got):.0%} | {sum(g['greedy32'] for g in got) / len(got):.0%} "
              f"| {median(g['prefilled'] for g in got):.0f}, {max(g['prefilled'] for g in got)} | {over} "
              f"| {median(g['ttft_s'] for g in got) * 1000:.0f} ms | {median(ratios):.1f}x |")
    # where the first token disagrees: how sure the full prefill was, and which of its choices composed took
    cut = median(row["margin"] for row in rows)
    print()
    print(f"full prefill's first-token margin (top-1 minus top-2 probability): median {cut:.3f}")
    print("| recompute | top-1 agrees, margin above the median | at or below it | disagreeing: composed took the "
          "full prefill's 2nd choice |")
    print("|---|---|---|---|")
    for r in rows[0]["composed"]:
        high = [row["composed"][r]["top1"] for row in rows if row["margin"] > cut]
        low = [row["composed"][r]["top1"] for row in rows if row["margin"] <= cut]
        off = [row["composed"][r]["full_rank"] for row in rows if not row["composed"][r]["top1"]]
        print(f"| {r} | {sum(high)}/{len(high)} | {sum(low)}/{len(low)} | {sum(x == 1 for x in off)}/{len(off)} |")


def composed_ask_rows(model, work: Path, per_conversation: int, recompute: list[int]) -> dict:
    """``ask --kv-compose`` on both development conversations (raw memory: everything in CURRENT, so the
    units are its day windows): unit selection's evidence recall, composed against a full prefill of
    the same tokens, prefilled tokens and time to first token."""
    from memcli import Memory
    from memcli.eval.metrics import evidence_recall, gold_dialog_ids
    from memcli.kv import block_store
    from memcli.kv.composed_ask import ComposedPrompt, fuse, latent_ranking
    from memcli.kv.engine import KVEngine, Unit
    from memcli.kv.latent import retrieval_heads
    from memcli.kv.units import Units, fill
    from memcli.retrieve.evidence_reader import DEFAULT, ranked_entries
    from memcli.store.lines import Library

    rows: dict = {"recall": {}, "agreement": [], "selection_s": {}}
    for name in ("conv-26", "conv-30"):
        root = work / f"ask-{name}"
        subprocess.run([sys.executable, "-m", "memcli", "--store", str(root), "ingest", str(LOCOMO / f"{name}.json"),
                        "--no-auto", "-q"], check=True)
        memory = Memory(str(root))
        memory.embed()
        store, index = memory.store, memory.index
        engine = KVEngine(model, block_store(store, memory.settings))
        prompt = ComposedPrompt(engine)
        count = lambda text: len(engine.tokenize(text))  # noqa: E731
        every = Units(Library(store)).every()
        begin = time.perf_counter()
        engine.composed_blocks(prompt.prefix, [Unit(u.label, engine.tokenize(u.text)) for u in every])
        rows.setdefault("blocks", []).append({"conversation": name, "units": len(every),
                                              "tokens": sum(count(u.text) for u in every),
                                              "seconds": round(time.perf_counter() - begin, 1)})
        if "heads_s" not in rows:
            begin = time.perf_counter()
            retrieval_heads(engine, prompt.prefix)
            rows["heads_s"] = round(time.perf_counter() - begin, 1)
        latent_ranking(engine, prompt, every, "warm up")  # every block's summary made
        questions = [q for q in json.loads((LOCOMO / f"{name}.json").read_text())["qa"]
                     if q.get("category") in (1, 2, 3, 4)]
        ways = ("text", "latent", "fused", "random")
        shuffle = random.Random(0).shuffle
        for qa in questions:
            gold = gold_dialog_ids(qa.get("evidence", []))
            library = Library(store)
            units = Units(library)
            timed = {}
            begin = time.perf_counter()
            text = units.ranked(ranked_entries(library, index, qa["question"], tuning=DEFAULT))
            timed["text"] = time.perf_counter() - begin
            begin = time.perf_counter()
            latent = latent_ranking(engine, prompt, units.every(), qa["question"])
            timed["latent"] = time.perf_counter() - begin
            begin = time.perf_counter()
            fused = fuse(text, latent)
            timed["fused"] = timed["text"] + timed["latent"] + time.perf_counter() - begin
            anyhow = list(every)
            shuffle(anyhow)
            ranked = {"text": text, "latent": latent, "fused": fused, "random": anyhow}
            for way in ways:
                chosen = fill(ranked[way], 2000, count)
                refs = {r for u in chosen for e in u.evidence for r in e.refs}
                full, _ = evidence_recall(gold, refs)
                rows["recall"].setdefault(way, []).append(full)
                rows["selection_s"].setdefault(way, []).append(timed.get(way, 0.0))
        step = max(1, len(questions) // per_conversation)
        for qa in questions[::step][:per_conversation]:
            chosen = list(reversed(fill(text_units(store, index, qa["question"]), 2000, count)))
            if not chosen:
                continue
            units = [Unit(u.label, engine.tokenize(u.text)) for u in chosen]
            tail = prompt.tail(qa["question"])
            engine.reset()
            begin = time.perf_counter()
            engine.load_chain([prompt.prefix])  # ask restores its instructions, then reads the evidence
            engine.prefill([t for u in units for t in u.tokens] + tail)
            logits = engine.last_logits()
            full_first = int(logits.argmax())
            full_ttft = time.perf_counter() - begin
            probs = softmax(logits)
            second = sorted(probs)[-2]
            full = greedy(engine, 32)
            row = {"conversation": name, "question_tokens": len(engine.tokenize(qa["question"])),
                   "tail_tokens": len(tail), "memory_tokens": sum(len(u.tokens) for u in units),
                   "units": len(units), "full_ttft_s": full_ttft, "composed": {},
                   "margin": float(probs[full_first] - second)}
            for r in recompute:
                engine.reset()
                before = engine.stats.prefilled
                begin = time.perf_counter()
                engine.compose(prompt.prefix, units, recompute=r)
                engine.prefill(tail)
                first = int(engine.last_logits().argmax())
                ttft = time.perf_counter() - begin
                prefilled = engine.stats.prefilled - before
                out = greedy(engine, 32)
                row["composed"][r] = {"top1": first == full_first, "greedy32": out == full, "ttft_s": ttft,
                                      "prefilled": prefilled, "full_rank": int((probs > probs[first]).sum())}
            rows["agreement"].append(row)
            print(f"{name}: {len(rows['agreement'])} composed questions", file=sys.stderr, flush=True)
        memory.close()
    return rows


def text_units(store, index, question: str):
    from memcli.kv.units import Units
    from memcli.retrieve.evidence_reader import DEFAULT, ranked_entries
    from memcli.store.lines import Library

    library = Library(store)
    return Units(library).ranked(ranked_entries(library, index, question, tuning=DEFAULT))


def softmax(logits):
    import numpy as np

    e = np.exp(np.asarray(logits, dtype=np.float64) - float(np.max(logits)))
    return e / e.sum()


def greedy(engine, n: int) -> list[int]:
    out = []
    for _ in range(n):
        token = int(engine.last_logits().argmax())
        out.append(token)
        engine.prefill([token])
    return out


if __name__ == "__main__":
    main()
