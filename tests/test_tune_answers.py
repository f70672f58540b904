"""The answer-tuning script scores a tuning over arrays (benchmarks/tune_answers.py ``Table``); it must answer
exactly as :func:`memcli.retrieve.extractive.choose` does, or the constants it picks are not the ones shipped."""

import math
import random
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _rows(rng: random.Random, n: int) -> list[dict]:
    from memcli.retrieve.extractive import UNKNOWN

    rows = []
    for i in range(n):
        texts = [f"span {i} {j}" for j in range(rng.randint(0, 7))]
        ranks = sorted(rng.randint(0, 3) for _ in texts)  # listed best-ranked entry first, as candidates() lists
        listed = [[t, r, rng.choice([0.0, 0.5, 1.0]), rng.choice([0.0, 0.5]), rng.random() < 0.7]
                  for t, r in zip(texts, ranks)]
        scores = {t: [rng.choice([-2.0, -4.0, -6.0, -math.inf]), rng.randint(1, 4)] for t in texts
                  if rng.random() < 0.9}  # an unscored candidate counts -inf
        if rng.random() < 0.8:
            scores[UNKNOWN] = [rng.choice([-1.0, -3.0, -8.0]), rng.randint(1, 4)]
        theirs = [c for c in listed if c[4]]
        refused_subject = not theirs and rng.random() < 0.5
        rules = {"00": [listed, None if listed else "nothing read adds to the question"],
                 "10": [theirs, "nothing read is Ana's or about them" if refused_subject else None],
                 "01": [listed if rng.random() < 0.8 else [], "no line read holds a word of the question"],
                 "11": [theirs if rng.random() < 0.8 else [], "no line read holds a word of the question"]}
        rows.append({"question": f"q{i}", "gold": f"span {i} 1", "category": rng.choice([1, 2, 4, 5]),
                     "rules": rules, "scores": scores})
    return rows


def test_the_array_scoring_answers_as_choose_does_on_every_sampled_tuning():
    sys.path.insert(0, str(REPO / "benchmarks"))
    from tune_answers import Table, answer, check, tunings

    rng = random.Random(7)
    rows = _rows(rng, 300)
    table = Table(rows)
    grid = tunings()
    sample = rng.sample(grid, 150)
    check(table, sample)  # every row answered as answer() (choose) answers it, or AssertionError
    plain = [answer(row, grid[0]) for row in rows]
    differed = sum([answer(row, tuning) for row in rows] != plain for tuning in sample)
    assert differed > 100  # the sampled tunings do answer differently: the comparison has something to compare
