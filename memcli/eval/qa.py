"""``memcli eval qa``: memcli's reader scored on extractive question-answering sets, the standard way.

Each question is read with its whole passage or dialogue (windows of :data:`memcli.qa.features.WINDOW`
tokens sharing :data:`~memcli.qa.features.STRIDE`, as the reader reads memory), and its answer is the
best span of all the windows, or none when the reader's no-answer margin wins (:mod:`memcli.qa.model`).
Scores are SQuAD's: exact match and token F1 against the best of the gold answers after lower-casing
and dropping punctuation and articles; a question with no answer scores 1 when none is given. The
records also give the threshold that would have scored best on the set (``best_threshold``): choose a
threshold on a split you do not report.
"""

from __future__ import annotations

import random
import re
import string
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from memcli.errors import UsageError
from memcli.qa.sets import Example, load
from memcli.results import Result

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = set(string.punctuation)


def normalize(text: str) -> str:
    """SQuAD's answer normalisation: lower case, no punctuation, no articles, single spaces."""
    text = "".join(c for c in text.lower() if c not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def f1(prediction: str, gold: str) -> float:
    pred, ref = normalize(prediction).split(), normalize(gold).split()
    if not pred or not ref:
        return float(pred == ref)
    common = sum((Counter(pred) & Counter(ref)).values())
    if not common:
        return 0.0
    precision, recall = common / len(pred), common / len(ref)
    return 2 * precision * recall / (precision + recall)


def scores(prediction: str, golds: list[str]) -> tuple[float, float]:
    """(exact match, F1) of ``prediction`` ("" for no answer) against the best gold answer (none: "")."""
    golds = golds or [""]
    return (max(float(normalize(prediction) == normalize(g)) for g in golds),
            max(f1(prediction, g) for g in golds))


@dataclass
class QaResult(Result):
    files: list[dict]  # per file: format, questions, em, f1, has_answer_f1, no_answer_right, ...
    threshold: float
    seconds: float


def parse_part(spec: str | None) -> tuple[int, int] | None:
    """``"1/2"`` -> (1, 2): the first of two parts."""
    if spec is None:
        return None
    try:
        i, n = (int(x) for x in spec.split("/"))
    except ValueError:
        raise UsageError(f"--part takes I/N (the I-th of N parts of the passages), not {spec!r}") from None
    if not 1 <= i <= n:
        raise UsageError(f"--part {spec}: I must be between 1 and N")
    return i, n


def part_of(examples: list[Example], part: tuple[int, int] | None) -> list[Example]:
    """The questions of the ``i``-th of ``n`` runs of the file's passages (articles, dialogues) in file
    order: a split that keeps each passage on one side."""
    if part is None:
        return examples
    groups = list(dict.fromkeys(e.group for e in examples))
    i, n = part
    keep = set(groups[(i - 1) * len(groups) // n: i * len(groups) // n])
    return [e for e in examples if e.group in keep]


def sample(examples: list[Example], limit: int | None, seed: int) -> list[Example]:
    if limit is None or limit >= len(examples):
        return examples
    return sorted(random.Random(seed).sample(examples, limit), key=examples.index)


def summarize(rows: list[dict], threshold: float) -> dict:
    """The set's scores at ``threshold``, and the threshold that would have scored best."""
    def at(t: float) -> tuple[float, float]:
        em = f = 0.0
        for r in rows:
            e, s = (r["em_answered"], r["f1_answered"]) if r["margin"] is not None and r["margin"] >= t \
                else (float(r["impossible"]), float(r["impossible"]))
            em, f = em + e, f + s
        return em / max(len(rows), 1), f / max(len(rows), 1)

    em, f = at(threshold)
    answerable = [r for r in rows if not r["impossible"]]
    impossible = [r for r in rows if r["impossible"]]
    answered = lambda r: r["margin"] is not None and r["margin"] >= threshold  # noqa: E731
    candidates = sorted({r["margin"] for r in rows if r["margin"] is not None})
    best = max(candidates, key=lambda t: at(t)[1], default=threshold) if impossible else threshold
    return {
        "questions": len(rows), "em": round(em, 4), "f1": round(f, 4),
        "has_answer_f1": round(sum(r["f1_answered"] for r in answerable if answered(r)) / max(len(answerable), 1), 4),
        "no_answer": len(impossible),
        "no_answer_right": round(sum(not answered(r) for r in impossible) / len(impossible), 4) if impossible else None,
        "abstained": round(sum(not answered(r) for r in rows) / max(len(rows), 1), 4),
        "best_threshold": round(best, 3), "f1_at_best_threshold": round(at(best)[1], 4),
    }


def evaluate(paths: list[Path], *, limit: int | None = None, seed: int = 0, threshold: float | None = None,
             part: str | None = None,
             progress: Callable[[str, int, int], None] | None = None, reader=None,
             records: list | None = None) -> QaResult:
    """Score the reader on each QA file (``limit``: a seeded sample of that many questions a file)."""
    if limit is not None and limit < 1:
        raise UsageError("--limit must be at least 1")
    split = parse_part(part)
    loaded = [(path, *load(path)) for path in paths]  # every file read before any is scored
    if reader is None:
        from memcli.qa.model import Reader

        reader = Reader()
    used = reader.threshold if threshold is None else threshold
    began = time.perf_counter()
    files = []
    for path, kind, examples in loaded:
        examples = part_of(examples, split)
        chosen = sample(examples, limit, seed)
        rows = []
        for done, ex in enumerate(chosen):
            span = reader.best(ex.question, [ex.context])
            text = span.text if span is not None else ""
            em, f = scores(text, ex.answers)
            rows.append({"id": ex.id, "impossible": ex.impossible, "answer": text,
                         "margin": None if span is None else round(span.margin, 4), "em_answered": em,
                         "f1_answered": f})
            if progress:
                progress(path.name, done + 1, len(chosen))
        if records is not None:
            records.extend({"file": path.name, **r} for r in rows)
        files.append({"file": str(path), "format": kind, "part": part, "of": len(examples), **summarize(rows, used)})
    return QaResult(files=files, threshold=used, seconds=round(time.perf_counter() - began, 1))
