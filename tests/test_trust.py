"""Trust boundaries: what arrives through git (or any copy of a store) is data.

Each test here is a finding of the adversarial round on 057d365: it failed there and passes now.
The teammate ones use two real clones of a bare repository (tests/test_share.py's two_clones)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from conftest import run_memcli
from test_share import git, two_clones


class Recorder(BaseHTTPRequestHandler):
    seen: list[dict] = []

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        Recorder.seen.append({"path": self.path, "auth": self.headers.get("Authorization"), "body": body})
        self.send_response(500)
        self.end_headers()

    do_GET = do_POST

    def log_message(self, *args):
        pass


def recording_server():
    Recorder.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def note(path: Path, text: str) -> Path:
    path.write_text(json.dumps([{"speaker": "Ann", "text": text, "time": "2024-03-01T10:00"}]))
    return path


@pytest.mark.slow  # several processes or stores: the slow tier (CI runs it)
def test_a_teammates_config_cannot_send_memory_or_credentials_to_their_server(tmp_path):
    a, b, _ = two_clones(tmp_path)
    server = recording_server()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        (a.folder / ".memcli" / "config.toml").write_text(
            f'[model]\nbackend = "openai"\nbase_url = "{url}"\napi_key_env = "VICTIM_TOKEN"\nname = "x"\n')
        a.memory.ingest(note(a.folder / "n.json", "The deploy key lives in the vault"), consolidate=False)
        git(a.folder, "add", "-A")
        git(a.folder, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "config")
        a.memory.sync()
        assert b.memory.sync().merged >= 1
        # no local model to fall back on (MEMCLI_MODEL names none): an ask that does not reach their server
        # ends in "model missing", quickly
        env = {"VICTIM_TOKEN": "ghp_victimsecret", "MEMCLI_STORE": str(b.folder / ".memcli"),
               "MEMCLI_MODEL": str(tmp_path / "no-model.gguf")}
        asked = run_memcli("ask", "Where does the deploy key live?", "--reader", "agent", "--json", env=env)
        assert Recorder.seen == []  # nothing reached their server: not the key, not the memory
        assert asked.code == 3 and "not used" in asked.stderr and "memcli trust" in asked.stderr
        status = run_memcli("status", "--json", env=env).json["settings"]
        assert status["model.base_url"]["value"] == "" and status["model.backend"]["value"] == "llama"
        # approved by the user of this clone, exactly these values are used
        shown = run_memcli("trust", "--json", env=env)
        assert shown.code == 0 and shown.json["approved"] and shown.json["settings"]["model.base_url"] == url
        assert run_memcli("status", "--json", env=env).json["settings"]["model.base_url"]["value"] == url
        run_memcli("ask", "Where does the deploy key live?", "--reader", "agent", "-q", env=env)
        assert Recorder.seen and Recorder.seen[0]["auth"] == "Bearer ghp_victimsecret"  # the test can fail
        # a later change by the teammate needs a new approval
        Recorder.seen = []
        config = b.folder / ".memcli" / "config.toml"
        config.write_text(config.read_text().replace('"x"', '"y"'))
        again = run_memcli("ask", "Where does the deploy key live?", "--reader", "agent", "--json", env=env)
        assert Recorder.seen == [] and again.code == 3 and "not used" in again.stderr
    finally:
        server.shutdown()


def test_a_store_config_that_is_a_link_is_refused(tmp_path):
    store = tmp_path / "s"
    assert run_memcli("--store", store, "init", "-q").code == 0
    outside = tmp_path / "elsewhere.toml"
    outside.write_text("[search]\nk = 3\n")
    (store / "config.toml").symlink_to(outside)
    done = run_memcli("--store", store, "status")
    assert done.code == 3 and "symbolic link" in done.stderr


def test_untrusted_settings_of_the_users_own_file_and_environment_are_honoured(tmp_path):
    config = tmp_path / "xdg-config" / "memcli" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('[model]\nbase_url = "http://127.0.0.1:9/v1"\n')
    store = tmp_path / "s"
    run_memcli("--store", store, "init", "-q")
    status = run_memcli("--store", store, "status", "--json")
    assert status.json["settings"]["model.base_url"]["value"] == "http://127.0.0.1:9/v1"
    assert "not used" not in status.stderr
    env = run_memcli("--store", store, "status", "--json", env={"MEMCLI_KV_DIR": str(tmp_path / "kv")})
    assert env.json["settings"]["kv.dir"]["value"] == str(tmp_path / "kv")


def commit_all(folder: Path, message: str) -> None:
    git(folder, "add", "-A", "-f", ".")
    git(folder, "-c", "user.name=mallory", "-c", "user.email=m@x", "commit", "-qm", message)


def test_a_committed_kv_link_never_makes_forget_delete_outside_the_store(tmp_path):
    a, b, _ = two_clones(tmp_path)
    outside = tmp_path / "victim-folder"
    (outside / "sessions").mkdir(parents=True)
    (outside / "sessions" / "precious.json").write_text("{}")
    (outside / "units").mkdir()
    (outside / "units" / "work.json").write_text("{}")
    a.memory.ingest(note(a.folder / "n.json", "The zeppelin hangar opens at nine"), consolidate=False)
    (a.folder / ".memcli" / "kv").symlink_to(outside)
    commit_all(a.folder, "a kv link")
    a.memory.sync()
    b.memory.sync()
    assert (b.folder / ".memcli" / "kv").is_symlink()
    done = run_memcli("--store", b.folder / ".memcli", "forget", "--grep", "zeppelin", "--json")
    assert done.code == 0, done.stderr
    assert "symbolic link" in done.stderr  # said, and the link was not followed
    assert sorted(p.name for p in outside.rglob("*.json")) == ["precious.json", "work.json"]


def test_kv_folders_are_private(tmp_path):
    store = tmp_path / "s"
    run_memcli("--store", store, "init", "-q")
    from memcli.paths import ensure_private_dir

    ensure_private_dir(store / "kv" / "blocks" / "ab")
    for folder in (store / "kv", store / "kv" / "blocks", store / "kv" / "blocks" / "ab"):
        assert folder.stat().st_mode & 0o777 == 0o700, folder


def test_a_committed_merge_union_attribute_cannot_break_state_json(tmp_path):
    a, b, _ = two_clones(tmp_path)
    (a.folder / ".memcli" / ".gitattributes").write_text("* merge=union\n")
    (a.folder / ".gitattributes").write_text(".memcli/state.json merge=union\n")
    commit_all(a.folder, "union everything")
    git(a.folder, "push", "-q")
    # both clones write (their state.json both change), then sync
    a.memory.ingest(note(a.folder / "n.json", "Ann moved to Lisbon"), consolidate=False)
    b.memory.ingest(note(b.folder / "n.json", "Bo adopted a cat"), consolidate=False)
    b.memory.sync()
    synced = a.memory.sync()
    b.memory.sync()
    for clone in (a, b):
        state = json.loads((clone.folder / ".memcli" / "state.json").read_text())  # one JSON object
        assert isinstance(state, dict)
        assert sorted(e.text for e in clone.entries()) == ["Ann moved to Lisbon", "Bo adopted a cat"]
        assert (clone.folder / ".memcli" / ".gitattributes").read_text().startswith("CURRENT.md merge=memcli")
        assert git(clone.folder, "status", "--porcelain", "--", ".memcli") == ""  # the repair is committed
    assert synced.repaired or b.memory.sync().repaired == []


@pytest.mark.slow  # several processes or stores: the slow tier (CI runs it)
def test_a_crafted_state_is_a_clear_error_naming_the_commit_and_doctor_repairs_it(tmp_path):
    a, b, _ = two_clones(tmp_path)
    a.memory.ingest(note(a.folder / "n.json", "Ann moved to Lisbon"), consolidate=False)
    a.memory.sync()
    b.memory.sync()
    state = a.folder / ".memcli" / "state.json"
    good = json.loads(state.read_text())
    state.write_text(json.dumps({**good, "origins": ["x"], "next_tick": "1e3"}))
    commit_all(a.folder, "crafted state")
    git(a.folder, "push", "-q")
    b.memory.sync()  # the driver merges what it can: no internal error
    store = b.folder / ".memcli"
    (b.folder / "m.json").write_text(json.dumps([{"speaker": "Bo", "text": "Bo adopted a cat"}]))
    done = run_memcli("--store", store, "ingest", b.folder / "m.json")
    if done.code != 0:  # the damage came through: a clear error naming the file and the commit
        assert done.code == 1 and "state.json" in done.stderr and "internal error" not in done.stderr
    damaged = run_memcli("--store", a.folder / ".memcli", "ingest", b.folder / "m.json")
    assert damaged.code == 1 and "state.json: damaged store state" in damaged.stderr
    assert "last changed by commit" in damaged.stderr and "mallory" in damaged.stderr
    assert "doctor --repair" in damaged.stderr
    repaired = run_memcli("--store", a.folder / ".memcli", "doctor", "--repair", "--json")
    checks = {c["name"]: c for c in repaired.json["checks"]}
    assert checks["repair"]["ok"] and checks["store state"]["ok"], checks
    fixed = json.loads(state.read_text())
    assert fixed["origins"] and all(isinstance(o, int) for o in fixed["origins"])
    assert fixed["next_tick"] >= good["next_tick"]
    assert run_memcli("--store", a.folder / ".memcli", "ingest", b.folder / "m.json").code == 0


def test_a_front_matter_of_the_wrong_type_is_a_clear_error_and_merges(tmp_path):
    from memcli.share.merge import merge_document

    store = tmp_path / "s"
    (tmp_path / "n.json").write_text(json.dumps([{"speaker": "Ann", "text": "Ann moved to Lisbon"}]))
    run_memcli("--store", store, "ingest", tmp_path / "n.json", "-q")
    current = store / "CURRENT.md"
    text = current.read_text()
    current.write_text(text.replace("update_log:", "update_log: 5\nold_log:", 1))
    (tmp_path / "m.json").write_text(json.dumps([{"speaker": "Bo", "text": "Bo adopted a cat"}]))
    done = run_memcli("--store", store, "ingest", tmp_path / "m.json")
    assert done.code == 1 and "update_log must be a list" in done.stderr and "CURRENT.md" in done.stderr
    merged, _ = merge_document(text, current.read_text(), text)
    assert "Ann moved to Lisbon" in merged


def test_sync_clears_what_a_killed_sync_left(tmp_path):
    a, b, _ = two_clones(tmp_path)
    a.memory.ingest(note(a.folder / "n.json", "Ann moved to Lisbon"), consolidate=False)
    a.memory.sync()
    (a.folder / ".git" / "index.lock").write_text("")
    (a.folder / ".merge_file_abc123").write_text("- <seq=1> a line of memory\n")
    done = run_memcli("--store", a.folder / ".memcli", "sync", "--json")
    assert done.code == 0, done.stderr
    assert any("index.lock" in p for p in done.json["cleared"])
    assert not (a.folder / ".git" / "index.lock").exists() and not (a.folder / ".merge_file_abc123").exists()


@pytest.mark.slow  # several processes or stores: the slow tier (CI runs it)
def test_undo_takes_back_this_clones_change_not_a_teammates(tmp_path):
    a, b, _ = two_clones(tmp_path)
    a.memory.ingest(note(a.folder / "n.json", "Ann moved to Lisbon"), consolidate=False)
    a.memory.sync()
    b.memory.sync()
    refused = run_memcli("--store", b.folder / ".memcli", "undo")
    assert refused.code == 2 and "--any" in refused.stderr  # b made no change: the author is named
    b.memory.ingest(note(b.folder / "m.json", "Bo adopted a cat"), consolidate=False)
    a.memory.ingest(note(a.folder / "o.json", "Ann took up chess"), consolidate=False)
    a.memory.sync()
    b.memory.sync()  # a's newest change is now b's newest in history
    undone = run_memcli("--store", b.folder / ".memcli", "undo", "--json")
    assert undone.code == 0, undone.stderr
    texts = sorted(e.text for e in b.entries())
    assert texts == ["Ann moved to Lisbon", "Ann took up chess"]  # b's own note went, a's stayed


def test_the_merge_driver_keeps_every_version_a_person_kept(tmp_path):
    from test_share import doc, line

    from memcli.share.merge import merge_document
    from memcli.store.format import parse_document

    base = doc(line(1, "a"), line(2, "b"))
    # theirs settled a conflict by keeping both versions of seq 2
    theirs = doc(line(1, "a"), line(2, "b"), line(2, "b, as the other clone wrote it"))
    ours = doc(line(1, "a"), line(2, "b"), line(3, "c"))
    for mine, other in ((ours, theirs), (theirs, ours)):  # either side merging
        merged, conflicts = merge_document(base, mine, other)
        texts = sorted(e.text for _, e in parse_document(merged).entries())
        assert conflicts == 0 and texts == ["a", "b", "b, as the other clone wrote it", "c"]
    # a later change elsewhere keeps both versions, and theirs taking one out takes it out
    merged, _ = merge_document(theirs, theirs, doc(line(1, "a"), line(2, "b")))
    assert sorted(e.text for _, e in parse_document(merged).entries()) == ["a", "b"]


def test_two_clones_with_one_origin_are_told_apart_at_sync(tmp_path):
    from memcli.store.identity import ORIGIN_FILE, drawn_origin

    a, b, _ = two_clones(tmp_path)
    a.memory.ingest(note(a.folder / "n.json", "Ann moved to Lisbon"), consolidate=False)
    a.memory.sync()
    b.memory.sync()
    # b's folder restored from a's: the same origin file, made to look like b's own
    mine = json.loads((a.folder / ".memcli" / ORIGIN_FILE).read_text())
    copied = {**mine, "path": str((b.folder / ".memcli").absolute())}
    copied.pop("folder", None)
    (b.folder / ".memcli" / ORIGIN_FILE).write_text(json.dumps(copied))
    assert drawn_origin(b.folder / ".memcli") == mine["origin"]
    a.memory.ingest(note(a.folder / "o.json", "Ann took up chess"), consolidate=False)
    a.memory.sync()
    done = b.memory.sync()
    assert done.origin and done.origin["from"] == mine["origin"] and done.origin["to"] != mine["origin"]
    assert drawn_origin(b.folder / ".memcli") == done.origin["to"]


def test_an_origin_drawn_in_another_folder_or_machine_is_drawn_anew(tmp_path):
    from memcli.store.identity import ORIGIN_FILE, drawn_origin, local_origin

    root = tmp_path / "s"
    root.mkdir()
    origin = local_origin(root, {})
    assert drawn_origin(root) == origin
    data = json.loads((root / ORIGIN_FILE).read_text())
    (root / ORIGIN_FILE).write_text(json.dumps({**data, "machine": "another-machine"}))
    assert drawn_origin(root) is None
    (root / ORIGIN_FILE).write_text(json.dumps({**data, "folder": "1:2"}))  # same path, another folder
    assert drawn_origin(root) is None


# ---------------------------------------------------------------- forget never forgets the wrong thing


def example_store(tmp_path) -> Path:
    from conftest import EXAMPLES

    store = tmp_path / "ex"
    assert run_memcli("--store", store, "ingest", EXAMPLES / "caroline-and-priya.json", "-q").code == 0
    return store


@pytest.mark.slow  # several processes or stores: the slow tier (CI runs it)
def test_forget_refuses_a_pattern_or_selection_that_takes_everything(tmp_path):
    from memcli.store.census import seq_counts

    store = example_store(tmp_path)
    before = seq_counts(store)
    for pattern in ("", "(?i)", "x*", "."):
        done = run_memcli("--store", store, "forget", "--grep", pattern)
        assert done.code == 2, (pattern, done.stderr)
        assert "--all" in done.stderr
    assert seq_counts(store) == before
    first, last = min(before), max(before)
    assert run_memcli("--store", store, "forget", f"{first}-{last}").code == 2
    assert seq_counts(store) == before
    everything = run_memcli("--store", store, "forget", "--all", "--json")
    assert everything.code == 0 and everything.json["count"] == len(before)


def test_the_mcp_forget_tool_refuses_a_match_everything_pattern(tmp_path):
    from memcli.mcp_server import MemoryTools
    from memcli.memory import Memory

    store = example_store(tmp_path)
    tools = MemoryTools(Memory(store))
    import pytest

    from memcli.errors import UsageError

    for pattern in ("", "(?i)"):
        with pytest.raises(UsageError):
            tools.forget(grep=pattern)


@pytest.mark.slow  # 4-6 s: the fast tier keeps within 5 minutes
def test_a_citation_that_moved_since_the_dry_run_is_refused(tmp_path):
    from memcli.store.census import seq_counts

    store = example_store(tmp_path)
    lines = run_memcli("--store", store, "read", "CURRENT", "--json").json["lines"]
    target = [line for line in lines if "entry" in line][5]
    citation = f"CURRENT:{target['line']}"
    shown = run_memcli("--store", store, "forget", citation, "--dry-run", "--json").json["entries"]
    assert [e["seq"] for e in shown] == [int(target["entry"]["meta"]["seq"])]
    # the store changes: CURRENT is consolidated and new entries land in it
    assert run_memcli("--store", store, "consolidate", "--no-llm", "-q").code == 0
    (tmp_path / "more.json").write_text(json.dumps([{"speaker": "Ann", "text": f"note {i}"} for i in range(40)]))
    assert run_memcli("--store", store, "ingest", tmp_path / "more.json", "-q").code == 0
    before = seq_counts(store)
    done = run_memcli("--store", store, "forget", citation)
    assert done.code == 2 and "dry run" in done.stderr
    assert seq_counts(store) == before  # nothing was forgotten
    # forgetting by the seq the dry run showed works
    assert run_memcli("--store", store, "forget", str(shown[0]["seq"]), "-q").code == 0


def test_wide_seq_ranges_cost_nothing(tmp_path):
    import sys

    store = example_store(tmp_path)
    ranges = [f"{n * 10**7}-{n * 10**7 + 10**6}" for n in range(1, 31)]  # 30 ranges of a million seqs each
    # the forget runs in a child of its own, whose peak memory is measured alone
    probe = ("import resource, subprocess, sys; done = subprocess.run(sys.argv[1:], capture_output=True); "
             "print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    out = subprocess.run([sys.executable, "-c", probe, sys.executable, "-m", "memcli", "--store", str(store), "forget",
                          *ranges, "--dry-run", "--json"], capture_output=True, text=True).stdout.split()
    code, peak_kb = int(out[0]), int(out[1])
    assert code == 1  # nothing in those ranges
    assert peak_kb < 400_000, peak_kb  # the whole command; expanding the ranges took 2.2 GB


def test_the_lock_never_holds_the_command_line(tmp_path):
    store = example_store(tmp_path)
    assert run_memcli("--store", store, "forget", "--grep", "zeppelin-ottoline", "-q").code == 1
    lock = (store / ".lock").read_text()
    assert "zeppelin" not in lock and "forget" in lock


# ---------------------------------------------------------------- secrets stay out of every field

TOKEN = "ghp_" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb7c"


def test_a_secret_in_any_field_is_scrubbed_everywhere(tmp_path):
    store = tmp_path / "s"
    source = tmp_path / f"chat-{TOKEN}.json"
    source.write_text(json.dumps([{"speaker": TOKEN, "text": "We talked about the zeppelin hangar", "id": TOKEN},
                                  {"speaker": "Ann", "text": "It opens at nine"}]))
    done = run_memcli("--store", store, "ingest", source, "--conv", f"conv-{TOKEN}", "--project", TOKEN, "--json")
    assert done.code == 0, done.stderr
    assert run_memcli("--store", store, "remember", "a note", "--source", TOKEN).code in (0, 2)  # remember is issue 50's
    from memcli.memory import Memory

    Memory(store).remember("another note", source=TOKEN, speaker=TOKEN, conv=TOKEN)
    assert run_memcli("--store", store, "consolidate", "--no-llm", "-q").code == 0
    assert run_memcli("--store", store, "ask", "zeppelin", "--evidence-only", "-q").code == 0  # the index
    leaked = [str(p) for p in [*store.rglob("*"), *(tmp_path / "xdg-cache").rglob("*")]
              if TOKEN in str(p) or (p.is_file() and "/models/" not in str(p) and TOKEN.encode() in p.read_bytes())]
    assert leaked == []
    assert "redacted" in (store / "CURRENT.md").read_text() or any(
        "redacted" in p.read_text() for p in (store / "docs").glob("*.md"))


def test_a_secret_in_a_file_name_stays_out_of_git_commit_messages(tmp_path):
    a, _, _ = two_clones(tmp_path)
    source = a.folder / f"notes-{TOKEN}.json"
    note(source, "Ann moved to Lisbon")
    a.memory.ingest(source, consolidate=False)
    log = git(a.folder, "log", "--format=%B")
    assert TOKEN not in log and "redacted" in log


def test_private_spans_nest_tolerate_spaces_and_run_across_a_sessions_messages():
    from memcli.ingest.privacy import scrub_many

    texts = ["keep <private>a <private>b</private> c</private> this",
             "keep <private >hidden</private > too",
             "open <PRIVATE>secret starts",
             "still secret",
             "ends</private> and this is kept"]
    out = [s.text for s in scrub_many(texts, sessions=["s"] * len(texts))]
    assert out[0] == "keep this" and out[1] == "keep too"
    assert out[2] == "open" and out[3] == "" and out[4] == "and this is kept"
    assert "secret" not in " ".join(out) and " c" not in out[0]
    # another session is not hidden by this one's open span
    other = scrub_many(["<private>x", "visible"], sessions=["s1", "s2"])
    assert other[1].text == "visible"


# ---------------------------------------------------------------- smaller items


def test_a_read_only_server_never_writes_the_store_to_finish_a_killed_writer(tmp_path):
    from conftest import snapshot

    from memcli.memory import Memory
    from memcli.store import atomic

    store = example_store(tmp_path)
    txn = atomic.Transaction(store)  # a writer killed right after its commit point, before its renames
    txn.write("CURRENT.md", (store / "CURRENT.md").read_text().replace("pottery", "ceramics"))
    (store / atomic.TXN_DIR / atomic.MANIFEST).write_text(json.dumps({"ops": txn.ops}))
    before = snapshot(store)
    warned: list[str] = []
    memory = Memory(store, read_only=True, on_warning=warned.append)
    with memory.store.reading():
        text = "\n".join(memory.store.load("CURRENT").doc.body)
    assert "ceramics" in text and "pottery" not in text  # the committed state is what it reads
    assert snapshot(store) == before and warned  # and it wrote nothing, saying why
    Memory(store).docs()  # a writer finishes it
    assert snapshot(store) != before and "ceramics" in (store / "CURRENT.md").read_text()


def test_the_hook_says_bad_paths_are_bad_input(tmp_path):
    for event in ({"hook_event_name": "SessionEnd", "transcript_path": "/tmp/a\udc00\ud800.jsonl", "cwd": "/tmp"},
                  {"hook_event_name": "SessionEnd", "transcript_path": "/tmp/x.jsonl", "cwd": "/" + "a" * 5000}):
        raw = json.dumps(event).encode()
        done = run_memcli("hook", "claude-code", stdin=raw)
        assert done.code == 4 and "internal error" not in done.stderr, done.stderr
        assert "not a usable path" in done.stderr


def test_a_huge_claude_code_session_is_read_without_its_tool_output(tmp_path, monkeypatch):
    session = tmp_path / "session.jsonl"
    records = []
    for n in range(4):
        records.append({"type": "user", "uuid": f"u{n}", "sessionId": "s", "timestamp": f"2025-01-01T10:0{n}:00Z",
                        "message": {"role": "user", "content": f"question {n} about the zeppelin"}})
        records.append({"type": "user", "uuid": f"t{n}", "sessionId": "s", "timestamp": f"2025-01-01T10:0{n}:30Z",
                        "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "x",
                                                                 "content": "y" * 600_000}]}})
    session.write_text("".join(json.dumps(r) + "\n" for r in records))
    store = tmp_path / "s"
    env = {"MEMCLI_MAX_INPUT_BYTES": str(1_000_000)}  # the file is 2.4 MB: over the limit, as 64 MiB ones are
    done = run_memcli("--store", store, "ingest", session, "--format", "claude-code", "--json", env=env)
    assert done.code == 0, done.stderr
    assert done.json["added"] == 4 and "tool output" in done.stderr
    again = run_memcli("--store", store, "ingest", session, "--format", "claude-code", "--json", env=env)
    assert again.json["added"] == 0


def test_status_says_a_killed_vectors_job_is_not_running(tmp_path):
    from memcli.paths import store_cache_dir
    from memcli.semantic import job

    store = example_store(tmp_path)
    folder = store_cache_dir(store)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / job.STATUS).write_text(json.dumps({"state": "running", "pid": 999999, "done": 3, "total": 9}))
    status = run_memcli("--store", store, "status", "--json").json
    assert status["vectors"]["job"]["state"] == "killed"
    assert "background" not in run_memcli("--store", store, "status").stdout.split("vectors:")[1].splitlines()[0]


def test_ctrl_c_while_memcli_starts_is_exit_130_without_a_traceback(tmp_path):
    import signal
    import sys
    import time

    for delay in (0.05, 0.15, 0.3):
        proc = subprocess.Popen([sys.executable, "-m", "memcli", "--store", str(tmp_path / "s"), "status"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate()
        if proc.returncode == 0 or proc.returncode == 1:
            continue  # it finished (or said there is no store) before the signal
        frames = re.findall(r'File "([^"]+)"', err.decode(errors="replace"))
        ours = [f for f in frames if "/memcli/" in f.replace("\\", "/")
                and not f.replace("\\", "/").endswith(("memcli/__init__.py", "memcli/__main__.py"))]
        if proc.returncode == -signal.SIGINT and not ours:
            continue  # Python's own start-up (site, runpy loading the package) was interrupted, before memcli's code ran
        assert proc.returncode == 130 and b"Traceback" not in err, (delay, proc.returncode, err[-2000:])


@pytest.mark.parametrize("raise_", ["raise KeyboardInterrupt", "raise RuntimeError('Error calling __set_name__') from KeyboardInterrupt()"])
def test_a_ctrl_c_python_wraps_in_another_error_is_still_exit_130(raise_):
    """A Ctrl-C landing in a class body being built reaches memcli as a RuntimeError (seen at start-up)."""
    import sys

    code = f"import memcli.cli as cli\ndef boom(argv):\n    {raise_}\ncli._main = boom\ncli.main()\n"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 130 and "Traceback" not in done.stderr, (done.returncode, done.stderr[-500:])
    assert done.stderr.strip() == "memcli: interrupted"


def test_an_error_with_no_ctrl_c_behind_it_is_not_called_an_interruption():
    from memcli.cli import interrupted

    try:
        try:
            raise ValueError("inner")
        except ValueError as inner:
            raise RuntimeError("outer") from inner
    except RuntimeError as outer:
        assert not interrupted(outer)


# ---------------------------------------------------------------- kills: no stale vectors, no wedged clone


def _forget_template(tmp_path):
    from conftest import EXAMPLES

    from memcli.memory import Memory

    template = tmp_path / "template"
    sessions = []
    for name, words in (("s1", "zeppelin hangar marmalade"), ("s2", "bakery opening hours")):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps([{"speaker": "Ann", "text": f"Note {i} on the {words} ({name})"} for i in range(12)]))
        sessions.append(path)
    memory = Memory(template, create=True)
    memory.ingest(sessions[0], conv="s1", consolidate=False)
    memory.ingest(sessions[1], conv="s2", consolidate=False)
    memory.consolidate(llm=False)
    memory.ingest(EXAMPLES / "chat-messages.json", conv="s1", consolidate=False)
    memory.ask("zeppelin hangar", reader="evidence-only")  # the index and every vector, in the cache
    gone = [e for doc_id in memory.store.all_ids() for _, e in memory.store.load(doc_id).doc.entries()
            if e.meta.get("conv") == "s1"]
    return template, gone


@pytest.mark.slow
@pytest.mark.parametrize("trials", [pytest.param(20, id="20-trials")])
def test_a_kill_during_forget_leaves_no_stale_vectors(tmp_path, trials):
    import random
    import shutil
    import signal
    import sqlite3
    import sys
    import time

    from memcli.forget_caches import PURGE, note_path
    from memcli.paths import store_cache_dir
    from memcli.semantic.encoder import Encoder
    from memcli.semantic.vectors import _key, entry_text
    from memcli.store import Store
    from memcli.store.census import seq_counts

    template, gone = _forget_template(tmp_path)
    model = Encoder().name
    keys = {_key(model, entry_text(e)) for e in gone}
    forgotten_seqs = {e.seq for e in gone}

    def fresh(name: str) -> Path:
        root = tmp_path / name
        shutil.copytree(template, root)
        shutil.copytree(store_cache_dir(template), store_cache_dir(root))
        return root

    command = [sys.executable, "-m", "memcli", "--store", "{root}", "forget", "--conv", "s1", "-q"]
    began = time.perf_counter()
    probe = fresh("probe")
    assert subprocess.run([c.replace("{root}", str(probe)) for c in command]).returncode == 0
    whole = time.perf_counter() - began
    rng = random.Random(7)
    after_commit = 0
    for trial in range(trials):
        root = fresh(f"kill-{trial}")
        proc = subprocess.Popen([c.replace("{root}", str(root)) for c in command],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.5 * whole, whole))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        after_commit += note_path(Store(root), PURGE).exists()
        asked = run_memcli("--store", root, "ask", "zeppelin hangar", "--evidence-only", "--json")  # the next command
        assert asked.code in (0, 1), asked.stderr
        now = seq_counts(root)
        assert all(n == 1 for n in now.values()), trial
        if forgotten_seqs & set(now):
            continue  # killed before the commit: nothing was forgotten
        db = sqlite3.connect(store_cache_dir(root) / "vectors.sqlite")
        stale = [k for (k,) in db.execute("SELECT key FROM texts") if bytes(k) in keys]
        db.close()
        assert stale == [], (trial, len(stale))
        assert not note_path(Store(root), PURGE).exists()
        assert "zeppelin" not in json.dumps(asked.json.get("evidence", []))
    print(f"{trials} kills, {after_commit} between the store's commit and the caches' cleaning")


@pytest.mark.slow
def test_a_kill_between_forgets_commit_and_its_cache_cleaning_leaves_no_stale_vectors(tmp_path):
    """The hard case of the kills above, made to come up: the test holds the search index's write lock,
    so the forget commits and then waits to clean its caches; it is killed there."""
    import shutil
    import signal
    import sqlite3
    import sys
    import time

    from memcli.forget_caches import PURGE, note_path
    from memcli.paths import store_cache_dir
    from memcli.semantic.encoder import Encoder
    from memcli.semantic.vectors import _key, entry_text
    from memcli.store import Store
    from memcli.store.census import seq_counts

    template, gone = _forget_template(tmp_path)
    keys = {_key(Encoder().name, entry_text(e)) for e in gone}
    forgotten_seqs = {e.seq for e in gone}
    root = tmp_path / "killed"
    shutil.copytree(template, root)
    shutil.copytree(store_cache_dir(template), store_cache_dir(root))
    lock = sqlite3.connect(store_cache_dir(root) / "index.sqlite", isolation_level=None)
    lock.execute("BEGIN IMMEDIATE")  # the index's writers wait (30 s) until it is released; its readers do not
    proc = subprocess.Popen([sys.executable, "-m", "memcli", "--store", str(root), "forget", "--conv", "s1", "-q"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 25
        while not (note_path(Store(root), PURGE).exists() and not forgotten_seqs & set(seq_counts(root))):
            assert proc.poll() is None, "the forget ended without waiting for the index"
            assert time.monotonic() < deadline, "the forget never committed"
            time.sleep(0.05)
        time.sleep(0.3)  # past the commit's last rename
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        lock.execute("ROLLBACK")
        lock.close()
    assert note_path(Store(root), PURGE).exists()
    asked = run_memcli("--store", root, "ask", "zeppelin hangar", "--evidence-only", "--json")  # the next command
    assert asked.code in (0, 1), asked.stderr
    assert "interrupted before its caches were cleaned" in asked.stderr
    now = seq_counts(root)
    assert all(n == 1 for n in now.values()) and not forgotten_seqs & set(now)
    vectors = store_cache_dir(root) / "vectors.sqlite"
    if vectors.exists():
        db = sqlite3.connect(vectors)
        stale = [k for (k,) in db.execute("SELECT key FROM texts") if bytes(k) in keys]
        db.close()
        assert stale == []
    assert not note_path(Store(root), PURGE).exists()
    assert "zeppelin" not in json.dumps(asked.json.get("evidence", []))


@pytest.mark.slow
@pytest.mark.parametrize("trials", [pytest.param(20, id="20-trials")])
def test_a_killed_sync_never_wedges_the_clone(tmp_path, trials):
    import random
    import signal
    import sys
    import time

    rng = random.Random(5)
    wedged_before = 0
    for trial in range(trials):
        a, b, _ = two_clones(tmp_path / f"t{trial}")
        for n in range(3):
            a.memory.ingest(note(a.folder / f"a{n}.json", f"Ann note {trial}-{n}"), consolidate=False)
            b.memory.ingest(note(b.folder / f"b{n}.json", f"Bo note {trial}-{n}"), consolidate=False)
        b.memory.sync()
        proc = subprocess.Popen([sys.executable, "-m", "memcli", "--store", str(a.folder / ".memcli"), "sync"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        time.sleep(rng.uniform(0.3, 2.0))
        os.killpg(proc.pid, signal.SIGKILL)  # memcli and its git children
        proc.wait()
        wedged_before += (a.folder / ".git" / "index.lock").exists()
        again = run_memcli("--store", a.folder / ".memcli", "sync", "--json")
        assert again.code == 0, (trial, again.stderr)
        assert b.memory.sync().pushed
        for clone in (a, b):
            texts = sorted(e.text for e in clone.entries())
            assert texts == sorted([f"Ann note {trial}-{n}" for n in range(3)] + [f"Bo note {trial}-{n}" for n in range(3)])
            assert not list(clone.folder.glob(".merge_file_*"))
            assert subprocess.run(["git", "-C", str(clone.folder), "status", "--porcelain", "--", ".memcli"],
                                  capture_output=True, text=True).stdout == ""
    print(f"{trials} killed syncs, {wedged_before} left git's index.lock behind; every next sync worked")
