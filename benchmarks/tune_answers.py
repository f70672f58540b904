#!/usr/bin/env python3
"""Choose the extractive answer's constants by cross-validation over the LoCoMo development pair.

    python benchmarks/tune_answers.py [--questions N] [--json OUT] [--records FILE]

Each conversation is ingested (raw memory) in a temporary store. Every question of categories 1-5
is asked as ``memcli ask`` asks it (the evidence reader at ask.budget, the answer reading
ask.answer_context tokens) and, for the oracle, from exactly its gold turns. The candidates of
each (with and without the subject and support rules) are scored once by the configured model
(``MEMCLI_MODEL``; default: the embedded one), so every tuning of :class:`Tuning` in the grid is
scored without the model: F1 on categories 1-4 (an "I don't know" scores 0) and the share of
category-5 questions (about things never said) answered "I don't know".

The rule for a tuning on one conversation: the highest category-5 abstention among the tunings
whose categories 1-4 F1 is within 0.01 of the best F1 without abstention (the issue's allowance);
ties to the higher F1. Chosen on each conversation, scored on the other. What ships: axis by axis
the alternative both directions chose; where they differ, of the two the one with the higher F1 on
both conversations together (a margin they differ on: none). The model's scores are computed once;
every tuning is then scored from the stored candidates (``--records``) exactly as
:func:`memcli.retrieve.extractive.choose` decides. The report also gives each evidence's ``ceiling``
(the F1 of each question's best candidate) and, in-sample on both conversations, the tuning the rule
picks (``in_sample_most_abstention``): how far these rules can go at all.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import random
import shutil
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from memcli import llm
from memcli.config import Settings
from memcli.eval.locomo import Runner, load_conversations, select
from memcli.eval.metrics import category_f1, gold_dialog_ids
from memcli.memory import Memory
from memcli.retrieve.evidence import best_part
from memcli.retrieve.evidence_reader import evidence_only
from memcli.retrieve.extractive import DEFAULT, UNKNOWN, Tuning, candidates, choose
from memcli.store.lines import Library

os.environ.setdefault("MEMCLI_VECTORS", "inline")  # questions rank with every vector, not a job's progress

LOCOMO = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "locomo"
FILES = [LOCOMO / "conv-26.json", LOCOMO / "conv-30.json"]
GRID = {
    "overlap": [1.0, 2.0, 4.0, 8.0, 16.0, 32.0],
    "length": [0.0, 0.5, 1.0],
    "rank": [0.0, 0.3, 1.0, 2.0, 4.0],
    "echo": [0.0, 1.0, 2.0, 4.0],
    "margin": [math.inf, 4.0, 2.0, 1.0, 0.5, 0.0],
    "lead": [0.0, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0],
    "support": [False, True],
    "subject": [False, True],
}
RULES = list(itertools.product([False, True], [False, True]))  # (subject, support)


def collect(model, cfg, conv, picked, limit: int, sources=("ask", "oracle")) -> list[dict]:
    """Per question and evidence (ask, oracle): the candidates under each rule and their scores."""
    from memcli.retrieve.answer import prompt

    work = Path(tempfile.mkdtemp(prefix="memcli-tune-answers-"))
    rows = []
    try:
        memory = Memory(work / "store", create=True, model=model, cache_dir=work / "index")
        memory.ingest(conv.source, format="locomo", sample=conv.sample_id, consolidate=False,
                      time="2000-01-01T00:00")
        oracle = Runner("oracle", "raw", cfg.ask_budget, cfg, model, consolidate_model=False)
        memory.embed(None)
        for n, qa in picked:
            question = qa["question"]
            for source in sources:
                with memory.store.reading():
                    found = (evidence_only(memory.store, memory.index, question, budget=cfg.ask_budget)
                             if source == "ask" else oracle._baseline(memory.store, qa))
                    read = best_part(found.library, found.evidence, found.order, cfg.ask_answer_context,
                                     count=model.count_tokens) if source == "ask" else found.evidence
                    library = found.library or Library(memory.store)
                    per_rule = {}
                    texts: list[str] = []
                    where: dict[str, list] = {}
                    for subject, support in RULES:
                        tuning = Tuning(subject=subject, support=support, limit=limit)
                        found_c, reason = candidates(question, library, read, found.order or [], tuning)
                        per_rule[f"{subject:d}{support:d}"] = (
                            [[c.text, c.rank, c.overlap, c.echo, c.about] for c in found_c], reason)
                        texts += [c.text for c in found_c if c.text not in texts]
                        where.update({c.text: [c.doc, c.line] for c in found_c if c.text not in where})
                    wanted = gold_dialog_ids(qa.get("evidence", []))
                    lines = [[e.doc, n, entry.meta.get("speaker"), entry.time, entry.text,
                              bool(set((entry.ref or "").split(";")) & wanted)]
                             for e in read for n, entry in library.doc(e.doc).entries.items()
                             if e.start_line <= n <= e.end_line]
                    place = {pick: at for at, pick in enumerate(found.order or [])}
                    lines.sort(key=lambda line: place.get((line[0], line[1]), len(place)))  # best-ranked first
                scores = {}
                if texts and read:
                    messages, shared = prompt(question, read, False)
                    lps, _ = model.score(messages, texts + [UNKNOWN])
                    scores = {t: [sum(s), len(s)] for t, s in zip(texts + [UNKNOWN], lps) if s}
                rows.append({"conversation": conv.sample_id or Path(conv.source).stem, "index": n,
                             "category": qa.get("category"), "question": question,
                             "gold": qa.get("answer", qa.get("adversarial_answer")), "source": source,
                             "rules": per_rule, "scores": scores, "where": where, "lines": lines})
            print(f"  {conv.source.split('/')[-1]} q{n}", file=sys.stderr, end="\r")
        memory.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return rows


def answer(row: dict, tuning: Tuning) -> str:
    """What :func:`memcli.retrieve.extractive.extract` answers under ``tuning``, from a row's candidates
    and scores: every line's candidates (rule "00"), each ``about`` as the subject rule's list (rule "10")
    marks it; the subject and support rules' refusals from their lists."""
    from memcli.retrieve.extractive import Candidate

    listed, _ = row["rules"]["00"]
    theirs, reason = row["rules"]["10"]
    if tuning.subject and not theirs and reason and "about them" in reason:
        return UNKNOWN
    supported, reason = row["rules"]["11" if tuning.subject else "01"]
    if tuning.support and not supported and reason and "word of the question" in reason:
        return UNKNOWN
    about = {text for text, *_, mine in theirs if mine}
    found = [Candidate(text, "", 0, None, "", rank, overlap, *row["scores"].get(text, (-math.inf, 1)),
                       about=text in about, echo=echo) for text, rank, overlap, echo, _ in listed]
    unknown = row["scores"].get(UNKNOWN)
    best, _why = choose(found, tuple(unknown) if unknown else None, tuning)
    return UNKNOWN if best is None else best.text


