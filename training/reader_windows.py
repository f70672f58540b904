"""The reader's training windows, shaped as memcli reads memory (``[YYYY-MM-DD HH:MM] speaker: text`` lines),
built from the public QA sets in ../shared/data/qa/ (never from LoCoMo or the examples):

- SQuAD 1.1: an answer's sentence with 0-1 neighbours each side, and for a share of the questions a
  no-answer window of the same passage's far sentences;
- Molweni dialogues whole (their unanswerable questions kept); FriendsQA answers in a run of 1-6 lines each
  side of theirs, and no-answer runs far from them; half the dialogues dated on their first line;
- **someone else said it** (:func:`wrong_speaker_windows`): a dialogue question that names the speaker of the
  answer's line, asked of another speaker of the same lines instead, labelled no answer (the shape of
  LoCoMo's unanswerable questions: memory holds the answer, but someone else's);
- **a value said again** (:func:`update_windows`): the answer's line said twice at different times with
  different values (the other value an answer to another question of the same kind), among other lines of
  its passage, dated in order; the question is answered by the later one (memory's "now").
"""

from __future__ import annotations

import random
import re
import sys
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from memcli.qa import features  # noqa: E402
from memcli.qa.model import line_ranges as line_spans  # noqa: E402
from memcli.qa.sets import Example, load  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "qa"

SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")


def sentences(text: str) -> list[tuple[int, int]]:
    spans, at = [], 0
    for m in SENTENCE_END.finditer(text):
        spans.append((at, m.start()))
        at = m.end()
    spans.append((at, len(text)))
    return [s for s in spans if s[1] > s[0]]


def stamp(rng: random.Random) -> str:
    """A random ``[YYYY-MM-DD HH:MM] `` as memcli dates a line."""
    return f"[{rng.randint(2019, 2026)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d} " \
           f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}] "


def date_lines(text: str, rng: random.Random) -> tuple[str, list[int]]:
    """``text``'s lines with ``[YYYY-MM-DD HH:MM] `` before the first (and now and then another), and the
    characters added before each original offset (a map for moving answer offsets)."""
    lines = text.split("\n")
    out, shift = [], []
    added = 0
    for i, line in enumerate(lines):
        if i == 0 or rng.random() < 0.1:
            dated = stamp(rng)
            added += len(dated)
            out.append(dated + line)
        else:
            out.append(line)
        shift.append(added)
    return "\n".join(out), shift


def moved(text: str, shift: list[int], offset: int) -> int:
    return offset + shift[text.count("\n", 0, offset)]


class Item(NamedTuple):
    """A question and the passage it is read with, as text: the answer's characters (None: no answer), and which
    of the passage's windows train on it (``first``; ``all``; ``answered``: the first that holds the answer)."""

    question: str
    passage: str
    answer: tuple[int, int] | None
    windows: str = "first"


def tokenized(tokenizer, items: list[Item]) -> list:
    """The training rows of ``items``: ``(ids, first, start, end)`` of the windows each one names."""
    out = []
    for item in items:
        rows = labelled(tokenizer, item.question, item.passage, item.answer)
        if item.windows == "answered":
            rows = [r for r in rows if r[2]]
        out += rows if item.windows == "all" else rows[:1]
    return out


def labelled(tokenizer, question, passage, answer: tuple[int, int] | None, window=features.WINDOW):
    """The windows of a passage with their labels: ``(ids, first, start, end)``; 0, 0 for no answer."""
    out = []
    for w in features.windows(tokenizer, question, passage, window=window):
        span = w.token_span(*answer) if answer else None
        if span and span[1] - span[0] >= features.MAX_ANSWER:
            continue
        out.append((w.ids, w.first, *(span or (0, 0))))
    return out


def squad_windows(examples: list[Example], rng, no_answer_share):
    out = []
    for ex in examples:
        spans = sentences(ex.context)
        start, text = ex.starts[0], ex.answers[0]
        end = start + len(text)
        first = next((i for i, (s, e) in enumerate(spans) if e > start), 0)
        last = next((i for i, (s, e) in enumerate(spans) if e >= end), len(spans) - 1)
        lo, hi = max(first - rng.randint(0, 1), 0), min(last + rng.randint(0, 1), len(spans) - 1)
        base = spans[lo][0]
        passage = ex.context[base:spans[hi][1]]
        out.append(Item(ex.question, passage, (start - base, end - base)))
        far = [i for i in range(len(spans)) if i < first - 2 or i > last + 2]
        if far and rng.random() < no_answer_share:
            i = rng.choice(far)
            lo, hi = i, min(i + rng.randint(0, 2), len(spans) - 1)
            passage = ex.context[spans[lo][0]:spans[hi][1]]
            if text.lower() not in passage.lower():
                out.append(Item(ex.question, passage, None))
    return out


