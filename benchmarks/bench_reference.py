#!/usr/bin/env python3
"""The capable paths on a model that can exercise them: readers and consolidation on the reference model.

    MEMCLI_MODEL=$(../shared/tools/reference-model) python benchmarks/bench_reference.py \
        [--questions N] [--sessions K] [--skip readers,consolidation] [--json OUT]

The reference model (Qwen2.5-Coder-1.5B-Instruct, ``../shared/tools/reference-model``) is a
benchmark model, never a dependency. Two parts, both on the LoCoMo development pair:

- **readers**: ``memcli eval locomo`` (raw memory, default budget and answer context) with the agentic
  reader against the evidence reader, each answering by ``generate`` (the model writes the answer,
  checked against the evidence) and the evidence reader also by ``extract`` (a span the model scores):
  F1 on categories 1-4, "I don't know" on category 5, seconds per question. ``--questions N`` takes
  the first N per conversation, round-robin over the categories.
- **consolidation**: the first ``--sessions`` sessions of each conversation ingested into a fresh
  store and consolidated by the model (``consolidate --llm``) and deterministically: seconds, entries
  kept (the conservation guard's count), documents, and the evidence-only all-evidence recall of that
  part's questions at 2,000 tokens on each consolidated memory.

Run it alone (it measures time).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("MEMCLI_VECTORS", "inline")  # questions rank with every vector, not a job's progress

REPO = Path(__file__).resolve().parent.parent
LOCOMO = REPO.parent / "shared" / "data" / "locomo"
FILES = [LOCOMO / "conv-26.json", LOCOMO / "conv-30.json"]
sys.path.insert(0, str(REPO))


def readers(model, questions: int | None, skip: set[str] = frozenset()) -> list[dict]:
    from memcli.eval.locomo import evaluate

    rows = []
    for mode, answer in (("evidence", "extract"), ("evidence", "generate"), ("agent", "generate")):
        if mode in skip:
            continue
        start = time.perf_counter()
        result = evaluate(FILES, mode=mode, categories={1, 2, 3, 4, 5}, questions=questions, model=model,
                          settings={"ask.answer": answer})
        seconds = time.perf_counter() - start
        summary = result.summary
        scored = [summary[k] for k in ("1", "2", "3", "4") if k in summary]
        n = sum(s["questions"] for s in scored)
        rows.append({"reader": mode, "answer": answer, "questions": summary["all"]["questions"],
                     "f1_1to4": round(sum(s["f1"] * s["questions"] for s in scored) / n, 4) if n else None,
                     "idk_5": summary.get("5", {}).get("abstained"),
                     "idk_1to4": round(sum((s["abstained"] or 0) * s["questions"] for s in scored) / n, 4) if n else None,
                     "recall_all": summary["all"]["recall_all"], "seconds_per_question": round(
                         seconds / max(1, summary["all"]["questions"]), 2), "by_category": summary})
        print(json.dumps(rows[-1]["reader"]), rows[-1]["answer"], rows[-1]["f1_1to4"], rows[-1]["idk_5"],
              rows[-1]["seconds_per_question"], file=sys.stderr)
    return rows


def part_of(path: Path, sessions: int, into: Path) -> tuple[Path, set[str]]:
    """A copy of a LoCoMo conversation with its first ``sessions`` sessions (in a scratch folder), and
    the dialog ids they hold."""
    data = json.loads(path.read_text())
    conv = data.get("conversation", data)
    kept = {f"session_{i}" for i in range(1, sessions + 1)}
    for key in [k for k in conv if k.startswith("session_") and not k.endswith(("date_time", "summary",
                                                                                    "observation"))]:
        if key not in kept:
            conv.pop(key)
    ids = {t["dia_id"] for k in kept if k in conv for t in conv[k]}
    out = into / path.name
    out.write_text(json.dumps(data))
    return out, ids


def consolidation(model, sessions: int) -> list[dict]:
    from memcli.eval.metrics import evidence_recall, gold_dialog_ids
    from memcli.memory import Memory

    rows = []
    scratch = Path(tempfile.mkdtemp(prefix="memcli-bench-reference-"))
    try:
        for path in FILES:
            part, ids = part_of(path, sessions, scratch)
            data = json.loads(part.read_text())
            questions = [q for q in data["qa"] if q.get("category") in (1, 2, 3, 4)
                         and gold_dialog_ids(q.get("evidence", [])) and gold_dialog_ids(q["evidence"]) <= ids]
            for llm in (True, False):
                work = scratch / f"{path.stem}-{llm}"
                memory = Memory(work / "store", create=True, model=model, cache_dir=work / "cache")
                ingested = memory.ingest(part, format="locomo", consolidate=False, time="2000-01-01T00:00")
                start = time.perf_counter()
                done = memory.consolidate(llm=llm)
                seconds = time.perf_counter() - start
                recalled = 0
                for qa in questions:
                    found = memory.ask(qa["question"], reader="evidence-only", budget=2000)
                    recalled += evidence_recall(gold_dialog_ids(qa["evidence"]),
                                                {r for e in found.evidence for r in e.refs})[0]
                entries = sum(d["entries"] for d in memory.docs().to_dict()["docs"])  # CURRENT included
                rows.append({"conversation": path.stem, "sessions": sessions, "llm": llm,
                             "entries_ingested": ingested.added, "entries_kept": entries,
                             "documents": len(done.documents), "seconds": round(seconds, 1),
                             "model_calls": done.calls.get("calls"), "fallbacks": done.calls.get("fallbacks"),
                             "questions": len(questions),
                             "recall_all": round(recalled / len(questions), 4) if questions else None})
                print(json.dumps(rows[-1]), file=sys.stderr)
                memory.close()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--questions", type=int, default=None, help="questions per conversation (default: all)")
    parser.add_argument("--sessions", type=int, default=3, help="sessions per conversation to consolidate")
    parser.add_argument("--skip", default="", help="comma-separated parts to skip: readers, consolidation, "
                                                   "agent (the agent reader alone)")
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args()
    if not os.environ.get("MEMCLI_MODEL"):
        sys.exit("set MEMCLI_MODEL to the reference GGUF (../shared/tools/reference-model prints its path)")
    from memcli import llm
    from memcli.config import Settings

    model = llm.open_model(Settings.load(None, None), kv_sequences=2)
    report = {"model": model.describe()}
    skip = set(args.skip.split(","))
    if "readers" not in skip:
        report["readers"] = readers(model, args.questions, skip)
    if "consolidation" not in skip:
        report["consolidation"] = consolidation(model, args.sessions)
    text = json.dumps(report, indent=1)
    print(text)
    if args.json:
        args.json.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
