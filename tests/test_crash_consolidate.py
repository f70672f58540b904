"""Fault injection: `memcli consolidate` killed at random moments never loses an entry."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter

import pytest
from conftest import LOCOMO, needs_locomo, run_memcli

from memcli.paths import Resolved
from memcli.store import Store
from memcli.store.format import parse_document

pytestmark = [needs_locomo, pytest.mark.slow]


def store_seqs(root) -> Counter:
    store = Store.open(Resolved(root, "test"))
    seqs: Counter = Counter()
    for doc_id in store.all_ids():
        doc = parse_document(store.doc_path(doc_id).read_text())  # raises if a document is broken
        seqs.update(e.seq for _, e in doc.entries())
    return seqs


def test_kill_consolidate_at_random_points(tmp_path):
    template = tmp_path / "template"
    assert run_memcli("--store", template, "ingest", LOCOMO / "conv-30.json", "--no-auto").code == 0
    expected = store_seqs(template)
    env = {**os.environ, "MEMCLI_CONSOLIDATE_TOKENS": "1500", "MEMCLI_TEST_COMMIT_PAUSE": "0.01"}
    # how long an uninterrupted run takes, to spread the kills over it: the faster of two runs (the first
    # pays for cold caches), and kills within 80% of it, so that a run a little faster than the one timed
    # is still killed (a kill after the end tests nothing)
    durations = []
    for attempt in range(2):
        timing = tmp_path / f"timing-{attempt}"
        shutil.copytree(template, timing)
        start = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "memcli", "--store", str(timing), "consolidate", "--no-llm"],
                              env=env, capture_output=True)
        assert done.returncode == 0, done.stderr.decode()
        durations.append(time.monotonic() - start)
        assert store_seqs(timing) == expected
    duration = max(0.3, 0.8 * min(durations))

    rng = random.Random(1234)
    outcomes = Counter()
    for trial in range(24):
        root = tmp_path / f"trial-{trial}"
        shutil.copytree(template, root)
        proc = subprocess.Popen([sys.executable, "-m", "memcli", "--store", str(root), "consolidate", "--no-llm"],
                                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.2, duration))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        outcomes["killed" if proc.returncode == -signal.SIGKILL else "finished"] += 1
        # the next command (any command) recovers, then nothing is lost and everything parses
        status = run_memcli("--store", root, "status", "--json")
        assert status.code == 0, status.stderr
        assert not any((root / ".txn").iterdir())
        assert store_seqs(root) == expected, f"trial {trial}"
        # and consolidation can be finished afterwards
        assert run_memcli("--store", root, "consolidate", "--no-llm").code == 0
        assert store_seqs(root) == expected
    assert outcomes["killed"] >= 20, outcomes