def dialogue_windows(examples: list[Example], rng, no_answer_share, around: tuple[int, int] | None):
    """Dialogue questions: whole (``around`` None) or the run of lines ``around`` the answer's (a random
    number of lines each side between the two), and no-answer runs far from it."""
    out = []
    for ex in examples:
        context, shift = date_lines(ex.context, rng) if rng.random() < 0.5 else (ex.context, None)
        offsets = [(ex.starts[0], ex.starts[0] + len(ex.answers[0]))] if ex.answers else []
        if shift is not None:
            offsets = [(moved(ex.context, shift, s), moved(ex.context, shift, e - 1) + 1) for s, e in offsets]
        if around is None:
            out.append(Item(ex.question, context, offsets[0] if offsets else None, "all"))
            continue
        lines, at = [], 0
        for line in context.split("\n"):
            lines.append((at, at + len(line)))
            at += len(line) + 1
        if not offsets:
            continue
        s, e = offsets[0]
        first = next(i for i, (a, b) in enumerate(lines) if b >= s)
        last = next(i for i, (a, b) in enumerate(lines) if b >= e - 1)
        lo = max(first - rng.randint(*around), 0)
        hi = min(last + rng.randint(*around), len(lines) - 1)
        base = lines[lo][0]
        out.append(Item(ex.question, context[base:lines[hi][1]], (s - base, e - base)))
        span = around[1]
        far = [i for i in range(len(lines) - span) if i + span < first - 1 or i > last + 1]
        if far and rng.random() < no_answer_share:
            i = rng.choice(far)
            passage = context[lines[i][0]:lines[i + rng.randint(*around)][1]]
            if all(a.lower() not in passage.lower() for a in ex.answers):
                out.append(Item(ex.question, passage, None))
    return out


def speaker_of(line: str) -> str | None:
    """The ``speaker`` of a ``speaker: text`` line (one person: a short label without a comma)."""
    head, sep, _ = line.partition(": ")
    return head if sep and 0 < len(head) <= 30 and "," not in head else None


def names(text: str, who: str, flags=0) -> bool:
    return re.search(rf"(?<!\w){re.escape(who)}(?!\w)", text, flags) is not None


def wrong_speaker_windows(examples: list[Example], rng, share: float, around=(1, 6), paired: bool = False):
    """For a ``share`` of the dialogue questions that name the speaker of their answer's line, the same question
    asked of another speaker of the lines read (one who says nothing holding the answer), labelled no answer;
    ``paired``: each with the question as asked on the same lines, labelled with its answer (so the name is all
    that tells the two apart: unpaired, a run of lines around the answer read with a question naming someone
    taught "none" to the questions that name the right speaker too, docs/reader.md)."""
    out = []
    for ex in examples:
        if not ex.answers or rng.random() >= share:
            continue
        lines = line_spans(ex.context)
        at = next(i for i, (a, b) in enumerate(lines) if b >= ex.starts[0])
        said = speaker_of(ex.context[slice(*lines[at])])
        if said is None or not names(ex.question, said):
            continue
        lo, hi = max(at - rng.randint(*around), 0), min(at + rng.randint(*around), len(lines) - 1)
        shown = [ex.context[slice(*span)] for span in lines[lo:hi + 1]]
        others = sorted({p for line in shown if (p := speaker_of(line)) and p != said and not names(ex.question, p, re.I)})
        others = [p for p in others if not any(speaker_of(line) == p and a.lower() in line.lower()
                                               for line in shown for a in ex.answers)]
        if not others:
            continue
        other = rng.choice(others)
        question = re.sub(rf"(?<!\w){re.escape(said)}(?!\w)", lambda _: other, ex.question)
        passage = "\n".join(shown)
        start, end = ex.starts[0] - lines[lo][0], ex.starts[0] - lines[lo][0] + len(ex.answers[0])
        if rng.random() < 0.5:
            dated, shift = date_lines(passage, rng)
            start, end, passage = moved(passage, shift, start), moved(passage, shift, end - 1) + 1, dated
        if paired:
            out.append(Item(ex.question, passage, (start, end)))
        out.append(Item(question, passage, None))
    return out


def kind(question: str) -> str:
    """The question's first word (what, who, where, how, ...): answers to the same kind are values of a kind."""
    found = re.search(r"[a-z]+", question.lower())
    return found.group(0) if found else ""


def dates_in_order(rng, count: int) -> list[str]:
    """``count`` distinct ``[YYYY-MM-DD HH:MM] `` stamps, earliest first."""
    import datetime as dt

    at = dt.datetime(rng.randint(2019, 2025), rng.randint(1, 12), rng.randint(1, 28), rng.randint(0, 23),
                     rng.randint(0, 59))
    out = []
    for _ in range(count):
        out.append(f"[{at:%Y-%m-%d %H:%M}] ")
        at += dt.timedelta(days=rng.randint(0, 60), minutes=rng.randint(1, 1440))
    return out


