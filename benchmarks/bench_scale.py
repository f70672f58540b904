#!/usr/bin/env python3
"""memcli as memory grows: ingest, vectors, question latency, size and recall at 10^3 .. 10^5 entries.

    python benchmarks/bench_scale.py [--sizes 1000 10000 100000] [--questions 60] [--cli 8] [--mcp 8] [--keep DIR]
    python benchmarks/bench_scale.py --measure DIR/store-N DIR/cache-N [--grow 6]

One store grows in steps. It first holds LoCoMo conv-26 (the target: its questions are asked at every
size), then copies of both development conversations are added one at a time, each as a new
conversation: its two speakers renamed (made-up names, in the signatures and the text, every prefix
of at least three letters of a name too, so "Mel" goes with "Melanie"), its references prefixed with
the copy's number so they stay unique, its sessions moved forward in time. Each copy goes in as
``memcli ingest`` then ``consolidate`` (deterministic) do it, through the Python API. At each size:

- ingest and consolidation, seconds per 1,000 entries, over the copies added since the last size;
- vectors: the background job's work done in the foreground (``Memory.compute_vectors``), seconds
  and texts embedded since the last size (texts already embedded, such as a sentence no name was
  changed in, are not embedded again: the figure is a floor for a library of all-distinct texts);
- questions (evidence-only, 2,000 tokens, vectors ready): p50/p95 in process over the target's
  questions; ``memcli ask --evidence-only --json`` as a process and MCP ``memory_search`` over stdio
  (the official client), medians;
- peak RSS of the process asking, store and cache size on disk;
- all-evidence recall @2,000 of the target's questions (categories 1-4) among everything else.

A 10^6 projection is printed from the last two sizes (a straight line through them).
Prints one JSON report; progress goes to standard error.
"""

from __future__ import annotations

import argparse
import copy
import itertools
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

os.environ.setdefault("MEMCLI_VECTORS", "inline")
os.environ.setdefault("MEMCLI_AUTO_CONSOLIDATE", "false")

REPO = Path(__file__).resolve().parent.parent
LOCOMO = REPO.parent / "shared" / "data" / "locomo"
TARGET = "conv-26"
SYLLABLES = ["ba", "do", "ki", "lu", "ma", "ne", "ri", "so", "ta", "vi", "ze", "ho", "ja", "pe", "qu", "wy"]


def made_up_name(number: int) -> str:
    """A name no conversation uses: three syllables from the number's base-16 digits, capitalised."""
    digits = [(number >> shift) & 15 for shift in (8, 4, 0)]
    return "".join(SYLLABLES[d] for d in digits).capitalize() + "x"


def speakers(conversation: dict) -> list[str]:
    return [conversation[key] for key in ("speaker_a", "speaker_b") if conversation.get(key)]


def renamed(name: str, conversation: dict, number: int) -> dict:
    """A copy of a LoCoMo conversation as another sample: speakers renamed, references and id prefixed,
    sessions a year per copy later (copy numbers stay below 7,000: years stay below 9,999)."""
    conv = {key: copy.deepcopy(value) for key, value in conversation.items()
            if key in ("speaker_a", "speaker_b") or re.fullmatch(r"session_\d+(_date_time)?", key)}
    names = {old: made_up_name(number * 2 + at) for at, old in enumerate(speakers(conv))}
    forms = {old[:n]: new for old, new in names.items() for n in range(3, len(old) + 1)}
    pattern = re.compile(r"\b(" + "|".join(sorted(map(re.escape, forms), key=len, reverse=True)) + r")\b")

    def swap(text: str) -> str:
        return pattern.sub(lambda m: forms[m.group(1)], text)

    for key in ("speaker_a", "speaker_b"):
        if key in conv:
            conv[key] = names[conv[key]]
    for key, value in list(conv.items()):
        if re.fullmatch(r"session_\d+", key) and isinstance(value, list):
            for turn in value:
                turn["speaker"] = names.get(turn.get("speaker"), turn.get("speaker"))
                turn["text"] = swap(turn.get("text", ""))
                if turn.get("blip_caption"):
                    turn["blip_caption"] = swap(turn["blip_caption"])
                turn["dia_id"] = f"x{number}-{turn.get('dia_id')}"
        elif key.endswith("_date_time") and isinstance(value, str):
            conv[key] = shifted(value, number)
    return {"sample_id": f"{name}-x{number}", "conversation": conv}


def shifted(when: str, years: int) -> str:
    from memcli.ingest.turns import parse_time

    moment = datetime.fromisoformat(parse_time(when, "bench", "date")) + timedelta(days=365 * years)
    return moment.strftime("%Y-%m-%d %H:%M")


