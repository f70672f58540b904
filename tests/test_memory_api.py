"""The Python API: what the CLI does, from Python, with the same results; token counts independent of models."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import EXAMPLES, REPO

from memcli import Memory
from memcli.errors import InputError, UsageError


def test_memory_api_does_what_the_cli_does(tmp_path, cli, store_dir):
    memory = Memory(store_dir, create=True)
    added = memory.ingest(EXAMPLES / "caroline-and-priya.json", consolidate=False)
    assert added.added == 25 and added.first_seq == 1
    assert memory.ingest(EXAMPLES / "caroline-and-priya.json", consolidate=False).added == 0  # already in memory
    note = memory.remember("Caroline's home study is on 3 June", speaker="user", time="2023-05-30T10:00")
    assert note.added == 1 and note.first_seq == 26
    assert memory.remember("Caroline's home study is on 3 June", speaker="user", time="2023-05-30T10:00").added == 0
    found = memory.ask("Which adoption agency did Caroline apply to?", reader="evidence-only")
    assert found.answer is None and found.evidence and "Open Door" in " ".join(e.text for e in found.evidence)
    # the CLI prints exactly what the API returns
    for args, result in ((["docs"], memory.docs()), (["grep", "-i", "open door"], memory.grep("open door", ignore_case=True)),
                         (["search", "adoption"], memory.search("adoption")),
                         (["read", "CURRENT", "--lines", "1-9"], memory.read("CURRENT", 1, 9))):
        assert cli(*args, "--json").json == json.loads(json.dumps(result.to_dict())), args
    asked = cli("ask", "Which adoption agency did Caroline apply to?", "--evidence-only", "--json").json
    assert asked["evidence"] == found.to_dict()["evidence"] and asked["citations"] == found.to_dict()["citations"]
    assert memory.status().current_entries == 26
    memory.close()


def test_api_errors_are_memcli_errors(tmp_path):
    memory = Memory(tmp_path / "s", create=True)
    with pytest.raises(InputError):
        memory.remember("   ")
    with pytest.raises(UsageError):
        memory.ask("anything", reader="psychic")
    assert not (tmp_path / "s").exists()  # nothing was written, so no store was made


STORED_COUNTS = """
import json, sys
from pathlib import Path
from memcli import Memory
if sys.argv[2] == "load":
    from memcli import llm
    from memcli.config import Settings
    model = llm.open_model(Settings.load())  # the real default model, loaded before anything is counted
    assert model.count_tokens("Open Door Adoptions") > 0
memory = Memory(sys.argv[1], create=True, settings={"consolidate.threshold_tokens": 400})
memory.ingest(sys.argv[3], consolidate=False)
memory.consolidate(llm=False)
root = Path(sys.argv[1])
counts = {p.name: [l for l in p.read_text().splitlines() if l.startswith("token_count:")]
          for p in [root / "CURRENT.md", *sorted((root / "docs").glob("*.md"))]}