def update_windows(examples: list[Example], rng, count: int, speakers: list[str]):
    """``count`` questions whose answer's line is said twice, at two times, with two values (the answer, and an
    answer of another question of the same kind in its place), among 0-2 other lines of the passage (0-1 sentences of an article), each line
    dated in order; labelled with the later value. Half the questions ask about "now"."""
    pool: dict[str, list[str]] = {}
    for ex in examples:
        if ex.answers and len(ex.answers[0]) <= 40:
            pool.setdefault(kind(ex.question), []).append(ex.answers[0])
    picked = [e for e in examples if e.answers and len(pool.get(kind(e.question), ())) > 1]
    rng.shuffle(picked)
    out = []
    for ex in picked[:count]:
        units = line_spans(ex.context) if ex.dialogue else sentences(ex.context)
        start, answer = ex.starts[0], ex.answers[0]
        own = next(((a, b) for a, b in units if a <= start and start + len(answer) <= b), None)
        if own is None:
            continue
        text, offset = ex.context[own[0]:own[1]], start - own[0]
        who = speaker_of(text) if ex.dialogue else rng.choice(speakers)
        if who is None:
            continue
        if ex.dialogue:
            if offset < len(who) + 2:
                continue  # the answer is the speaker label
            text, offset = text[len(who) + 2:], offset - len(who) - 2
        other = rng.choice(pool[kind(ex.question)])
        if other.lower() in text.lower() or answer.lower() in other.lower():
            continue
        values = [(text, answer), (text[:offset] + other + text[offset + len(answer):], other)]
        rng.shuffle(values)
        rest = [ex.context[a:b] for a, b in units if (a, b) != own]
        rest = [t if ex.dialogue else f"{rng.choice(speakers)}: {t}" for t in rest
                if t.strip() and answer.lower() not in t.lower() and other.lower() not in t.lower()]
        fillers = rng.sample(rest, min(len(rest), rng.randint(0, 2 if ex.dialogue else 1)))
        said = [f"{who}: {v}" for v, _ in values]
        cuts = sorted(rng.randint(0, len(fillers)) for _ in range(2))
        order = fillers[:cuts[0]] + [said[0]] + fillers[cuts[0]:cuts[1]] + [said[1]] + fillers[cuts[1]:]
        lines = [s + line for s, line in zip(dates_in_order(rng, len(order)), order)]
        latest = cuts[1] + 1
        base = sum(len(line) + 1 for line in lines[:latest]) + len(lines[latest]) - len(said[1]) + len(who) + 2 + offset
        question = ex.question
        if rng.random() < 0.5 and question.rstrip().endswith("?"):
            question = question.rstrip()[:-1].rstrip() + " now?"
        out.append(Item(question, "\n".join(lines), (base, base + len(values[1][1])), "answered"))
    return out


def training_items(args, rng) -> dict[str, list[Item]]:
    """Every kind of training question the recipe in ``args`` asks for, by its name."""
    sets = {name: load(DATA / f"{name}.json.gz")[1] for name in
            ("squad_v1.1_train", "molweni_train", "friendsqa_trn")}
    out = {}
    squad = [e for e in sets["squad_v1.1_train"] if e.answers]
    rng.shuffle(squad)
    out["squad"] = squad_windows(squad[:args.squad], rng, args.no_answer)
    molweni = sets["molweni_train"]
    rng.shuffle(molweni)
    molweni = molweni[:args.molweni]
    out["molweni"] = dialogue_windows(molweni, rng, 0.0, None)
    friends = sets["friendsqa_trn"]
    rng.shuffle(friends)
    friends = friends[:args.friendsqa]
    out["friendsqa"] = dialogue_windows(friends, rng, args.no_answer, (1, 6))
    out["someone else said it"] = wrong_speaker_windows(molweni + friends, rng, args.wrong_speaker,
                                                       paired=args.paired)
    speakers = sorted({p for ex in molweni + friends for line in ex.context.split("\n") if (p := speaker_of(line))})
    mixed = squad + molweni + friends
    out["a value said again"] = update_windows(mixed, rng, args.updates, speakers)
    return out


def training_windows(tokenizer, args, rng) -> dict[str, list]:
    """Every kind of window the recipe in ``args`` asks for, by its name (:func:`training_items`, tokenized)."""
    return {name: tokenized(tokenizer, items) for name, items in training_items(args, rng).items()}


def report(out: dict[str, list]) -> list:
    """One line a kind of window (how many, how many without an answer, their length); all the rows."""
    for name, rows in out.items():
        none = sum(1 for r in rows if r[2] == 0)
        print(f"{name}: {len(rows)} windows ({none} no answer), "
              f"{sum(len(r[0]) for r in rows) / max(len(rows), 1):.0f} tokens on average", flush=True)
    return [r for rows in out.values() for r in rows]
