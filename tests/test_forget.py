"""memcli forget: entries taken out of the documents, CURRENT, the search index, the vectors and the KV
store for good, in one transaction, without their text in the update log, and not brought back by a
re-ingest. Through the real command."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time

import pytest
from conftest import EXAMPLES, snapshot

from memcli import Memory
from memcli.store.census import seq_counts

SECRET_WORDS = ("zeppelin", "marmalade", "Ottoline")


def two_sessions(tmp_path) -> tuple:
    """Two agent sessions' worth of chat: the first says things the second never does."""
    first = [{"role": "user", "content": f"Note {i}: the zeppelin hangar smells of marmalade, says Ottoline."}
             for i in range(4)] + [{"role": "assistant", "content": "Ottoline keeps the zeppelin logbook."}]
    second = [{"role": "user", "content": "The shop opens at nine on Saturdays."},
              {"role": "assistant", "content": "Saturday opening noted: nine o'clock."}]
    paths = []
    for name, messages in (("first", first), ("second", second)):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps({"messages": messages}))
        paths.append(path)
    return paths


def everything(store_dir, tmp_path) -> dict[str, bytes]:
    """The store and its caches (not the embedding model's own files: its vocabulary holds every word)."""
    cache = {name: data for name, data in snapshot(tmp_path / "xdg-cache").items() if "/models/" not in f"/{name}"}
    return {**snapshot(store_dir), **cache}


def test_forget_a_session_leaves_no_trace_and_a_reingest_adds_nothing(cli, tmp_path, store_dir):
    first, second = two_sessions(tmp_path)
    assert cli("ingest", first, "--conv", "session-1").code == 0
    assert cli("ingest", second, "--conv", "session-2").code == 0
    assert cli("consolidate").code == 0  # some of it in topic documents, some in CURRENT
    assert cli("ingest", EXAMPLES / "chat-messages.json", "--conv", "session-1").code == 0
    assert cli("ask", "Who keeps the zeppelin logbook?", "--evidence-only").code == 0  # index and vectors built
    files = everything(store_dir, tmp_path)
    assert any(b"zeppelin" in data for data in files.values())
    before = seq_counts(store_dir)

    listed = cli("forget", "--session", "session-1", "--dry-run", "--json")
    assert listed.code == 0 and listed.json["count"] == 5 + 5 and everything(store_dir, tmp_path) == files
    assert all(e["conv"] == "session-1" for e in listed.json["entries"])

    done = cli("forget", "--session", "session-1", "--json")
    assert done.code == 0 and done.json["count"] == 10, done.stderr
    assert sorted(done.json["seqs"]) == sorted(e["seq"] for e in listed.json["entries"])
    assert set(seq_counts(store_dir)) == set(before) - set(done.json["seqs"])
    assert cli("ask", "Who keeps the zeppelin logbook?", "--evidence-only").code in (0, 1)  # caches rebuilt
    leftover = {name for name, data in everything(store_dir, tmp_path).items()
                for word in SECRET_WORDS if word.encode() in data}
    assert not leftover
    log = "".join(p.read_text() for p in store_dir.rglob("*.md"))
    assert "op: forget" in log and "Ottoline" not in log
    assert cli("grep", "Saturday").code == 0  # the other session is all there
    again = cli("ingest", first, "--conv", "session-1", "--json")
    assert again.code == 0 and again.json["added"] == 0  # its fingerprints stay: nothing comes back
    assert cli("forget", "--session", "session-1").code == 1  # nothing left to forget


def test_forget_by_citation_seq_time_and_pattern(cli, tmp_path, store_dir):
    assert cli("ingest", EXAMPLES / "caroline-and-priya.json").code == 0
    lines = cli("read", "CURRENT", "--json").json["lines"]
    entries = [line for line in lines if "entry" in line]
    first, second = entries[0], entries[1]
    cited = cli("forget", f"CURRENT:{first['line']}", "--json")
    assert cited.code == 0 and cited.json["seqs"] == [int(first["entry"]["meta"]["seq"])]
    by_seq = cli("forget", second["entry"]["meta"]["seq"], "--json")
    assert by_seq.code == 0 and by_seq.json["count"] == 1
    narrowed = cli("forget", "--grep", "pottery", "--since", "2024-03-01", "--until", "2024-03-31", "--json")
    assert narrowed.code == 0 and narrowed.json["count"] == 1
    assert cli("grep", "pottery").code == 1
    assert cli("forget", "--grep", "(unclosed").code == 2
    assert cli("forget", "nonsense!").code == 2
    assert cli("forget", "no-such-doc:1-3").code == 2
    assert cli("forget").code == 2  # forgetting needs to be told what


