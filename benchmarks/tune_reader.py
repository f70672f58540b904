#!/usr/bin/env python3
"""Choose how ``ask`` answers from the reader's line scores (``reading.Choice``) by cross-validation over the
LoCoMo development pair: chosen on one conversation, reported on the other, both ways.

    python benchmarks/tune_reader.py ../shared/data/locomo/conv-26.json ../shared/data/locomo/conv-30.json
    python benchmarks/updates_suite.py /tmp/ku && python benchmarks/tune_reader.py conv-26.json conv-30.json --updates /tmp/ku

Each conversation is ingested into a store of its own (as ``memcli eval locomo`` does, raw turns), its
vectors computed, and every question of categories 1-5 asked as ``memcli ask`` asks it; the reader scores
the lines once (with each line's likeness in meaning to the question), and each choice (threshold, subject
rule, recency and its kind, a newer restatement's margin and kind, the likeness's weight) decides from those
scores (and the ranking's newer-first relation, kept with them). A question's score is LoCoMo's F1 for
categories 1-4, and 1 for "I don't know" on category 5 (adversarial), 0 otherwise; a choice is judged by the mean of all of them. With ``--updates SUITE`` (benchmarks/updates_suite.py's format)
the suite's tune half counts too, as much as a conversation (its questions asked as bench_updates.py asks
them, right as it judges them); the report half is only reported, with the choice made on everything else.
``--only whose`` (or ``alone``, ``ranked``, ``meaning``, ``recent``, ``moved``) runs that one search of a few fields beside the shipped choice
instead of the full grid and every search (the whose search: 5 minutes here, most of it asking the questions);
``--only rules`` reports the shipped choice with each of its rules off in turn (``RULES_OFF``). ``--dialogues FILE...``:
public dialogue QA sets asked of memory as ``bench_dialogues.py`` asks them; every choice is reported on them,
none chosen (Molweni and FriendsQA dev: about 20 minutes more here).
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import tempfile
from dataclasses import asdict, replace
from pathlib import Path

from memcli import Memory
from memcli.eval.metrics import category_f1
from memcli.eval.qa import scores as qa_scores
from memcli.retrieve import current, people, reading
from memcli.semantic import upkeep
from memcli.store.lines import Library

THRESHOLDS = [x / 2 for x in range(-4, 13)]
SUBJECT = [True]  # the choice made, the same without the rule is reported beside it
WHOSE = [None, 1.0, 2.0, 4.0]
WHOSE_WIDE = [None, 0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0]  # searched alone, the rest as shipped (--only whose)
TIE = 1 / 150  # about one question of a development conversation
RECENT = [0.0, 0.5, 1.0, 2.0, 3.0, 5.0]
STATING = [False, True]
RESTATED = [None, 0.5, 0.0, -2.0, -4.0, -6.0, float("-inf")]  # the margin a newer restatement needs (None: off)
KIN = [None, 0.15, 0.3]  # how alike its span must be to the one it replaces (None: any)
RECENT_WIDE = [0.0, 1.0, 2.0, 3.0, 5.0, 8.0, 12.0]  # with RECENT_KIN, searched with the threshold, the rest as shipped
RECENT_KIN = [None, 0.3, 0.6]  # how alike a nearly-as-good line's span must be to the best's to count as newer
SEARCHES = ["whose", "alone", "ranked", "meaning", "recent", "moved", "rules"]  # the searches beside the full grid (--only)
MEANING = [0.0, 1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0]  # what a line's likeness in meaning weighs (chosen alone)
RANKED = [0.0, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0]  # how much less a line's margin counts a doubling of its place in the ranking
# (searched with the threshold, the rest as shipped: the whole grid times five would take hours)
ALONE = [0, 3, 5, 8, 12]  # how many of the best lines are read again, each alone, for the check on whose line answers
WHOSE_ALONE = [0.0, 0.5, 1.0, 2.0, 3.0]  # by how much another's line read alone must answer better (searched together)
MOVED = [None, 2.0, 0.5, 0.0, -2.0, -4.0, -6.0, float("-inf")]  # the margin a line's new value needs (searched
# alone, the rest as shipped: its kind is the newer restatement's, ``kin``)
RULES_OFF = {  # each rule of the shipped choice turned off in turn (--only rules: what it is worth against the reader)
    "the newer restatement": {"restated": None}, "the recency window": {"recent": 0.0},
    "the newer restatement and the recency window": {"restated": None, "recent": 0.0},
    "the person rule's margin": {"whose": None},
    "the lines read alone": {"alone": 0}, "the likeness in meaning": {"meaning": 0.0},
    "the person rule in group chats": {"group": False}, "the person rule": {"subject": False, "whose": None},
    "the new value of a line that names the old": {"moved": None}, "which day from a line that names one": {"weekday": False}}


def alike():
    """How alike two spans are as values, as ``ask`` judges it (``current.kinship``; remembered across choices)."""
    return current.kinship(reading.shared_reader())


class Watch:
    """``reading.read_answer`` that keeps what the reader scored for the last question."""

    def __init__(self):
        self.last, self.question = None, ""
        self.original = reading.read_answer

    def __enter__(self):
        def watching(question, library, read, reader=None, choice=None, restated=None, order=None, index=None):
            reader = reader or reading.shared_reader()
            lines = reading.score_lines(question, library, read, reader, order)
            if index is not None:  # every line's likeness, whatever the choice's weight on it
                lines = reading.likeness(index, question, lines)
            alone = reading.read_alone(question, library, lines, max(ALONE), reader)  # what any choice may read
            self.last = (library, lines, reader.threshold, restated or {}, alone)
            self.question = question  # as the reader read it (without the words that say a time: asked_time)
            return reading.decide(question, library, lines, reader.threshold, choice or reading.DEFAULT, restated,
                                  current.kinship(reader), alone)

        reading.read_answer = watching
        return self

    def __exit__(self, *exc):
        reading.read_answer = self.original


def capture_updates(suite: Path, root: Path) -> list[dict]:
    """The update suite's questions with the lines the reader scored for each (``row["right"](said)``)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_updates import UNKNOWN, build, dated, holds

    questions = [json.loads(line) for line in open(suite / "questions.jsonl")]
    rows = []
    memories = build(suite, root / "updates", sorted({q["conv"] for q in questions}))
    with Watch() as watch:
        for q in questions:
            watch.last = None
            result = memories[q["conv"]].ask(q["question"], **dated(q))
            if watch.last is None:  # answered before the reader read anything
                library, lines, threshold, restated, alone = None, [], 0.0, {}, {}
            else:
                library, lines, threshold, restated, alone = watch.last
            values = [q["answer"], *q["stale"]] if q["answer"] else []

            def right(said, q=q, values=values):
                if q["kind"] == "unmentioned":
                    return said.abstained or said.text.strip() == UNKNOWN
                return not said.abstained and holds(said.text, q["answer"], values, q.get("keys"))

            rows.append({"conv": "updates-" + q["half"], "kind": q["kind"],
                         "question": q["question"] if watch.last is None else watch.question,
                         "library": library, "lines": lines, "threshold": threshold, "restated": restated,
                         "alone": alone, "right": right,
                         "fixed": result if watch.last is None else None})
    for memory in memories.values():
        memory.close()
    return rows


