"""A store shared through git: unique seqs, the entry merge, sync between real clones, log and undo."""

from __future__ import annotations

import json
import random
import re
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from conftest import LOCOMO, needs_locomo, run_memcli

from memcli.memory import Memory
from memcli.share.merge import merge_document, merge_lines, merge_state
from memcli.store.format import Entry, parse_document
from memcli.store.identity import ORIGINS, origin_of
from memcli.terms import STOPWORDS


def git(where: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(where), *args], check=True, capture_output=True, text=True).stdout


def line(seq: int, text: str, **meta: str) -> str:
    return Entry({"seq": str(seq), "time": "2024-01-01T10:00", **meta}, text).render()


def doc(*lines: str, title: str = "# Topic") -> str:
    return "---\nid: topic\nsummary: s\ntoken_count: 1\nupdate_log: []\n---\n" + "\n".join([title, *lines]) + "\n"


def seqs_of(text: str) -> list[int]:
    return [e.seq for _, e in parse_document(text).entries()]


# ---------------------------------------------------------------- the merge, file by file


def test_merge_keeps_the_union_and_what_one_side_removed_stays_removed():
    base = doc(line(1, "a"), line(2, "b"))
    ours = doc(line(1, "a"), line(3, "c"))  # ours took 2 out (consolidated elsewhere), added 3
    theirs = doc(line(1, "a"), line(2, "b"), line(4, "d"))  # theirs added 4
    merged, conflicts = merge_document(base, ours, theirs)
    assert conflicts == 0 and seqs_of(merged) == [1, 3, 4]
    assert parse_document(merged).meta["token_count"] > 1  # counted anew


def test_a_consolidation_on_one_side_and_new_entries_on_the_other_are_both_kept():
    base = doc(line(1, "a"), line(2, "b"), title="# CURRENT")
    consolidated = doc(title="# CURRENT")
    grown = doc(line(1, "a"), line(2, "b"), line(3, "c"), line(4, "d"), title="# CURRENT")
    for ours, theirs in ((consolidated, grown), (grown, consolidated)):
        merged, conflicts = merge_document(base, ours, theirs)
        assert conflicts == 0 and seqs_of(merged) == [3, 4]


def test_an_entry_changed_on_one_side_takes_the_change_and_on_both_is_kept_twice_marked():
    base = doc(line(1, "a"), line(2, "b"))
    ours = doc(line(1, "a", superseded_by="2"), line(2, "b"))
    theirs = doc(line(1, "a"), line(2, "b changed"))
    merged, conflicts = merge_document(base, ours, theirs)
    assert conflicts == 0
    assert [e.text for _, e in parse_document(merged).entries()] == ["a", "b changed"]
    assert parse_document(merged).entries().__next__()[1].meta["superseded_by"] == "2"
    merged, conflicts = merge_document(base, doc(line(1, "a"), line(2, "ours")), doc(line(1, "a"), line(2, "theirs")))
    entries = [e for _, e in parse_document(merged).entries()]
    assert conflicts == 1 and [(e.seq, e.text, e.meta.get("merge")) for e in entries] == [
        (1, "a", None), (2, "ours", None), (2, "theirs", "conflict")]


def test_their_new_entries_land_beside_the_line_they_followed_and_new_sections_come_along():
    base = doc("## One", line(1, "a"), "## Two", line(2, "b"))
    ours = doc("## One", line(1, "a"), line(5, "e"), "## Two", line(2, "b"))
    theirs = doc("## One", line(1, "a"), "## Two", line(2, "b"), line(3, "c"), "## Three", line(4, "d"))
    merged, _ = merge_document(base, ours, theirs)
    body = merged.split("---\n", 2)[2].splitlines()
    assert [b.split("> ")[-1] if b.startswith("- ") else b for b in body] == [
        "# Topic", "## One", "a", "e", "## Two", "b", "c", "## Three", "d"]
    # an add/add (both clones made the same document): git gives an empty ancestor
    merged, conflicts = merge_document("", doc(line(1, "a")), doc(line(2, "b")))
    assert conflicts == 0 and seqs_of(merged) == [1, 2]


