"""Writers are serialized across processes; interrupted transactions finish or roll back."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import snapshot

from memcli.paths import Resolved
from memcli.store import CURRENT_ID, Store, atomic


def test_parallel_ingests_never_lose_or_duplicate_a_seq(tmp_path, store_dir):
    writers, turns_each = 6, 40
    files = []
    for w in range(writers):
        path = tmp_path / f"chat-{w}.json"
        path.write_text(json.dumps([{"role": "user", "content": f"writer {w} fact {i}"}
                                    for i in range(turns_each)]))
        files.append(path)
    procs = [subprocess.Popen([sys.executable, "-m", "memcli", "--store", str(store_dir), "ingest",
                               str(f), "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              env=os.environ.copy())
             for f in files]
    results = [p.communicate(timeout=120) for p in procs]
    for proc, (out, err) in zip(procs, results):
        assert proc.returncode == 0, err.decode()
        assert json.loads(out)["added"] == turns_each

    store = Store.open(Resolved(store_dir, "test"))
    entries = [e for _, e in store.load(CURRENT_ID).doc.entries()]
    seqs = [e.seq for e in entries]
    assert sorted(seqs) == list(range(1, writers * turns_each + 1))  # each exactly once
    assert sorted(e.text for e in entries) == sorted(
        f"writer {w} fact {i}" for w in range(writers) for i in range(turns_each))
    assert store.read_state()["next_seq"] == writers * turns_each + 1
    # each ingest's turns are contiguous: no interleaving inside one transaction
    for w in range(writers):
        mine = [e.seq for e in entries if e.text.startswith(f"writer {w} ")]
        assert mine == list(range(mine[0], mine[0] + turns_each))


def _staged_transaction(root, files: dict[str, str], commit_manifest: bool):
    """Leave a transaction as a crash would: staged files, with or without the manifest."""
    txn = atomic.Transaction(root)
    for rel, text in files.items():
        txn.write(rel, text)
    if commit_manifest:
        (root / atomic.TXN_DIR / atomic.MANIFEST).write_text(json.dumps({"ops": txn.ops}))


def test_crash_before_commit_point_rolls_back(cli, store_dir):
    assert cli("ingest", "-", "--format", "text", stdin=b"first fact\n").code == 0
    before = snapshot(store_dir)
    _staged_transaction(store_dir, {"CURRENT.md": "garbage", "state.json": "{}"}, commit_manifest=False)
    result = cli("grep", "first fact")
    assert result.code == 0
    after = snapshot(store_dir)
    assert after == before  # staged files discarded, nothing applied


def test_crash_after_commit_point_is_completed(cli, store_dir):
    assert cli("ingest", "-", "--format", "text", stdin=b"first fact\n").code == 0
    store = Store.open(Resolved(store_dir, "test"))
    doc = store.load(CURRENT_ID).doc
    new_text = doc.render().replace("first fact", "corrected fact")
    _staged_transaction(store_dir, {"CURRENT.md": new_text}, commit_manifest=True)
    # simulate that the crash happened after the first rename: recovery must be idempotent
    atomic.recover(store_dir)
    assert "corrected fact" in (store_dir / "CURRENT.md").read_text()
    assert not any((store_dir / atomic.TXN_DIR).iterdir())
    assert cli("grep", "corrected fact").code == 0


def test_half_applied_transaction_is_finished_by_the_next_writer(cli, store_dir):
    assert cli("ingest", "-", "--format", "text", stdin=b"first fact\n").code == 0
    store = Store.open(Resolved(store_dir, "test"))
    doc = store.load(CURRENT_ID).doc
    _staged_transaction(store_dir, {"CURRENT.md": doc.render().replace("first", "second"),
                                    "state.json": json.dumps({"format": 1, "next_seq": 2}) + "\n"},
                        commit_manifest=True)
    # the first rename happened before the "crash"
    os.replace(store_dir / atomic.TXN_DIR / "00000.stage", store_dir / "CURRENT.md")
    result = cli("ingest", "-", "--format", "text", "--json", stdin=b"third fact\n")
    assert result.code == 0, result.stderr
    assert result.json["first_seq"] == 2
    texts = [e.text for _, e in store.load(CURRENT_ID).doc.entries()]
    assert texts == ["second fact", "third fact"]


READER = r"""
import sys
from memcli import Memory
from memcli.config import Settings
memory = Memory(sys.argv[1], settings={"search.semantic": False})
for i in range(int(sys.argv[2])):
    memory.search("fact writer round", k=5)
    memory.ask("which facts did the writer note?", reader="evidence-only", budget=300)
