"""memcli ingest: every input shape, duplicates, and bad input that changes nothing."""

from __future__ import annotations

import json
import re

import pytest
from conftest import EXAMPLES, LOCOMO, needs_locomo, snapshot

from memcli.ingest.turns import parse_time
from memcli.paths import Resolved
from memcli.store import CURRENT_ID, Store


def current_entries(store_dir):
    store = Store.open(Resolved(store_dir, "test"))
    return [e for _, e in store.load(CURRENT_ID).doc.entries()]


def locomo_turns(path):
    data = json.loads(path.read_text())
    return sum(len(v) for k, v in data.items() if re.fullmatch(r"session_\d+", k))


@pytest.mark.parametrize("name", ["conv-26.json", "conv-30.json"])
@needs_locomo
def test_ingest_locomo_conversation_object(cli, store_dir, name):
    path = LOCOMO / name
    result = cli("ingest", path, "--json")
    assert result.code == 0, result.stderr
    out = result.json
    turns = locomo_turns(path)
    assert out["format"] == "locomo" and out["added"] == turns == out["turns"]
    entries = current_entries(store_dir)
    assert [e.seq for e in entries] == list(range(1, turns + 1))
    first = entries[0]
    assert first.meta["conv"] == name[:-5]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d", first.time)
    assert first.ref == "D1:1"
    data = json.loads(path.read_text())
    assert first.text == data["session_1"][0]["text"]
    # an image shared in a turn becomes text from its caption
    captioned = next(t for t in data["session_1"] + data["session_2"] if t.get("blip_caption"))
    entry = next(e for e in entries if e.ref == captioned["dia_id"])
    assert captioned["blip_caption"] in entry.text


@needs_locomo
def test_ingest_locomo_sample_list_and_sample_choice(cli, store_dir, tmp_path):
    samples = []
    for name in ("conv-26.json", "conv-30.json"):
        data = json.loads((LOCOMO / name).read_text())
        conversation = {k: v for k, v in data.items() if k.startswith(("speaker_", "session_"))}
        samples.append({"sample_id": name[:-5], "conversation": conversation, "qa": data["qa"]})
    path = tmp_path / "locomo10.json"
    path.write_text(json.dumps(samples))

    one = cli("ingest", path, "--sample", "conv-30", "--json")
    assert one.code == 0, one.stderr
    assert one.json["added"] == locomo_turns(LOCOMO / "conv-30.json")
    assert {e.meta["conv"] for e in current_entries(store_dir)} == {"conv-30"}

    both = cli("ingest", path, "--json")
    assert both.json["added"] == locomo_turns(LOCOMO / "conv-26.json")
    assert both.json["skipped"] == locomo_turns(LOCOMO / "conv-30.json")
    entries = current_entries(store_dir)
    assert {e.meta["conv"] for e in entries} == {"conv-26", "conv-30"}
    # dialog ids repeat across samples; conv keeps them apart
    assert len({(e.meta["conv"], e.ref) for e in entries}) == len(entries)

    missing = cli("ingest", path, "--sample", "conv-99")
    assert missing.code == 4 and "conv-99" in missing.stderr


def test_ingest_twice_adds_nothing_and_says_so(cli, store_dir):
    first = cli("ingest", EXAMPLES / "caroline-and-priya.json")
    assert first.code == 0
    before = snapshot(store_dir)
    again = cli("ingest", EXAMPLES / "caroline-and-priya.json")
    assert again.code == 0
    assert "nothing new" in again.stdout
    assert snapshot(store_dir) == before


def test_the_speaker_text_time_shape_people_write_first_is_a_chat(cli, store_dir, tmp_path):
    path = tmp_path / "notes.json"
    path.write_text(json.dumps([{"speaker": "Ana", "text": "I moved to Lisbon in May", "time": "2024-05-02T10:00"},
                                {"speaker": "Ben", "text": "How is the flat?"}]))
    done = cli("ingest", path, "--json")
    assert done.code == 0 and done.json["format"] == "chat" and done.json["added"] == 2, done.stderr
    first, second = current_entries(store_dir)
    assert (first.meta["speaker"], first.time, first.text) == ("Ana", "2024-05-02T10:00", "I moved to Lisbon in May")
    assert second.meta["speaker"] == "Ben" and "source" not in second.meta
    path.write_text(json.dumps([{"speaker": 7, "text": "x"}]))
    bad = cli("ingest", path, "--json")
    assert bad.code == 4 and "speaker" in bad.json["error"]["message"]


def test_quiet_ingest_and_consolidate_print_nothing(cli, tmp_path):
    for args in (("ingest", EXAMPLES / "chat-messages.json", "-q"), ("-q", "consolidate")):
        done = cli(*args)
        assert done.code == 0 and done.stdout == "" and done.stderr == "", done
    assert cli("ingest", EXAMPLES / "chat-messages.json").stdout  # without -q it says what it did


