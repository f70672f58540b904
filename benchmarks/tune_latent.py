#!/usr/bin/env python3
"""Choose latent selection's constants by cross-validation over the LoCoMo development pair.

    python benchmarks/tune_latent.py [--budget 2000] [--json OUT]

With the default model: the model's retrieval heads are found on memcli's
calibration memory (no development data; memcli.kv.latent.find_heads). Both
conversations are ingested raw (their memory units are CURRENT's days) in
temporary stores and every unit's block is made. Per question (categories
1-4), the score each of the 8 best retrieval heads gives every unit, and the
text ranking's units, are computed once; then all-evidence recall at
``--budget`` tokens is measured for every candidate:

- latent alone: the number of heads (1-8) and how their scores combine (mean
  of the raw scores, or of scores standardized across the units);
- fused with the text ranking: reciprocal-rank constant k and latent weight.

Cross-validation: the candidate with the best recall on one conversation is
chosen and scored on the other, both ways; the printout gives both
directions, every candidate's recall on each conversation, and the candidate
best on the two together (what memcli ships: memcli.kv.latent.HEADS,
memcli.kv.composed_ask.FUSION_K and LATENT_WEIGHT).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("MEMCLI_VECTORS", "inline")  # questions rank with every vector, not a job's progress

REPO = Path(__file__).resolve().parent.parent
LOCOMO = REPO.parent / "shared" / "data" / "locomo"
CONVERSATIONS = ("conv-26", "conv-30")
MAX_HEADS = 8
LATENT = [{"heads": n, "combine": c} for n in (1, 2, 3, 4, 6, 8) for c in ("mean", "standardized")]
FUSED = [{"k": k, "weight": w} for k, w in itertools.product((1, 3, 10, 30), (0.25, 0.5, 1.0, 2.0))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--budget", type=int, default=2000)
    parser.add_argument("--json", metavar="OUT", help="also write every figure as JSON to OUT")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="memcli-tune-latent-"))
    os.environ.update({"XDG_CACHE_HOME": str(work / "cache"), "XDG_CONFIG_HOME": str(work / "config"),
                       "MEMCLI_AUTO_CONSOLIDATE": "false"})
    sys.path.insert(0, str(REPO))
    import numpy as np

    from memcli import Memory
    from memcli.eval.metrics import evidence_recall, gold_dialog_ids
    from memcli.kv import block_store
    from memcli.kv.composed_ask import FUSION_K, LATENT_WEIGHT, ComposedPrompt, fuse, unit_head_scores
    from memcli.kv.engine import KVEngine
    from memcli.kv.latent import HEADS, retrieval_heads
    from memcli.kv.units import Units, fill
    from memcli.llm import open_model
    from memcli.retrieve.evidence_reader import DEFAULT, ranked_entries
    from memcli.store.lines import Library

    model = None
    data: dict = {}
    report: dict = {"budget": args.budget}
    for name in CONVERSATIONS:
        root = work / name
        subprocess.run([sys.executable, "-m", "memcli", "--store", str(root), "ingest",
                        str(LOCOMO / f"{name}.json"), "--no-auto", "-q"], check=True)
        memory = Memory(str(root))
        memory.embed()
        if model is None:
            model = open_model(memory.settings, kv_sequences=2)
        engine = KVEngine(model, block_store(memory.store, memory.settings))
        prompt = ComposedPrompt(engine)
        begin = time.perf_counter()
        heads = retrieval_heads(engine, prompt.prefix)
        report.setdefault("calibration_s", round(time.perf_counter() - begin, 1))
        report["heads"] = [[*h, q] for h, q in zip(heads.heads[:MAX_HEADS], heads.quality[:MAX_HEADS])]
        every = Units(Library(memory.store)).every()
        unit_head_scores(engine, prompt, every, "warm up", MAX_HEADS)  # every block and summary made
        rows = []
        qas = [q for q in json.loads((LOCOMO / f"{name}.json").read_text())["qa"] if q.get("category") in (1, 2, 3, 4)]
        for qa in qas:
            library = Library(memory.store)
            text = Units(library).ranked(ranked_entries(library, memory.index, qa["question"], tuning=DEFAULT))
            units, table = unit_head_scores(engine, prompt, every, qa["question"], MAX_HEADS)
            rows.append({"gold": gold_dialog_ids(qa.get("evidence", [])), "text": text, "units": units,
                         "table": table})
        count = {u.text: len(engine.tokenize(u.text)) for u in every}
        data[name] = (rows, count)
        memory.close()
        print(f"{name}: {len(rows)} questions scored", file=sys.stderr, flush=True)

    def recall(name: str, rank) -> float:
        rows, count = data[name]
        hits = []
        for row in rows:
            picked = fill(rank(row), args.budget, count.__getitem__)
            refs = {r for u in picked for e in u.evidence for r in e.refs}
            hits.append(evidence_recall(row["gold"], refs)[0])
        return sum(hits) / len(hits)

    def latent(row, heads: int, combine: str):
        table = row["table"][:, :heads]
        if combine == "standardized":
            table = (table - table.mean(axis=0)) / np.where(table.std(axis=0) > 0, table.std(axis=0), 1.0)
        score = table.mean(axis=1)
        return [row["units"][i] for i in sorted(range(len(row["units"])), key=lambda i: -score[i])]

    report["text"] = {name: recall(name, lambda row: row["text"]) for name in CONVERSATIONS}
    report["latent"] = [{**c, **{name: recall(name, lambda row, c=c: latent(row, **c)) for name in CONVERSATIONS}}
                        for c in LATENT]
    shipped = {"heads": HEADS, "combine": "mean"}
    report["fused"] = [{**c, **{name: recall(name, lambda row, c=c: fuse(row["text"], latent(row, **shipped), **c))
                                for name in CONVERSATIONS}} for c in FUSED]
    report["shipped"] = {"latent": shipped, "fused": {"k": FUSION_K, "weight": LATENT_WEIGHT}}
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))
    show(report)


def cross_validate(candidates: list[dict], keys: list[str]) -> list[str]:
    lines = []
    for chose, other in (CONVERSATIONS, tuple(reversed(CONVERSATIONS))):
        best = max(candidates, key=lambda c: c[chose])  # the first of equals: the simpler (fewer heads, smaller k)
        lines.append(f"chosen on {chose}: {', '.join(f'{k}={best[k]}' for k in keys)} -> {chose} {best[chose]:.1%}, "
                     f"{other} {best[other]:.1%}")
    both = max(candidates, key=lambda c: sum(c[n] for n in CONVERSATIONS))
    lines.append(f"best on the two together (what ships): {', '.join(f'{k}={both[k]}' for k in keys)} -> "
                 + ", ".join(f"{n} {both[n]:.1%}" for n in CONVERSATIONS))
    return lines


def show(report: dict) -> None:
    print(f"retrieval heads (layer, head, calibration MRR), found in {report['calibration_s']} s: "
          + ", ".join(f"({layer}, {head}) {q:.3f}" for layer, head, q in report["heads"]))
    print(f"\nall-evidence recall at {report['budget']} tokens; text ranking: "
          + ", ".join(f"{name} {report['text'][name]:.1%}" for name in CONVERSATIONS))
    print("\n| heads | combine | " + " | ".join(CONVERSATIONS) + " |\n|---|---|---|---|")
    for c in report["latent"]:
        print(f"| {c['heads']} | {c['combine']} | " + " | ".join(f"{c[n]:.1%}" for n in CONVERSATIONS) + " |")
    print("\n".join(["", "latent alone, cross-validated:"] + cross_validate(report["latent"], ["heads", "combine"])))
    print("\n| k | latent weight | " + " | ".join(CONVERSATIONS) + " |\n|---|---|---|---|")
    for c in report["fused"]:
        print(f"| {c['k']} | {c['weight']} | " + " | ".join(f"{c[n]:.1%}" for n in CONVERSATIONS) + " |")
    print("\n".join(["", "fused with the text ranking, cross-validated:"] + cross_validate(report["fused"], ["k", "weight"])))
    print(f"\nshipped: {report['shipped']}")


if __name__ == "__main__":
    main()