print("ok")
"""

WRITER = r"""
import sys
from memcli import Memory
memory = Memory(sys.argv[1], settings={"search.semantic": False, "consolidate.split_tokens": 300})
for i in range(int(sys.argv[2])):
    for j in range(3):
        memory.remember(f"round {i} fact {j}: the writer noted item {i * 3 + j}", speaker="user")
    memory.consolidate(llm=False)
print("ok")
"""

INGESTER = r"""
import json, pathlib, sys
from memcli import Memory
memory = Memory(sys.argv[1], settings={"search.semantic": False})
for i in range(int(sys.argv[2])):
    messages = [{"role": "user", "content": f"ingested round {i} note {j} about the harbour",
                 "timestamp": "2024-05-01T10:00:00Z"} for j in range(2)]
    path = pathlib.Path(sys.argv[1]).parent / f"ingest-{i}.json"
    path.write_text(json.dumps({"messages": messages}))
    memory.ingest(path, consolidate=False)
print("ok")
"""


@pytest.mark.slow
def test_readers_never_fail_beside_consolidating_and_ingesting_writers(tmp_path, store_dir):
    """Search and evidence questions in loops from two processes while a third remembers and consolidates and
    a fourth ingests files, 100 rounds each: the index is read as one snapshot and writers take turns, so no
    command fails however the writes fall between its reads, and no entry is lost or doubled."""
    from memcli import Memory

    Memory(store_dir, create=True).remember("the writer starts", speaker="user")
    env = {**os.environ, "MEMCLI_CACHE": str(tmp_path / "cache")}  # one cache, shared as users share it
    rounds = 100
    procs = [subprocess.Popen([sys.executable, "-c", code, str(store_dir), str(n)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, env=env)
             for code, n in ((WRITER, rounds), (INGESTER, rounds), (READER, rounds), (READER, rounds))]
    for proc in procs:
        out, err = proc.communicate(timeout=900)
        assert proc.returncode == 0 and out.strip() == b"ok", err.decode()[-2000:]
    store = Store.open(Resolved(store_dir, "test"))
    seqs = sorted(e.seq for doc_id in store.all_ids() for _, e in store.load(doc_id).doc.entries())
    assert seqs == list(range(1, rounds * 5 + 2))  # nothing lost or doubled


class _Pausing:
    """A SQLite connection that, after its first read of the postings, lets ``meanwhile`` run in another thread
    for a moment (another process re-indexing the library between two reads of a search)."""

    def __init__(self, db, meanwhile):
        self._db, self._meanwhile, self.done = db, meanwhile, None

    def __getattr__(self, name):
        return getattr(self._db, name)

    def execute(self, sql, *args):
        rows = self._db.execute(sql, *args)
        if "FROM postings WHERE term IN" in sql and self.done is None:
            import threading
            import time

            rows = list(rows)
            self.done = threading.Thread(target=self._meanwhile)
            self.done.start()
            time.sleep(1.0)  # long enough for the other writer to commit, if the snapshot let it
        return rows


def test_a_search_is_one_snapshot_while_another_process_reindexes(tmp_path, store_dir):
    from memcli import Memory
    from memcli.index import LibraryIndex

    memory = Memory(store_dir, create=True)
    for i in range(30):
        memory.remember(f"fact {i}: the harbor light is lit at dusk", speaker="user")
    store = memory.store
    reader = LibraryIndex(store, partition_tokens=40, cache_dir=tmp_path / "cache")
    reader.refresh()
    errors = []

    def reindex():
        try:
            memory.remember("a later fact about the harbor at dusk", speaker="user")  # CURRENT changes
            LibraryIndex(store, partition_tokens=40, cache_dir=tmp_path / "cache").refresh()  # new part ids
        except Exception as exc:
            errors.append(exc)

    reader.db = _Pausing(reader.db, reindex)
    hits = reader.search("harbor light dusk", k=5, refresh=False)
    reader.db.done.join(timeout=60)
    assert hits and all(h.doc == "CURRENT" for h in hits) and not errors
    reader.db = reader.db._db
    assert any("later fact" in h.snippet for h in reader.search("later fact harbor", k=40))