print(json.dumps(counts))
"""


def test_stored_token_counts_do_not_depend_on_a_model_loaded_before(tmp_path):
    def counts(name: str, mode: str) -> dict:
        proc = subprocess.run([sys.executable, "-c", STORED_COUNTS, str(tmp_path / name), mode,
                               str(EXAMPLES / "caroline-and-priya.json")], capture_output=True, text=True, cwd=REPO)
        assert proc.returncode == 0, proc.stderr[-2000:]
        return json.loads(proc.stdout.strip().splitlines()[-1])

    plain, loaded = counts("plain", "none"), counts("loaded", "load")
    assert len(plain) > 2 and all(plain.values())  # CURRENT and several documents, each with its count
    assert loaded == plain


def test_ask_where_keeps_to_entries_with_given_values(tmp_path, cli, store_dir):
    memory = Memory(store_dir, create=True)
    memory.remember("The kiln reached cone 6 after nine hours", conv="kiln", time="2024-03-01T10:00")
    memory.remember("The kiln shelf cracked, order a new one", conv="kiln", time="2024-03-02T10:00")
    memory.remember("The kiln in the garden shed is for sale", conv="garden", time="2024-03-03T10:00")
    memory.remember("Tomatoes go in the raised bed", conv="garden", time="2024-03-04T10:00")
    everything = memory.ask("kiln", reader="evidence-only")
    assert "garden shed" in " ".join(e.text for e in everything.evidence)
    kiln = memory.ask("kiln", reader="evidence-only", where={"conv": "kiln"})
    assert kiln.evidence and "garden shed" not in " ".join(e.text for e in kiln.evidence)
    # recent: the entries kept that the question's words miss follow, newest first
    garden = memory.ask("kiln", reader="evidence-only", where={"conv": "garden"}, recent=True)
    texts = [e.text for e in sorted(garden.evidence, key=lambda e: e.rank)]
    assert "garden shed" in texts[0] and "Tomatoes" in " ".join(texts) and "cone 6" not in " ".join(texts)
    assert not memory.ask("kiln", reader="evidence-only", where={"conv": "nowhere"}).evidence
    with pytest.raises(UsageError):
        memory.ask("kiln", reader="agent", where={"conv": "kiln"})
    memory.close()
    shown = cli("ask", "kiln", "--evidence-only", "--where", "conv=kiln", "--json")
    assert shown.code == 0 and "garden shed" not in json.dumps(shown.json["evidence"])
    assert cli("ask", "kiln", "--evidence-only", "--where", "conv").code == 2


def test_a_cache_dir_given_holds_every_cache_of_the_store(tmp_path):
    """``Memory(cache_dir=...)``: the search index, the vectors, consolidation's own index and forget's notes live there, and
    nothing of the store in the default per-store cache folder (a store's text is never copied elsewhere)."""
    cache = tmp_path / "my-cache"
    with Memory(tmp_path / "store", create=True, cache_dir=cache) as memory:
        memory.ingest(EXAMPLES / "caroline-and-priya.json", consolidate=False)
        memory.consolidate(llm=False)
        assert memory.ask("Which adoption agency did Caroline apply to?", reader="evidence-only").evidence
        assert memory.forget(grep="minivan", dry_run=True).count == 1  # forget's notes too
        assert memory.forget(grep="minivan").count == 1
    assert (cache / "index.sqlite").is_file() and (cache / "vectors.sqlite").is_file()
    assert not list((tmp_path / "xdg-cache").glob("memcli/stores/*"))


def test_a_forget_made_through_another_cache_folder_drops_what_this_one_kept(tmp_path):
    """A store used through two cache folders (``Memory(cache_dir=...)`` and the CLI's own): a forget cleans
    the folder it runs with, and the other, whose vectors still hold the entry's (a sentence's vector tells
    much of its words), sees the new tombstones when it next opens and drops its caches, once."""
    import sqlite3
    import warnings

    from conftest import run_memcli

    from memcli.semantic.encoder import MODEL_NAME
    from memcli.semantic.vectors import _key, entry_text

    cache, store = tmp_path / "my-cache", tmp_path / "store"
    with Memory(store, create=True, cache_dir=cache) as memory:
        memory.ingest(EXAMPLES / "caroline-and-priya.json", consolidate=False)
        assert memory.ask("What did Caroline sell?", reader="evidence-only").evidence
        [line] = [e for e in memory.store.load("CURRENT").doc.entries() if "minivan" in e[1].text]
    key = _key(MODEL_NAME, entry_text(line[1]))

    def kept() -> set[bytes]:
        with sqlite3.connect(cache / "vectors.sqlite") as db:
            return {k for (k,) in db.execute("SELECT key FROM texts")}

    assert key in kept()
    assert run_memcli("--store", store, "forget", "--grep", "minivan", "-q").code == 0  # the CLI's own folder
    assert key in kept()
    for time in range(2):
        with warnings.catch_warnings(record=True) as said, Memory(store, cache_dir=cache) as memory:
            warnings.simplefilter("always", RuntimeWarning)
            assert memory.ask("What did Caroline sell?", reader="evidence-only").evidence
        dropped = [w for w in said if "forgotten since this clone's caches" in str(w.message)]
        assert len(dropped) == (1 - time) and key not in kept() and kept()  # dropped once, rebuilt without it


def test_a_memory_kept_open_settles_its_caches_when_a_forget_lands_meanwhile(tmp_path):
    """A long-running process (an MCP server) holds its caches open while a forget lands that it did not make
    (through another cache folder here; a plain ``git pull`` alike): its next question sees the tombstones
    change and drops what its own cache folder kept of the entry, the vector too, without a restart."""
    import sqlite3

    from conftest import run_memcli

    from memcli.semantic.encoder import MODEL_NAME
    from memcli.semantic.vectors import _key, entry_text

    cache, store = tmp_path / "my-cache", tmp_path / "store"

    def kept() -> set[bytes]:
        with sqlite3.connect(cache / "vectors.sqlite") as db:
            return {k for (k,) in db.execute("SELECT key FROM texts")}

    said: list[str] = []
    with Memory(store, create=True, cache_dir=cache, on_warning=said.append) as memory:
        memory.ingest(EXAMPLES / "caroline-and-priya.json", consolidate=False)
        assert memory.ask("What did Caroline sell?", reader="evidence-only").evidence
        [line] = [e for _, e in memory.store.load("CURRENT").doc.entries() if "minivan" in e.text]
        key = _key(MODEL_NAME, entry_text(line))
        assert key in kept()
        assert run_memcli("--store", store, "forget", "--grep", "minivan", "-q").code == 0  # another process
        assert key in kept()
        assert memory.ask("What did Caroline sell?", reader="evidence-only").evidence  # the same object
        assert key not in kept() and kept()
        assert memory.forget(grep="home study").count >= 1  # its own forget: cleaned, not dropped again
        memory.ask("What did Caroline sell?", reader="evidence-only")
    assert len([w for w in said if "forgotten since this clone's caches" in w]) == 1, said


def test_a_forget_through_one_cache_folder_leaves_the_chat_sessions_it_cleaned_to_the_other(tmp_path):
    """The KV folder is the store's, one for every cache folder: a forget through one cleans its chat sessions
    of the text, and the other cache folder, which drops its own index and vectors when it sees the new
    tombstones, keeps the sessions that were cleaned (each KV folder notes the tombstones it is clean of).
    A session saved by hand here, shaped as chat saves one: chat needs the model, and the logic is the files'."""
    import warnings

    from conftest import run_memcli

    cache, store = tmp_path / "my-cache", tmp_path / "store"
    with Memory(store, create=True, cache_dir=cache) as memory:
        memory.ingest(EXAMPLES / "caroline-and-priya.json", consolidate=False)
        assert memory.ask("What did Caroline sell?", reader="evidence-only").evidence
        [sold] = [e.text for _, e in memory.store.load("CURRENT").doc.entries() if "minivan" in e.text]
    sessions = store / "kv" / "sessions"
    sessions.mkdir(parents=True)

    def session(name: str, said: str) -> None:
        (sessions / f"{name}.json").write_text(json.dumps({"name": name, "messages": [
            {"role": "user", "content": said}, {"role": "assistant", "content": "Noted."}]}))

    session("cars", f"Caroline said: {sold}")
    session("garden", "What did Priya make in her class?")
    assert run_memcli("--store", store, "forget", "--grep", "minivan", "-q").code == 0  # the CLI's own folder
    assert sorted(p.stem for p in sessions.glob("*.json")) == ["garden"]  # the one that said it went
    session("later", "The boiler was serviced on Tuesday.")  # made after the forget
    for time in range(2):
        with warnings.catch_warnings(record=True) as said, Memory(store, cache_dir=cache) as memory:
            warnings.simplefilter("always", RuntimeWarning)
            assert memory.ask("What did Caroline sell?", reader="evidence-only").evidence
        dropped = [w for w in said if "forgotten since this clone's caches" in str(w.message)]
        assert len(dropped) == (1 - time)  # this cache folder's own index and vectors: dropped once
        assert sorted(p.stem for p in sessions.glob("*.json")) == ["garden", "later"]
    assert run_memcli("--store", store, "forget", "--grep", "home study", "-q").code == 0
    assert sorted(p.stem for p in sessions.glob("*.json")) == ["garden", "later"]
    (store / "kv" / "forget-seen.json").unlink()  # a KV folder from before the note: it may hold anything
    with warnings.catch_warnings(record=True) as said, Memory(store, cache_dir=cache) as memory:
        warnings.simplefilter("always", RuntimeWarning)
        memory.search("boiler")
    assert not list(sessions.glob("*.json")) and any("forgotten since" in str(w.message) for w in said)


def test_a_memory_opened_read_only_refuses_every_write_and_leaves_the_store_as_it_was(tmp_path):
    """``Memory(read_only=True)`` promises never to write the store: each change (an ingest, a note, a forget,
    a consolidation, chat's remembering, sync and undo) is refused with a usage error before anything is
    written; reading and a dry run still work."""
    import hashlib

    root = tmp_path / "store"
    with Memory(root, create=True) as memory:
        memory.ingest(EXAMPLES / "caroline-and-priya.json", consolidate=False)

    def state() -> dict:
        return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
                for p in sorted(root.rglob("*")) if p.is_file()}

    before = state()
    with Memory(root, read_only=True) as memory:
        writes = {
            "ingest": lambda: memory.ingest(EXAMPLES / "caroline-and-priya.json", consolidate=False),
            "remember": lambda: memory.remember("The boiler was serviced on Tuesday."),
            "forget": lambda: memory.forget(grep="minivan"),
            "consolidate": lambda: memory.consolidate(llm=False),
            "start_consolidation": lambda: memory.start_consolidation("asked"),
            "chat": lambda: memory.chat("w"),
            "sync": lambda: memory.sync(),
            "undo": lambda: memory.undo(),
        }
        for name, write in writes.items():
            with pytest.raises(UsageError, match="read-only"):
                write()
            assert state() == before, f"{name} wrote the store"
        assert memory.forget(grep="minivan", dry_run=True).count == 1
        assert memory.consolidate(llm=False, dry_run=True).entries_consolidated > 0
        assert memory.ask("What did Caroline buy?", reader="evidence-only").evidence
        assert not Path(memory.settings.kv_dir).is_relative_to(root)  # a chat's KV state: outside the store
    assert state() == before


