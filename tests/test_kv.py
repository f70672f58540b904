"""KV blocks with the real default model: exact restore, resumed chat, refusal, checksum, eviction, invalidation."""

from __future__ import annotations

import json
import shutil
import sys
import textwrap
import time

import numpy as np
import pytest
from conftest import EXAMPLES, REPO, run_memcli

from memcli.kv.blocks import BlockHeader, BlockRefused, BlockStore, checksum
from memcli.llm.models import default_model_path

MEMORY = "500"  # chat.memory_tokens: small contexts keep the tests quick


def open_engine(root, verify: bool = False, **options):
    from memcli.kv.engine import KVEngine
    from memcli.llm.llamacpp import LlamaCppModel

    path = options.pop("path", default_model_path())
    model = LlamaCppModel(path, n_ctx=options.pop("n_ctx", 2048), kv_sequences=2, **options)
    return KVEngine(model, BlockStore(root), verify=verify)


def units_for(engine):
    from memcli.kv.engine import Unit

    texts = ["You remember things.\n", "Caroline applied to Open Door Adoptions in April 2024.\n" * 6,
             "Priya painted the spare room yellow in July.\n" * 8]
    return [Unit(f"u{i}", engine.tokenize(t)) for i, t in enumerate(texts)]


@pytest.mark.slow  # a fast-tier budget of 5 minutes; CI runs it
def test_restore_in_a_new_process_gives_identical_logits(tmp_path):
    blocks = tmp_path / "blocks"
    script = textwrap.dedent(f"""
        import sys; sys.path.insert(0, {str(REPO)!r}); sys.path.insert(0, {str(REPO / 'tests')!r})
        from pathlib import Path
        from test_kv import open_engine, units_for
        engine = open_engine(Path({str(blocks)!r}))
        engine.load_chain(units_for(engine))
        print(engine.stats.saved_blocks)
    """)
    import subprocess

    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-1] == "3"
    engine = open_engine(blocks)
    units = units_for(engine)
    probe = engine.tokenize(" Who")[0]
    engine.load_chain(units)
    assert engine.stats.restored == sum(len(u.tokens) for u in units) and engine.stats.prefilled == 0
    restored = engine.next_logits(probe)
    engine.reset()
    engine.prefill([t for u in units for t in u.tokens])
    fresh = engine.next_logits(probe)
    assert float(np.abs(restored - fresh).max()) == 0.0
    assert float(np.abs(fresh).max()) > 1.0  # real logits, not an empty buffer


@pytest.mark.slow  # a fast-tier budget of 5 minutes; CI runs it
def test_blocks_from_other_settings_are_refused(tmp_path):
    blocks = tmp_path / "blocks"
    engine = open_engine(blocks)
    units = units_for(engine)
    engine.load_chain(units)
    del engine

    other = open_engine(blocks, type_k=8)  # q8_0 keys
    other.load_chain(units)
    assert other.stats.restored == 0 and other.stats.prefilled > 0
    assert any("type_k" in reason for reason in other.stats.refused)
    del other

    copy = tmp_path / "copy.gguf"
    shutil.copy(default_model_path(), copy)
    with open(copy, "r+b") as fh:  # change one byte of the last tensor's data
        fh.seek(-10, 2)
        byte = fh.read(1)
        fh.seek(-10, 2)
        fh.write(bytes([byte[0] ^ 1]))
    modified = open_engine(blocks, path=copy)
    modified.load_chain(units)
    assert modified.stats.restored == 0
    assert any("model_sha256" in reason for reason in modified.stats.refused)
    del modified

    small = open_engine(blocks, n_ctx=256)
    with pytest.raises(Exception, match="context"):
        small.load_chain(units + units)  # more than 256 tokens: refused before anything loads