def folder_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def ingest(memory, path: Path, sample: str | None) -> tuple[int, float, float]:
    begin = time.perf_counter()
    added = memory.ingest(path, format="locomo", sample=sample, consolidate=False).added
    middle = time.perf_counter()
    memory.consolidate(llm=False)
    return added, middle - begin, time.perf_counter() - middle


def recall_and_latency(memory, questions: list[dict]) -> dict:
    from memcli.eval.metrics import evidence_recall, gold_dialog_ids

    took, recalled = [], []
    for qa in questions:
        begin = time.perf_counter()
        asked = memory.ask(qa["question"], reader="evidence-only", budget=2000)
        took.append(time.perf_counter() - begin)
        refs = {r for e in asked.evidence for r in e.refs}
        recalled.append(evidence_recall(gold_dialog_ids(qa.get("evidence", [])), refs)[0])
    return {"p50_ms": round(statistics.median(took) * 1000, 1), "p95_ms": round(percentile(took, 0.95) * 1000, 1),
            "recall_at_2000": round(sum(recalled) / len(recalled), 3)}


def cli_latency(store: Path, questions: list[str]) -> float:
    took = []
    for question in questions:
        begin = time.perf_counter()
        subprocess.run([sys.executable, "-m", "memcli", "--store", str(store), "ask", question, "--evidence-only",
                        "--json"], check=True, capture_output=True)
        took.append(time.perf_counter() - begin)
    return round(statistics.median(took) * 1000, 1)


def mcp_latency(store: Path, questions: list[str]) -> float:
    import anyio
    from mcp.client import Client
    from mcp.client.stdio import StdioServerParameters

    async def measure() -> float:
        server = StdioServerParameters(command=sys.executable, args=["-m", "memcli", "--store", str(store), "mcp"],
                                       env=dict(os.environ))
        took = []
        async with Client(server) as client:
            await client.call_tool("memory_search", {"question": "warm-up"})
            for question in questions:
                begin = time.perf_counter()
                result = await client.call_tool("memory_search", {"question": question})
                took.append(time.perf_counter() - begin)
                assert not result.is_error, result.content
        return round(statistics.median(took) * 1000, 1)

    return anyio.run(measure)


def keep_copy(store: Path, work: Path, size: int) -> None:
    """A copy of the store and its cache as ``store-N`` and ``cache-N``, the cache's folder renamed for the
    copy's path (a store's cache folder is named by its path), so --measure finds its index and vectors."""
    from memcli.paths import store_cache_dir

    copy_store, copy_cache = work / f"store-{size}", work / f"cache-{size}"
    subprocess.run(["cp", "-a", str(store), str(copy_store)], check=True)
    subprocess.run(["cp", "-a", str(work / "cache"), str(copy_cache)], check=True)
    own = store_cache_dir(store.resolve())
    moved = copy_cache / own.relative_to(work / "cache")
    moved.rename(moved.parent / store_cache_dir(copy_store.resolve()).name)


