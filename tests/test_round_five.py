"""Round five of the adversarial findings: what a commit, a link or a file in the store's place could
make memcli do (each test failed on main 78f62bc). The MCP fast path's own findings are in
tests/test_mcp_first_line.py."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import time
from pathlib import Path

import pytest
from conftest import EXAMPLES, run_memcli

from tests.test_capture import SAMPLES, jsonl


def example_store(tmp_path) -> Path:
    store = tmp_path / "ex"
    assert run_memcli("--store", store, "ingest", EXAMPLES / "caroline-and-priya.json", "-q").code == 0
    return store


def current_lines(store) -> list[dict]:
    return [line for line in run_memcli("--store", store, "read", "CURRENT", "--json").json["lines"]
            if "entry" in line]


def event(name: str, cwd, transcript=None) -> bytes:
    return json.dumps({"session_id": "x", "hook_event_name": name, "cwd": str(cwd),
                       **({"transcript_path": str(transcript)} if transcript is not None else {})}).encode()


# ---------------------------------------------------------------- forget's notes belong to the clone

@pytest.mark.slow  # a fast tier within 5 minutes: CI runs it
def test_a_dry_run_note_that_arrives_through_git_cannot_stand_in_for_the_users_own(tmp_path):
    """A teammate force-adds .forget-preview.json and, with it, a change that moves CURRENT's lines; after
    sync, the user's forget of the citation their dry run showed is refused (it names another note now),
    and sync says the tracked copy is ignored."""
    from test_share import two_clones

    a, b, _ = two_clones(tmp_path)
    notes = [{"speaker": "Ann", "text": f"note {i} about the kiln"} for i in range(1, 7)]
    (a.folder / "notes.json").write_text(json.dumps(notes))
    a.memory.ingest(a.folder / "notes.json", consolidate=False)
    a.memory.sync()
    b.memory.sync()
    lines = {e.text: n for n, e in a.memory.store.load("CURRENT").doc.entries()}
    citation = f"CURRENT:{lines['note 3 about the kiln']}"
    shown = a.memory.forget([citation], dry_run=True)
    assert [e["text"] for e in shown.entries] == ["note 3 about the kiln"]
    # the teammate: a forget moves the lines (its update-log note grows the front matter, the entry goes);
    # their preview says the user's citation holds what it holds after the change
    b.memory.forget(grep="note 6 about")
    line = lines["note 3 about the kiln"]
    now = {n: e for n, e in b.memory.store.load("CURRENT").doc.entries()}
    assert now[line].text != "note 3 about the kiln"
    forged = b.folder / ".memcli" / ".forget-preview.json"
    forged.write_text(json.dumps({f"CURRENT:{line}-{line}": [now[line].seq]}))
    subprocess.run(["git", "-C", str(b.folder), "add", "-f", ".memcli/.forget-preview.json"], check=True)
    subprocess.run(["git", "-C", str(b.folder), "-c", "user.name=B", "-c", "user.email=b@example.com", "commit", "-qm",
                    "notes"], check=True)
    b.memory.sync()
    a.memory.sync()  # the teammate's copy lands in the work tree, over the user's own note if it was there
    before = [e.text for _, e in a.memory.store.load("CURRENT").doc.entries()]
    assert dict(a.memory.store.load("CURRENT").doc.entries())[line].text == now[line].text
    refused = run_memcli("--store", a.folder / ".memcli", "forget", citation)
    assert refused.code == 2 and "dry run" in refused.stderr, refused.stderr
    assert [e.text for _, e in a.memory.store.load("CURRENT").doc.entries()] == before  # nothing was forgotten
    synced = run_memcli("--store", a.folder / ".memcli", "sync", "--json")
    assert synced.code == 0 and synced.json["ignored"] == [".memcli/.forget-preview.json"], synced.stderr
    assert "never reads" in run_memcli("--store", a.folder / ".memcli", "sync").stderr


def test_a_purge_note_that_arrives_with_the_store_drops_no_chat_session(tmp_path):
    """A .forget-purge.json in the store's folder (force-added by a teammate, synced) is not this clone's
    interrupted forget: the next command deletes no saved chat session and no KV unit."""
    store = example_store(tmp_path)
    kv = store / "kv"
    (kv / "sessions").mkdir(parents=True)
    (kv / "units").mkdir()
    saved = {"messages": [{"role": "user", "content": "hello"}], "memory_keys": []}
    (kv / "sessions" / "chat.json").write_text(json.dumps(saved))
    (kv / "units" / "unit.json").write_text("{}")
    (store / ".forget-purge.json").write_text(json.dumps({"time": "2026-01-01T00:00:00", "documents": ["CURRENT"]}))
    found = run_memcli("--store", store, "search", "adoption agency")
    assert found.code == 0 and "interrupted" not in found.stderr, found.stderr
    assert (kv / "sessions" / "chat.json").exists() and (kv / "units" / "unit.json").exists()


def test_an_interrupted_forget_is_still_finished_by_the_next_command(tmp_path):
    """The clone's own purge note (now beside its caches) still has the next command drop the caches."""
    from memcli.forget_caches import PURGE, note_path
    from memcli.store import Store

    store = example_store(tmp_path)
    assert run_memcli("--store", store, "search", "adoption", "-q").code == 0
    kv = store / "kv" / "units"
    kv.mkdir(parents=True)
    (kv / "unit.json").write_text("{}")
    note = note_path(Store(store), PURGE)
    note.write_text(json.dumps({"time": "2026-01-01T00:00:00", "documents": ["CURRENT"]}))
    found = run_memcli("--store", store, "search", "adoption agency")
    assert found.code == 0 and "interrupted" in found.stderr
    assert not note.exists() and not (kv / "unit.json").exists()