@pytest.mark.slow
def test_corrupted_block_is_detected_and_rebuilt(tmp_path, cli, store_dir, monkeypatch):
    monkeypatch.setenv("MEMCLI_CHAT_MEMORY_TOKENS", MEMORY)
    assert cli("ingest", EXAMPLES / "caroline-and-priya.json").code == 0
    assert cli("kv", "build", "--json").code == 0
    files = sorted((store_dir / "kv" / "blocks").glob("*/*.kvb"), key=lambda p: p.stat().st_size)
    target = files[-1]
    data = bytearray(target.read_bytes())
    data[-100] ^= 0xFF
    target.write_bytes(bytes(data))
    verify = cli("kv", "verify", "--json")
    assert verify.code == 1 and "checksum" in json.dumps(verify.json["bad"])
    blocks = BlockStore(store_dir / "kv" / "blocks")
    with pytest.raises(BlockRefused, match="checksum"):
        blocks.get(target.stem, blocks.header(target.stem).fingerprint_id)
    rebuilt = cli("kv", "build", "--json")
    assert rebuilt.code == 0 and any("checksum" in r for r in rebuilt.json["refused"])
    assert cli("kv", "verify").code == 0


@pytest.mark.slow  # a fast-tier budget of 5 minutes; CI runs it
def test_kv_verify_catches_swapped_files_and_edited_headers(cli, store_dir, monkeypatch):
    monkeypatch.setenv("MEMCLI_CHAT_MEMORY_TOKENS", MEMORY)
    assert cli("ingest", EXAMPLES / "caroline-and-priya.json").code == 0
    assert cli("kv", "build", "--json").code == 0 and cli("kv", "verify").code == 0
    files = sorted((store_dir / "kv" / "blocks").glob("*/*.kvb"))
    assert len(files) >= 2
    first, second = files[0].read_bytes(), files[1].read_bytes()
    files[0].write_bytes(second)  # each file now holds the other's block: checksums still match
    files[1].write_bytes(first)
    swapped = cli("kv", "verify", "--json")
    assert swapped.code == 1
    assert all("swapped" in swapped.json["bad"][path.stem] for path in files[:2])  # (and blocks chained on them)
    files[0].write_bytes(first)
    files[1].write_bytes(second)
    assert cli("kv", "verify").code == 0
    magic, header, state = first.split(b"\n", 2)
    edited = json.loads(header)
    edited["n_tokens"] += 1  # a token count that no longer matches the cells
    files[0].write_bytes(magic + b"\n" + json.dumps(edited).encode() + b"\n" + state)
    bad = cli("kv", "verify", "--json")
    assert bad.code == 1 and "header was changed" in json.dumps(bad.json["bad"])


def test_eviction_keeps_the_budget_least_recently_used_first(tmp_path):
    store = BlockStore(tmp_path)
    keys = []
    for i in range(5):
        key = f"{i:064x}"
        store.put(BlockHeader(key=key, parent=None, unit=f"doc:d{i}@x", start=0, n_tokens=10, fingerprint_id="f",
                              fingerprint={}, state_version=1, checksum="", size=0), b"x" * 1000)
        keys.append(key)
    now = time.time()
    for age, key in zip((50, 10, 40, 30, 20), keys):  # block 0 is the least recently used
        import os

        os.utime(store.path(key), (now - age, now - age))
    size = sum(b.file_size for b in store.blocks())
    removed, freed = store.evict(size - 1500)
    left = {b.header.key for b in store.blocks()}
    assert removed == 2 and keys[0] not in left and keys[2] not in left
    assert sum(b.file_size for b in store.blocks()) <= size - 1500


@pytest.mark.parametrize("mapped", [True, False])
def test_a_block_reads_back_exactly_and_a_file_of_the_wrong_length_is_refused(tmp_path, monkeypatch, mapped):
    """The state is mapped from the file (or, where mapping fails, read): the same bytes either way,
    and a block file cut short or grown is refused, never loaded."""
    if not mapped:
        import mmap

        def no_mmap(*args, **kwargs):
            raise OSError("mmap not supported here")

        monkeypatch.setattr(mmap, "mmap", no_mmap)
    store = BlockStore(tmp_path)
    state = bytes(range(256)) * 4099
    header = BlockHeader(key="ab" * 32, parent=None, unit="doc:d@x", start=0, n_tokens=10, fingerprint_id="f",
                         fingerprint={}, state_version=1, checksum="", size=0)
    path = store.put(header, state)
    got_header, got = store.get(header.key, "f")
    assert bytes(got) == state and got_header.checksum == checksum(state)
    assert not got.readonly  # ctypes hands it to llama.cpp without a copy
    del got
    whole = path.read_bytes()
    for damaged in (whole[:-1], whole + b"\0", whole[:len(whole) - len(state)]):
        path.write_bytes(damaged)
        with pytest.raises(BlockRefused, match="checksum"):
            store.get(header.key, "f")
    assert store.verify(header.key) is not None


