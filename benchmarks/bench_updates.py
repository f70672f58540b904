#!/usr/bin/env python3
"""Facts that change: the knowledge-update suite of ``benchmarks/updates_suite.py`` through memcli as a
user runs it (ingest each chat into its own store, consolidate without a model, ask with the default
profile), scored per half of the suite (``tune``: the slots constants were chosen on; ``report``: the
others).

    python benchmarks/updates_suite.py /tmp/ku
    python benchmarks/bench_updates.py /tmp/ku [--half report] [--json OUT] [--no-answers] [--off]
    python benchmarks/bench_updates.py /tmp/ku --grid --locomo conv-26.json conv-30.json  # choose current.Tuning
    python benchmarks/bench_updates.py /tmp/ku --grid --past-only --locomo ...  # only its second stage
    python benchmarks/bench_updates.py SUITE --half report  # a suite written elsewhere, in the same format
    python benchmarks/bench_updates.py /tmp/ku --marked conv-26.json conv-30.json  # what LoCoMo gets marked

For each question kind it prints:

- ``current``: the answer holds the current value (mentioning an earlier one too is fine), and in
  ``ask --evidence-only``'s ranking the line that set the current value comes before every line that
  states only an earlier one;
- ``past``: the same, for the current value asked in the past tense ("Which company did Idris join last?");
- ``as_of``: ``ask --as-of DAY`` answers with the value true on that day;
- ``unmentioned``: a slot the chat never mentions is "I don't know";
- ``dated``, ``before``: the value true on a day the question writes ("as of 8 December 2023"), or before the value
  it names ("Which company did Bram work for before Quarry Bank?"), ``ask`` reading the time from its words
  (:mod:`memcli.retrieve.asked_time`), the ranking judged on the same bound; ``previous``: the same value asked
  "previous" ("Which company was Bram's previous employer?"), read in two steps by ``ask`` (its ranking is
  judged on the question as asked).

A suite may name, per question, the lines that state each value (``lines``: ``current`` and ``stale``
texts), which the ranking is then judged by, and the words an answer must hold for each value (``keys``);
without them a line or an answer holds a value when it holds the value's first word that no other value of
the slot has (:func:`key`).

It also lists the entries marked superseded in each store and how many of them were marked wrongly (a
superseded line whose value is the current one of its slot).

The answers are the shipped default's, the newer-first stage of the ranking (:mod:`memcli.retrieve.current`)
on unless ``--off`` (it shipped off from 2026-11-26 to 2026-11-28, when this script turned it on only with
``--newer-first``).
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import random
import re
import shutil
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from memcli import Memory
from memcli.retrieve import current
from memcli.retrieve.answer import UNKNOWN
from memcli.retrieve.asked_time import asked_time
from memcli.retrieve.evidence_reader import evidence_only, meaning
from memcli.semantic import upkeep
from memcli.store.format import parse_entry


def key(value: str, others: list[str]) -> str:
    """The part of ``value`` that tells it from the slot's other values (its first such word)."""
    words = value.split()
    other_words = {w.casefold() for o in others if o != value for w in o.split()}
    for word in words:
        if word.casefold() not in other_words:
            return word.casefold()
    return value.casefold()


def holds(text: str, value: str, values: list[str], keys: dict[str, str] | None = None) -> bool:
    """Whether ``text`` holds ``value``: its :func:`key`, or the key a suite gives for it (``keys``)."""
    word = (keys or {}).get(value) or key(value, values)
    return re.search(rf"(?<!\w){re.escape(word.casefold())}(?!\w)", text.casefold()) is not None


def said(text: str, lines: list[str]) -> bool:
    """Whether an entry's ``text`` is one of a suite's ``lines`` (compared without case and spacing)."""
    flat = " ".join(text.split()).casefold()
    return any(" ".join(line.split()).casefold() in flat for line in lines)


AS_OF = True  # pass as_of to memcli (False: measure memcli without it)


def dated(q: dict) -> dict:
    return {"as_of": q["as_of"]} if AS_OF and q["kind"] == "as_of" else {}