def test_stores_that_share_one_kv_folder_keep_their_chat_sessions_as_each_is_opened_in_turn(tmp_path):
    """A ``kv.dir`` several stores name: each store's tombstones are noted apart in the folder, so opening one
    store and then the other does not drop every chat session each time (each sees its own note, once made)."""
    import warnings

    kv = tmp_path / "kv"
    stores = [tmp_path / "a", tmp_path / "b"]
    for root, word in zip(stores, ("minivan", "pottery")):
        with Memory(root, create=True, settings={"kv.dir": str(kv)}) as memory:
            memory.ingest(EXAMPLES / "caroline-and-priya.json", consolidate=False)
            assert memory.forget(grep=word).count >= 1
    (kv / "sessions").mkdir(parents=True, exist_ok=True)
    for root in stores:  # the first opening of each after the note existed: nothing is dropped again after
        with warnings.catch_warnings(record=True), Memory(root, settings={"kv.dir": str(kv)}) as memory:
            warnings.simplefilter("always", RuntimeWarning)
            memory.search("adoption")
    saved = kv / "sessions" / "w.json"
    saved.write_text(json.dumps({"name": "w", "messages": [{"role": "user", "content": "Hello there, memory."}]}))
    for root in [*stores, *stores]:
        with warnings.catch_warnings(record=True), Memory(root, settings={"kv.dir": str(kv)}) as memory:
            warnings.simplefilter("always", RuntimeWarning)
            memory.search("adoption")
        assert saved.exists(), root.name