@pytest.mark.slow  # a fast-tier budget of 5 minutes; CI runs it
def test_chat_resumed_in_a_new_process_prefills_only_the_new_message(tmp_path):
    store = tmp_path / "store"
    env = {"MEMCLI_CHAT_MEMORY_TOKENS": MEMORY, "MEMCLI_AUTO_CONSOLIDATE": "false"}
    assert run_memcli("--store", store, "ingest", EXAMPLES / "caroline-and-priya.json", env=env).code == 0
    first = run_memcli("--store", store, "chat", "--session", "s", "--json", "--no-remember",
                       stdin=b"Which agency did Caroline choose?\n", env=env)
    assert first.code == 0, first.stderr
    turn = json.loads(first.stdout.splitlines()[0])
    assert turn["reply"] and turn["stats"]["prefilled_tokens"] <= 30
    message = "Who is Priya?"
    second = run_memcli("--store", store, "chat", "--session", "s", "--json", "--stats",
                        stdin=f"{message}\n/quit\n".encode(), env=env)
    assert second.code == 0, second.stderr
    assert "(restored)" in second.stderr and "0 prefilled" in second.stderr
    stats = json.loads(second.stdout.splitlines()[0])["stats"]
    from memcli.tokens import count_tokens

    assert stats["prefilled_tokens"] <= count_tokens(message) + 16
    assert stats["restored_tokens"] == stats["prompt_tokens"] - stats["prefilled_tokens"] > 100
    assert stats["ttft_s"] > 0 and "restored" in second.stderr and "prepared" in second.stderr  # --stats
    assert "Who is Priya?" in (store / "CURRENT.md").read_text()  # remembered (the first turn was not)
    assert "Which agency" not in (store / "CURRENT.md").read_text()


@pytest.mark.slow
def test_consolidation_invalidates_exactly_the_affected_blocks(cli, store_dir, monkeypatch):
    monkeypatch.setenv("MEMCLI_CHAT_MEMORY_TOKENS", "3000")
    assert cli("ingest", EXAMPLES / "caroline-and-priya.json").code == 0
    assert cli("consolidate", "--no-llm").code == 0
    assert cli("ingest", EXAMPLES / "chat-messages.json").code == 0
    built = cli("kv", "build", "--json").json
    chain = [u["unit"] for u in built["units"]]
    assert chain[0] == "header" and chain[-2].startswith("CURRENT@") and chain[-1] == "turn-open"
    assert len(chain) > 4

    def files():
        return {p.stem: p.read_text() for p in [*store_dir.glob("*.md"), *store_dir.glob("docs/*.md")]}

    before = files()
    result = cli("consolidate", "--no-llm", "--json").json
    after = files()
    changed = {name for name in before if after.get(name) != before[name]}
    labels = [b["unit"] for b in cli("kv", "ls", "--json").json["blocks"]]
    first_stale = next(i for i, unit in enumerate(chain)
                       if unit != "header" and unit.split("@")[0].removeprefix("doc:") in changed)
    assert set(labels) == set(chain[:first_stale])
    assert result["kv_invalidated_blocks"] == len(chain) - first_stale > 0