def superseded(root: Path) -> list[dict]:
    out = []
    for path in sorted((root / "docs").glob("*.md")) + [root / "CURRENT.md"]:
        if not path.exists():
            continue
        for line in path.read_text().splitlines():
            entry = parse_entry(line)
            if entry is not None and "superseded_by" in entry.meta:
                out.append({"doc": path.stem, "seq": entry.seq, "by": int(entry.meta["superseded_by"]),
                            "text": entry.text})
    return out


def build(suite: Path, root: Path, convs: list[str]) -> dict[str, Memory]:
    """One store per conversation under ``root``: ingested, consolidated without a model, embedded."""
    memories = {}
    for conv in convs:
        memory = Memory(root / conv, create=True, cache_dir=root / f"{conv}.cache")
        memory.ingest(suite / f"{conv}.json", consolidate=False)
        memory.consolidate()
        upkeep.embed(memory.index)  # every vector now (a big store would start a background job)
        memories[conv] = memory
    return memories


def score(memories: dict[str, Memory], questions: list[dict], answers: bool) -> dict:
    rows, marked, seconds = [], [], []
    for conv, memory in memories.items():
        marked += [{"conv": conv, **m} for m in superseded(memory.root)]
        for q in (q for q in questions if q["conv"] == conv):
            values = [q["answer"], *q["stale"]] if q["answer"] else []
            row = {**q}
            if q["kind"] != "unmentioned":
                asked, bound = q["question"], dated(q)
                if q["kind"] in WRITTEN and (said_then := asked_time(asked, memory.store, memory.index)):
                    asked, bound = said_then.question, {"as_of": said_then.as_of}  # as ask reads the question
                got = evidence_only(memory.store, memory.index, asked, budget=memory.settings.ask_budget, **bound)
                texts = [got.library.doc(d).entries[n].text for d, n in got.order]
                if "lines" in q:  # the suite names the lines that state each value
                    current = [i for i, t in enumerate(texts) if said(t, q["lines"]["current"])]
                    stale = [i for i, t in enumerate(texts) if said(t, q["lines"]["stale"])]
                else:
                    current = [i for i, t in enumerate(texts) if holds(t, q["answer"], values)]
                    stale = [i for i, t in enumerate(texts) if not holds(t, q["answer"], values)
                             and any(holds(t, s, values) for s in q["stale"])]
                row["ranked_first"] = bool(current) and all(current[-1] < s for s in stale)
                row["read_first"] = row["ranked_first"] and current[-1] < READ  # and among the first few
            if answers:
                begin = time.perf_counter()
                result = memory.ask(q["question"], **dated(q))
                seconds.append(time.perf_counter() - begin)
                row["got"] = result.answer
                if q["kind"] == "unmentioned":
                    row["right"] = result.abstained or (result.answer or "").strip() == UNKNOWN
                else:
                    row["right"] = holds(result.answer or "", q["answer"], values, q.get("keys"))
            rows.append(row)
    report: dict = {"questions": len(rows)}
    for kind in KINDS:
        some = [r for r in rows if r["kind"] == kind]
        if not some:
            continue
        entry = {"n": len(some)}
        if answers:
            entry["right"] = round(sum(r["right"] for r in some) / len(some), 3)
        if kind != "unmentioned":
            entry["ranked_first"] = round(sum(r["ranked_first"] for r in some) / len(some), 3)
            entry["read_first"] = round(sum(r["read_first"] for r in some) / len(some), 3)
        report[kind] = entry
    report["superseded"] = len(marked)
    # marked wrongly: a superseded line that holds the value its chat's slot has at the end
    current = {(q["conv"], q["answer"]) for q in questions if q["kind"] == "current"}
    report["superseded_wrongly"] = sum(any(conv == m["conv"] and value in m["text"] for conv, value in current)
                                       for m in marked)
    if seconds:
        report["median_s"] = round(sorted(seconds)[len(seconds) // 2], 2)
    return {"report": report, "rows": rows, "marked": marked}


KINDS = ("current", "past", "as_of", "unmentioned", "dated", "before", "previous")  # "past": the current value asked in the past
# tense; "dated", "before", "previous": an earlier value with the time in the question's words
WRITTEN = ("dated", "before")  # ("previous": ask reads it in two steps; its ranking is judged as the question asks)
GRID = {"same": [0.3, 0.4, 0.5], "near": [3, 8], "near_in": ["store", "head"],
        "gates": [(False, False, False), (True, True, True)]}
PAST_SAME = [math.inf, 0.8, 0.7, 0.6, 0.5]  # the second stage: current.Tuning.past_same, the rest as chosen
READ = 3  # "read first": the line that set the current value among the ranking's first READ
GOLD_LOSS = 0.03  # the most the stage may lower LoCoMo's gold-first share on a conversation (about 3 questions)


def ranking(report: dict, kinds=("current", "as_of")) -> float:
    """The mean of "ranked first" and "read first" over ``kinds`` (those the report has)."""
    got = [report[k][m] for k in kinds if k in report for m in ("ranked_first", "read_first")]
    return sum(got) / len(got)


def trial(memories: dict[str, Memory], questions: list[dict], stores: list, off: list[float], kinds,
          label: str) -> tuple[dict, list[float], bool]:
    """The tuning ``current.DEFAULT`` now holds, scored as the grid scores one: per half, :func:`ranking` of
    ``kinds``; LoCoMo's gold-first per conversation; whether that is within :data:`GOLD_LOSS` of ``off``."""
    got = {}
    for half in ("tune", "report"):
        got[half] = ranking(score(memories, [q for q in questions if q["half"] == half], False)["report"], kinds)
    gold = [gold_first(memory, qas) for memory, qas in stores]
    kept = all(g >= o - GOLD_LOSS - 1e-9 for g, o in zip(gold, off))
    print(f"{label}: tune {got['tune']:.3f} report {got['report']:.3f} LoCoMo gold first "
          + " / ".join(f"{g:.3f}" for g in gold) + ("" if kept else " (over the guard)"), flush=True)
    return got, gold, kept


def past_grid(memories: dict[str, Memory], questions: list[dict], stores: list, base: current.Tuning,
              off: list[float]) -> current.Tuning:
    """The second stage: ``base`` with each :data:`PAST_SAME` (how similar two entries must be for the newer to
    move ahead for a question in the past tense), scored on the current, past-tense and as-of questions'
    ranking; chosen as :func:`grid` chooses (the LoCoMo guard against ``off``, the stage off), ties to the
    larger ``past_same``."""
    results = []
    for past_same in PAST_SAME:
        current.DEFAULT = replace(base, past_same=past_same)
        got, gold, kept = trial(memories, questions, stores, off, ("current", "past", "as_of"),
                                f"past_same {past_same}")
        if kept:
            results.append((round(got["tune"], 6), round(sum(gold) / len(gold), 6), past_same, current.DEFAULT))
    return max(results, key=lambda r: r[:3])[3] if results else base


def grid(memories: dict[str, Memory], questions: list[dict], files: list[Path],
         past_only: bool = False) -> current.Tuning:
    """Every tuning of :data:`GRID` (window 8, lag 0.2; the gates stating, later, present all off or all on;
    the near entries of the whole store or of the ranking's best 8) on the evidence
    ranking, no model: on the suite the mean over current and as-of questions of "ranked first" and "read
    first", and on the LoCoMo conversations ``files`` the share of questions of categories 1-4 whose first
    entry in ``--evidence-only``'s order is a gold line. Chosen: the best on the tune half among the tunings
    that lower that share by at most :data:`GOLD_LOSS` on each conversation (the stage off: the guard); ties
    to the best mean gold-first on LoCoMo, then the larger ``same``; shown on both halves. Then
    :func:`past_grid` from that choice (``past_only``: from the shipped tuning, without the first stage)."""
    root = Path(tempfile.mkdtemp(prefix="ku-locomo-"))
    stores = locomo_stores(files, root)
    results, shipped = [], current.DEFAULT
    try:
        current.DEFAULT = current.OFF
        off = [gold_first(memory, qas) for memory, qas in stores]
        print(f"{current.OFF}: LoCoMo gold first " + " / ".join(f"{g:.3f}" for g in off), flush=True)
        combos = [] if past_only else list(itertools.product(GRID["same"], GRID["near"], GRID["near_in"],
                                                               GRID["gates"]))
        for same, near, near_in, (stating, later, present) in combos:
            current.DEFAULT = current.Tuning(same=same, near=near, near_in=near_in, stating=stating, later=later,
                                             present=present)
            got, gold, kept = trial(memories, questions, stores, off, ("current", "as_of"), str(current.DEFAULT))
            if kept:
                results.append((round(got["tune"], 6), round(sum(gold) / len(gold), 6), same, current.DEFAULT))
        chosen = shipped if past_only else max(results, key=lambda r: r[:3])[3] if results else current.OFF
        print(f"first stage: {chosen}", flush=True)
        return past_grid(memories, questions, stores, chosen, off)
    finally:
        current.DEFAULT = shipped
        for memory, _ in stores:
            memory.close()
        shutil.rmtree(root, ignore_errors=True)


def locomo_stores(files: list[Path], root: Path) -> list[tuple[Memory, list[dict]]]:
    """One raw store per LoCoMo conversation (under ``root``), embedded, with its questions of
    categories 1-4."""
    stores = []
    for path in files:
        memory = Memory(root / path.stem, create=True, cache_dir=root / f"{path.stem}.cache")
        memory.ingest(path, consolidate=False)
        upkeep.embed(memory.index)  # every vector now (a big store would start a background job)
        stores.append((memory, [qa for qa in json.loads(path.read_text())["qa"] if qa.get("category") != 5]))
    return stores


def gold_first(memory: Memory, qas: list[dict]) -> float:
    """The share of ``qas`` whose first entry in ``--evidence-only``'s order (2,000 tokens) is a gold line."""
    from memcli.eval.locomo import gold_dialog_ids

    hits = 0
    for qa in qas:
        found = evidence_only(memory.store, memory.index, qa["question"], budget=2000)
        if found.order:
            doc, line = found.order[0]
            hits += bool(set((found.library.doc(doc).entries[line].ref or "").split(";"))
                         & gold_dialog_ids(qa.get("evidence", [])))
    return hits / max(1, len(qas))


def moves(files: list[Path], sample: int = 30, seed: int = 3) -> None:
    """On LoCoMo conversations (raw memory, one store each): for every question of categories 1-5, the
    entries the ranking moved ahead of an older one they restate (:func:`current.newer_first`), how
    often that changed the three entries the extractive answer reads, and a seeded sample of the moved
    pairs to read: whether the newer line really states the same thing anew."""
    pairs, questions, changed = [], 0, 0
    root = Path(tempfile.mkdtemp(prefix="ku-locomo-"))
    try:
        for path in files:
            data = json.loads(path.read_text())
            with Memory(root / path.stem, create=True, cache_dir=root / f"{path.stem}.cache") as memory:
                memory.ingest(path, consolidate=False)
                upkeep.embed(memory.index)  # every vector now (a big store would start a background job)
                for qa in data["qa"]:
                    questions += 1
                    shipped, current.DEFAULT = current.DEFAULT, current.OFF
                    before = evidence_only(memory.store, memory.index, qa["question"], budget=500).order
                    current.DEFAULT = shipped
                    found = evidence_only(memory.store, memory.index, qa["question"], budget=500)
                    library = found.library
                    moved: list = []
                    current.newer_first(library, memory.index, before, memory.index.similarities(
                        meaning(memory.index, qa["question"])), shipped, moves=moved, question=qa["question"])
                    changed += before[:3] != found.order[:3]
                    pairs += [(qa["question"], library.doc(o[0]).entries[o[1]], library.doc(n[0]).entries[n[1]])
                              for o, n in moved]
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"{len(pairs)} entries moved ahead of an older one they restate, in {len({q for q, _, _ in pairs})} "
          f"of {questions} questions; the first three entries changed in {changed}")
    for question, older, newer in random.Random(seed).sample(pairs, min(sample, len(pairs))):
        print(f"- Q: {question}\n    older [{older.time}] {older.meta.get('speaker')}: {older.text[:160]}"
              f"\n    newer [{newer.time}] {newer.meta.get('speaker')}: {newer.text[:160]}")


def locomo(files: list[Path], tunings: list[current.Tuning], budgets=(500, 2000, 4000)) -> None:
    """All-evidence recall of ``ask --evidence-only`` on LoCoMo conversations (raw memory) under each
    tuning: the guard the tuning is chosen under (not lower than with the stage off at any budget)."""
    from memcli.eval.locomo import evaluate

    for tuning in tunings:
        current.DEFAULT = tuning
        recall = [evaluate(files, mode="evidence-only", budget=b).summary["all"]["recall_all"] for b in budgets]
        print(f"window {tuning.window}: recall "
              + " / ".join(f"{r:.4f}" for r in recall) + f" at {' / '.join(map(str, budgets))} tokens", flush=True)


def marked_on(files: list[Path], sample: int = 30, seed: int = 3) -> None:
    """On LoCoMo conversations (one store each, ingested and consolidated without a model as a user does):
    the entries marked superseded, as exact repeats and as corrections (:mod:`memcli.ingest.corrections`),
    and a seeded sample of the corrections to read: whether the later line really corrects the earlier."""
    from memcli.consolidate.lexical import normalized

    root = Path(tempfile.mkdtemp(prefix="ku-marked-"))
    try:
        for path in files:
            with Memory(root / path.stem, create=True, cache_dir=root / f"{path.stem}.cache") as memory:
                memory.ingest(path, consolidate=False)
                memory.consolidate()
                found = superseded(memory.root)
            texts = {e.seq: e.text for doc in sorted((root / path.stem / "docs").glob("*.md"))
                     for e in map(parse_entry, doc.read_text().splitlines()) if e is not None}
            repeats = [m for m in found if normalized(texts.get(m["by"], "")) == normalized(m["text"])]
            fixes = [m for m in found if m not in repeats]
            print(f"{path.name}: {len(found)} entries superseded: {len(repeats)} exact repeats, "
                  f"{len(fixes)} by a correction")
            for m in random.Random(seed).sample(fixes, min(sample, len(fixes))):
                print(f"- seq {m['seq']}: {m['text'][:160]}\n    by seq {m['by']}: {texts.get(m['by'], '?')[:160]}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("suite", type=Path)
    parser.add_argument("--half", choices=["tune", "report"])
    parser.add_argument("--no-answers", action="store_true", help="only the evidence ranking (no model)")
    parser.add_argument("--grid", action="store_true", help="choose current.Tuning on the tune half (no model)")
    parser.add_argument("--locomo", type=Path, nargs="+", metavar="FILE",
                        help="LoCoMo conversations: evidence recall under the grid's tunings (no suite run)")
    parser.add_argument("--no-recall", action="store_true", help="with --locomo: only the moves")
    parser.add_argument("--past-only", action="store_true",
                        help="with --grid: only the second stage (past_same), from the shipped tuning")
    parser.add_argument("--marked", type=Path, nargs="+", metavar="FILE",
                        help="LoCoMo conversations: the entries ingest and consolidation mark superseded (no suite run)")
    parser.add_argument("--off", action="store_true", help="the newer-first stage off (current.OFF)")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--show", action="store_true", help="print every wrong answer")
    args = parser.parse_args()
    if args.off:  # what the answers would be without the stage; without the flag, as shipped
        current.DEFAULT = current.OFF
    if args.marked:
        marked_on(args.marked)
        return
    if args.grid and not args.locomo:
        parser.error("--grid needs --locomo FILE...: ties on the suite are broken by the development pair")
    if args.locomo and not args.grid:
        moves(args.locomo)
        if not args.no_recall:
            locomo(args.locomo, [current.OFF, current.DEFAULT])
        return
    questions = [json.loads(line) for line in open(args.suite / "questions.jsonl")]
    root = Path(tempfile.mkdtemp(prefix="ku-"))
    out = {}
    try:
        memories = build(args.suite, root, sorted({q["conv"] for q in questions}))
        if args.grid:
            chosen = grid(memories, questions, args.locomo, args.past_only)
            print(f"chosen on the tune half: {chosen}")
            return
        for half in [args.half] if args.half else ["tune", "report"]:
            got = score(memories, [q for q in questions if q["half"] == half], not args.no_answers)
            out[half] = got
            print(f"{half}: {json.dumps(got['report'])}")
            if args.show:
                for row in got["rows"]:
                    if not row.get("right", True) or not row.get("ranked_first", True):
                        print("  ", row["kind"], row.get("as_of", ""), row["question"], "|", row["answer"], "| got:",
                              row.get("got"), "| first:", row.get("ranked_first"))
    finally:
        for memory in locals().get("memories", {}).values():
            memory.close()
        shutil.rmtree(root, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