def test_an_upgrade_keeps_the_chat_sessions_of_a_store_whose_caches_had_seen_its_forgets(tmp_path):
    """A KV folder kept by a memcli from before the KV folder's own note: when the cache folder's note says
    it saw every tombstone (that memcli cleaned the KV folder with it), the KV folder takes the note and
    keeps its chat sessions; when it does not, they are dropped, as ever."""
    import warnings

    root = tmp_path / "store"
    with Memory(root, create=True) as memory:
        memory.ingest(EXAMPLES / "caroline-and-priya.json", consolidate=False)
        assert memory.forget(grep="minivan").count == 1
    saved = root / "kv" / "sessions" / "w.json"
    saved.parent.mkdir(parents=True, exist_ok=True)
    saved.write_text(json.dumps({"name": "w", "messages": [{"role": "user", "content": "Hello there, memory."}]}))
    (root / "kv" / "forget-seen.json").unlink(missing_ok=True)  # as the earlier memcli left the KV folder
    with warnings.catch_warnings(record=True) as said, Memory(root) as memory:
        warnings.simplefilter("always", RuntimeWarning)
        memory.search("adoption")
    assert saved.exists() and not [w for w in said if "forgotten" in str(w.message)]
    assert (root / "kv" / "forget-seen.json").exists()
    (root / "kv" / "forget-seen.json").unlink()
    with warnings.catch_warnings(record=True), Memory(root, cache_dir=tmp_path / "another-cache") as memory:
        warnings.simplefilter("always", RuntimeWarning)  # a cache folder that saw nothing
        memory.search("adoption")
    assert not saved.exists()