def read_rules(row: dict) -> tuple[list, set[str], dict[str, bool]]:
    """A record's candidates (every line's, rule "00"), the texts the subject rule marks the named person's,
    and whether each rule refused the question outright (``subject``, ``support``, ``support_subject``)."""
    listed, _ = row["rules"]["00"]
    theirs, reason = row["rules"]["10"]
    refused = {"subject": not theirs and bool(reason) and "about them" in reason}
    for rule, key in (("support", "01"), ("support_subject", "11")):
        kept, why = row["rules"][key]
        refused[rule] = not kept and bool(why) and "word of the question" in why
    return listed, {text for text, *_, mine in theirs if mine}, refused


class Table:
    """Rows' candidates as arrays (a row a question, a column a candidate), so a tuning is scored in a few
    array operations (the grid's 60,480 tunings in about 25 s; :func:`answer`, row by row, took ten
    minutes for 8,640).
    Candidates are listed best-ranked entry first, so the first of the highest scores is the one
    :func:`choose` takes (ties to the better rank); :func:`check` compares the two on sampled tunings."""

    def __init__(self, rows: list[dict]):
        import numpy as np

        self.rows = rows
        width = max([1] + [len(r["rules"]["00"][0]) for r in rows])
        shape = (len(rows), width)
        self.lp, self.tokens = np.full(shape, -np.inf), np.ones(shape)
        self.overlap, self.rank, self.echo = np.zeros(shape), np.zeros(shape), np.zeros(shape)
        self.about, self.valid, self.f1 = np.zeros(shape, bool), np.zeros(shape, bool), np.zeros(shape)
        self.unknown = np.full((len(rows), 2), np.nan)
        self.refused = {rule: np.zeros(len(rows), bool) for rule in ("subject", "support", "support_subject")}
        self.five = np.array([r["category"] == 5 for r in rows])
        for i, row in enumerate(rows):
            listed, about, refused = read_rules(row)
            for rule, said in refused.items():
                self.refused[rule][i] = said
            for j, (text, rank, overlap, echo, _) in enumerate(listed):
                self.lp[i, j], self.tokens[i, j] = row["scores"].get(text, (-math.inf, 1))
                self.overlap[i, j], self.rank[i, j], self.echo[i, j] = overlap, rank, echo
                self.about[i, j], self.valid[i, j] = text in about, True
                if row["category"] != 5:
                    self.f1[i, j] = category_f1(text, row["gold"], row["category"])
            if row["scores"].get(UNKNOWN):
                self.unknown[i] = row["scores"][UNKNOWN]
        self.log_rank = np.vectorize(math.log1p)(self.rank)  # math's, as score() takes it: the same last bit

    def chosen(self, tuning: Tuning):
        """Per row, the index of the answer's candidate under ``tuning``, or -1 for "I don't know"."""
        import numpy as np

        norm = np.maximum(1.0, self.tokens) ** tuning.length
        likely = self.lp / norm
        scores = np.where(self.valid, likely + tuning.overlap * self.overlap - tuning.rank * self.log_rank
                          - tuning.echo * self.echo, -np.inf)
        at = scores.argmax(axis=1)
        rows = np.arange(len(at))
        keep = self.valid.any(axis=1)
        if tuning.subject:
            keep &= ~self.refused["subject"] & self.about[rows, at]
        if tuning.support:
            keep &= ~self.refused["support_subject" if tuning.subject else "support"]
        with np.errstate(invalid="ignore"):
            unknown = self.unknown[:, 0] / np.maximum(1.0, self.unknown[:, 1]) ** tuning.length
            keep &= ~(unknown - likely[rows, at] > tuning.margin)  # no score for "I don't know": NaN, kept
            if tuning.lead > 0:
                top = scores[rows, at]
                rival = np.where(self.rank != self.rank[rows, at][:, None], scores, -np.inf).max(axis=1)
                keep &= ~(top - rival < tuning.lead)
        return np.where(keep, at, -1)

    def ceiling(self) -> float:
        """Mean F1 (categories 1-4) of each question's best candidate: an answer a perfect choice would give."""
        import numpy as np

        best = np.where(self.valid, self.f1, 0.0).max(axis=1)
        return round(float(best[~self.five].mean()), 4)

    def measure(self, tuning: Tuning, pick=None) -> dict:
        """F1 on categories 1-4 (an "I don't know" scores 0) and the share of category 5 abstained on,
        over all rows or the boolean mask ``pick``."""
        import numpy as np

        at = self.chosen(tuning)
        pick = np.ones(len(at), bool) if pick is None else pick
        f1 = np.where(at >= 0, self.f1[np.arange(len(at)), np.maximum(at, 0)], 0.0)
        asked, five = pick & ~self.five, pick & self.five
        return {"f1": round(float(f1[asked].mean()), 4) if asked.any() else None,
                "abstain5": round(float((at[five] < 0).mean()), 4) if five.any() else None}


