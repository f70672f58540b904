#!/usr/bin/env python3
"""The line that answers: the token-level stage (memcli/retrieve/aligned.py) and the extractive answer,
tuned on one development conversation and reported on the other, both directions.

    python benchmarks/tune_answers.py --ask-only --records R.jsonl    # the model's scores, once
    python benchmarks/bench_answers.py --records R.jsonl [--json OUT]
    python benchmarks/bench_answers.py --time 40 [--cli 6]              # seconds a question, as shipped

The records hold, per question of categories 1-5 of the development pair (raw memory), what ``ask``
reads (the evidence reader at ask.budget, its best ask.answer_context tokens, best-ranked first, each
line marked gold when it is one of the question's evidence turns), every candidate span of it with the
default model's log-probability, and the subject and support rules' lists. This script adds each line's
alignment with the question (MiniLM token vectors, late interaction; computed here) and scores every
tuning of the grid without the model:

- gold entry first: the share of questions of categories 1-4 with a gold line read whose first line,
  in the order the answer ranks them, is gold (the readers' order, and the aligned order);
- answer F1 on categories 1-4 ("I don't know" scores 0), and "I don't know" on category 5;
- for each tuning whether it uses the model's scores at all, and how many entries' candidates it
  scores (``entries``; the model then reads only those, which the records approximate by the scores
  it gave reading all 600 tokens: ``--check`` runs the real ``ask`` to measure what that changes).

The rule for a tuning on one conversation: the most category-5 "I don't know" among the tunings whose
categories 1-4 F1 is within 0.01 of the best F1 of any tuning that never abstains; ties to the higher
F1. Chosen on each conversation, scored on the other (how well the rule carries to a conversation it did
not see); what ships is the rule's choice on both conversations together.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

from memcli.eval.metrics import category_f1
from memcli.retrieve.answer import UNKNOWN

GRID = {
    "model": [True, False],  # the model's log-probabilities in the score, or not (no model call)
    "entries": [0, 1, 2, 3],  # candidates of this many best-aligned entries (0: all read)
    "rerank": [0.0, 0.05, 1.0],  # the aligned order: alignment less this times log(1 + readers' rank)
    "top": [0, 6, 10],  # lines aligned: this many of the readers' best (0: all read); the rest follow them
    "align": [0.0, 2.0, 4.0, 8.0, 16.0],
    "overlap": [0.0, 2.0, 4.0, 8.0],
    "rank": [0.0, 1.0, 2.0],
    "echo": [0.0],  # measured before and not adopted (docs/benchmarks.md); kept as an axis to widen
    "length": [0.5, 1.0],
}
ABSTAIN = {
    "floor": [0.0, 0.25, 0.3, 0.35, 0.4, 0.5],
    "margin": [math.inf, 2.0, 0.0],
    "subject": [False, True],
    "support": [False, True],
}
RERANK_BIG = 1.0  # "rerank" 1.0 stands for the readers' own order (alignment does not reorder)


def line_text(line: list) -> str:
    """A record's line as :func:`memcli.semantic.vectors.entry_text` gives it: speaker, text."""
    _doc, _n, speaker, _time, text, _gold = line
    text = " ".join(text.split())
    return f"{speaker}: {text}" if speaker else text