# ---------------------------------------------------------------- which store

@pytest.mark.slow  # a fast tier within 5 minutes: CI runs it
def test_a_linked_dot_memcli_is_not_taken_as_the_projects_store(tmp_path):
    client = tmp_path / "client-work"
    assert run_memcli("init", client).code == 0
    assert run_memcli("--store", client / ".memcli", "remember", "client A contract price is 40k", "-q").code == 0
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    (project / ".memcli").symlink_to("../client-work/.memcli")
    before = (client / ".memcli" / "CURRENT.md").read_bytes()
    found = run_memcli("grep", "contract", cwd=project)
    assert found.code == 3 and "symbolic link" in found.stderr and "--store" in found.stderr, found.stderr
    assert "client A" not in found.stdout
    assert run_memcli("init", cwd=project).code == 3
    session = tmp_path / "s.jsonl"
    shutil.copy(SAMPLES / "claude-code-session.jsonl", session)
    for flags in (["--wait"], []):
        hooked = run_memcli("hook", "claude-code", *flags, stdin=event("SessionEnd", project, session), cwd=tmp_path)
        assert hooked.code == 3 and "symbolic link" in hooked.stderr, hooked.stderr
    time.sleep(0.5)
    assert (client / ".memcli" / "CURRENT.md").read_bytes() == before  # nothing was saved there
    on_purpose = run_memcli("--store", project / ".memcli", "grep", "contract", cwd=project)
    assert on_purpose.code == 0 and "client A" in on_purpose.stdout


