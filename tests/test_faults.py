"""Fault injection: interrupts at every step of a commit, hostile manifests and links, read-only and full disks.

After every fault the store must hold every entry exactly once (the old state or the new one, flush by
flush), every document must parse, and nothing outside the store may have changed.
"""

from __future__ import annotations

import errno
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from contextlib import contextmanager

import pytest
from conftest import EXAMPLES, small_disk, snapshot

from memcli import Memory
from memcli.consolidate import job
from memcli.errors import StoreError, StoreWriteError
from memcli.store import atomic
from memcli.store.census import outside_snapshot, seq_counts

SMALL_FLUSHES = {"consolidate.threshold_tokens": 400}  # the example conversation in 4 flushes


@pytest.fixture
def template(tmp_path):
    root = tmp_path / "template"
    Memory(root, create=True).ingest(EXAMPLES / "caroline-and-priya.json", consolidate=False)
    return root


def fresh(template, tmp_path, name: str):
    root = tmp_path / name
    shutil.copytree(template, root)
    return root


class Fault(Exception):
    pass


@contextmanager
def failing(monkeypatch, at: int, error: BaseException, onwards: bool = False):
    """Make the ``at``-th file operation of a commit (a staged write, the manifest, a rename) raise ``error``
    (with ``onwards``, that one and every later one: a disk that stays full).
    The consolidation job's status file (a courtesy whose write failures are ignored) is not counted."""
    calls = {"n": 0}
    real_replace, real_write = os.replace, atomic.write_file_synced

    def step(real):
        def run(*args, **kwargs):
            if job.STATUS in str(args[0]):
                return real(*args, **kwargs)
            calls["n"] += 1
            if calls["n"] == at or (onwards and calls["n"] > at):
                raise error
            return real(*args, **kwargs)
        return run

    monkeypatch.setattr(atomic.os, "replace", step(real_replace))
    monkeypatch.setattr(atomic, "write_file_synced", step(real_write))
    yield calls
    monkeypatch.setattr(atomic.os, "replace", real_replace)
    monkeypatch.setattr(atomic, "write_file_synced", real_write)


@pytest.mark.slow
def test_an_interrupt_at_every_step_of_a_commit_loses_and_duplicates_nothing(template, tmp_path, monkeypatch):
    expected = seq_counts(template)
    assert set(expected.values()) == {1}
    with failing(monkeypatch, 0, Fault()) as calls:  # count the steps of an uninterrupted consolidation
        Memory(fresh(template, tmp_path, "count"), settings=SMALL_FLUSHES).consolidate(llm=False)
    steps = calls["n"]
    assert steps > 20  # four flushes, each staging several files, a manifest and the renames
    outside = outside_snapshot(tmp_path / "template")
    for at in range(1, steps + 1):
        for error in (KeyboardInterrupt(), OSError(errno.ENOSPC, "No space left on device"),
                      OSError(errno.EROFS, "Read-only file system")):
            root = fresh(template, tmp_path, f"at-{at}-{type(error).__name__}-{getattr(error, 'errno', 0)}")
            with failing(monkeypatch, at, error), pytest.raises((KeyboardInterrupt, StoreWriteError)):
                Memory(root, settings=SMALL_FLUSHES).consolidate(llm=False)
            Memory(root).docs()  # the next command (a read) finishes or rolls back what was left
            assert seq_counts(root) == expected, (at, error)
            assert not any((root / atomic.TXN_DIR).iterdir()), (at, error)
            Memory(root, settings=SMALL_FLUSHES).consolidate(llm=False)  # and the work can be completed
            assert seq_counts(root) == expected and not Memory(root).status().current_entries
            shutil.rmtree(root)
    assert outside_snapshot(tmp_path / "template") == outside