class Questions:
    """The records as arrays: rows are questions, columns candidates (or lines)."""

    def __init__(self, rows: list[dict], aligner):
        from tune_answers import read_rules  # here: --time also runs on code older than tune_answers needs

        from memcli.semantic.alignment import align, best_matches

        self.rows = rows
        n = len(rows)
        width = max([1] + [len(r["rules"]["00"][0]) for r in rows])
        lines = max([1] + [len(r["lines"]) for r in rows])
        shape = (n, width)
        self.lp, self.tokens = np.full(shape, -np.inf), np.ones(shape)
        self.overlap, self.echo, self.f1 = np.zeros(shape), np.zeros(shape), np.zeros(shape)
        self.about, self.valid = np.zeros(shape, bool), np.zeros(shape, bool)
        self.line = np.zeros(shape, int)  # the candidate's line (index into the row's lines, readers' order)
        self.unknown = np.full((n, 2), np.nan)
        self.aligned = np.full((n, lines), -np.inf)  # each line's alignment with the question
        self.gold = np.zeros((n, lines), bool)
        self.nlines = np.array([len(r["lines"]) for r in rows])
        self.weakest = {top: np.ones(n) for top in GRID["top"]}  # per number of lines aligned
        self.five = np.array([r["category"] == 5 for r in rows])
        self.refused = {k: np.zeros(n, bool) for k in ("subject", "support", "support_subject")}
        started = time.perf_counter()
        for i, row in enumerate(rows):
            asked = aligner.question(row["question"])
            content = asked.content()
            found = [align(asked, t, content) for t in aligner.lines([line_text(x) for x in row["lines"]])]
            for j, a in enumerate(found):
                self.aligned[i, j] = a.score
                self.gold[i, j] = row["lines"][j][5]
            for top in GRID["top"]:
                head = found[:top] if top else found
                if content and head:
                    self.weakest[top][i] = float(best_matches(head).min())
            where = {(x[0], x[1]): j for j, x in enumerate(row["lines"])}
            listed, about, refused = read_rules(row)
            for rule, said in refused.items():
                self.refused[rule][i] = said
            for j, (text, _rank, overlap, echo, _) in enumerate(listed):
                self.lp[i, j], self.tokens[i, j] = row["scores"].get(text, (-np.inf, 1))
                self.overlap[i, j], self.echo[i, j] = overlap, echo
                self.about[i, j], self.valid[i, j] = text in about, True
                self.line[i, j] = where.get(tuple(row["where"][text]), 0)
                if row["category"] != 5:
                    self.f1[i, j] = category_f1(text, row["gold"], row["category"])
            if row["scores"].get(UNKNOWN):
                self.unknown[i] = row["scores"][UNKNOWN]
        self.align_s = time.perf_counter() - started
        self.orders = {(r, top): self._order(r, top) for r in GRID["rerank"] for top in GRID["top"]}

    def _order(self, rerank: float, top: int) -> np.ndarray:
        """Per row, each line's place in the aligned order (0: first): the ``top`` best lines of the
        readers' order (0: all) by their alignment, then the rest in the readers' order."""
        place = np.arange(self.aligned.shape[1])[None, :]
        key = np.where(place < self.nlines[:, None], self.aligned - rerank * np.log1p(place), -np.inf)
        if top:
            key = np.where(place < top, key, np.where(place < self.nlines[:, None], -1e3 - place, -np.inf))
        if rerank >= RERANK_BIG:
            key = np.where(place < self.nlines[:, None], -place.astype(float), -np.inf)
        order = np.argsort(-key, axis=1, kind="stable")
        ranks = np.empty_like(order)
        rows = np.arange(len(order))[:, None]
        ranks[rows, order] = place
        return ranks

    def gold_first(self, rows: np.ndarray, rerank: float, top: int = 0) -> tuple[float, int]:
        """Share of ``rows`` (categories 1-4, a gold line read) whose first line in the order is gold."""
        wanted = rows & ~self.five & self.gold.any(axis=1)
        first = np.argmin(self.orders[(rerank, top)], axis=1)
        hits = self.gold[np.arange(len(first)), first]
        return float(hits[wanted].mean()) if wanted.any() else 0.0, int(wanted.sum())

    def best(self, t: dict) -> tuple[np.ndarray, np.ndarray]:
        """Per row, the best candidate by the score of tuning ``t`` (-1: none), and the model's part of
        each candidate's score."""
        rows = np.arange(len(self.rows))
        ranks = self.orders[(t["rerank"], t["top"])][rows[:, None], self.line]
        valid = self.valid & ((ranks < t["entries"]) if t["entries"] else True)
        likely = self.lp / np.maximum(1.0, self.tokens) ** t["length"] if t["model"] else np.zeros_like(self.lp)
        al = self.aligned[rows[:, None], self.line]
        if t["top"]:
            al = np.where(self.line < t["top"], al, 0.0)  # lines past the top are not aligned
        scores = (np.where(np.isfinite(likely), likely, -1e6) + t["overlap"] * self.overlap
                  - t["rank"] * np.log1p(ranks) - t["echo"] * self.echo
                  + t["align"] * np.where(np.isfinite(al), al, 0.0))
        scores = np.where(valid, scores - 1e-9 * ranks, -np.inf)  # ties to the better-ranked entry
        best = np.where(valid.any(axis=1), scores.argmax(axis=1), -1)
        return best, likely

    def kept(self, t: dict, best: np.ndarray, likely: np.ndarray) -> np.ndarray:
        """Per row, whether tuning ``t``'s abstention rules let its best candidate stand."""
        rows = np.arange(len(best))
        safe = np.maximum(best, 0)
        keep = best >= 0
        if t["subject"]:
            keep &= ~self.refused["subject"] & self.about[rows, safe]
        if t["support"]:
            keep &= ~self.refused["support_subject" if t["subject"] else "support"]
        if t["model"] and math.isfinite(t["margin"]):
            with np.errstate(invalid="ignore"):
                unknown = self.unknown[:, 0] / np.maximum(1.0, self.unknown[:, 1]) ** t["length"]
                keep &= ~(unknown - likely[rows, safe] > t["margin"])
        if t["floor"] > 0:
            keep &= self.weakest[t["top"]] >= t["floor"]
        return keep

    def choices(self, t: dict) -> np.ndarray:
        """Per row, the chosen candidate under tuning ``t``, or -1 for "I don't know"."""
        best, likely = self.best(t)
        return np.where(self.kept(t, best, likely), best, -1)

    def measure(self, rows: np.ndarray, t: dict) -> dict:
        return self._metrics(rows, self.choices(t))

    def _metrics(self, rows: np.ndarray, chosen: np.ndarray) -> dict:
        idx = np.arange(len(chosen))
        f1 = np.where(chosen >= 0, self.f1[idx, np.maximum(chosen, 0)], 0.0)
        plain = rows & ~self.five
        five = rows & self.five
        return {"f1": round(float(f1[plain].mean()), 4) if plain.any() else 0.0,
                "idk5": round(float((chosen[five] < 0).mean()), 4) if five.any() else 0.0,
                "questions": int(plain.sum()), "category5": int(five.sum())}

    def sweep(self, grid: list[dict], groups: dict[str, np.ndarray]) -> list[tuple[dict, dict]]:
        """Every tuning measured on every group of rows; a scoring is computed once for all the
        abstention rules tried with it."""
        by_score: dict[tuple, list[dict]] = {}
        for t in grid:
            by_score.setdefault(tuple(t[k] for k in GRID), []).append(t)
        out = []
        for group in by_score.values():
            best, likely = self.best(group[0])
            for t in group:
                chosen = np.where(self.kept(t, best, likely), best, -1)
                out.append((t, {name: self._metrics(rows, chosen) for name, rows in groups.items()}))
        return out