def test_ingest_chat_messages_shapes(cli, store_dir, tmp_path):
    result = cli("ingest", EXAMPLES / "chat-messages.json", "--json")
    assert result.code == 0, result.stderr
    assert result.json["format"] == "chat"
    assert result.json["added"] == 5 and result.json["ignored"] == 1  # the system message
    entries = current_entries(store_dir)
    assistant = [e for e in entries if e.meta.get("source") == "AI"]
    assert len(assistant) == 2 and all(e.meta["speaker"] == "assistant" for e in assistant)
    assert entries[0].meta["speaker"] == "sam" and entries[0].time == "2024-05-02T09:12"

    plain = tmp_path / "list.json"
    plain.write_text(json.dumps([
        {"role": "user", "content": "I prefer tea over coffee."},
        {"role": "assistant", "content": [{"type": "text", "text": "Noted: tea."}]},
    ]))
    listed = cli("ingest", plain, "--json", "--time", "2024-06-01T08:00")
    assert listed.json["added"] == 2
    assert current_entries(store_dir)[-1].text == "Noted: tea."
    assert current_entries(store_dir)[-1].time == "2024-06-01T08:00"

    jsonl = tmp_path / "chat.jsonl"
    jsonl.write_text('{"role": "user", "content": "My bike is a green Brompton."}\n\n'
                     '{"role": "assistant", "content": "A folding bike, nice."}\n')
    lines = cli("ingest", jsonl, "--json")
    assert lines.json["format"] == "jsonl" and lines.json["added"] == 2
    assert current_entries(store_dir)[-2].ref == "chat.jsonl:1"


def test_ingest_text_paragraphs_and_stdin(cli, store_dir, tmp_path):
    notes = tmp_path / "notes.md"
    notes.write_text("# Notes\n\nThe spare key is under the blue pot.\nIt opens the back door.\n\n\n"
                     "Dentist appointment moved to Friday.\n")
    result = cli("ingest", notes, "--json")
    assert result.json["format"] == "text" and result.json["added"] == 3
    entries = current_entries(store_dir)
    assert entries[1].text == "The spare key is under the blue pot.\nIt opens the back door."
    assert entries[1].ref == "notes.md:3"

    piped = cli("ingest", "-", "--json", "--format", "text", stdin=b"Remember to water the ferns.\n")
    assert piped.code == 0, piped.stderr
    assert piped.json["added"] == 1 and piped.json["source"] == "<stdin>"
    assert current_entries(store_dir)[-1].text == "Remember to water the ferns."


BAD_INPUTS = {
    "invalid.json": (b'{"speaker_a": "A", "session_1": [', "invalid JSON"),
    "shape.json": (b'{"hello": "world"}', "not a format memcli reads"),
    "notext.json": (json.dumps({"speaker_a": "A", "speaker_b": "B",
                                "session_1_date_time": "1:56 pm on 8 May, 2023",
                                "session_1": [{"speaker": "A", "dia_id": "D1:1", "text": "hi"},
                                              {"speaker": "B", "dia_id": "D1:2", "text": "  "}]}).encode(),
                    "session_1[1]: turn has no text"),
    "baddate.json": (json.dumps({"speaker_a": "A", "speaker_b": "B",
                                 "session_1_date_time": "sometime in spring",
                                 "session_1": [{"speaker": "A", "dia_id": "D1:1", "text": "hi"}]}).encode(),
                     "session_1_date_time: date 'sometime in spring' does not parse"),
    "emptymsg.json": (b'[{"role": "user", "content": "ok"}, {"role": "user", "content": ""}]',
                      "#2: message has no text"),
    "badline.jsonl": (b'{"role": "user", "content": "ok"}\n{"role": "user", "content": \n',
                      "line 2"),
    "binary.txt": (b"\xff\xfe\x00garbage", "not UTF-8"),
    "empty.txt": (b"   \n", "input is empty"),
}


@pytest.mark.parametrize("name", sorted(BAD_INPUTS))
def test_bad_input_exits_4_names_the_place_and_changes_nothing(cli, store_dir, tmp_path, name):
    assert cli("ingest", EXAMPLES / "caroline-and-priya.json").code == 0
    before = snapshot(store_dir)
    data, expected = BAD_INPUTS[name]
    path = tmp_path / name
    path.write_bytes(data)
    result = cli("ingest", path)
    assert result.code == 4, result.stderr
    assert name in result.stderr and expected in result.stderr
    assert "Traceback" not in result.stderr
    assert snapshot(store_dir) == before
    as_json = cli("ingest", path, "--json")
    assert as_json.code == 4 and as_json.json["error"]["type"] == "bad_input"


def test_missing_file_is_bad_input_and_creates_nothing(cli, store_dir):
    result = cli("ingest", "nope.json")
    assert result.code == 4 and "nope.json: no such file" in result.stderr
    assert not store_dir.exists()


@pytest.mark.parametrize("text,iso", [
    ("1:56 pm on 8 May, 2023", "2023-05-08T13:56"),
    ("12:09 am on 13 September, 2023", "2023-09-13T00:09"),
    ("12:30 pm on 1 Jan, 2024", "2024-01-01T12:30"),
    ("2024-05-02T09:12:00Z", "2024-05-02T09:12"),
    ("2024-05-02 11:12:00+02:00", "2024-05-02T09:12"),
])
def test_dates(text, iso):
    assert parse_time(text, "x", "y") == iso


def test_default_store_is_created_under_xdg_data(isolated_env):
    from conftest import run_memcli

    result = run_memcli("ingest", EXAMPLES / "chat-messages.json", "--json")
    assert result.code == 0, result.stderr
    root = isolated_env / "xdg-data" / "memcli"
    assert result.json["store"] == str(root)
    assert (root / "CURRENT.md").exists()
    assert oct(root.stat().st_mode & 0o777) == "0o700"
    assert oct((root / "docs").stat().st_mode & 0o777) == "0o700"
    for path in root.rglob("*"):
        if path.is_file():
            assert oct(path.stat().st_mode & 0o777) == "0o600", path