@pytest.mark.slow  # a fast-tier budget of 5 minutes; CI runs it
def test_chat_commands_in_a_pipeline(tmp_path):
    store = tmp_path / "store"
    env = {"MEMCLI_CHAT_MEMORY_TOKENS": MEMORY, "MEMCLI_AUTO_CONSOLIDATE": "false"}
    assert run_memcli("--store", store, "ingest", EXAMPLES / "caroline-and-priya.json", env=env).code == 0
    lines = "Remember that my cat is called Pixel.\n/evidence\n/forget\n/stats\n/nonsense\n/quit\nnever read\n"
    done = run_memcli("--store", store, "chat", "--max-tokens", "8", stdin=lines.encode(), env=env)
    assert done.code == 0, done.stderr
    assert len(done.stdout.splitlines()) == 1  # one reply; commands answer on stderr
    assert "header:" in done.stderr and "CURRENT@" in done.stderr  # /evidence
    assert "forgot the last exchange (1 memory entries removed)" in done.stderr  # the small model's reply was never kept
    assert '"last_turn"' in done.stderr and "unknown command /nonsense" in done.stderr
    assert "Pixel" not in (store / "CURRENT.md").read_text()
    session = json.loads((store / "kv" / "sessions" / "default.json").read_text())
    assert session["messages"] == []


@pytest.mark.slow  # the real default model, twice: a fast-tier budget of 5 minutes; CI runs it
def test_chat_forget_takes_the_exchange_out_of_memory_as_forget_does(tmp_path, monkeypatch):
    """``/forget`` forgets the entries the exchange became, as stored (a secret in it was redacted, so
    its text is not the message's), wherever they are, with a tombstone and the caches cleaned (the
    vectors held the entry's); resumed in a new session, the memory context is built again without it."""
    import sqlite3

    from memcli import Memory
    from memcli.semantic.encoder import MODEL_NAME
    from memcli.semantic.vectors import _key, entry_text
    from memcli.store.identity import tombstone_seqs

    monkeypatch.setenv("MEMCLI_CHAT_MEMORY_TOKENS", MEMORY)
    monkeypatch.setenv("MEMCLI_AUTO_CONSOLIDATE", "false")
    root = tmp_path / "store"

    def entry(word):
        return [e for _, e in Memory(root).store.load("CURRENT").doc.entries() if word in e.text]

    def vectors() -> set[bytes]:
        with sqlite3.connect(Memory(root).store.cache_folder / "vectors.sqlite") as db:
            return {k for (k,) in db.execute("SELECT key FROM texts")}

    with Memory(root, create=True) as memory:
        memory.ingest(EXAMPLES / "caroline-and-priya.json", consolidate=False)
        chat = memory.chat("w", max_tokens=4)
        chat.say("Remember that our deploy key is AKIAZ3MHK7QPLW2XJ4NB for the staging bucket.")
        [said] = entry("staging bucket")
        assert "AKIA" not in said.text  # stored redacted: not the message's text
        assert memory.ask("Which key is for the staging bucket?", reader="evidence-only").evidence
        key = _key(MODEL_NAME, entry_text(said))
        assert key in vectors()
        assert chat.forget() == 1 and not entry("staging bucket")
        assert said.seq in tombstone_seqs((root / "forgotten.txt").read_text()) and key not in vectors()
        assert chat.forget() is None
        chat.say("Remember that my sister Ana moved to Porto last spring.")
    with Memory(root) as memory:
        assert entry("Porto")
        chat = memory.chat("w", max_tokens=4)  # resumed: the entry is in its memory context now
        held = chat.engine.rt.detokenize(chat.engine.context_tokens())
        assert "Porto" in held
        assert chat.forget() == 1 and not entry("Porto")
        assert "Porto" not in chat.engine.rt.detokenize(chat.engine.context_tokens())
        assert json.loads((root / "kv" / "sessions" / "w.json").read_text())["messages"] == []


def test_kv_commands_without_blocks_and_without_a_local_model(cli):
    assert cli("ingest", EXAMPLES / "caroline-and-priya.json").code == 0
    assert cli("kv", "ls", "--json").json == {"action": "ls", "count": 0, "blocks": []}
    assert cli("kv", "stats", "--json").json["blocks"] == 0
    assert cli("kv", "verify").code == 0
    assert cli("kv", "prune", "--json").json["evicted_blocks"] == 0
    assert cli("--base-url", "http://127.0.0.1:9/v1", "chat", stdin=b"hi\n").code == 3


