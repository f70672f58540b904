"""The token estimate against the real tokenizer; our BM25 against rank-bm25 built from scratch."""

from __future__ import annotations

import random

import pytest
from conftest import EXAMPLES, REPO

from memcli.index import LibraryIndex
from memcli.partitions import partitions
from memcli.paths import Resolved
from memcli.store import Store
from memcli.terms import terms
from memcli.tokens import count_tokens


def test_token_estimate_within_20_percent_of_smollm2():
    from memcli.llm.models import default_model_path
    from memcli.llm.runtime import Vocabulary

    real_count = Vocabulary(default_model_path()).count
    for path in [EXAMPLES / "caroline-and-priya.json", EXAMPLES / "chat-messages.json",
                 REPO / "memcli" / "index.py"]:
        text = path.read_text()
        real = real_count(text)
        assert real > 100
        assert abs(count_tokens(text) - real) / real < 0.20, (path, count_tokens(text), real)


def test_scores_equal_rank_bm25_over_the_same_partitions(cli, store_dir):
    from rank_bm25 import BM25Okapi

    rng = random.Random(7)
    words = ["adoption", "agency", "pottery", "bowl", "minivan", "kayak", "garden", "tomato", "sister", "course", "home", "study", "waiting", "list", "parent", "match", "friday", "thursday", "class"]
    lines = [" ".join(rng.choice(words) for _ in range(rng.randint(3, 12))) for _ in range(120)]
    assert cli("ingest", "-", "--format", "text", stdin="\n\n".join(lines).encode()).code == 0
    store = Store.open(Resolved(store_dir, "test"))
    index = LibraryIndex(store, partition_tokens=40)
    parts = partitions(store.load("CURRENT").doc, 40)
    reference = BM25Okapi([terms(p.text) for p in parts])
    for query in ["adoption agency", "kayak tomato", "home study waiting list", "class"]:
        expected = reference.get_scores(terms(query))
        hits = index.search(query, k=len(parts))
        got = {(h.start_line, h.end_line): h.score for h in hits}
        for part, score in zip(parts, expected):
            key = (part.start, part.end)
            if key in got:
                assert got[key] == pytest.approx(score, rel=1e-9, abs=1e-9)
            else:
                assert score == 0  # only partitions without a query term are left out
    index.close()