def test_a_topic_document_left_empty_is_removed(cli, tmp_path, store_dir):
    first, second = two_sessions(tmp_path)
    assert cli("ingest", first, "--conv", "only").code == 0
    assert cli("consolidate").code == 0
    assert list((store_dir / "docs").glob("*.md"))
    done = cli("forget", "--conv", "only", "--all", "--json")  # the whole memory: said so
    assert done.code == 0 and done.json["documents_removed"] and not list((store_dir / "docs").glob("*.md"))


@pytest.mark.slow  # a fast-tier budget of 5 minutes; CI runs it
def test_forget_drops_the_kv_blocks_and_chat_sessions_that_hold_the_text(tmp_path):
    from conftest import run_memcli

    store = tmp_path / "store"
    first, second = two_sessions(tmp_path)
    assert run_memcli("--store", store, "ingest", first, "--conv", "s1").code == 0
    assert run_memcli("--store", store, "ingest", second, "--conv", "s2").code == 0
    chat = run_memcli("--store", store, "chat", "--max-tokens", "4", "--no-remember", "--session", "talk",
                      stdin=b"What does the zeppelin hangar smell of?\n")
    assert chat.code == 0, chat.stderr
    sessions = list((store / "kv" / "sessions").glob("*.json"))
    assert sessions and list((store / "kv" / "blocks").rglob("*.kvb"))
    done = run_memcli("--store", store, "forget", "--conv", "s1", "--json")
    assert done.code == 0, done.stderr
    caches = done.json["caches"]
    assert caches["kv_blocks"] >= 1 and caches["chat_sessions"] == 1
    assert not list((store / "kv" / "sessions").glob("*.json")) and not list((store / "kv" / "units").glob("*"))
    stale = run_memcli("--store", store, "kv", "prune", "--json")
    assert stale.code == 0 and stale.json["stale_blocks"] == 0  # nothing made from the old documents is left


@pytest.mark.slow  # a fast-tier budget of 5 minutes; CI runs it
def test_a_kill_during_forget_leaves_the_old_or_the_new_state(tmp_path):
    template = tmp_path / "template"
    first, second = two_sessions(tmp_path)
    memory = Memory(template, create=True)
    memory.ingest(first, conv="s1", consolidate=False)
    memory.ingest(second, conv="s2", consolidate=False)
    memory.consolidate(llm=False)
    memory.ingest(EXAMPLES / "chat-messages.json", conv="s1", consolidate=False)
    old = seq_counts(template)
    env = {**os.environ, "MEMCLI_TEST_COMMIT_PAUSE": "0.15"}
    rng = random.Random(11)
    killed = 0
    for trial in range(8):
        root = tmp_path / f"kill-{trial}"
        shutil.copytree(template, root)
        proc = subprocess.Popen([sys.executable, "-m", "memcli", "--store", str(root), "forget", "--conv", "s1"],
                                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.2, 1.2))
        proc.send_signal(signal.SIGKILL)
        killed += proc.wait() == -signal.SIGKILL
        Memory(root).docs()  # the next command finishes or rolls back
        now = seq_counts(root)
        assert all(n == 1 for n in now.values()), trial
        assert now == old or (set(now) < set(old) and len(old) - len(now) == 10), (trial, len(now))
    assert killed >= 3  # most trials were killed before they finished (which state each left is timing)


def test_a_forget_with_the_semantic_signal_off_drops_what_a_run_with_it_on_kept(cli, tmp_path, monkeypatch):
    """The vectors cache and the matrix's snapshots of a run with the signal on hold the forgotten entries'
    vectors (a sentence's vector tells much of its words): a forget in a run with it off drops those rows in
    the cache's own transaction (a running job's next chunk waits for it) and wipes the snapshots."""
    import sqlite3

    from memcli.semantic.encoder import MODEL_NAME
    from memcli.semantic.vectors import SNAPSHOT, _key, entry_text
    from memcli.store.format import Entry

    first, second = two_sessions(tmp_path)
    assert cli("ingest", first, "--conv", "session-1").code == 0
    assert cli("ingest", second, "--conv", "session-2").code == 0
    assert cli("embed").code == 0
    assert cli("ask", "Who keeps the zeppelin logbook?", "--evidence-only").code == 0  # the snapshot written
    [cache] = {path.parent for path in (tmp_path / "xdg-cache").rglob("vectors.sqlite")}
    assert list(cache.glob(f"{SNAPSHOT}-*"))
    listed = cli("forget", "--session", "session-1", "--dry-run", "--json").json["entries"]
    gone = {_key(MODEL_NAME, entry_text(Entry(text=e["text"], meta={"speaker": e["speaker"]}))) for e in listed}

    def keys() -> set[bytes]:
        with sqlite3.connect(cache / "vectors.sqlite") as db:
            return {key for (key,) in db.execute("SELECT key FROM texts")}

    assert gone <= keys()
    monkeypatch.setenv("MEMCLI_SEMANTIC", "false")
    done = cli("forget", "--session", "session-1", "--json")
    assert done.code == 0 and done.json["caches"]["vectors"] >= len(gone), done.json
    assert not gone & keys() and keys()  # the other session's vectors stay
    assert not list(cache.glob(f"{SNAPSHOT}-*"))
    monkeypatch.setenv("MEMCLI_SEMANTIC", "true")
    assert cli("ask", "When does the shop open?", "--evidence-only").code == 0  # the signal on again: rebuilt
    assert not gone & keys()