@pytest.mark.slow  # 4-6 s: the fast tier keeps within 5 minutes
def test_kv_verify_catches_a_wrong_state_with_a_valid_checksum(tmp_path):
    from memcli.kv.engine import Unit

    root = tmp_path / "blocks"
    engine = open_engine(root)
    units = units_for(engine)[:2]
    keys = engine.load_chain(units)
    swapped = Unit("other", list(reversed(units[1].tokens)))  # same length and positions, other content
    other_keys = engine.load_chain([units[0], swapped])
    blocks = BlockStore(root)
    good, wrong = blocks.path(keys[1]), blocks.path(other_keys[1])
    magic, header_line, _ = good.read_bytes().split(b"\n", 2)
    state = wrong.read_bytes().split(b"\n", 2)[2]
    header = json.loads(header_line)
    header["checksum"], header["size"] = checksum(state), len(state)
    header["digest"] = BlockHeader.from_dict(header).own_digest()
    good.write_bytes(magic + b"\n" + json.dumps(header).encode() + b"\n" + state)  # a consistent file, wrong cells
    assert blocks.verify(keys[1]) is None

    trusting = open_engine(root)
    trusting.load_chain(units)
    assert trusting.stats.restored == sum(len(u.tokens) for u in units)  # llama.cpp loads it silently
    del trusting
    checking = open_engine(root, verify=True)
    checking.load_chain(units)
    assert any("--kv-verify" in r for r in checking.stats.refused)
    assert checking.stats.prefilled == len(units[1].tokens)  # rebuilt by prefill


@pytest.mark.slow
def test_composed_documents_restore_in_any_order_without_prefill(tmp_path):
    engine = open_engine(tmp_path / "blocks")
    header, first, second = units_for(engine)
    engine.compose(header, [first, second])
    built = engine.stats.prefilled
    engine.reset()
    engine.compose(header, [second, first])  # both documents come from blocks, moved to new positions
    assert engine.stats.prefilled == built and engine.stats.restored >= len(first.tokens) + len(second.tokens)
    total = len(header.tokens) + len(first.tokens) + len(second.tokens)
    assert engine.n_tokens == total
    assert engine.rt.seq_pos_max(0) == total - 1
    question = engine.tokenize(" Who painted the room?")
    engine.prefill(question)  # decoding after a shift re-rotates the moved keys
    composed = engine.last_logits()
    blocks = {b.header.unit for b in BlockStore(tmp_path / "blocks").blocks()}
    assert {"compose:u1", "compose:u2"} <= blocks

    def prefilled(units) -> np.ndarray:
        engine.reset()
        engine.prefill([t for u in units for t in u.tokens] + question)
        return engine.last_logits()

    # composed is approximate: the second document never attended to the first. It must still be far
    # closer to a full prefill of the same order (measured: correlation 0.98-0.99) than a context
    # without the documents is (0.84-0.87); misplaced or wrong cells fall to the latter or below
    full = prefilled([header, second, first])
    without = prefilled([header])
    assert np.corrcoef(full, composed)[0, 1] > np.corrcoef(full, without)[0, 1] + 0.05
    assert np.corrcoef(full, composed)[0, 1] > 0.95
    # one document right after the header is not approximate at all: its block is the exact chain
    engine.reset()
    engine.compose(header, [first])
    engine.prefill(question)
    assert np.allclose(engine.last_logits(), prefilled([header, first]), atol=1e-3)