@pytest.mark.slow  # a fast tier within 5 minutes: CI runs it
def test_a_session_whose_cwd_is_gone_or_a_file_goes_to_the_project_store_above_it(tmp_path):
    project = tmp_path / "kiln"
    (project / ".git").mkdir(parents=True)
    assert run_memcli("init", project).code == 0
    (project / "notes.txt").write_text("x")
    session = tmp_path / "s.jsonl"
    shutil.copy(SAMPLES / "claude-code-session.jsonl", session)
    for cwd in (project / "src" / "removed-worktree", project / "notes.txt"):
        saved = run_memcli("hook", "claude-code", "--wait", "--json", stdin=event("SessionEnd", cwd, session),
                           cwd=tmp_path)
        assert saved.code == 0, saved.stderr
        assert saved.json["store"] == str(project / ".memcli") and saved.json["project"] is None
        quick = run_memcli("hook", "claude-code", "--json", stdin=event("SessionEnd", cwd, session), cwd=tmp_path)
        assert quick.code == 0 and quick.json["store"] == str(project / ".memcli"), quick.stderr
    recalled = run_memcli("hook", "claude-code", stdin=event("SessionStart", project / "src" / "removed-worktree"),
                          cwd=tmp_path)
    assert recalled.code == 0 and "Memory of" in recalled.stdout


# ---------------------------------------------------------------- approved paths

@pytest.mark.slow  # a fast tier within 5 minutes: CI runs it
def test_an_approved_relative_kv_dir_is_the_stores_folder_whatever_the_working_folder(tmp_path):
    store = example_store(tmp_path)
    (store / "config.toml").write_text('[kv]\ndir = "kv-cache"\n')
    assert run_memcli("--store", store, "trust", "-q").code == 0
    elsewhere = tmp_path / "someone-else"
    for folder in ("units", "sessions"):
        (elsewhere / "kv-cache" / folder).mkdir(parents=True)
    (elsewhere / "kv-cache" / "units" / "theirs.json").write_text("not json")
    (elsewhere / "kv-cache" / "sessions" / "theirs.json").write_text("not json")
    os.chmod(elsewhere / "kv-cache", 0o755)
    status = run_memcli("--store", store, "status", "--json", cwd=elsewhere).json
    assert status["settings"]["kv.dir"]["value"] == os.path.realpath(store / "kv-cache")
    seq = current_lines(store)[0]["entry"]["meta"]["seq"]
    assert run_memcli("--store", store, "forget", seq, "-q", cwd=elsewhere).code == 0
    assert (elsewhere / "kv-cache" / "units" / "theirs.json").exists()
    assert (elsewhere / "kv-cache" / "sessions" / "theirs.json").exists()
    assert stat.S_IMODE(os.stat(elsewhere / "kv-cache").st_mode) == 0o755
    # the approval is of the folder it names: the store's own, approved as such
    (store / "config.toml").write_text(f'[kv]\ndir = "{os.path.realpath(store / "kv-cache")}"\n')
    assert run_memcli("--store", store, "status", "--json").json["settings"]["kv.dir"]["source"].endswith(
        "config.toml")


# ---------------------------------------------------------------- approvals survive damage

@pytest.mark.slow  # a fast tier within 5 minutes: CI runs it
def test_a_damaged_approvals_file_is_reported_and_never_overwritten_with_less(tmp_path):
    from memcli.trust import trust_file

    stores = []
    for name in ("one", "two", "three"):
        store = tmp_path / name
        assert run_memcli("--store", store, "init", "-q").code == 0
        (store / "config.toml").write_text('[model]\nname = "teammate"\n')
        stores.append(store)
    for store in stores[:2]:
        assert run_memcli("--store", store, "trust", "-q").code == 0
    path = trust_file()
    good = path.read_bytes()
    damaged = good.replace(b"{", b"[", 1)
    path.write_bytes(damaged)
    status = run_memcli("--store", stores[0], "status", "--json")
    assert status.json["approvals"]["damaged"] and status.json["settings"]["model.name"]["value"] == "default"
    assert "approvals:" in run_memcli("--store", stores[0], "status").stdout
    again = run_memcli("--store", stores[2], "trust")
    assert again.code == 3 and "does not overwrite" in again.stderr, again.stderr
    assert path.read_bytes() == damaged  # every approval it held is still there to repair
    path.unlink()
    path.mkdir()
    folder = run_memcli("--store", stores[2], "trust")
    assert folder.code == 3 and "internal error" not in folder.stderr, folder.stderr