@pytest.mark.slow  # a fast-tier budget of 5 minutes; CI runs it
def test_signals_during_commits_are_held_until_the_commit_is_done(template, tmp_path):
    expected = seq_counts(template)
    env = {**os.environ, "MEMCLI_CONSOLIDATE_TOKENS": "400", "MEMCLI_TEST_COMMIT_PAUSE": "0.03"}
    def command(root):
        return [sys.executable, "-m", "memcli", "--store", str(root), "consolidate", "--no-llm"]

    start = time.monotonic()
    assert subprocess.run(command(fresh(template, tmp_path, "timing")), env=env).returncode == 0
    duration = time.monotonic() - start
    rng = random.Random(7)
    interrupted = 0
    for trial in range(10):
        root = fresh(template, tmp_path, f"signal-{trial}")
        proc = subprocess.Popen(command(root), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.3, duration))
        proc.send_signal(signal.SIGINT if trial % 2 else signal.SIGTERM)
        interrupted += proc.wait() != 0
        Memory(root).docs()
        assert seq_counts(root) == expected, trial
    assert interrupted >= 5


def test_a_crafted_manifest_touches_nothing_outside_the_store(template, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim.txt").write_text("keep me")
    before_outside = outside_snapshot(outside)
    for ops in ([{"op": "write", "path": "../outside/evil.txt", "staged": "00000.stage"}],
                [{"op": "delete", "path": str(outside / "victim.txt")}],
                [{"op": "delete", "path": "docs/../../outside/victim.txt"}],
                [{"op": "write", "path": "CURRENT.md", "staged": "../../outside/victim.txt"}],
                "not a list"):
        root = fresh(template, tmp_path, f"manifest-{len(list(tmp_path.iterdir()))}")
        txn = root / atomic.TXN_DIR
        txn.mkdir(exist_ok=True)
        (txn / "00000.stage").write_text("pwned")
        (txn / atomic.MANIFEST).write_text(json.dumps({"ops": ops}))
        before = snapshot(root)
        with pytest.raises(StoreError, match="not a file of this store|not a memcli transaction"):
            Memory(root).docs()
        assert outside_snapshot(outside) == before_outside
        assert snapshot(root) == before  # refused, not applied and not discarded: it is left for a person
    assert not (tmp_path / "outside" / "evil.txt").exists()


def test_symbolic_links_in_a_store_are_refused_never_followed(template, tmp_path, cli):
    secret = tmp_path / "secret.md"
    secret.write_text("---\nid: secret\n---\n# Secret\n- <seq=999,time=2024-01-01T00:00> the top secret word\n")
    root = fresh(template, tmp_path, "links")
    (root / "docs" / "secret-aaaaaa.md").symlink_to(secret)
    os.mkfifo(root / "docs" / "pipe-bbbbbb.md")
    memory = Memory(root)
    docs = memory.docs()
    assert {d.id for d in docs.docs} == {"CURRENT"}
    assert len(docs.refused) == 2 and any("symbolic link" in r for r in docs.refused)
    assert not memory.grep("secret").matches and not memory.search("secret").hits
    assert not memory.ask("top secret word", reader="evidence-only").evidence
    shown = cli("--store", root, "read", "secret-aaaaaa", store=False)
    assert shown.code != 0 and "top secret" not in shown.stdout
    doctor = cli("--store", root, "doctor", "--json", store=False).json
    assert not next(c for c in doctor["checks"] if c["name"] == "store files")["ok"]
    # a docs/ folder that is a link is not followed
    linked = fresh(template, tmp_path, "linked-docs")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.copy(secret, elsewhere / "secret-cccccc.md")
    shutil.rmtree(linked / "docs")
    (linked / "docs").symlink_to(elsewhere)
    assert not Memory(linked).grep("secret").matches
    assert any("docs: a symbolic link" in r for r in Memory(linked).docs().refused)
    # a link where CURRENT.md, the lock or the transaction folder would be is refused too
    for name in ("CURRENT.md", ".lock"):
        other = fresh(template, tmp_path, f"link-{name}")
        (other / name).unlink(missing_ok=True)
        (other / name).symlink_to(secret)
        with pytest.raises(StoreError):
            Memory(other).ingest(EXAMPLES / "chat-messages.json", consolidate=False)
        assert "the top secret word" in secret.read_text() and secret.read_text().count("seq=") == 1


def test_a_full_disk_and_a_read_only_store_are_exit_5_and_lose_nothing(template, tmp_path, cli):
    with small_disk(tmp_path, "300k") as disk:
        root = disk / "store"
        shutil.copytree(template, root)
        expected = seq_counts(root)
        big = tmp_path / "big.txt"
        big.write_text("\n\n".join(f"fact number {i} " + "padding " * 40 for i in range(900)))
        full = cli("--store", root, "ingest", big, "--json", store=False)
        assert full.code == 5 and full.json["error"]["type"] == "store_write", full.stderr
        assert "No space left" in full.json["error"]["message"] and str(disk) in full.json["error"]["message"]
        assert seq_counts(root) == expected and cli("--store", root, "grep", "Caroline", store=False).code == 0
        assert subprocess.run(["mount", "-o", "remount,ro", str(disk)], capture_output=True).returncode == 0
        read_only = cli("--store", root, "ingest", EXAMPLES / "chat-messages.json", "--json", store=False)
        assert read_only.code == 5 and "Read-only file system" in read_only.json["error"]["message"]
        assert cli("--store", root, "grep", "Caroline", store=False).code == 0  # reading still works
        assert seq_counts(root) == expected


def test_a_full_cache_disk_falls_back_to_searching_without_the_cache(template, tmp_path, cli, monkeypatch):
    with small_disk(tmp_path, "16k") as disk:
        (disk / "filler").write_bytes(b"x" * 15_000)
        monkeypatch.setenv("XDG_CACHE_HOME", str(disk / "cache"))
        found = cli("--store", template, "search", "adoption", store=False)
        assert found.code == 0 and found.stdout.strip(), found.stderr
        assert "searching without it" in found.stderr


def test_a_writer_waits_for_the_lock_at_most_lock_timeout_and_says_who_holds_it(template, cli, monkeypatch):
    monkeypatch.setenv("MEMCLI_LOCK_TIMEOUT", "0.5")
    with atomic.StoreLock(template, exclusive=True):  # another writer (this test process) holds the store
        start = time.monotonic()
        busy = cli("--store", template, "ingest", EXAMPLES / "chat-messages.json", "--json", store=False)
        assert time.monotonic() - start < 10
    assert busy.code == 1 and "busy" in busy.json["error"]["message"]
    assert f"process {os.getpid()}" in busy.json["error"]["message"]
    assert cli("--store", template, "ingest", EXAMPLES / "chat-messages.json", store=False).code == 0


def test_links_in_the_kv_store_are_refused(template, tmp_path):
    from memcli.kv.blocks import BlockRefused, BlockStore

    outside = tmp_path / "elsewhere.kvb"
    outside.write_bytes(b"MEMCLI-KV 1\n{}\n")
    blocks = BlockStore(template / "kv" / "blocks")
    key = "ab" * 32
    blocks.path(key).parent.mkdir(parents=True)
    blocks.path(key).symlink_to(outside)
    with pytest.raises(BlockRefused, match="symbolic link"):
        blocks.header(key)
    assert "symbolic link" in blocks.verify(key)
    assert [b.header.unit for b in blocks.blocks()] == ["(unreadable)"]
    blocks.remove(key)
    assert outside.exists() and not blocks.path(key).is_symlink()


def test_a_write_failure_after_the_commit_point_says_it_will_be_completed(template, tmp_path, monkeypatch, capsys):
    """A failure before the commit point is a failure (nothing changes, ever); one after it says the change is
    committed and will be completed, and the next command completes it."""
    from memcli.cli import run

    for at, committed in ((1, False), (6, True)):  # a staged write; the first rename after the manifest
        root = fresh(template, tmp_path, f"ingest-{at}")
        before = seq_counts(root)
        note = tmp_path / f"note-{at}.txt"
        note.write_text("a note written while the disk was full\n")
        with failing(monkeypatch, at, OSError(errno.ENOSPC, "No space left on device")):
            code = run(["--store", str(root), "ingest", str(note)])
        err = capsys.readouterr().err
        assert code == 5 and ("is committed and the next memcli command completes it" in err) is committed, err
        Memory(root).docs()  # the next command
        assert len(seq_counts(root)) == len(before) + committed


def test_a_full_cache_never_fails_ask(template, tmp_path, monkeypatch):
    """The cache (index, vectors, the embedding model's unpacked files) is disposable: a full cache disk
    makes evidence slower or ranked by words alone, with a warning, never a failed question."""
    import memcli.semantic.encoder as encoder

    monkeypatch.setenv("MEMCLI_CACHE", str(tmp_path / "full-cache"))

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(encoder.tempfile, "mkstemp", full)
    warned = []
    found = Memory(fresh(template, tmp_path, "cache"), on_warning=warned.append).ask(
        "Which adoption agency did Caroline apply to?", reader="evidence-only")
    assert found.evidence and any("Open Door" in e.text for e in found.evidence)
    assert any("ranked by words alone" in w and "No space left" in w for w in warned), warned


def test_reads_use_the_committed_state_when_a_pending_transaction_cannot_be_finished(template, tmp_path, monkeypatch):
    """A committed change whose renames the disk refuses is read from the transaction folder (with a warning),
    nothing is written, and the first command that can write completes it."""
    root = fresh(template, tmp_path, "pending")
    note = tmp_path / "note.txt"
    note.write_text("the lighthouse keeper repainted the zeppelin hangar\n")
    with failing(monkeypatch, 6, OSError(errno.ENOSPC, "No space left on device"), onwards=True), \
            pytest.raises(StoreWriteError):
        Memory(root).ingest(note, consolidate=False)
    assert atomic.pending(root) and "zeppelin" not in (root / "CURRENT.md").read_text()
    files = {p: p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file() and "kv" not in p.parts}
    warned: list[str] = []
    with failing(monkeypatch, 1, OSError(errno.EACCES, "Permission denied"), onwards=True):
        memory = Memory(root, on_warning=warned.append)
        assert [m.doc for m in memory.grep("zeppelin").matches] == ["CURRENT"]
        assert any("zeppelin" in e.text for e in memory.ask("Who repainted the hangar?",
                                                            reader="evidence-only").evidence)
        assert memory.status().current_entries == len(seq_counts(root)) + 1
    store_warnings = [w for w in warned if "committed change" in w]  # (the patched rename fails the cache too)
    assert len(store_warnings) == 3 and all("reading it from" in w and "Permission denied" in w
                                            for w in store_warnings), "\n".join(warned)
    assert {p: p.read_bytes() for p in files} == files  # nothing written
    Memory(root).docs()  # a command that can write completes it
    assert not atomic.pending(root) and "zeppelin" in (root / "CURRENT.md").read_text()


@pytest.mark.slow  # 3-4 s: the fast tier keeps within 5 minutes
def test_a_read_only_store_with_a_pending_transaction_still_answers(template, tmp_path, cli, monkeypatch):
    with small_disk(tmp_path, "2m") as disk:
        root = disk / "store"
        shutil.copytree(template, root)
        note = tmp_path / "note.txt"
        note.write_text("the lighthouse keeper repainted the zeppelin hangar\n")
        with failing(monkeypatch, 6, OSError(errno.ENOSPC, "No space left on device"), onwards=True), \
                pytest.raises(StoreWriteError):
            Memory(root).ingest(note, consolidate=False)
        assert subprocess.run(["mount", "-o", "remount,ro", str(disk)], capture_output=True).returncode == 0
        for args in (("grep", "zeppelin"), ("ask", "Who repainted the hangar?", "--evidence-only"), ("docs",)):
            done = cli("--store", root, *args, store=False)
            assert done.code == 0 and "reading it from" in done.stderr and "Read-only" in done.stderr, done
        assert "zeppelin" in cli("--store", root, "grep", "zeppelin", store=False).stdout
        assert subprocess.run(["mount", "-o", "remount,rw", str(disk)], capture_output=True).returncode == 0
        assert cli("--store", root, "status", store=False).code == 0 and not atomic.pending(root)
        assert "zeppelin" in (root / "CURRENT.md").read_text()
