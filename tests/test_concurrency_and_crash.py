"""Writers are serialized across processes; interrupted transactions finish or roll back."""

from __future__ import annotations

import json
import os
import subprocess
import sys

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
