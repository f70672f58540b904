"""The real default model (SmolLM2-135M) consolidating a whole LoCoMo conversation."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from conftest import LOCOMO, needs_locomo, run_memcli

from memcli.paths import Resolved
from memcli.store import Store
from memcli.store.format import parse_document

pytestmark = [needs_locomo, pytest.mark.slow]


def test_default_model_consolidates_conv26_losing_nothing(tmp_path):
    store_dir = tmp_path / "store"
    assert run_memcli("--store", store_dir, "ingest", LOCOMO / "conv-26.json", "--no-auto").code == 0
    store = Store.open(Resolved(store_dir, "test"))
    before = {e.seq: (dict(e.meta), e.text) for _, e in store.load("CURRENT").doc.entries()}

    result = run_memcli("--store", store_dir, "consolidate", "--llm", "--json")
    assert result.code == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["llm"] is True and report["model"].startswith("SmolLM2")
    assert report["calls"]["calls"] > 0 and report["entries_consolidated"] == len(before)

    seen: Counter = Counter()
    for doc_id in store.all_ids():
        doc = parse_document(store.doc_path(doc_id).read_text())  # every document parses
        if doc_id != "CURRENT":
            assert doc.meta["id"] == doc_id and doc.meta["summary"]
        for _, entry in doc.entries():
            seen[entry.seq] += 1
            meta = dict(entry.meta)
            meta.pop("superseded_by", None)
            assert (meta, entry.text) == before[entry.seq]
    assert seen == Counter(before.keys())  # every seq exactly once