def tunings() -> list[dict]:
    axes = {**GRID, **ABSTAIN}
    out = []
    for values in itertools.product(*axes.values()):
        t = dict(zip(axes, values))
        if not t["model"] and (t["length"] != 1.0 or math.isfinite(t["margin"])):
            continue  # without the model, length and margin mean nothing
        out.append(t)
    return out


def never_abstains(t: dict) -> bool:
    return t["floor"] == 0 and not math.isfinite(t["margin"]) and not t["subject"] and not t["support"]


def choose_on(measured: list[tuple[dict, dict]], group: str, extra: dict | None = None) -> tuple[dict, dict]:
    """The rule: the most category-5 abstention within 0.01 F1 of the best never-abstaining tuning."""
    pool = [(t, m[group]) for t, m in measured if all(t[k] == v for k, v in (extra or {}).items())]
    best_plain = max(m["f1"] for t, m in pool if never_abstains(t))
    allowed = [(t, m) for t, m in pool if m["f1"] >= best_plain - 0.01]
    return max(allowed, key=lambda tm: (tm[1]["idk5"], tm[1]["f1"]))


def timing(per_conversation: int, cli: int) -> dict:
    """Seconds a question of the default ``ask`` (the shipped settings and model), alone: each development
    conversation ingested (raw memory, every vector computed), ``per_conversation`` questions of categories
    1-5 spread over it asked through :meth:`memcli.Memory.ask` in one process (the model loaded once, as an
    MCP server or ``eval`` keeps it), and ``cli`` of them as ``memcli ask`` processes (everything loaded
    anew: what a shell user waits)."""
    import os
    import shutil
    import statistics
    import subprocess
    import tempfile

    from memcli.eval.locomo import load_conversations
    from memcli.memory import Memory

    locomo = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "locomo"
    report: dict = {"in_process": {}, "cli": {}}
    totals, parts, processes = [], {}, []
    for conv in load_conversations([locomo / "conv-26.json", locomo / "conv-30.json"], None):
        work = Path(tempfile.mkdtemp(prefix="memcli-bench-answers-"))
        try:
            os.environ["MEMCLI_CACHE"] = str(work / "cache")  # this process and the CLI's share the index
            env = {**os.environ, "MEMCLI_VECTORS": "inline"}
            memory = Memory(work / "store", create=True)
            memory.ingest(conv.source, format="locomo", sample=conv.sample_id, consolidate=False,
                          time="2000-01-01T00:00")
            memory.embed(None)
            picked = conv.questions[:: max(1, len(conv.questions) // per_conversation)][:per_conversation]
            memory.ask(picked[0]["question"])  # the model and the encoder loaded, as in a server
            for qa in picked:
                result = memory.ask(qa["question"])
                totals.append(result.timings["total_s"])
                for key, value in result.timings.items():
                    parts.setdefault(key, []).append(value)
            memory.close()
            for qa in picked[:cli]:
                started = time.perf_counter()
                subprocess.run([sys.executable, "-m", "memcli", "--store", str(work / "store"), "ask",
                                qa["question"]], env=env, capture_output=True, check=False)
                processes.append(time.perf_counter() - started)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    report["in_process"] = {"questions": len(totals), "median_s": round(statistics.median(totals), 3),
                            "p90_s": round(sorted(totals)[int(0.9 * (len(totals) - 1))], 3),
                            "median_parts_s": {k: round(statistics.median(v), 3) for k, v in parts.items()}}
    if processes:
        report["cli"] = {"questions": len(processes), "median_s": round(statistics.median(processes), 3)}
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=Path, help="benchmarks/tune_answers.py --ask-only --records")
    parser.add_argument("--time", type=int, default=0, metavar="N",
                        help="instead: time the default ask on N questions of each development conversation")
    parser.add_argument("--cli", type=int, default=0, metavar="K", help="with --time: K of them as processes too")
    parser.add_argument("--json", type=Path, help="write the report here")
    parser.add_argument("--sample", type=int, default=0, help="score this many random tunings (0: the whole grid)")
    args = parser.parse_args()
    if args.time:
        text = json.dumps(timing(args.time, args.cli), indent=1)
        print(text)
        if args.json:
            args.json.write_text(text)
        return 0
    if args.records is None:
        parser.error("--records (or --time) is required")
    rows = [json.loads(x) for x in args.records.read_text().splitlines() if x.strip()]
    rows = [r for r in rows if r["source"] == "ask"]
    from memcli.semantic.alignment import Aligner  # here: --time also runs on code that has none
    from memcli.semantic.encoder import Encoder

    q = Questions(rows, Aligner(Encoder()))
    convs = sorted({r["conversation"] for r in rows})
    by = {c: np.array([r["conversation"] == c for r in rows]) for c in convs}
    both = np.ones(len(rows), bool)
    grid = tunings()
    if args.sample:
        import random
        grid = random.Random(0).sample(grid, args.sample)
    print(f"{len(rows)} questions, {len(grid)} tunings; alignment of the lines read {q.align_s:.1f} s",
          file=sys.stderr)
    report: dict = {"questions": len(rows), "tunings": len(grid), "gold_first": {}, "directions": []}
    for c in [*convs, "both"]:
        sel = both if c == "both" else by[c]
        report["gold_first"][c] = {"readers": q.gold_first(sel, RERANK_BIG),
                                   **{f"aligned (rerank {r}, top {top})": q.gold_first(sel, r, top)
                                      for r in GRID["rerank"] for top in GRID["top"] if r < RERANK_BIG}}
    shipped_before = {"model": True, "entries": 0, "rerank": RERANK_BIG, "top": 0, "align": 0.0, "overlap": 4.0,
                      "rank": 2.0, "echo": 0.0, "length": 1.0, "floor": 0.0, "margin": math.inf,
                      "subject": True, "support": True}
    report["before"] = {c: q.measure(both if c == "both" else by[c], shipped_before) for c in [*convs, "both"]}
    started = time.perf_counter()
    measured = q.sweep(grid, {**by, "both": both})
    report["sweep_s"] = round(time.perf_counter() - started, 1)
    chosen = {}
    for variant, extra in (("with the model", {"model": True}), ("without the model", {"model": False})):
        for train, test in itertools.permutations(convs, 2):
            t, on_train = choose_on(measured, train, extra)
            chosen[(variant, train)] = t
            report["directions"].append({"variant": variant, "chosen_on": train, "tuning": t, "train": on_train,
                                         "test": q.measure(by[test], t),
                                         "test_gold_first": q.gold_first(by[test], t["rerank"], t["top"])})
        best = max(((t, m["both"]) for t, m in measured if t["model"] == extra["model"] and never_abstains(t)),
                   key=lambda tm: tm[1]["f1"])
        report.setdefault("in_sample_best_never_abstaining", {})[variant] = {"tuning": best[0], "both": best[1]}
    report["ships"] = {}
    for variant, extra in (("with the model", {"model": True}), ("without the model", {"model": False})):
        ships, _ = choose_on(measured, "both", extra)  # the rule on all the questions; the directions above
        report["ships"][variant] = {"tuning": ships,  # say how well choosing so carries to a conversation unseen
                                    **{c: q.measure(both if c == "both" else by[c], ships) for c in [*convs, "both"]},
                                    "gold_first": q.gold_first(both, ships["rerank"], ships["top"]),
                                    "never_abstaining": q.measure(both, {**ships, "floor": 0.0, "margin": math.inf,
                                                                         "subject": False, "support": False})}
    text = json.dumps(report, indent=1, default=str)
    print(text)
    if args.json:
        args.json.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