def test_a_tombstones_file_that_is_no_regular_file_stops_no_question(cli, store_dir):
    """forgotten.txt is read whenever the caches open (were entries forgotten since they were cleaned?): a FIFO
    or a link there (a teammate's commit) is never opened to block or followed; the question is answered and a
    warning says the caches were not checked."""
    import os

    assert cli("remember", "The shop opens at nine.").code == 0
    os.mkfifo(store_dir / "forgotten.txt")
    asked = cli("ask", "When does the shop open?", "--evidence-only")
    assert asked.code == 0 and "were not checked for entries forgotten elsewhere" in asked.stderr
    assert "nine" in asked.stdout


def test_a_forget_cleans_the_kv_folder_of_a_read_only_server_too(cli, store_dir):
    """A read-only MCP server keeps its KV state in the store's cache folder (it writes nothing in the store),
    where no other command writes: a forget cleans it as it cleans the store's own ``kv/`` (a session holding a
    forgotten text goes; one that does not stays)."""
    import json

    from memcli import Memory
    from memcli.kv import read_only_root

    assert cli("remember", "The locker code is 4417.").code == 0
    assert cli("remember", "The shop opens at nine.").code == 0
    sessions = read_only_root(Memory(store_dir).store) / "sessions"
    sessions.mkdir(parents=True)
    for name, said in (("holds", "What was the locker code? The locker code is 4417."), ("other", "When does it open?")):
        (sessions / f"{name}.json").write_text(json.dumps({"messages": [{"role": "user", "content": said}]}))
    done = cli("forget", "--grep", "locker", "--json")
    assert done.code == 0 and done.json["caches"]["chat_sessions"] == 1, done.json
    assert sorted(p.name for p in sessions.iterdir()) == ["other.json"]


def test_a_store_deleted_by_hand_leaves_caches_that_doctor_finds_and_prunes(tmp_path):
    """A store removed with ``rm -rf`` (or moved) leaves its cache folder, whose search index holds its words:
    ``memcli doctor`` lists it, ``--prune-caches`` removes it; a live store's folder, one that does not say
    its store, and a link are left as they are."""
    from conftest import run_memcli

    cache = tmp_path / "xdg-cache" / "memcli" / "stores"
    gone, kept = tmp_path / "gone", tmp_path / "kept"
    for store in (gone, kept):
        assert run_memcli("--store", store, "ingest", EXAMPLES / "chat-messages.json", "-q").code == 0
        assert run_memcli("--store", store, "search", "ledgerd", "-q").code == 0
    folders = {p.name: p for p in cache.iterdir()}
    assert len(folders) == 2 and all((p / "store.txt").is_file() for p in folders.values())
    unowned = cache / "0123456789abcdef"
    unowned.mkdir()
    (unowned / "index.sqlite").write_bytes(b"made before memcli noted its store")
    (cache / "fedcba9876543210").symlink_to(unowned)
    shutil.rmtree(gone)
    [gone_folder] = [p for p in folders.values() if (p / "store.txt").read_text() == str(gone.resolve())]
    assert b"ledgerd" in (gone_folder / "index.sqlite").read_bytes()  # its words, after the store went

    told = run_memcli("--store", kept, "doctor", "--json")
    caches = told.json["caches"]
    assert [c["folder"] for c in caches["left_behind"]] == [str(gone_folder)] and caches["unowned"] == 1
    assert caches["left_behind"][0]["store"] == str(gone.resolve()) and caches["left_behind"][0]["bytes"] > 0
    assert "--prune-caches" in run_memcli("--store", kept, "doctor").stdout
    pruned = run_memcli("--store", kept, "doctor", "--prune-caches", "--json").json["caches"]
    assert pruned == {"left_behind": [], "unowned": 1, "pruned": 1}
    assert not gone_folder.exists() and unowned.is_dir() and (cache / "fedcba9876543210").is_symlink()
    assert sorted(p.name for p in cache.iterdir()) == sorted([*set(folders) - {gone_folder.name},
                                                              unowned.name, "fedcba9876543210"])
    assert run_memcli("--store", kept, "search", "ledgerd", "--json").json["hits"]