def check(table: Table, sample: list[Tuning]) -> None:
    """The array scoring answers exactly as :func:`answer` (that is, :func:`choose`) does."""
    for tuning in sample:
        at = table.chosen(tuning)
        for i, row in enumerate(table.rows):
            said = UNKNOWN if at[i] < 0 else row["rules"]["00"][0][at[i]][0]
            assert said == answer(row, tuning), (row["question"], tuning, said, answer(row, tuning))


def measure(rows: list[dict], tuning: Tuning) -> dict:
    return Table(rows).measure(tuning)


def tunings() -> list[Tuning]:
    return [Tuning(**dict(zip(GRID, values)), limit=DEFAULT.limit) for values in itertools.product(*GRID.values())]


def choose_on(rows: list[dict]) -> tuple[Tuning, dict]:
    """The tuning with the most category-5 abstention among those within 0.01 F1 (categories 1-4) of the
    best tuning that never abstains; ties to the higher F1, then to the support rule on (it decides only
    questions no line read shares a word with, which LoCoMo's do not ask)."""
    table = Table(rows)
    scored = [(t, table.measure(t)) for t in tunings()]
    best_f1 = max(m["f1"] for t, m in scored
                  if t.margin == math.inf and not t.lead and not t.support and not t.subject)
    allowed = [(t, m) for t, m in scored if m["f1"] >= best_f1 - 0.01]
    return max(allowed, key=lambda tm: (tm[1]["abstain5"], tm[1]["f1"], tm[0].support))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--questions", type=int, default=None, help="questions per conversation (default: all)")
    parser.add_argument("--limit", type=int, default=DEFAULT.limit, help="candidates scored at most")
    parser.add_argument("--records", type=Path, help="read (if it exists) or write the scored candidates here")
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument("--ask-only", action="store_true",
                        help="score only what ask reads (no gold-evidence rows), write --records and stop: the "
                             "records benchmarks/bench_answers.py tunes on")
    args = parser.parse_args()
    cfg = Settings.load(None, None)
    if args.records and args.records.exists():
        rows = [json.loads(line) for line in args.records.read_text().splitlines() if line.strip()]
    else:
        model = llm.open_model(cfg)
        rows, start = [], time.perf_counter()
        for conv in load_conversations(FILES, None):
            rows += collect(model, cfg, conv, select(conv.questions, {1, 2, 3, 4, 5}, args.questions), args.limit,
                            ("ask",) if args.ask_only else ("ask", "oracle"))
        print(f"scored in {time.perf_counter() - start:.0f} s ({model.name})", file=sys.stderr)
        if args.records:
            args.records.write_text("".join(json.dumps(r) + "\n" for r in rows))
    if args.ask_only:
        return 0
    convs = sorted({r["conversation"] for r in rows})
    grid = tunings()
    sample = [DEFAULT] + [grid[i] for i in random.Random(0).sample(range(len(grid)), 40)]
    check(Table(rows), sample)
    by = {(c, s): [r for r in rows if r["conversation"] == c and r["source"] == s] for c in convs
          for s in ("ask", "oracle")}
    report = {"default": {}, "directions": []}
    for c in convs:
        for s in ("ask", "oracle"):
            report["default"][f"{c}/{s}"] = measure(by[(c, s)], DEFAULT)
            report["default"][f"{c}/{s}/no abstention"] = measure(
                by[(c, s)], replace(DEFAULT, margin=math.inf, lead=0.0, support=False, subject=False))
    chosen = {}
    for train, test in itertools.permutations(convs, 2):
        tuning, on_train = choose_on(by[(train, "ask")])
        chosen[train] = tuning
        report["directions"].append({"chosen_on": train, "tuning": tuning.__dict__, "train": on_train,
                                     "test": measure(by[(test, "ask")], tuning),
                                     "test_oracle": measure(by[(test, "oracle")], tuning)})
    # axis by axis: what both directions chose; where they differ, of their two choices the one with the
    # higher F1 (categories 1-4) on both conversations together, the other axes as agreed; a margin they
    # differ on is left out (no margin: the simpler rule)
    agreed = {axis: getattr(chosen[convs[0]], axis) for axis in GRID
              if len({getattr(t, axis) for t in chosen.values()}) == 1}
    both = [r for c in convs for r in by[(c, "ask")]]
    ships = dict(agreed)
    for axis in GRID:
        if axis in agreed:
            continue
        if axis == "margin":
            ships[axis] = math.inf
            continue
        options = sorted({getattr(t, axis) for t in chosen.values()})
        base = {**{a: getattr(DEFAULT, a) for a in GRID}, **agreed}
        ships[axis] = max(options, key=lambda v: measure(both, Tuning(**{**base, axis: v}))["f1"])
    shipped = Tuning(**ships, limit=DEFAULT.limit)
    report["ships"] = shipped.__dict__
    report["ships_measured"] = {f"{c}/{s}": measure(by[(c, s)], shipped) for c in convs for s in ("ask", "oracle")}
    plain = replace(shipped, margin=math.inf, lead=0.0, support=False, subject=False)
    report["ships_without_abstaining"] = {f"{c}/{s}": measure(by[(c, s)], plain) for c in convs
                                          for s in ("ask", "oracle")}
    for name in ("ships_measured", "ships_without_abstaining"):  # both conversations' questions together
        for s in ("ask", "oracle"):
            rows = [r for c in convs for r in by[(c, s)]]
            report[name][f"both/{s}"] = measure(rows, shipped if name == "ships_measured" else plain)
    for s in ("ask", "oracle"):  # the best answer each evidence offers: what picking can reach
        table = Table([r for c in convs for r in by[(c, s)]])
        report.setdefault("ceiling", {})[f"both/{s}"] = table.ceiling()
    bound, on_both = choose_on(both)  # in-sample, both conversations: how far these rules can go at all
    report["in_sample_most_abstention"] = {"tuning": bound.__dict__, "both/ask": on_both}
    text = json.dumps(report, indent=1, default=str)
    print(text)
    if args.json:
        args.json.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