@pytest.mark.slow  # a fast-tier budget of 5 minutes; CI runs it
def test_shared_prompt_prefixes_restore_exactly_in_a_fresh_context(tmp_path):
    """ask's path: a call saves its shared prefixes; a fresh context restores them and answers identically."""
    from memcli.kv import keep_prompt_prefixes
    from memcli.llm.llamacpp import LlamaCppModel

    system = {"role": "system", "content": "You answer from the memory below.\n" + "Priya keeps bees in Leeds.\n" * 20}
    shared = [[system]]

    def ask(question: str, keep: bool = True):
        model = LlamaCppModel(default_model_path(), n_ctx=2048, kv_sequences=2)
        if keep:
            keep_prompt_prefixes(model, BlockStore(tmp_path / "blocks"))
        return model.chat([system, {"role": "user", "content": question}], max_tokens=12, shared=shared)

    first = ask("Where does Priya keep bees?")
    assert first.restored_tokens == 0 and first.prefilled_tokens == first.prompt_tokens
    assert len(list((tmp_path / "blocks").rglob("*.kvb"))) == 1
    again = ask("Where does Priya keep bees?")
    assert again.restored_tokens > 0.8 * again.prompt_tokens  # the system message, restored, not prefilled
    assert again.prefilled_tokens == again.prompt_tokens - again.restored_tokens
    assert again.text == first.text == ask("Where does Priya keep bees?", keep=False).text
    other = ask("What does Priya keep?")  # another question over the same prefix
    assert other.restored_tokens == again.restored_tokens
    assert other.ttft_s is not None and other.ttft_s > 0


@pytest.mark.slow
def test_ask_restores_its_prompt_prefixes_from_blocks(cli, store_dir, monkeypatch):
    cli("ingest", str(EXAMPLES / "caroline-and-priya.json"), "--no-auto")
    monkeypatch.setenv("MEMCLI_ASK_ANSWER", "generate")  # the chat model answers (the reader has no prompt)
    question = "Which adoption agency did Caroline apply to?"  # answered: the model is called (and its prefixes kept)
    first = json.loads(cli("ask", question, "--json", "--max-rounds", "1").stdout)
    second = json.loads(cli("ask", question, "--json", "--max-rounds", "1").stdout)  # a new model context
    assert first["tokens"]["restored"] == 0 and second["tokens"]["restored"] > 0
    assert second["tokens"]["prefilled"] < first["tokens"]["prefilled"]
    assert second["answer"] == first["answer"]
    assert second["timings"]["answer_ttft_s"] > 0
    off = json.loads(cli("ask", question, "--json", "--max-rounds", "1", "--no-kv").stdout)
    assert off["tokens"]["restored"] == 0 and off["answer"] == first["answer"]
    assert any((store_dir / "kv" / "blocks").rglob("*.kvb"))
    assert "prompt" in {b["unit"] for b in cli("kv", "ls", "--json").json["blocks"]}
    assert cli("forget", "--grep", "minivan", "-q").code == 0  # the prefixes hold evidence, a catalog: they go
    assert "prompt" not in {b["unit"] for b in cli("kv", "ls", "--json").json["blocks"]}


def test_kv_stats_and_verify_read_as_text_not_python(cli):
    assert cli("ingest", EXAMPLES / "chat-messages.json").code == 0
    for command in ("stats", "verify"):
        done = cli("kv", command)
        assert done.code == 0 and "{" not in done.stdout and "None" not in done.stdout, done.stdout
    assert "bad: none" in cli("kv", "verify").stdout


@pytest.mark.slow  # the real default model: a fast-tier budget of 5 minutes; CI runs it
def test_a_forget_made_elsewhere_while_a_chat_runs_does_not_come_back_with_its_next_save(tmp_path, monkeypatch):
    """``memcli forget`` in another terminal drops the session file that said the text; the chat still
    running held it in its conversation and context, and its next turn saved them again. Now the chat sees
    the new tombstones before the turn: the conversation starts again (with a warning), the context is
    built without the entry, and nothing written after holds the text."""
    import warnings

    from memcli import Memory

    monkeypatch.setenv("MEMCLI_CHAT_MEMORY_TOKENS", MEMORY)
    monkeypatch.setenv("MEMCLI_AUTO_CONSOLIDATE", "false")
    root = tmp_path / "store"
    saved = root / "kv" / "sessions" / "w.json"
    with Memory(root, create=True) as memory:
        memory.ingest(EXAMPLES / "caroline-and-priya.json", consolidate=False)
    with warnings.catch_warnings(record=True) as said, Memory(root) as memory:
        warnings.simplefilter("always", RuntimeWarning)
        chat = memory.chat("w", max_tokens=4)
        chat.say("Remember that the spare key is under the blue flowerpot.")
        chat.say("Remember that the boiler was serviced on Tuesday.")
        assert "flowerpot" in saved.read_text()
        assert run_memcli("--store", root, "forget", "--grep", "flowerpot", "-q").code == 0  # another process
        assert not saved.exists()  # the forget dropped the session that said it
        chat.say("What should I buy for the garden?")
        assert "flowerpot" not in saved.read_text()
        assert "flowerpot" not in chat.engine.rt.detokenize(chat.engine.context_tokens())
        assert len(chat.session.messages) == 2
        assert any("forgotten while this chat ran" in str(w.message) for w in said)
        assert "flowerpot" not in chat.engine.rt.detokenize(json.loads(saved.read_text())["tokens"])