def test_line_sets_and_state_merge():
    assert merge_lines("x\ny\n", "x\ny\nz\n", "y\nw\n")[0] == "y\nz\nw\n"
    state, _ = merge_state(json.dumps({"format": 2, "next_tick": 5, "origins": [1]}),
                           json.dumps({"format": 2, "next_tick": 9, "origins": [1, 7], "ids": "unique"}),
                           json.dumps({"format": 2, "next_tick": 7, "origins": [1, 3], "ids": "unique"}))
    assert json.loads(state) == {"format": 2, "next_tick": 9, "origins": [1, 3, 7], "ids": "unique"}


# ---------------------------------------------------------------- real clones of a bare repository


def sessions(count_per_conversation: int = 19, turns: int = 6) -> list[list[dict]]:
    """LoCoMo sessions cut to their first turns, as chat transcripts (read here, never copied)."""
    out = []
    for name in ("conv-26", "conv-30"):
        conv = json.loads((LOCOMO / f"{name}.json").read_text())
        for i in range(1, count_per_conversation + 1):
            if f"session_{i}" not in conv:
                break
            out.append([{"speaker": t["speaker"], "text": t["text"], "time": f"2023-{1 + i % 12:02d}-0{1 + i % 9}T10:00",
                         "id": f"{name}-s{i}-{n}"} for n, t in enumerate(conv[f"session_{i}"][:turns])])
    return out


class Clone:
    def __init__(self, folder: Path):
        self.folder = folder
        self.memory = Memory(folder / ".memcli")

    def entries(self) -> list[Entry]:
        store = self.memory.store
        return [e for doc_id in store.all_ids() for _, e in store.load(doc_id).doc.entries()]


def two_clones(tmp_path: Path) -> tuple[Clone, Clone, Path]:
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    git(tmp_path, "clone", "-q", str(remote), "a")
    Memory.init(tmp_path / "a")
    Memory(tmp_path / "a" / ".memcli").share()
    a = Clone(tmp_path / "a")
    a.memory.sync()
    git(tmp_path, "clone", "-q", str(remote), "b")
    return a, Clone(tmp_path / "b"), remote