def measure(memory, work: Path, asked: list[dict], args) -> dict:
    """Question latency (in process, CLI, MCP), recall, peak RSS and sizes of the store as it is."""
    words = [qa["question"] for qa in asked]
    row = recall_and_latency(memory, asked)
    store = memory.store.root
    if args.cli:
        row["cli_median_ms"] = cli_latency(store, words[:args.cli])
    if args.mcp:
        row["mcp_median_ms"] = mcp_latency(store, words[:args.mcp])
    row["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    row["store_mb"] = round(folder_bytes(store) / 2**20, 1)
    row["cache_mb"] = round(folder_bytes(Path(os.environ["XDG_CACHE_HOME"])) / 2**20, 1)
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    parser.add_argument("--questions", type=int, default=60, help="target questions asked in process (0: all)")
    parser.add_argument("--cli", type=int, default=8, help="questions asked as a process (0: none)")
    parser.add_argument("--mcp", type=int, default=8, help="questions asked over MCP (0: none)")
    parser.add_argument("--keep", type=Path, help="build the store here and keep it, with a copy at each size "
                        "(default: a temporary folder)")
    parser.add_argument("--measure", type=Path, nargs=2, metavar=("STORE", "CACHE"),
                        help="only measure a store kept by --keep (store-N and cache-N), as the code is now")
    parser.add_argument("--grow", type=int, default=0, metavar="N",
                        help="with --measure: then add N more copies, timing their ingest and consolidation "
                        "(the store is changed)")
    args = parser.parse_args()

    from memcli.eval.locomo import load_conversations
    from memcli.memory import Memory

    samples = {name: json.loads((LOCOMO / f"{name}.json").read_text()) for name in ("conv-26", "conv-30")}
    target = load_conversations([LOCOMO / f"{TARGET}.json"], TARGET)[0]
    answerable = [qa for qa in target.questions if qa.get("category") in (1, 2, 3, 4)]
    step = max(1, len(answerable) // args.questions) if args.questions else 1
    asked = answerable[::step][:args.questions or None]

    if args.measure:
        os.environ["XDG_CACHE_HOME"] = str(args.measure[1].resolve())
        memory = Memory(store=args.measure[0])
        begin = time.perf_counter()
        memory.compute_vectors()
        row = {"entries": sum(1 for d in memory.store.all_ids() for _ in memory.store.load(d).doc.entries()),
               "documents": len(memory.store.doc_ids()), "index_and_vectors_s": round(time.perf_counter() - begin, 1),
               **measure(memory, args.measure[0], asked, args)}
        if args.grow:
            samples = {name: json.loads((LOCOMO / f"{name}.json").read_text()) for name in ("conv-26", "conv-30")}
            folder = Path(tempfile.mkdtemp(prefix="memcli-grow-"))
            added = took_in = took_con = 0.0
            print(json.dumps(row), file=sys.stderr)
            grown, number = 0, 999
            while grown < args.grow:
                number += 1  # numbers the build does not reach; those an earlier --grow added are skipped
                name = ("conv-30", "conv-26")[number % 2]
                path = folder / f"{name}-x{number}.json"
                path.write_text(json.dumps(renamed(name, samples[name], number)))
                n, t_in, t_con = ingest(memory, path, None)
                if not n:
                    continue
                grown, added, took_in, took_con = grown + 1, added + n, took_in + t_in, took_con + t_con
                print(f"grow: copy {number} ({name}) ingest {t_in:.2f} s, consolidate {t_con:.2f} s", file=sys.stderr)
            row.update(grown_entries=int(added), grow_ingest_s_per_1000=round(took_in / added * 1000, 2),
                       grow_consolidate_s_per_1000=round(took_con / added * 1000, 2))
        print(json.dumps(row, indent=1))
        return 0
    work = Path(args.keep or tempfile.mkdtemp(prefix="memcli-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    os.environ["XDG_CACHE_HOME"] = str(work / "cache")
    store = work / "store"
    Memory.init(store=store)
    memory = Memory(store=store)
    copies = work / "copies"
    copies.mkdir(exist_ok=True)

    report: dict = {"sizes": [], "questions": len(asked)}
    entries, ingest_s, consolidate_s, added_since = 0, 0.0, 0.0, 0
    added, took_in, took_con = ingest(memory, LOCOMO / f"{TARGET}.json", TARGET)
    entries += added
    memory.compute_vectors()
    report["target_alone"] = {"entries": entries, **recall_and_latency(memory, asked)}
    print(f"alone: {report['target_alone']}", file=sys.stderr)
    sources = itertools.cycle(["conv-30", "conv-26"])
    number = 0
    for size in sorted(args.sizes):
        while entries < size:
            number += 1
            name = next(sources)
            path = copies / f"{name}-x{number}.json"
            path.write_text(json.dumps(renamed(name, samples[name], number)))
            added, took_in, took_con = ingest(memory, path, None)
            path.unlink()
            entries += added
            added_since += added
            ingest_s += took_in
            consolidate_s += took_con
            print(f"{entries} entries: copy {number} ({name}) ingest {took_in:.2f} s, consolidate {took_con:.2f} s",
                  file=sys.stderr)
        begin = time.perf_counter()
        vectors = memory.compute_vectors()
        vector_s = time.perf_counter() - begin
        row = {"entries": entries, "documents": len(memory.store.doc_ids()),
               "ingest_s_per_1000": round(ingest_s / added_since * 1000, 2) if added_since else None,
               "consolidate_s_per_1000": round(consolidate_s / added_since * 1000, 2) if added_since else None,
               "vectors_s": round(vector_s, 1), "texts_embedded": vectors.get("embedded"),
               **measure(memory, work, asked, args)}
        report["sizes"].append(row)
        if args.keep:  # kept for --measure: the same store measured again by other code
            keep_copy(store, work, size)
        print(json.dumps(row), file=sys.stderr)
        ingest_s, consolidate_s, added_since = 0.0, 0.0, 0
    if len(report["sizes"]) >= 2:
        low, high = report["sizes"][-2], report["sizes"][-1]
        scale = (1_000_000 - high["entries"]) / (high["entries"] - low["entries"])
        report["projected_1e6"] = {key: round(high[key] + (high[key] - low[key]) * scale, 1)
                                   for key in ("p50_ms", "p95_ms", "peak_rss_mb", "store_mb", "cache_mb")}
    memory.close()
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
