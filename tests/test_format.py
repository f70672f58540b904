"""The file format: whatever is written reads back the same, hand edits keep working."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from memcli.store.format import (
    Document,
    Entry,
    escape_text,
    parse_document,
    parse_entry,
    parse_signature,
    render_signature,
    unescape_text,
)

keys = st.from_regex(r"[A-Za-z_][A-Za-z0-9_.-]{0,10}", fullmatch=True)
values = st.text(max_size=40)
metas = st.dictionaries(keys, values, max_size=6)


@given(st.text())
def test_text_escaping_round_trips_and_stays_on_one_line(text):
    escaped = escape_text(text)
    assert len(escaped.splitlines()) <= 1
    assert "\n" not in escaped and "\r" not in escaped
    assert unescape_text(escaped) == text


@given(metas)
def test_signature_round_trips(meta):
    sig = render_signature(meta)
    assert sig.startswith("<") and sig.endswith(">")
    assert len(sig.splitlines()) == 1
    if meta:
        assert parse_signature(sig[1:-1]) == meta


@given(st.integers(min_value=1, max_value=10**9), metas, st.text())
def test_entry_round_trips(seq, meta, text):
    meta = {"seq": str(seq), **{k: v for k, v in meta.items() if k != "seq"}}
    entry = Entry(meta, text)
    line = entry.render()
    back = parse_entry(line)
    assert back is not None
    assert back.meta == meta and back.text == text and back.seq == seq


def test_design_example_entry_parses():
    line = ("- <seq=40,time=2023-05-25T13:14,speaker=Caroline,ref=D2:8> "
            "Caroline is researching adoption agencies.")
    entry = parse_entry(line)
    assert entry.seq == 40 and entry.time == "2023-05-25T13:14" and entry.ref == "D2:8"
    assert entry.meta["speaker"] == "Caroline"
    assert entry.render() == line


def test_malformed_signature_is_plain_text():
    assert parse_entry("- <seq=1,oops> text") is None
    assert parse_entry("- just a bullet") is None
    assert parse_entry("text <seq=1> not a bullet") is None


line_text = st.text(alphabet=st.characters(blacklist_characters="\n"), max_size=60)


@settings(max_examples=200)
@given(st.lists(line_text, max_size=12), st.booleans())
def test_document_without_front_matter_round_trips_byte_for_byte(lines, trailing_newline):
    text = "\n".join(lines) + ("\n" if trailing_newline else "")
    if text.startswith("---\n") or text.startswith("---\r\n"):
        text = "x" + text
    assert parse_document(text).render() == text


DOC = """---
id: caroline-adoption-3f9a1c
summary: Caroline's adoption plans - agencies researched, interviews, timeline
token_count: 412
created_time: 2023-05-25T13:14:00
updated_time: 2023-10-22T09:10:00
update_log:
  - {time: 2023-10-22T09:10:00, op: update, seqs: [40, 57], note: merged from CURRENT}
aux: {}
owner: someone   # an unknown key, with a comment
---
# Caroline
## Adoption
- <seq=40,time=2023-05-25T13:14,speaker=Caroline,ref=D2:8,mood=hopeful> Caroline is researching adoption agencies.
- <seq=57,time=2023-08-23T15:31,speaker=Caroline,ref=D13:1> Caroline applied to adoption agencies.
"""


def test_design_document_round_trips_and_keeps_times_as_strings():
    doc = parse_document(DOC)
    assert doc.render() == DOC
    assert doc.meta["created_time"] == "2023-05-25T13:14:00"
    assert doc.meta["owner"] == "someone"
    assert [e.seq for _, e in doc.entries()] == [40, 57]
    # line numbers are file line numbers
    assert [n for n, _ in doc.entries()] == [14, 15]
    assert doc.body_start == 12


def test_unknown_keys_survive_a_metadata_rewrite():
    doc = parse_document(DOC)
    doc.meta["summary"] = "new summary"
    doc.meta["update_log"].append({"time": "2023-11-01T00:00:00", "op": "update", "seqs": [58]})
    text = doc.render()
    back = parse_document(text)
    assert back.meta["owner"] == "someone"
    assert back.meta["aux"] == {}
    assert back.meta["updated_time"] == "2023-10-22T09:10:00"
    assert len(back.meta["update_log"]) == 2
    entry = next(e for _, e in back.entries() if e.seq == 40)
    assert entry.meta["mood"] == "hopeful"  # unknown signature keys survive
    assert back.render() == text  # and the rewritten file is itself stable


def test_hand_edits_keep_working():
    edited = (DOC.replace("## Adoption", "## Family plans")
              .replace("applied to adoption agencies", "was accepted by an adoption agency")
              + "- <seq=99,time=2023-12-01T10:00,speaker=Caroline> Added by hand.\n"
              + "- a plain bullet without a signature\n")
    doc = parse_document(edited)
    assert doc.render() == edited
    entries = [e for _, e in doc.entries()]
    assert [e.seq for e in entries] == [40, 57, 99]
    assert entries[1].text == "Caroline was accepted by an adoption agency."


def test_crlf_document_round_trips():
    text = DOC.replace("\n", "\r\n")
    doc = parse_document(text)
    assert doc.render() == text
    assert [e.seq for _, e in doc.entries()] == [40, 57]


def test_broken_front_matter_is_reported_with_a_line():
    import pytest

    from memcli.store.format import FormatError

    with pytest.raises(FormatError) as err:
        parse_document("---\nid: [unclosed\n---\nbody\n")
    assert err.value.line is not None
    with pytest.raises(FormatError):
        parse_document("---\nid: x\nno end\n")


def test_new_document_renders_and_parses():
    doc = Document(meta={"id": "x", "summary": "s", "token_count": 1, "update_log": [], "aux": {}},
                   body=["# T", Entry({"seq": "1", "time": "2024-01-01T00:00"}, "a\nb").render(), ""])
    back = parse_document(doc.render())
    assert back.meta["id"] == "x"
    assert [e.text for _, e in back.entries()] == ["a\nb"]