def run_trial(tmp_path: Path, seed: int, pool: list[list[dict]]) -> Counter:
    """One trial; returns what the syncs had to do (merges, entries both clones filed, files git
    left in conflict), so the caller can tell the hard cases were met."""
    rng = random.Random(seed)
    a, b, _ = two_clones(tmp_path)
    rng.shuffle(pool)
    own = {id(a): pool[: len(pool) // 2], id(b): pool[len(pool) // 2:]}
    ingested: Counter = Counter()
    work: Counter = Counter()
    for _ in range(rng.randint(8, 16)):
        clone = rng.choice((a, b))
        op = rng.choice(("ingest", "ingest", "ingest", "consolidate", "consolidate", "sync", "sync", "forget"))
        if op == "ingest" and own[id(clone)]:
            turns = own[id(clone)].pop()
            path = clone.folder.parent / f"{clone.folder.name}-session.json"
            path.write_text(json.dumps(turns))
            result = clone.memory.ingest(path, consolidate=False)
            assert result.added == len(turns)
            ingested.update(t["text"].strip() for t in turns)
        elif op == "consolidate":
            clone.memory.consolidate(llm=False)
        elif op == "forget" and (held := clone.entries()):
            entry = rng.choice(held)
            assert clone.memory.forget([str(entry.seq)]).count == 1
            ingested[entry.text] -= 1
            work["forgets"] += 1
        elif op == "sync":
            work.update(synced(clone.memory.sync()))
    ingested = +ingested
    for clone in (a, b, a):
        work.update(synced(clone.memory.sync()))
    heads = {git(c.folder, "rev-parse", "HEAD") for c in (a, b)}
    assert len(heads) == 1, f"seed {seed}: the clones did not converge"
    for clone in (a, b):
        entries = clone.entries()
        seqs = Counter(e.seq for e in entries)
        assert all(n == 1 for n in seqs.values()), f"seed {seed}: an entry held twice in {clone.folder.name}"
        got = Counter(e.text for e in entries)
        assert got == ingested, f"seed {seed}: lost {list(ingested - got)}, added {list(got - ingested)}"
        assert not any("merge" in e.meta for e in entries)
        assert git(clone.folder, "status", "--porcelain") == "", f"seed {seed}: something left for a person"
        for path in (clone.folder / ".memcli").rglob("*.md"):
            assert "<<<<<<<" not in path.read_text()
    assert {e.seq for e in a.entries()} == {e.seq for e in b.entries()}
    return work


def synced(result) -> Counter:
    return Counter(merges=result.merged, duplicates=result.duplicates, settled=len(result.settled),
                   forgotten_copies=result.forgotten)


@needs_locomo
@pytest.mark.slow  # a fast-tier budget of 5 minutes (the other clone tests stay fast); CI runs it
@pytest.mark.parametrize("trials", [pytest.param(50, id="50-trials")])
def test_two_clones_ingest_consolidate_and_sync_in_random_orders(tmp_path, trials):
    pool = sessions()
    work: Counter = Counter()
    for seed in range(trials):
        work.update(run_trial(tmp_path / f"trial-{seed}", seed, [list(s) for s in pool]))
    print(f"{trials} trials: {dict(work)}")
    assert work["merges"] > 0
    if trials >= 50:  # the hard cases came up: both clones filed the same entries in different documents, and
        # a clone had filed an entry the other forgot
        assert work["duplicates"] > 0 and work["forgotten_copies"] > 0
    # memcli's commands work on both clones of the last trial
    last = tmp_path / f"trial-{trials - 1}"
    for name in ("a", "b"):
        store = last / name / ".memcli"
        status = run_memcli("--store", store, "status", "--json")
        assert status.code == 0, status.stderr
        assert status.json["entries"] > 0
        words = re.findall(r"[^\W\d_]+", Clone(last / name).entries()[0].text)
        word = max((w for w in words if w.lower() not in STOPWORDS), key=len)  # a word memory is searched by
        asked = run_memcli("--store", store, "ask", "--evidence-only", f"what about {word}?", "--json")
        assert asked.code == 0 and word in json.dumps(asked.json["evidence"], ensure_ascii=False), asked.stderr
        assert run_memcli("--store", store, "docs", "--json").code == 0


@needs_locomo
def test_seqs_are_unique_per_clone_and_old_stores_keep_theirs(tmp_path):
    pool = sessions(2)
    folder = tmp_path / "project"
    folder.mkdir()
    git(folder, "init", "-q")
    Memory.init(folder)
    plain = Memory(folder / ".memcli")
    (folder / "one.json").write_text(json.dumps(pool[0]))
    plain.ingest(folder / "one.json", consolidate=False)
    old = [e.seq for _, e in plain.store.load("CURRENT").doc.entries()]
    assert old == list(range(1, len(pool[0]) + 1))  # a store that is not shared numbers 1, 2, 3...
    plain.share()
    state = json.loads((folder / ".memcli" / "state.json").read_text())
    assert state["ids"] == "unique" and state["format"] == 2
    (folder / "two.json").write_text(json.dumps(pool[1]))
    plain.ingest(folder / "two.json", consolidate=False)
    seqs = [e.seq for _, e in plain.store.load("CURRENT").doc.entries()]
    assert seqs[: len(old)] == old  # read as they were
    new = seqs[len(old):]
    assert new == sorted(new) and len(set(new)) == len(new) and all(s > ORIGINS * 10**9 for s in new)
    origin = json.loads((folder / ".memcli" / "origin.json").read_text())["origin"]
    assert {origin_of(s) for s in new} == {origin}
    assert plain.status().shared == {"origin": origin}
    tracked = git(folder, "ls-files").split()
    assert ".memcli/origin.json" not in tracked and ".memcli/.lock" not in tracked
    assert ".memcli/CURRENT.md" in tracked and ".memcli/.gitattributes" in tracked


@pytest.mark.slow  # a fast-tier budget of 5 minutes; CI runs it
@needs_locomo
def test_undo_after_a_consolidation_restores_the_library_byte_for_byte_and_log_says_what_each_did(tmp_path):
    pool = sessions(3)
    project = tmp_path / "p"
    project.mkdir()
    git(project, "init", "-q")
    store = project / ".memcli"
    made = run_memcli("init", "--git", project, "--json")
    assert made.code == 0, made.stderr
    for n, turns in enumerate(pool[:2]):
        (project / f"s{n}.json").write_text(json.dumps(turns))
        assert run_memcli("--store", store, "ingest", project / f"s{n}.json", "--no-auto", "-q").code == 0

    def library() -> dict[str, bytes]:
        return {p: (project / p).read_bytes() for p in git(project, "ls-files").split()}

    before = library()
    consolidated = run_memcli("--store", store, "consolidate", "--no-llm", "--json")
    assert consolidated.code == 0 and consolidated.json["entries_consolidated"] > 0
    assert library() != before
    undone = run_memcli("--store", store, "undo", "--json")
    assert undone.code == 0, undone.stderr
    assert undone.json["op"] == "consolidate" and undone.json["entries_removed"] == []
    assert library() == before
    log = run_memcli("--store", store, "log", "--json").json["changes"]
    assert [c["op"] for c in log] == ["undo", "consolidate", "ingest", "ingest", "share"]
    assert "12 entries into 1 document" in log[1]["message"] and log[2]["message"].endswith("6 entries from s1.json")
    # the next undo walks back: the last ingest goes, and says which entries
    again = run_memcli("--store", store, "undo", "--json")
    assert again.code == 0 and again.json["op"] == "ingest" and len(again.json["entries_removed"]) == 6
    assert len(Clone(project).entries()) == 6
    # a forget is for good
    assert run_memcli("--store", store, "forget", "--grep", ".", "--all", "-q").code == 0
    refused = run_memcli("--store", store, "undo")
    assert refused.code == 2 and "cannot be undone" in refused.stderr


@needs_locomo
def test_a_forget_in_one_clone_removes_the_copy_the_other_filed(tmp_path):
    a, b, _ = two_clones(tmp_path)
    turns = sessions(1)[0]
    (a.folder / "s.json").write_text(json.dumps(turns))
    a.memory.ingest(a.folder / "s.json", consolidate=False)
    a.memory.sync()
    b.memory.sync()
    b.memory.consolidate(llm=False)  # b files the entries in a document
    gone = a.memory.forget(grep=turns[0]["text"][:20])  # a forgets one while they are still in CURRENT
    assert gone.count == 1
    for clone in (a, b, a):
        clone.memory.sync()
    for clone in (a, b):
        texts = [e.text for e in clone.entries()]
        assert turns[0]["text"] not in texts and len(texts) == len(turns) - 1


def test_a_forget_that_arrives_leaves_this_clones_caches_too(tmp_path):
    """Another clone's forget takes the entry out of this clone's files at the merge: its vector (a sentence's
    vector tells much of its words) goes from this clone's cache in the same sync (a kill before the cleaning
    leaves the caches to be dropped). One merged by a plain ``git pull`` is caught up when memcli next opens
    the caches: they are dropped, once, and rebuilt."""
    import sqlite3

    from memcli.semantic.encoder import MODEL_NAME
    from memcli.semantic.vectors import _key, entry_text
    from memcli.share.sync import sync

    a, b, _ = two_clones(tmp_path)
    said = ["The spare key is under the blue flowerpot.", "My locker code is 4417.",
            "We hiked the Alps last summer.", "Next spring we fly to Lisbon."]
    (tmp_path / "s.json").write_text(json.dumps([{"speaker": "Ana", "text": t, "time": f"2024-01-0{n + 1}T10:00"}
                                                 for n, t in enumerate(said)]))
    a.memory.ingest(tmp_path / "s.json", consolidate=False)
    a.memory.sync()
    store = b.folder / ".memcli"
    assert run_memcli("--store", store, "sync", "-q").code == 0
    assert run_memcli("--store", store, "ask", "Where is the spare key?", "--evidence-only").code == 0
    cache = Memory(store).store.cache_folder
    key = {t: _key(MODEL_NAME, entry_text(Entry({"speaker": "Ana"}, t))) for t in said}

    def kept() -> set[bytes]:
        with sqlite3.connect(cache / "vectors.sqlite") as db:
            return {k for (k,) in db.execute("SELECT key FROM texts")}

    assert set(key.values()) <= kept()
    assert a.memory.forget(grep="flowerpot").count == 1
    a.memory.sync()
    done = run_memcli("--store", store, "sync", "--json")
    assert done.code == 0 and done.json["merged"] >= 1 and done.json["caches"]["vectors"] >= 1, done.json
    assert "flowerpot" not in done.stdout + done.stderr
    assert key[said[0]] not in kept() and {key[t] for t in said[1:]} <= kept()  # the rest stay
    assert a.memory.forget(grep="locker").count == 1
    a.memory.sync()
    git(b.folder, "pull", "-q", "--no-rebase")  # by hand: memcli sees only the files change
    asked = run_memcli("--store", store, "ask", "What is the locker code?", "--evidence-only")
    assert asked.code in (0, 1) and "forgotten since this clone's caches were last cleaned" in asked.stderr
    assert key[said[1]] not in kept() and key[said[2]] in kept()  # dropped, and rebuilt without it
    again = run_memcli("--store", store, "ask", "What is the locker code?", "--evidence-only")
    assert again.code in (0, 1) and "forgotten" not in again.stderr  # caught up: nothing dropped again
    assert a.memory.forget(grep="Alps").count == 1
    a.memory.sync()
    sync(Memory(store).store)  # the merge without the cleaning after it: what a kill in between leaves
    asked = run_memcli("--store", store, "ask", "Where did we hike?", "--evidence-only")
    assert asked.code in (0, 1) and "interrupted before its caches were cleaned" in asked.stderr
    assert key[said[2]] not in kept() and key[said[3]] in kept()


def test_sync_refuses_outside_a_shared_store_and_while_a_consolidation_runs(tmp_path, monkeypatch):
    Memory.init(tmp_path)
    plain = run_memcli("--store", tmp_path / ".memcli", "sync")
    assert plain.code == 2 and "init --git" in plain.stderr
    git(tmp_path, "init", "-q")
    subprocess.run(["git", "init", "-q", "--bare", str(tmp_path / "remote.git")], check=True)
    git(tmp_path, "remote", "add", "origin", str(tmp_path / "remote.git"))
    memory = Memory(tmp_path / ".memcli")
    memory.share()
    from memcli.consolidate import job

    monkeypatch.setattr(job, "running", lambda root: {"state": "running", "pid": 1})
    with pytest.raises(Exception, match="consolidation is running"):
        memory.sync()
    with pytest.raises(Exception, match="consolidation is running"):
        memory.undo()


def test_init_git_sets_up_attributes_driver_and_doctor_checks_them(tmp_path):
    git(tmp_path, "init", "-q")
    made = run_memcli("init", "--git", tmp_path, "--json")
    assert made.code == 0, made.stderr
    attributes = (tmp_path / ".memcli" / ".gitattributes").read_text()
    for pattern in ("CURRENT.md", "docs/*.md", "ingested.txt", "forgotten.txt", "aliases.txt", "state.json"):
        assert f"{pattern} merge=memcli" in attributes
    assert "merge-driver" in git(tmp_path, "config", "merge.memcli.driver")
    from memcli.share.git import problems
    from memcli.store import Store

    store = Store(tmp_path / ".memcli")
    assert problems(store) == []
    ignore = tmp_path / ".memcli" / ".gitignore"
    written = ignore.read_text()
    ignore.write_text(written.replace("!aliases.txt\n", ""))  # as a memcli without aliases wrote it
    assert any("git ignores aliases.txt" in p for p in problems(store))
    assert run_memcli("init", "--git", tmp_path).code == 0 and ignore.read_text() == written
    git(tmp_path, "config", "--unset", "merge.memcli.driver")
    assert any("merge.memcli.driver" in p for p in problems(store))


@needs_locomo
def test_a_document_removed_in_one_clone_and_grown_in_the_other_keeps_every_entry_once(tmp_path):
    a, b, _ = two_clones(tmp_path)
    pool = sessions(2)
    (tmp_path / "s.json").write_text(json.dumps(pool[0]))
    a.memory.ingest(tmp_path / "s.json", consolidate=False)
    a.memory.consolidate(llm=False)
    a.memory.sync()
    b.memory.sync()
    (doc_id,) = a.memory.store.doc_ids()
    # a: a person splits the document in three by hand and removes it
    lines = [e.render() for _, e in a.memory.store.load(doc_id).doc.entries()]
    for part in range(3):
        (a.folder / ".memcli" / "docs" / f"part-{part}.md").write_text(
            f"# Part {part}\n" + "".join(line + "\n" for line in lines[part::3]))
    git(a.folder, "rm", "-q", f".memcli/docs/{doc_id}.md")
    a.memory.sync()  # commits the change made outside memcli, pushes
    # b: the same document grows by one entry
    path = b.folder / ".memcli" / "docs" / f"{doc_id}.md"
    grown = Entry({"seq": "424242", "time": "2024-01-01T10:00", "speaker": "X"}, "a fact only b has")
    path.write_text(path.read_text().rstrip("\n") + "\n" + grown.render() + "\n")
    result = b.memory.sync()
    assert result.settled == [f".memcli/docs/{doc_id}.md"] and result.duplicates == len(pool[0])
    a.memory.sync()
    for clone in (a, b):
        entries = clone.entries()
        assert len(entries) == len(pool[0]) + 1 and len({e.seq for e in entries}) == len(entries)
        assert git(clone.folder, "status", "--porcelain") == ""


@needs_locomo
@pytest.mark.slow  # 4-6 s: the fast tier keeps within 5 minutes
def test_an_entry_edited_differently_in_two_clones_is_kept_twice_marked_and_doctor_says_so(tmp_path):
    a, b, _ = two_clones(tmp_path)
    turns = sessions(1)[0]
    (tmp_path / "s.json").write_text(json.dumps(turns))
    a.memory.ingest(tmp_path / "s.json", consolidate=False)
    a.memory.sync()
    b.memory.sync()
    for clone, words in ((a, "as a wrote it"), (b, "as b wrote it")):
        path = clone.folder / ".memcli" / "CURRENT.md"
        path.write_text(path.read_text().replace(turns[0]["text"].strip(), words))
        clone.memory.sync()
    a.memory.sync()
    for clone in (a, b):
        entries = clone.entries()
        edited = [(e.text, e.meta.get("merge")) for e in entries if e.text.startswith("as ")]
        assert sorted(text for text, _ in edited) == ["as a wrote it", "as b wrote it"]
        assert sorted(map(str, (mark for _, mark in edited))) == ["None", "conflict"]  # theirs, for the merger
        assert len(entries) == len(turns) + 1
        assert git(clone.folder, "status", "--porcelain") == ""
        doctor = run_memcli("--store", clone.folder / ".memcli", "doctor", "--json")
        check = next(c for c in doctor.json["checks"] if c["name"] == "git sharing")
        assert not check["ok"] and "changed differently in two clones" in check["detail"]


def test_two_clones_that_learned_different_updates_agree_on_the_newer_after_sync(tmp_path):
    a, b, _ = two_clones(tmp_path)
    said = [("2024-01-10T10:00", "I live in Utrecht, close to the canal."),
            ("2024-03-05T10:00", "We moved to Ghent last month, the new flat is lovely."),  # learned by b
            ("2024-02-01T10:00", "We moved to Leiden last week.")]  # learned by a, after b's ingest
    for clone, turns in ((a, said[:1]), (b, said[1:2]), (a, said[2:])):
        clone.memory.sync()
        (clone.folder / "s.json").write_text(json.dumps([{"speaker": "Noor", "text": t, "time": time}
                                                         for time, t in turns]))
        clone.memory.ingest(clone.folder / "s.json", consolidate=False)
        clone.memory.sync()
    a.memory.sync()
    from memcli.retrieve.evidence_reader import evidence_only

    for clone in (a, b):
        clone.memory.ask("Where does Noor live?", reader="evidence-only")  # the vectors
        found = evidence_only(clone.memory.store, clone.memory.index, "Where does Noor live?", budget=500)
        first = found.library.doc(found.order[0][0]).entries[found.order[0][1]]
        assert "Ghent" in first.text  # the newest by event time, whichever clone learned it


def test_a_renamed_document_keeps_its_git_history_and_its_former_id_reads_in_the_other_clone(tmp_path):
    a, b, _ = two_clones(tmp_path)
    for text in ("My pottery class made clay bowls today.", "The pottery class fires the clay bowls in a kiln."):
        a.memory.remember(text, speaker="Caroline", time="2023-05-01T10:00")
    a.memory.consolidate(llm=False)
    (doc_id,) = a.memory.store.doc_ids()
    old = "weekend-notes-" + doc_id.rsplit("-", 1)[1]  # the name of a title it no longer has
    git(a.folder, "mv", f".memcli/docs/{doc_id}.md", f".memcli/docs/{old}.md")
    git(a.folder, "-c", "user.name=A person", "-c", "user.email=a@example.com", "commit", "-q", "-m", "an older name")
    a.memory.remember("The pottery class teacher loved my clay bowls.", speaker="Caroline", time="2023-05-08T10:00")
    a.memory.consolidate(llm=False)
    (now,) = a.memory.store.doc_ids()
    assert now != old
    history = git(a.folder, "log", "--follow", "--format=%s", "--", f".memcli/docs/{now}.md")
    assert "an older name" in history and history.count("memcli consolidate") == 2  # the rename is followed
    a.memory.sync()
    b.memory.sync()
    read = b.memory.read(old, 1, 3)
    assert read.doc == now and read.moved_from == old


@pytest.mark.slow  # the real default model: a fast-tier budget of 5 minutes; CI runs it
def test_a_chat_remembers_and_forgets_in_commits_of_their_own(tmp_path):
    """In a shared store each message a chat remembers is a commit, as a note is, and ``/forget`` another:
    nothing is left uncommitted for a later change's commit to sweep in."""
    project = tmp_path / "p"
    project.mkdir()
    git(project, "init", "-q")
    store = project / ".memcli"
    assert run_memcli("init", "--git", project).code == 0
    lines = ("Remember that my cat is called Pixel and she is grey.\n"
             "Remember that the boiler was serviced on Tuesday.\n/forget\n/quit\n")
    talked = run_memcli("--store", store, "chat", "--max-tokens", "4", stdin=lines.encode(),
                        env={"MEMCLI_CHAT_MEMORY_TOKENS": "500", "MEMCLI_AUTO_CONSOLIDATE": "false"})
    assert talked.code == 0, talked.stderr
    changes = run_memcli("--store", store, "log", "--json").json["changes"]
    assert [c["op"] for c in changes[:3]] == ["forget", "remember", "remember"]
    assert not git(project, "status", "--porcelain", "--", ".memcli")
    assert "Pixel" in git(project, "show", "HEAD:.memcli/CURRENT.md")
    assert "boiler" not in git(project, "show", "HEAD:.memcli/CURRENT.md")


@pytest.mark.slow  # the real default model: a fast-tier budget of 5 minutes; CI runs it
def test_a_chat_resumed_after_a_plain_pull_that_brought_a_forget_does_not_hold_the_text(tmp_path, monkeypatch):
    """A chat session said something another clone has since forgotten; the forget arrives by a plain
    ``git pull`` (memcli sees only the files change). ``memcli chat`` settles the caches before it resumes
    the session: the session that holds the text goes, with a warning, and the model's context lacks it."""
    import warnings

    monkeypatch.setenv("MEMCLI_CHAT_MEMORY_TOKENS", "500")
    monkeypatch.setenv("MEMCLI_AUTO_CONSOLIDATE", "false")
    a, b, _ = two_clones(tmp_path)
    b.memory.sync()
    chat = b.memory.chat("w", max_tokens=4)
    chat.say("Remember that the spare key is under the blue flowerpot.")
    b.memory.close()
    Clone(tmp_path / "b").memory.sync()
    a.memory.sync()
    assert a.memory.forget(grep="flowerpot").count == 1
    a.memory.sync()
    git(b.folder, "pull", "-q", "--no-rebase")  # by hand: memcli sees only the files change
    with warnings.catch_warnings(record=True) as said, Memory(b.folder / ".memcli") as memory:
        warnings.simplefilter("always", RuntimeWarning)
        chat = memory.chat("w", max_tokens=4)
        assert "flowerpot" not in chat.engine.rt.detokenize(chat.engine.context_tokens())
        assert not any("flowerpot" in m["content"] for m in chat.session.messages)
    assert any("forgotten since this clone's caches" in str(w.message) for w in said)