@pytest.mark.slow  # the real default model: a fast-tier budget of 5 minutes; CI runs it
def test_doctor_lists_where_the_store_keeps_kv_blocks_and_each_folder_outside_it_was_used_with(tmp_path):
    """KV blocks are memory in another form: ``memcli doctor`` names the store's KV folder and every folder
    outside it that the store was used with and that still claims it, not one that does not claim it."""
    from memcli import Memory
    from memcli.config import Settings
    from memcli.kv import note_folder

    root, elsewhere, stranger = tmp_path / "store", tmp_path / "elsewhere-kv", tmp_path / "not-a-kv-folder"
    with Memory(root, create=True) as memory:
        memory.remember("The spare key is under the blue flowerpot.")
        note_folder(memory.store, Settings.load(root, {"kv.dir": str(elsewhere)}))
    stranger.mkdir()
    used = root / "kv" / "folders.json"
    used.write_text(json.dumps([*json.loads(used.read_text()), str(stranger)]))
    paths = run_memcli("--store", root, "doctor", "--json").json["paths"]
    assert paths["kv"] == {"path": str(root / "kv"), "source": "store", "exists": True}
    assert [v["path"] for k, v in paths.items() if k.startswith("kv_used")] == [str(elsewhere.resolve())]
    told = run_memcli("--store", root, "doctor", env={"MEMCLI_KV_DIR": str(elsewhere)}).stdout
    assert f"kv           {elsewhere}" in told and "kv_used" not in told  # the folder in use is listed once


def test_a_forget_cleans_a_kv_folder_the_store_was_used_with_under_another_setting(tmp_path, monkeypatch):
    """A chat run with ``kv.dir`` (one shell's ``MEMCLI_KV_DIR``) keeps its session outside the store; a
    forget run without that setting still finds the folder (the store notes it, the folder claims the
    store) and drops the session that said the text. A folder the store's note names that does not claim
    the store (a note that came with a copy or a commit) is never touched."""
    from memcli import Memory

    monkeypatch.setenv("MEMCLI_CHAT_MEMORY_TOKENS", MEMORY)
    monkeypatch.setenv("MEMCLI_AUTO_CONSOLIDATE", "false")
    root, elsewhere = tmp_path / "store", tmp_path / "elsewhere-kv"
    with Memory(root, create=True) as memory:
        memory.ingest(EXAMPLES / "caroline-and-priya.json", consolidate=False)
    with Memory(root, settings={"kv.dir": str(elsewhere)}) as memory:
        memory.chat("w", max_tokens=4).say("Remember that the spare key is under the blue flowerpot.")
    saved = elsewhere / "sessions" / "w.json"
    assert "flowerpot" in saved.read_text()
    stranger = tmp_path / "not-a-kv-folder"
    (stranger / "sessions").mkdir(parents=True)
    (stranger / "sessions" / "keep.json").write_text(saved.read_text())  # would go, were the folder cleaned
    used = root / "kv" / "folders.json"
    used.write_text(json.dumps([*json.loads(used.read_text()), str(stranger)]))  # as a hostile note would
    assert run_memcli("--store", root, "forget", "--grep", "flowerpot", "-q").code == 0  # no kv.dir here
    assert not saved.exists()
    assert (stranger / "sessions" / "keep.json").exists()