def capture_dialogues(paths: list[Path], root: Path) -> list[dict]:
    """Public dialogue QA sets asked of memory as ``bench_dialogues.py`` asks them, with the lines the reader
    scored for each question (``row["answers"]``: the gold answers, none for a question without one)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_dialogues import asked

    rows = []
    with Watch() as watch:
        for path in paths:
            watch.last = None
            for _, example, answer, abstained, _ in asked(path, None, root / "dialogues"):
                row = {"conv": path.name, "answers": example.answers,
                       "question": example.question if watch.last is None else watch.question,
                       "fixed": (answer, abstained) if watch.last is None else None}
                if watch.last is not None:
                    row |= dict(zip(("library", "lines", "threshold", "restated", "alone"), watch.last))
                rows.append(row)
                watch.last = None
    return rows


def capture(paths: list[Path], root: Path) -> list[dict]:
    """Every question of the conversations with the lines the reader scored for it (the stores stay in
    ``root``: the answers are decided from their documents)."""
    rows = []
    with Watch() as watch:
        for path in paths:
            data = json.loads(path.read_text())
            with Memory(root / path.stem, create=True, cache_dir=root / f"{path.stem}.cache") as memory:
                memory.ingest(path, consolidate=False)
                upkeep.embed(memory.index)
                for qa in data["qa"]:
                    watch.last = None
                    memory.ask(qa["question"], keep_evidence=False)
                    if watch.last is None:
                        continue
                    library, lines, threshold, restated, alone = watch.last
                    rows.append({"conv": path.stem, "question": watch.question, "category": qa["category"],
                                 "gold": qa.get("answer", qa.get("adversarial_answer")), "library": library,
                                 "lines": lines, "threshold": threshold, "restated": restated, "alone": alone})
                    print(f"\r{path.stem}: {len(rows)} questions", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    return rows


def judged(rows: list[dict], choice: reading.Choice) -> dict:
    if rows and "kind" in rows[0]:
        return judged_updates(rows, choice)
    if rows and "answers" in rows[0]:
        return judged_dialogues(rows, choice)
    scores, answered, by_category = [], [], {}
    for row in rows:
        said = reading.decide(row["question"], row["library"], row["lines"], row["threshold"], choice, row["restated"],
                              alike(), row["alone"])
        if row["category"] == 5:
            score = float(said.abstained)
        else:
            score = category_f1(None if said.abstained else said.text, row["gold"], row["category"])
        scores.append(score)
        answered.append(not said.abstained)
        by_category.setdefault(row["category"], []).append(score)
    mean = lambda xs: round(sum(xs) / max(len(xs), 1), 4)  # noqa: E731
    return {"all": mean(scores), "answered": mean(answered),
            "f1_1_4": mean([s for r, s in zip(rows, scores) if r["category"] != 5]),
            **{f"cat{c}": mean(v) for c, v in sorted(by_category.items())}}


def judged_dialogues(rows: list[dict], choice: reading.Choice) -> dict:
    """SQuAD's F1 (``bench_dialogues.py``'s scores): "I don't know" scores 1 on a question without an answer."""
    every, answerable, none_right = [], [], []
    for row in rows:
        if row["fixed"]:
            text, abstained = row["fixed"]
        else:
            said = reading.decide(row["question"], row["library"], row["lines"], row["threshold"], choice,
                                  row["restated"], alike(), row["alone"])
            text, abstained = said.text, said.abstained
        score = qa_scores("" if abstained else text, row["answers"])[1]
        every.append(score)
        (answerable if row["answers"] else none_right).append(score)
    mean = lambda xs: round(sum(xs) / len(xs), 4) if xs else None  # noqa: E731
    return {"all": mean(every), "answerable_f1": mean(answerable), "no_answer_right": mean(none_right)}


def judged_updates(rows: list[dict], choice: reading.Choice) -> dict:
    by_kind: dict = {}
    answered: list[bool] = []
    for row in rows:
        said = row["fixed"] or reading.decide(row["question"], row["library"], row["lines"], row["threshold"], choice,
                                              row["restated"], alike(), row["alone"])
        by_kind.setdefault(row["kind"], []).append(float(row["right"](said)))
        answered.append(not said.abstained)
    every = [x for v in by_kind.values() for x in v]
    return {"all": round(sum(every) / max(len(every), 1), 4), "answered": round(sum(answered) / max(len(answered), 1), 4),
            **{kind: round(sum(v) / len(v), 3) for kind, v in sorted(by_kind.items())}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("conversations", type=Path, nargs=2)
    parser.add_argument("--updates", type=Path, metavar="SUITE", help="the update suite: its tune half counts too")
    parser.add_argument("--dialogues", type=Path, nargs="+", metavar="FILE",
                        help="public dialogue QA sets (bench_dialogues.py): every choice reported on them, none chosen")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--only", choices=SEARCHES, action="append",
                        help="only this search beside the shipped choice (repeatable; default: the full grid and every one)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tune-reader-") as root:
        tune(args, Path(root))


def memoized() -> None:
    """What decide() asks of a line or a question, remembered (it does not depend on the choice)."""
    about, asking, named = people.about, reading.asking, reading.named_people
    abouts, asks, names = {}, {}, {}

    def about_(entry, people):
        key = (id(entry), frozenset(people))
        if key not in abouts:
            abouts[key] = about(entry, people)
        return abouts[key]

    def asking_(text):
        if text not in asks:
            asks[text] = asking(text)
        return asks[text]

    def named_(question, people):
        key = (question, frozenset(people))
        if key not in names:
            names[key] = named(question, people)
        return names[key]

    people.about, reading.asking, reading.named_people = about_, asking_, named_
    speakers, known = Library.speakers, {}

    def speakers_(self):
        key = (id(self), len(self._docs))
        if key not in known:
            known[key] = speakers(self)
        return known[key]

    Library.speakers = speakers_


def tune(args, root: Path) -> None:
    rows = capture(args.conversations, root)
    updates = capture_updates(args.updates, root) if args.updates else []
    tune_half = [r for r in updates if r["conv"] == "updates-tune"]
    report_half = [r for r in updates if r["conv"] == "updates-report"]
    dialogues = capture_dialogues(args.dialogues, root) if args.dialogues else []
    memoized()

    def public(choice) -> dict:
        """The choice on each public dialogue set (only ever reported)."""
        return {name: judged([r for r in dialogues if r["conv"] == name], choice)
                for name in dict.fromkeys(r["conv"] for r in dialogues)}

    choices = [reading.Choice(threshold=t, subject=s, recent=r, stating=a, whose=w, restated=n, kin=k)
               for t, s, r, a, w, n, k in itertools.product(THRESHOLDS, SUBJECT, RECENT, STATING, WHOSE, RESTATED, KIN)
               if n is not None or k is None]  # kin only matters where a restatement may answer
    convs = sorted({r["conv"] for r in rows})

    def objective(parts: list[list[dict]], choice) -> float:
        return sum(judged(part, choice)["all"] for part in parts if part) / max(sum(1 for p in parts if p), 1)

    def chosen(parts: list[list[dict]], among: list[reading.Choice] = choices) -> reading.Choice:
        """The best choice; those within TIE of it are ties, and of them the one that answers most wins
        (a difference of less than a question a conversation is no reason to say "I don't know" more)."""
        scored = [(objective(parts, c), c) for c in among]
        top = max(score for score, _ in scored)
        tied = [c for score, c in scored if score >= top - TIE]
        return max(tied, key=lambda c: (sum(judged(p, c)["answered"] for p in parts if p),
                                         objective(parts, c)))

    report = {"shipped": {c: judged([r for r in rows if r["conv"] == c], reading.DEFAULT) for c in convs}
              | public(reading.DEFAULT)}
    if updates:
        report["shipped"]["updates tune"] = judged(tune_half, reading.DEFAULT)
        report["shipped"]["updates report"] = judged(report_half, reading.DEFAULT)
    everything = [[r for r in rows if r["conv"] == c] for c in convs] + [tune_half]
    full = not args.only  # the full grid, and what is reported beside its choice
    if full:
        for tune, other in itertools.permutations(convs):
            on = [[r for r in rows if r["conv"] == tune], tune_half]
            best = chosen(on)
            report[f"chosen on {tune}" + (" and the updates' tune half" if updates else "")] = {
                "choice": asdict(best), "tune": judged(on[0], best),
                "report": judged([r for r in rows if r["conv"] == other], best)}
        best = chosen(everything)
        report["chosen on both conversations" + (" and the updates' tune half" if updates else "")] = {
            "choice": asdict(best), **{c: judged([r for r in rows if r["conv"] == c], best) for c in convs},
            **({"updates tune": judged(tune_half, best), "updates report": judged(report_half, best)} if updates else {})}
        for whose in WHOSE:  # the choice with each value of the whose rule beside it
            other = replace(best, whose=whose)
            report[f"the same with whose={whose}"] = {
                c: judged([r for r in rows if r["conv"] == c], other) for c in convs} | (
                {"updates tune": judged(tune_half, other), "objective": round(objective(everything, other), 4)}
                if updates else {"objective": round(objective(everything, other), 4)})
        for restated, kin in itertools.product(RESTATED, KIN):  # what ships with each margin a newer restatement needs
            other = replace(reading.DEFAULT, restated=restated, kin=kin)
            report[f"the shipped choice with restated={restated}, kin={kin}"] = {
                c: judged([r for r in rows if r["conv"] == c], other) for c in convs} | (
                {"updates tune": judged(tune_half, other), "updates report": judged(report_half, other)} if updates else {})
    def beside(label: str, among: list[reading.Choice], fields: tuple[str, ...], shipped: list[dict],
               suite: bool = True) -> None:
        """A search of ``fields`` alone (``among``: the rest as shipped): each fold's choice reported on the other,
        the choice on everything, and the shipped choice with each of ``shipped`` (field values); ``suite=False``:
        chosen on the conversations alone (the update suite's halves both only reported)."""
        def picked(pick):
            return {"choice": {f: getattr(pick, f) for f in fields}}
        everything_ = everything if suite else everything[:-1]
        for tune, other in itertools.permutations(convs):
            on = [[r for r in rows if r["conv"] == tune], tune_half if suite else []]
            pick = chosen(on, among)
            report[f"{label} chosen on {tune}"] = picked(pick) | {
                "tune": judged(on[0], pick), "report": judged([r for r in rows if r["conv"] == other], pick),
                **({"updates report": judged(report_half, pick)} if updates else {}), **public(pick)}
        pick = chosen(everything_, among)
        report[f"{label} chosen on both conversations" + (" and the updates' tune half" if updates and suite else "")] = \
            picked(pick) | {c: judged([r for r in rows if r["conv"] == c], pick) for c in convs} | (
                {"updates tune": judged(tune_half, pick), "updates report": judged(report_half, pick)} if updates else {}
            ) | public(pick)
        for values in shipped:
            other = replace(reading.DEFAULT, **values)
            report["the shipped choice with " + ", ".join(f"{k}={v}" for k, v in values.items())] = {
                c: judged([r for r in rows if r["conv"] == c], other) for c in convs} | (
                {"updates tune": judged(tune_half, other), "updates report": judged(report_half, other)}
                if updates else {}) | public(other)

    def wanted(search: str) -> bool:
        return full or search in args.only

    # the person rule's margin: chosen alone at the shipped threshold, the rest as shipped
    if wanted("whose"):
        beside("whose", [replace(reading.DEFAULT, whose=w) for w in WHOSE_WIDE], ("whose",),
               [{"whose": w} for w in WHOSE_WIDE])
    # the lines read alone for whose line answers: how many and by how much, the rest as shipped
    if wanted("alone"):
        beside("alone and whose_alone", [replace(reading.DEFAULT, alone=n, whose_alone=w) for n in ALONE for w in WHOSE_ALONE],
               ("alone", "whose_alone"), [{"alone": n, "whose_alone": w} for n in ALONE for w in WHOSE_ALONE])
    # the ranking's place: chosen with the threshold, the rest as shipped
    if wanted("ranked"):
        beside("threshold and ranked", [replace(reading.DEFAULT, threshold=t, ranked=r) for t in THRESHOLDS for r in RANKED],
               ("threshold", "ranked"), [{"ranked": r} for r in RANKED])
    # a line's likeness in meaning: chosen on the conversations alone at the shipped threshold (the update suite,
    # which keeps asking for more of it while conv-26 loses, held out), the rest as shipped
    if wanted("meaning"):
        beside("meaning", [replace(reading.DEFAULT, meaning=m) for m in MEANING], ("meaning",),
               [{"meaning": m} for m in MEANING], suite=False)
    # the latest line of the same kind: chosen with the threshold, the rest as shipped
    pairs = [(r, k) for r in RECENT_WIDE for k in RECENT_KIN if r > 0 or k is None]
    if wanted("recent"):
        beside("threshold, recent and recent_kin",
               [replace(reading.DEFAULT, threshold=t, recent=r, recent_kin=k) for t in THRESHOLDS for r, k in pairs],
               ("threshold", "recent", "recent_kin"), [{"recent": r, "recent_kin": k} for r, k in pairs])
    # the new value of a line that names the old one too: the margin it needs
    if wanted("moved"):
        beside("moved", [replace(reading.DEFAULT, moved=m) for m in MOVED], ("moved",), [{"moved": m} for m in MOVED])
    for rule, values in RULES_OFF.items() if wanted("rules") else [("the person rule", RULES_OFF["the person rule"])]:
        other = replace(reading.DEFAULT, **values)
        report[f"the shipped choice without {rule}"] = {
            c: judged([r for r in rows if r["conv"] == c], other) for c in convs} | (
            {"updates tune": judged(tune_half, other), "updates report": judged(report_half, other)} if updates else {}
        ) | public(other)
    print(json.dumps(report, indent=1))
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
