"""File names follow titles; former ids resolve (memcli/store/aliases.py); headings kept apart."""

from __future__ import annotations

from memcli.consolidate.apply import refresh_headings
from memcli.consolidate.titles import retitled_id
from memcli.memory import Memory
from memcli.paths import Resolved
from memcli.store import Store
from memcli.store.aliases import ALIASES
from memcli.store.format import Document, Entry


def test_a_name_changes_only_when_it_no_longer_begins_with_the_titles_first_phrase():
    title = "Pottery class, clay bowls and kiln (Caroline)"
    assert retitled_id("pottery-class-caroline-0a1b2c", title) is None  # begins with "pottery class"
    assert retitled_id("old-notes-0a1b2c", title) == "pottery-class-clay-bowls-and-kiln-caroline-0a1b2c"
    assert retitled_id("my-notes", title) is None  # an id a person gave (no suffix memcli made)
    assert retitled_id("Pottery-class-0A1B2C", title) is None


def test_a_former_id_resolves_along_its_chain_and_an_existing_document_is_read_by_its_own_id(tmp_path):
    store = Store.open(Resolved(tmp_path / "store", "test"), create=True)
    (store.docs_dir / "c-000003.md").write_text("# C\n")
    (store.docs_dir / "b-000002.md").write_text("# B\n")
    (store.root / ALIASES).write_text("a-000001>b-000002\nb-000002>c-000003\nx-000009>y-000009\n"
                                      "loop-000001>loop-000002\nloop-000002>loop-000001\nnot an alias line\n")
    assert store.resolve("a-000001") == "b-000002"  # b still exists: the chain stops at the first that does
    (store.docs_dir / "b-000002.md").unlink()
    assert store.resolve("a-000001") == "c-000003" and store.resolve("b-000002") == "c-000003"
    assert store.resolve("c-000003") == "c-000003"
    assert store.resolve("x-000009") == "x-000009"  # leads nowhere: the id as named (NotFound when read)
    assert store.resolve("loop-000001") == "loop-000001"


def _pottery(memory: Memory, texts: list[str], day: str) -> None:
    for text in texts:
        memory.remember(text, speaker="Caroline", time=f"2023-05-{day}T10:00")
    memory.consolidate(llm=False)


def test_a_document_whose_first_phrase_changed_is_renamed_and_its_former_id_still_reads(tmp_path, cli, store_dir):
    memory = Memory(store_dir, create=True)
    _pottery(memory, ["My pottery class made clay bowls today.", "The pottery class fires the clay bowls in a kiln.",
                      "Next pottery class we glaze the clay bowls."], "01")
    [doc_id] = memory.store.doc_ids()
    suffix = doc_id.rsplit("-", 1)[1]
    old = f"weekend-notes-{suffix}"  # a name from a title the document no longer has
    path = memory.store.docs_dir / f"{doc_id}.md"
    path.rename(memory.store.docs_dir / f"{old}.md")
    _pottery(memory, ["The pottery class teacher loved my clay bowls.", "I sold two clay bowls from pottery class."],
             "08")
    [now] = memory.store.doc_ids()
    assert now != old and now.endswith(f"-{suffix}") and now.startswith(("pottery-class", "clay-bowls"))
    assert (memory.store.root / ALIASES).read_text() == f"{old}>{now}\n"
    read = cli("--json", "read", old, "--lines", "1-3")
    assert read.code == 0 and read.json["doc"] == now and read.json["moved_from"] == old
    shown = cli("read", old)
    assert shown.code == 0 and f"{old} is now {now}" in shown.stderr
    assert cli("--json", "grep", "kiln", "--doc", old).json["matches"][0]["doc"] == now
    assert cli("--json", "search", "kiln", "--doc", old).code == 0
    refused = cli("forget", f"{old}:5-6")  # a former id's line numbers may have moved: forget names the new one
    assert refused.code == 2 and f"{old} is now {now}" in refused.stderr
    memory.close()


def test_a_title_a_person_wrote_keeps_its_file_name(tmp_path, store_dir):
    memory = Memory(store_dir, create=True)
    _pottery(memory, ["My pottery class made clay bowls today.", "The pottery class fires the clay bowls in a kiln."],
             "01")
    [doc_id] = memory.store.doc_ids()
    suffix = doc_id.rsplit("-", 1)[1]
    old = f"weekend-notes-{suffix}"
    text = (memory.store.docs_dir / f"{doc_id}.md").read_text()
    title = next(line for line in text.splitlines() if line.startswith("# "))
    (memory.store.docs_dir / f"{doc_id}.md").unlink()
    (memory.store.docs_dir / f"{old}.md").write_text(text.replace(title, "# Weekend notes"))
    _pottery(memory, ["The pottery class teacher loved my clay bowls."], "08")
    assert memory.store.doc_ids() == [old]
    assert not (memory.store.root / ALIASES).exists()
    memory.close()


def _section_doc(headings_and_texts) -> Document:
    body = ["# Dance (Jon)"]
    for seq, (heading, texts) in enumerate(headings_and_texts):
        body.append(f"## {heading}")
        body += [Entry({"seq": str(seq * 10 + i), "time": heading[:10] + "T10:00", "speaker": "Jon"}, t).render()
                 for i, t in enumerate(texts)]
    return Document(meta={"id": "dance-jon-0a1b2c", "aux": {"title": "Dance (Jon)"}}, body=[*body, ""])


def test_a_heading_memcli_gave_does_not_repeat_an_earlier_sections_first_phrase_while_it_has_another():
    doc = _section_doc([
        ("2023-01-20 · dance studio", ["The dance studio opened.", "The dance studio is big."]),
        ("2023-02-01 · dance studio and grand opening", ["The dance studio grand opening was packed.",
                                                         "The grand opening had a dance studio tour."]),
        ("Studio plans", ["The dance studio needs floors."]),  # a person's heading: never renamed
        ("2023-03-05 · dance studio", ["The dance studio! Our studio."])])  # nothing else to say
    refresh_headings(doc, lambda term: 1.0)
    headings = [line[3:] for line in doc.body if line.startswith("## ")]
    assert headings[0] == "2023-01-20 · dance studio"  # the first under a phrase keeps it
    assert headings[1].startswith("2023-02-01 · grand opening")
    assert headings[2] == "Studio plans" and headings[3] == "2023-03-05 · dance studio"
    before = list(doc.body)
    refresh_headings(doc, lambda term: 1.0)
    assert doc.body == before  # once apart, headings stay as they are


def test_a_heading_whose_entries_all_went_under_superseded_goes_with_them(store_dir):
    memory = Memory(store_dir, create=True)
    _pottery(memory, ["My pottery class made clay bowls today.", "The kiln at pottery class is huge."], "01")
    _pottery(memory, ["My pottery class made clay bowls today.", "The kiln at pottery class is huge."], "08")
    [doc_id] = memory.store.doc_ids()
    text = memory.store.read_text(doc_id)
    headings = [line for line in text.splitlines() if line.startswith("## ")]
    assert len(headings) == 2 and headings[0].startswith("## 2023-05-08 · ") and headings[1] == "## Superseded"
    assert text.count("superseded_by=") == 2
    memory.close()