# ---------------------------------------------------------------- nothing blocks on a FIFO

@pytest.mark.slow  # a fast tier within 5 minutes: CI runs it
def test_a_fifo_where_a_configuration_file_is_blocks_no_command(tmp_path):
    store = example_store(tmp_path)
    os.mkfifo(store / "config.toml")
    commands = [["status"], ["grep", "agency"], ["remember", "a note"], ["docs"]]
    for args in commands:
        done = subprocess.run([*run_memcli_argv(store), *args], capture_output=True, text=True, timeout=60)
        assert done.returncode == 3 and "not a regular file" in done.stderr, (args, done.stderr)
    started = subprocess.run([*run_memcli_argv(None), "hook", "claude-code"], input=event("SessionStart", tmp_path),
                             capture_output=True, timeout=60, env={**os.environ, "MEMCLI_STORE": str(store)})
    assert started.returncode == 3, started.stderr
    request = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    served = subprocess.run([*run_memcli_argv(store), "mcp"], input=(json.dumps(request) + "\n").encode(),
                            capture_output=True, timeout=60)
    assert served.returncode == 3 and served.stdout == b"", served  # never "initialized", then gone
    os.unlink(store / "config.toml")
    user_config = tmp_path / "xdg-config" / "memcli"
    user_config.mkdir(parents=True)
    os.mkfifo(user_config / "config.toml")
    done = subprocess.run([*run_memcli_argv(store), "status"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 3 and "not a regular file" in done.stderr


def run_memcli_argv(store) -> list[str]:
    import sys

    return [sys.executable, "-m", "memcli", *(["--store", str(store)] if store is not None else [])]


# ---------------------------------------------------------------- readers of files a user hands in

def test_a_line_longer_than_the_record_limit_is_skipped_without_being_read_whole(tmp_path):
    import tracemalloc

    from memcli.ingest.source import read_input

    path = tmp_path / "session.jsonl"
    with path.open("wb") as out:
        out.write(b'{"a": 1}\n')
        out.write(b'{"tool": "' + b"y" * (40 << 20) + b'"}\n')  # 40 MB on one line
        out.write(b'{"b": 2}\n')
        out.write(b'{"c": 3}')  # the last line, no newline yet
    tracemalloc.start()
    try:
        source = read_input(path, max_bytes=1 << 20, json_lines=True, record_limit=256 * 1024)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert source.dropped == 1 and source.data == b'{"a": 1}\n{"b": 2}\n{"c": 3}'
    assert peak < 8 << 20, peak  # a few chunks, never the line


@pytest.mark.slow  # a fast tier within 5 minutes: CI runs it
def test_forced_formats_read_what_auto_detection_reads_and_refuse_other_shapes(tmp_path):
    for shape in ([], {"info": 1, "messages": []}, {"info": {}, "messages": 3}, {"info": {}, "messages": [1, "x"]}):
        path = tmp_path / "other.json"
        path.write_text(json.dumps(shape))
        done = run_memcli("--store", tmp_path / "s", "ingest", path, "--format", "opencode")
        assert done.code == 4 and "internal error" not in done.stderr, (shape, done.stderr)
    gemini = SAMPLES / "gemini-cli-yoavf.json"
    auto = run_memcli("--store", tmp_path / "g1", "ingest", gemini, "--json")
    forced = run_memcli("--store", tmp_path / "g2", "ingest", gemini, "--format", "gemini", "--json")
    assert auto.code == 0 and forced.code == 0, forced.stderr
    assert auto.json["format"] == "gemini" and forced.json["added"] == auto.json["added"] > 0
    events = [{"type": "user.message", "id": "sevt_1", "processed_at": "2026-05-01T10:00:00Z",
               "content": [{"type": "text", "text": "the staging port is 8443"}]},
              {"type": "agent.message", "id": "sevt_2", "processed_at": "2026-05-01T10:00:05Z",
               "content": [{"type": "text", "text": "Noted: 8443."}]}]
    listed = tmp_path / "events.json"
    listed.write_text(json.dumps({"data": events, "next_page": None}, indent=2))
    auto = run_memcli("--store", tmp_path / "m1", "ingest", listed, "--json")
    forced = run_memcli("--store", tmp_path / "m2", "ingest", listed, "--format", "managed-agents", "--json")
    assert auto.json["format"] == "managed-agents" and forced.code == 0, forced.stderr
    assert forced.json["added"] == auto.json["added"] == 2


def test_one_bad_record_in_a_pi_session_costs_itself_not_the_turns_before_it(cli, tmp_path):
    def entry(n: int) -> dict:
        return {"type": "message", "id": f"e{n:02d}", "parentId": f"e{n - 1:02d}" if n > 1 else None,
                "timestamp": f"2026-07-10T10:{n:02d}:00.000Z",
                "message": {"role": "user" if n % 2 else "assistant", "content": [{"type": "text", "text": f"turn {n}"}]}}

    path = tmp_path / "2026-07-10T10-00-00-000Z_0199.jsonl"
    records = [{"type": "session", "version": 3, "id": "0199", "timestamp": "2026-07-10T10:00:00.000Z", "cwd": "/w"}]
    records += [entry(n) for n in range(1, 11)]
    jsonl(path, records)
    lines = path.read_text().splitlines()
    lines[7] = lines[7][:25]  # turn 7's record, cut: not JSON
    path.write_text("\n".join(lines) + "\n")
    done = cli("ingest", path, "--json")
    assert done.code == 0 and done.json["format"] == "pi"
    texts = [line["entry"]["text"] for line in cli("read", "CURRENT", "--json").json["lines"] if "entry" in line]
    assert texts == [f"turn {n}" for n in range(1, 11) if n != 7]


# ---------------------------------------------------------------- the hook says "saving" only for a real file

def test_the_hook_says_saving_only_for_a_regular_file_and_resolves_a_relative_one_against_the_events_cwd(tmp_path):
    store = tmp_path / "store"
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "folder").mkdir()
    for path, said in (("/dev/zero", "not a regular file"), (tmp_path / "fifo", "not a regular file"),
                       (tmp_path / "folder", "is a directory"), (tmp_path / "missing.jsonl", "no such file")):
        done = run_memcli("--store", store, "hook", "claude-code", "--json", stdin=event("SessionEnd", tmp_path, path))
        assert done.code == 4 and said in done.stderr, (path, done.stdout, done.stderr)
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(SAMPLES / "claude-code-session.jsonl", project / "session.jsonl")
    (tmp_path / "elsewhere").mkdir()
    relative = run_memcli("--store", store, "hook", "claude-code", "--json",
                          stdin=event("SessionEnd", project, "session.jsonl"), cwd=tmp_path / "elsewhere")
    assert relative.code == 0 and relative.json["action"] == "saving", relative.stderr
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (not (store / "CURRENT.md").exists()
                                           or (store / "CURRENT.md").read_text().count("- <seq=") < 4):
        time.sleep(0.2)
    assert (store / "CURRENT.md").read_text().count("- <seq=") == 4
    no_cwd = run_memcli("--store", store, "hook", "claude-code", stdin=json.dumps(
        {"hook_event_name": "SessionEnd", "transcript_path": "session.jsonl"}).encode(), cwd=project)
    assert no_cwd.code == 4 and "relative" in no_cwd.stderr


@pytest.mark.parametrize("wait", [True, False])
def test_a_fifo_transcript_never_hangs_the_hook(tmp_path, wait):
    os.mkfifo(tmp_path / "fifo")
    done = subprocess.run([*run_memcli_argv(tmp_path / "store"), "hook", "claude-code", *(["--wait"] if wait else [])],
                          input=event("SessionEnd", tmp_path, tmp_path / "fifo"), capture_output=True, timeout=60)
    assert done.returncode == 4
