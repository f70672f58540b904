"""Consolidation: every stage through a scripted model's good and bad answers, and the guard."""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest
from conftest import EXAMPLES, LOCOMO, needs_locomo, snapshot
from fakes import ScriptedModel, seqs_in

from memcli.config import Settings
from memcli.consolidate import guard
from memcli.consolidate.run import consolidate
from memcli.paths import Resolved
from memcli.store import CURRENT_ID, Store
from memcli.store.format import parse_entry


def open_store(store_dir) -> Store:
    return Store.open(Resolved(store_dir, "test"))


def all_entries(store: Store):
    """(doc id, entry, under Superseded) for every entry in the store."""
    from memcli.consolidate.layout import Layout

    out = []
    for doc_id in store.all_ids():
        layout = Layout.of(store.load(doc_id).doc)
        out += [(doc_id, parse_entry(line), False) for line in layout.live_lines() if parse_entry(line)]
        out += [(doc_id, parse_entry(line), True) for line in layout.superseded if parse_entry(line)]
    return out


def assert_conserved(store: Store, expected_seqs, originals=None):
    entries = all_entries(store)
    counts = Counter(e.seq for _, e, _ in entries)
    assert sorted(counts) == sorted(expected_seqs), "seqs lost or invented"
    assert all(n == 1 for n in counts.values()), "a seq appears twice"
    if originals:
        for _, entry, retired in entries:
            meta = dict(entry.meta)
            if retired:
                assert int(meta.pop("superseded_by")) in counts
            assert (meta, entry.text) == originals[entry.seq]


def ingest(cli, path, *extra):
    result = cli("ingest", path, "--json", *extra)
    assert result.code == 0, result.stderr
    return result.json


def current_originals(store: Store):
    return {e.seq: (dict(e.meta), e.text) for _, e in store.load(CURRENT_ID).doc.entries()}


def cfg_for(store: Store, **overrides) -> Settings:
    return Settings.load(store.root, overrides)


@pytest.mark.slow  # 4-6 s: the fast tier keeps within 5 minutes
@needs_locomo
def test_deterministic_consolidation_of_conv26_conserves_everything(cli, store_dir):
    ingest(cli, LOCOMO / "conv-26.json")
    store = open_store(store_dir)
    originals = current_originals(store)
    result = cli("consolidate", "--no-llm", "--json")
    assert result.code == 0, result.stderr
    report = result.json
    assert report["entries_consolidated"] == len(originals) and report["current_entries_left"] == 0
    assert report["llm"] is False and len(report["flushes"]) > 1
    assert_conserved(store, originals, originals)
    docs = store.doc_ids()
    assert len(docs) == len(report["documents"]) >= 5
    for doc_id in docs:
        loaded = store.load(doc_id, strict=True)
        meta = loaded.doc.meta
        assert meta["id"] == doc_id and meta["summary"] and meta["update_log"]
        assert re.fullmatch(r"[a-z0-9-]+-[0-9a-f]{6}", doc_id)
        assert meta["token_count"] <= 5000
    assert all(op["op"] in ("create", "update", "split", "merge", "rename") for d in docs
               for op in store.load(d).doc.meta["update_log"])
    renamed = [op["note"].removeprefix("renamed from ") for d in docs for op in store.load(d).doc.meta["update_log"]
               if op["op"] == "rename"]
    assert renamed and all(store.resolve(old) in docs for old in renamed)  # every former id still reads
    # the library is searchable right away
    assert cli("search", "adoption agency", "--json").json["hits"][0]["doc"] != CURRENT_ID


@pytest.mark.slow  # a fast-tier budget of 5 minutes; CI runs it
@needs_locomo
def test_dry_run_writes_nothing_and_reports_the_plan(cli, store_dir):
    ingest(cli, LOCOMO / "conv-30.json")
    before = snapshot(store_dir)
    result = cli("consolidate", "--no-llm", "--dry-run", "--json")
    assert result.code == 0, result.stderr
    assert result.json["dry_run"] is True and result.json["flushes"][0]["created"]
    assert snapshot(store_dir) == before
    text = cli("consolidate", "--no-llm", "--dry-run")
    assert text.stdout.startswith("dry run: would consolidate")


def test_good_model_answers_are_used(cli, store_dir):
    ingest(cli, EXAMPLES / "caroline-and-priya.json")
    store = open_store(store_dir)
    originals = current_originals(store)
    adoption = [s for s, (m, t) in originals.items() if re.search(r"adopt|home study|Open Door|Harbor", t)]

    def respond(step, messages, schema):
        if step == "rewrite":
            seqs = seqs_in(messages)
            mine = [s for s in seqs if s in adoption]
            rest = [s for s in seqs if s not in adoption]
            groups = [{"topic": "Caroline's adoption plans", "seqs": mine}] if mine else []
            groups += [{"topic": "Priya and the pottery class", "seqs": rest}] if rest else []
            return {"groups": groups, "superseded": [{"seq": 6, "by": 15}]}
        if step == "plan":
            n = len(re.findall(r"^\d+\. ", messages[-1]["content"], re.M))
            return {"actions": [{"group": i, "doc": "new", "title": f"Topic {i}"} for i in range(n)]}
        if step == "summary":
            if "adopt" in messages[-1]["content"]:
                return {"summary": "Caroline's path to adopting a sibling pair through Open Door Adoptions"}
            return {"summary": "Priya's pottery class, the bowls for her sister, and catching up with Caroline"}
        raise AssertionError(step)

    model = ScriptedModel(respond)
    result = consolidate(store, cfg_for(store), model=model)
    assert set(model.steps()) == {"rewrite", "plan", "summary"}
    assert result.calls["fallbacks"] == {} and result.calls["invalid"] == 0, result.calls
    assert_conserved(store, originals, originals)
    texts = {d: store.doc_path(d).read_text() for d in store.doc_ids()}
    home = [d for d, t in texts.items() if "## Caroline's adoption plans" in t]
    assert len(home) == 1
    doc = store.load(home[0]).doc
    assert doc.meta["summary"].startswith("Caroline's path")
    retired = [(e, r) for d, e, r in all_entries(store) if e.seq == 6]
    assert retired[0][1] is True and retired[0][0].meta["superseded_by"] == "15"


@pytest.mark.parametrize("bad", ["not json at all", '{"groups": [', "{}", '{"groups": "x", "superseded": []}',
                                 '{"groups": [{"topic": "x", "seqs": [999999]}], "superseded": []}',
                                 "x" * 5000])
def test_rejected_answers_fall_back_to_the_deterministic_path(cli, store_dir, bad):
    ingest(cli, EXAMPLES / "caroline-and-priya.json")
    store = open_store(store_dir)
    originals = current_originals(store)
    model = ScriptedModel(lambda step, messages, schema: bad)
    result = consolidate(store, cfg_for(store), model=model)
    calls = result.calls
    assert calls["fallbacks"].get("rewrite") and calls["fallbacks"].get("plan") and calls["fallbacks"].get("summary")
    assert calls["invalid"] >= 2 and calls["calls"] >= 2
    # each step was asked twice (one retry) before falling back
    assert model.steps().count("rewrite") == 2 * calls["fallbacks"]["rewrite"]
    assert_conserved(store, originals, originals)
    assert store.doc_ids()


def test_dropped_seqs_stay_with_their_neighbours_and_hostile_titles_never_become_paths(cli, store_dir):
    ingest(cli, EXAMPLES / "caroline-and-priya.json")
    store = open_store(store_dir)
    originals = current_originals(store)
    hostile = ["../../../etc/passwd", "/tmp/evil", "..", "CURRENT", "a\nb# c", "\x00\x1b[31m", "x" * 500]

    def respond(step, messages, schema):
        if step == "rewrite":
            seqs = seqs_in(messages)
            return {"groups": [{"topic": hostile[0], "seqs": seqs[::2]}], "superseded": []}  # half left out
        if step == "plan":
            n = len(re.findall(r"^\d+\. ", messages[-1]["content"], re.M))
            return {"actions": [{"group": i, "doc": "new", "title": hostile[i % len(hostile)]} for i in range(n)]}
        return {"summary": "../../etc/shadow\nsecond line"}

    result = consolidate(store, cfg_for(store), model=ScriptedModel(respond))
    assert any("left out" in p for p in result.calls["problems"])
    assert_conserved(store, originals, originals)
    files = sorted(p.name for p in (store_dir / "docs").iterdir())
    assert files and all(re.fullmatch(r"[a-z0-9-]+-[0-9a-f]{6}\.md", f) for f in files)
    assert not (store_dir.parent / "etc").exists()
    for doc_id in store.doc_ids():
        summary = store.load(doc_id).doc.meta["summary"]
        assert "\n" not in summary


def test_invented_document_ids_are_rejected(cli, store_dir):
    ingest(cli, EXAMPLES / "caroline-and-priya.json")
    store = open_store(store_dir)
    consolidate(store, cfg_for(store), model=None)
    before_ids = set(store.doc_ids())
    ingest(cli, EXAMPLES / "chat-messages.json")
    originals = {**current_originals(store)}

    def respond(step, messages, schema):
        if step == "rewrite":
            return {"groups": [{"topic": "stuff", "seqs": seqs_in(messages)}], "superseded": []}
        if step == "plan":
            return {"actions": [{"group": 0, "doc": "made-up-doc-123456", "title": "x"}]}
        return {"summary": "A summary that is long enough"}

    result = consolidate(store, cfg_for(store), model=ScriptedModel(respond))
    assert result.calls["fallbacks"].get("plan") == 1
    assert not (store_dir / "docs" / "made-up-doc-123456.md").exists()
    assert set(store.doc_ids()) >= before_ids
    seqs = {e.seq for _, e, _ in all_entries(store)}
    assert set(originals) <= seqs


def test_a_flush_that_fails_the_guard_is_redone_deterministically(cli, store_dir, monkeypatch):
    import memcli.consolidate.run as run

    ingest(cli, EXAMPLES / "caroline-and-priya.json")
    store = open_store(store_dir)
    originals = current_originals(store)
    real_apply = run.apply_blocks
    calls = {"n": 0}

    def lossy_apply(ws, draft):  # the first (model-assisted) attempt loses an entry
        added = real_apply(ws, draft)
        calls["n"] += 1
        if calls["n"] == 1:
            doc = ws.docs[sorted(added)[0]]
            victim = next(i for i, line in enumerate(doc.body) if parse_entry(line))
            del doc.body[victim]
        return added

    monkeypatch.setattr(run, "apply_blocks", lossy_apply)
    model = ScriptedModel(lambda step, messages, schema: "{}")
    result = consolidate(store, cfg_for(store), model=model)
    assert result.flushes[0].deterministic_redo is True
    assert any("lost" in p for p in result.flushes[0].guard_problems)
    assert_conserved(store, originals, originals)


def test_guard_catches_every_kind_of_damage():
    from memcli.store.format import Document, Entry

    def doc(*lines):
        d = Document(meta={"id": "d"}, body=["# T", "## A", *lines, ""])
        d.mark_loaded()
        return d

    e1 = Entry({"seq": "1", "time": "2024-01-01T00:00", "speaker": "A"}, "one")
    e2 = Entry({"seq": "2", "time": "2024-01-01T00:00", "speaker": "B"}, "two")
    good = doc(e1.render(), e2.render(), "a note written by hand")
    assert guard.check([e2], [doc(e1.render(), "a note written by hand")], {"d": good}) == []
    assert "seq 2 lost" in guard.check([e2], [doc(e1.render())], {"d": doc(e1.render())})
    assert any("invented" in p for p in guard.check([], [doc(e1.render())], {"d": good}))
    assert any("duplicated" in p for p in guard.check([e1], [], {"d": doc(e1.render(), e1.render())}))
    changed = Entry(dict(e1.meta), "ONE")
    assert any("text changed" in p for p in guard.check([e1], [], {"d": doc(changed.render())}))
    retagged = Entry({**e1.meta, "speaker": "Z"}, "one")
    assert any("metadata changed" in p for p in guard.check([e1], [], {"d": doc(retagged.render())}))
    retired = Entry({**e1.meta, "superseded_by": "2"}, "one")
    misplaced = guard.check([e1, e2], [], {"d": doc(retired.render(), e2.render())})
    assert any("not under Superseded" in p for p in misplaced)
    placed = Document(meta={"id": "d"}, body=["# T", "## A", e2.render(), "## Superseded", retired.render(), ""])
    assert guard.check([e1, e2], [], {"d": placed}) == []
    dangling = Entry({**e1.meta, "superseded_by": "7"}, "one")
    bad = Document(meta={"id": "d"}, body=["# T", "## Superseded", dangling.render(), ""])
    assert any("not a live entry" in p for p in guard.check([e1], [], {"d": bad}))
    assert any("line lost" in p for p in guard.check([], [good], {"d": doc(e1.render(), e2.render())}))


@needs_locomo
@pytest.mark.slow  # 4-6 s: the fast tier keeps within 5 minutes
def test_split_and_merge(cli, store_dir):
    ingest(cli, LOCOMO / "conv-30.json")
    store = open_store(store_dir)
    originals = current_originals(store)
    result = cli("consolidate", "--no-llm", "--split", "600", "--merge", "400", "--json")
    assert result.code == 0, result.stderr
    report = result.json
    assert any(f["split"] for f in report["flushes"]) and any(f["merged"] for f in report["flushes"])
    assert_conserved(store, originals, originals)
    for doc_id in store.doc_ids():
        doc = store.load(doc_id).doc
        assert doc.meta["token_count"] <= 600 or sum(1 for _ in doc.entries()) == 1
    flushes = report["flushes"]
    for number, flush in enumerate(flushes):
        again = {d for later in flushes[number + 1:] for d in [*later["created"], *later["updated"]]}
        for group in flush["merged"]:
            assert 2 <= len(group) <= 4
            for gone in group[1:]:  # merged-away documents are deleted (a later flush may use the id again)
                assert gone in again or not (store_dir / "docs" / f"{gone}.md").exists()


def test_updates_existing_documents_and_supersedes_repeats(cli, store_dir, tmp_path):
    ingest(cli, EXAMPLES / "caroline-and-priya.json")
    assert cli("consolidate", "--no-llm").code == 0
    store = open_store(store_dir)
    first_docs = set(store.doc_ids())
    repeat = tmp_path / "more.json"
    repeat.write_text(json.dumps([
        {"role": "user", "name": "Caroline", "content": "I've started researching adoption agencies. I want to "
         "build a family on my own, and I'm tired of waiting for the perfect moment."},
    ]))
    ingest(cli, repeat)
    result = cli("consolidate", "--no-llm", "--json").json
    assert result["flushes"][0]["superseded"] == 0  # not within the flush...
    retired = [(d, e) for d, e, r in all_entries(store) if r]
    assert len(retired) == 1  # ...but against the document it was filed into
    doc_id, old = retired[0]
    assert doc_id in first_docs and old.seq == 4
    new_seq = int(old.meta["superseded_by"])
    assert any(e.seq == new_seq and d == doc_id and not r for d, e, r in all_entries(store))


def test_hand_written_lines_in_current_become_entries(cli, store_dir):
    ingest(cli, EXAMPLES / "chat-messages.json")
    store = open_store(store_dir)
    path = store.current_path
    path.write_text(path.read_text() + "- Sam's cat is called Pixel.\nA note without a bullet.\n")
    result = cli("consolidate", "--no-llm", "--json")
    assert result.code == 0, result.stderr
    texts = {e.text: e for _, e, _ in all_entries(store)}
    assert texts["Sam's cat is called Pixel."].meta["source"] == "hand"
    assert texts["A note without a bullet."].seq == 7
    assert store.read_state()["next_seq"] == 8


def test_automatic_consolidation_after_ingest(cli, store_dir, monkeypatch):
    monkeypatch.setenv("MEMCLI_AUTO_CONSOLIDATE", "true")
    monkeypatch.setenv("MEMCLI_CONSOLIDATE_LLM", "false")
    monkeypatch.setenv("MEMCLI_CONSOLIDATE_TOKENS", "1000")
    small = ingest(cli, EXAMPLES / "chat-messages.json")
    assert small["consolidation"] is None  # under both thresholds
    big = ingest(cli, EXAMPLES / "caroline-and-priya.json")
    assert big["consolidation"]["entries_consolidated"] == 30
    assert "tokens" in big["consolidation"]["reason"]
    store = open_store(store_dir)
    assert not list(store.load(CURRENT_ID).doc.entries())
    no_auto = cli("ingest", "-", "--format", "text", "--no-auto", "--json", stdin=("word " * 1500).encode())
    assert no_auto.json["consolidation"] is None
    status = cli("status", "--json").json
    assert status["consolidation_due"].startswith("CURRENT has")


def test_off_topic_model_text_is_rejected(cli, store_dir):
    ingest(cli, EXAMPLES / "caroline-and-priya.json")
    store = open_store(store_dir)

    def respond(step, messages, schema):
        if step == "rewrite":
            return {"groups": [{"topic": "2018-39", "seqs": seqs_in(messages)}], "superseded": []}
        if step == "plan":
            return {"actions": [{"group": 0, "doc": "new", "title": "Quarterly tax filing"}]}
        return {"summary": "Same old story, different directions. A one-line summary of a memory document."}

    result = consolidate(store, cfg_for(store), model=ScriptedModel(respond))
    assert result.calls["fallbacks"].get("rewrite") == 1 and result.calls["fallbacks"].get("summary")
    assert any("no word in common" in p for p in result.calls["problems"])
    for doc_id in store.doc_ids():
        text = store.doc_path(doc_id).read_text()
        assert "2018-39" not in text and "Same old story" not in text and "tax" not in doc_id


def test_documents_with_broken_front_matter_are_left_alone(cli, store_dir):
    ingest(cli, EXAMPLES / "caroline-and-priya.json")
    store = open_store(store_dir)
    broken = store_dir / "docs" / "adoption-notes-000000.md"
    text = "---\nsummary: [unclosed\n---\n# Adoption\n- Caroline researches adoption agencies like Open Door.\n"
    broken.write_text(text)
    originals = current_originals(store)
    result = cli("consolidate", "--no-llm", "--json")
    assert result.code == 0, result.stderr
    assert broken.read_text() == text
    seqs = {e.seq for d, e, _ in all_entries(store) if d != "adoption-notes-000000"}
    assert seqs == set(originals)


def test_replacements_retired_in_another_document_are_followed(cli, store_dir, tmp_path):
    first = tmp_path / "first.json"
    first.write_text(json.dumps([{"role": "user", "content": "I like tea."}]))
    ingest(cli, first)
    assert cli("consolidate", "--no-llm").code == 0
    store = open_store(store_dir)
    (tea_doc,) = store.doc_ids()
    later = tmp_path / "later.json"
    later.write_text(json.dumps([{"role": "user", "content": "These days my favourite drink is green tea."},
                                 {"role": "assistant", "content": "I like tea."}]))
    ingest(cli, later)  # seqs 2 (user) and 3 (assistant, a copy of seq 1's words)

    def respond(step, messages, schema):
        if step == "rewrite":
            return {"groups": [{"topic": "Green tea", "seqs": [2]}, {"topic": "Tea", "seqs": [3]}],
                    "superseded": [{"seq": 2, "by": 3}]}
        if step == "plan":
            return {"actions": [{"group": 0, "doc": "new", "title": "Green tea"},
                                {"group": 1, "doc": tea_doc, "title": "Tea"}]}
        return {"summary": "What the user likes to drink: tea, green tea"}

    result = consolidate(store, cfg_for(store), model=ScriptedModel(respond))
    assert not result.flushes[0].deterministic_redo, result.flushes[0].guard_problems
    retired = {e.seq: e.meta["superseded_by"] for _, e, r in all_entries(store) if r}
    # seq 3 (assistant) repeats seq 1 (user): the user's words win; seq 2 then points past 3 to 1
    assert retired == {3: "1", 2: "1"}



def test_a_model_may_mark_an_entry_superseded_only_by_a_later_one_of_the_same_speaker(cli, store_dir, tmp_path):
    """The model's pairs pass the check every update passes (ingest.corrections.may_supersede): Ben's line
    does not replace Ana's, nor does an earlier line a later one."""
    chat = tmp_path / "chat.json"
    chat.write_text(json.dumps({"messages": [
        {"role": "user", "name": "Ana", "timestamp": "2024-01-01T10:00:00Z", "content": "I live in Paris."},
        {"role": "user", "name": "Ben", "timestamp": "2024-01-02T10:00:00Z", "content": "I live in Berlin."},
        {"role": "user", "name": "Ana", "timestamp": "2024-02-01T10:00:00Z", "content": "I moved to Rome."}]}))
    ingest(cli, chat)
    store = open_store(store_dir)

    def respond(step, messages, schema):
        if step == "rewrite":
            return {"groups": [{"topic": "Where they live", "seqs": seqs_in(messages)}],
                    "superseded": [{"seq": 1, "by": 3}, {"seq": 3, "by": 1}, {"seq": 1, "by": 2}]}
        if step == "plan":
            return {"actions": [{"group": 0, "doc": "new", "title": "Where they live"}]}
        return {"summary": "Where Ana and Ben live: Paris, Berlin, Rome"}

    result = consolidate(store, cfg_for(store), model=ScriptedModel(respond))
    retired = {e.seq: e.meta["superseded_by"] for _, e, r in all_entries(store) if r}
    assert retired == {1: "3"}, (retired, result.calls)
    assert [p for p in result.calls["problems"] if "ignored superseded pair" in p] == [
        "rewrite: ignored superseded pair {'seq': 3, 'by': 1}", "rewrite: ignored superseded pair {'seq': 1, 'by': 2}"]

def _scopes(store_dir) -> list[tuple[str, set, set]]:
    """(document, its speakers, its conversations) of every topic document."""
    out = []
    for path in sorted((store_dir / "docs").glob("*.md")):
        entries = [e for e in map(parse_entry, path.read_text().splitlines()) if e is not None]
        out.append((path.stem, {e.meta.get("speaker") for e in entries}, {e.meta.get("conv") for e in entries}))
    return out


def test_unrelated_conversations_never_share_a_document(cli, store_dir, tmp_path):
    """A coding chat that borrows the example's words (home, light, family, week) is filed apart from
    Caroline and Priya's conversation: no shared person, no shared conversation, no shared document."""
    chat = [{"speaker": "user", "text": text, "time": f"2024-04-21T1{n % 10}:00"} if n % 2 == 0 else
            {"speaker": "assistant", "text": text, "time": f"2024-04-21T1{n % 10}:30"}
            for n, text in enumerate([
                "Our Rust service at home keeps a light cache of the family accounts; it stalls every week.",
                "Check the Postgres pool size: a light cache over a small pool stalls when the week's batch runs.",
                "We deploy it on Kubernetes with a home-made Helm chart and a harbor registry for the images.",
                "Set resource limits in the chart and pin the harbor image tags, then watch the pool metrics.",
                "The family accounts table has 40 million rows and no index on the week column.",
                "Add the index on the week column concurrently, then the weekly batch reads through it."])]
    (tmp_path / "rust.json").write_text(json.dumps(chat))
    assert cli("ingest", EXAMPLES / "caroline-and-priya.json").code == 0
    assert cli("ingest", tmp_path / "rust.json", "--conv", "rust-service").code == 0
    assert cli("consolidate", "--split", "5000").code == 0
    scopes = _scopes(store_dir)
    assert scopes
    for doc, speakers, convs in scopes:
        coding = {"user", "assistant"} & speakers
        assert not (coding and speakers - {"user", "assistant"}), (doc, speakers)
        assert not ("rust-service" in convs and len(convs) > 1), (doc, convs)
    # and both conversations were filed
    assert any("rust-service" in convs for _, _, convs in scopes)
    assert any("Caroline" in speakers for _, speakers, _ in scopes)


@pytest.mark.slow  # a fast-tier budget of 5 minutes; CI runs it
@needs_locomo
def test_the_development_pair_consolidated_together_keeps_each_conversation_apart(cli, store_dir):
    for name in ("conv-26", "conv-30"):
        assert cli("ingest", LOCOMO / f"{name}.json", "--sample", name).code == 0
    assert cli("consolidate").code == 0
    scopes = _scopes(store_dir)
    assert len(scopes) > 2 and all(len(convs) == 1 for _, _, convs in scopes), scopes


def test_titles_are_phrases_of_the_text_and_summaries_are_entry_sentences(cli, store_dir):
    """Deterministic names and summaries, on the example and two real agent sessions filed together: a
    title is up to three phrases ("a, b and c") that occur in its document, never a list of keywords,
    with a word beyond the people's names; its headings are a date and phrases of their section."""
    from conftest import REPO

    from memcli.consolidate.layout import Layout
    from memcli.store.lines import sentences
    from memcli.terms import STOPWORDS

    for path in (EXAMPLES / "caroline-and-priya.json", REPO / "tests" / "samples" / "codex-0.125-codemie.jsonl",
                 REPO / "tests" / "samples" / "claude-code-2.0.76-codemie.jsonl"):
        assert cli("ingest", path).code == 0
    assert cli("consolidate").code == 0
    store = open_store(store_dir)
    assert store.doc_ids()
    for doc_id in store.doc_ids():
        doc = store.load(doc_id).doc
        title = next(line[2:] for _, line in doc.lines() if line.startswith("# "))
        named = re.sub(r"\(.*?\)", "", title).strip()  # the people in parentheses are names, not topic words
        assert not re.search(r"[<>\[\]{}`|\ue000-\uf8ff]", title + doc_id), (doc_id, title)
        text = " ".join(" ".join(e.text.split()) for _, e in doc.entries()).casefold()
        parts = re.split(r", | and ", named)
        assert len(parts) <= 3 and (len(parts) == 1 or any(" " in p for p in parts)), (doc_id, title)  # no keyword list
        for part in parts:
            assert re.search(rf"(?<!\w){re.escape(part.casefold())}(?!\w)", text), (doc_id, title, part)
        people = {w.lower() for w in re.findall(r"\w+", title[len(named):])}
        assert {w.lower() for w in re.findall(r"[^\W_]+", named)} - STOPWORDS - people, (doc_id, title)
        for section in Layout.of(doc).sections:
            day, _, phrase = section.title.partition(" · ")
            own = " ".join(" ".join(e.text.split()) for e in section.entries()).casefold()
            assert re.fullmatch(r"\d{4}-\d\d-\d\d", day), (doc_id, section.title)
            assert all(part.casefold() in own for part in re.split(r", | and ", phrase)), (doc_id, section.title)
        rest = " ".join(str(doc.meta["summary"]).split())
        own = {" ".join(s.split()) for _, e in doc.entries() for s in sentences(" ".join(e.text.split()))}
        for sentence in sorted(own, key=len, reverse=True):
            rest = rest.replace(sentence, " ")
        assert not rest.strip(), (doc_id, doc.meta["summary"])


def test_a_session_is_never_cut_between_a_question_and_its_reply():
    from memcli.consolidate.draft import _answered, deterministic_blocks
    from memcli.store.format import Entry

    turns = []
    for n in range(40):  # two subjects, the cut between them falling right after a question
        speaker = ("Ana", "Ben")[n % 2]
        text = (f"The garden needs tomatoes, basil and compost number {n}." if n < 20
                else f"The car needs brakes, tyres and an oil change number {n}.")
        if n == 19:
            text = "Do you want more basil and compost for the garden?"
        turns.append(Entry(meta={"seq": str(n + 1), "time": "2024-05-01T10:00", "speaker": speaker}, text=text))
    blocks = deterministic_blocks(turns, lambda term: 1.0, max_tokens=200)
    assert len(blocks) > 1
    for left, right in zip(blocks, blocks[1:]):
        assert not _answered(left.entries[-1], right.entries[0]), (left.entries[-1].text, right.entries[0].text)
    assert [e.seq for b in blocks for e in b.entries] == list(range(1, 41))


def test_a_growing_document_is_titled_by_all_its_entries_and_a_persons_title_stays(tmp_path):
    from memcli.consolidate.apply import new_document, refresh_title
    from memcli.consolidate.layout import Layout
    from memcli.store.format import Entry

    def entry(seq: int, text: str) -> str:
        return Entry(meta={"seq": str(seq), "time": "2024-05-01T10:00", "speaker": "Ana"}, text=text).render()

    idf = lambda term: 1.0  # noqa: E731
    doc = new_document("garden-tomatoes-abc123", "Garden, tomatoes (Ana)")
    layout = Layout.of(doc)
    layout.add("2024-05-01 · garden", [entry(1, "The garden tomatoes are ripe.")])
    layout.add("2024-06-01 · bike", [entry(n, f"My bike race training went well, race {n}.") for n in range(2, 9)])
    doc.body = layout.body()
    refresh_title(doc, idf)
    title = Layout.of(doc).title
    assert title != "Garden, tomatoes (Ana)" and "bike race" in title.lower() and doc.meta["aux"]["title"] == title
    assert doc.meta["id"] == "garden-tomatoes-abc123"
    edited = Layout.of(doc)
    edited.title, edited.title_line = "My summer", "# My summer"  # a person renames it
    doc.body = edited.body()
    refresh_title(doc, idf)
    assert Layout.of(doc).title == "My summer"


@pytest.mark.slow  # several processes or stores: the slow tier (CI runs it)
@needs_locomo
def test_documents_of_the_same_people_begin_their_titles_with_different_phrases(tmp_path):
    """A consolidated LoCoMo conversation (about 20 documents of the same two people, most of them about one
    dance studio): no two begin their titles with the same phrase, and a second consolidation keeps them."""
    from memcli import Memory
    from memcli.consolidate.layout import Layout
    from memcli.consolidate.titles import lead, subject
    from memcli.tokens import count_tokens

    memory = Memory(tmp_path / "store", create=True, settings={"consolidate.auto": False})
    memory.ingest(LOCOMO / "conv-30.json", format="locomo", consolidate=False)
    memory.consolidate(llm=False, split=5000)

    def titles() -> dict[str, str]:
        store = memory.store
        return {d: next(line[2:] for _, line in store.load(d).doc.lines() if line.startswith("# "))
                for d in store.doc_ids()}

    first = titles()
    leads = [(t[t.rfind("("):], lead(t)) for t in first.values()]  # (the people, the first phrase)
    assert len(first) >= 10 and len(set(leads)) == len(leads), sorted(leads)
    # one subject a document: two documents of the same people with the same best phrase are one, unless
    # together they would be over the split limit
    store, idf = memory.store, memory.index.idf()
    about: dict[tuple, list[int]] = {}
    for d in store.doc_ids():
        doc = store.load(d).doc
        entries = Layout.of(doc).live_entries()
        people = tuple(sorted({e.meta["speaker"] for e in entries}))
        about.setdefault((people, subject(entries, idf)), []).append(count_tokens("\n".join(t for _, t in doc.lines())))
    assert all(len(sizes) == 1 or sum(sorted(sizes)[:2]) >= 5000 for sizes in about.values()), about
    memory.ingest(LOCOMO / "conv-30.json", format="locomo", consolidate=False)  # nothing new
    memory.consolidate(llm=False, split=5000)
    assert titles() == first


def test_where_a_block_is_filed_does_not_depend_on_how_titles_are_phrased(tmp_path, monkeypatch):
    """Routing and merging compare what the entries say (the signatures of titles and headings), never the
    phrases a title shows: the examples consolidate into the same documents, entry for entry, when every
    title and heading memcli writes says something else entirely."""
    from conftest import EXAMPLES

    import memcli.consolidate.apply as apply
    import memcli.consolidate.draft as draft
    import memcli.consolidate.plan as plan
    from memcli import Memory

    def grouping(folder) -> set[frozenset[int]]:
        memory = Memory(folder, create=True)
        for example in sorted(EXAMPLES.glob("*.json")):  # two people's and a coding session's: several documents
            memory.ingest(example, consolidate=False)
        memory.consolidate(llm=False)
        store = memory.store
        return {frozenset(e.seq for _, e in store.load(d).doc.entries()) for d in store.doc_ids()}

    shown = grouping(tmp_path / "phrases")
    assert len(shown) > 1
    for module, name in ((plan, "document_title"), (apply, "document_title"), (draft, "block_title")):
        monkeypatch.setattr(module, name, lambda entries, idf, *_: f"Zebra quilt lantern {entries[0].seq}")
    assert grouping(tmp_path / "other") == shown


def test_search_reads_a_title_a_person_wrote_but_not_the_titles_and_headings_memcli_made(cli, store_dir):
    """memcli's titles and headings repeat words of the entries under them and are not indexed; a person's
    title says what the entries may not, and is (aux.title records the title memcli gave)."""
    from memcli.index import LibraryIndex
    from memcli.paths import Resolved
    from memcli.store import Store

    assert cli("init").code == 0 or (store_dir / "state.json").exists()
    page = """---
id: {id}
summary: The tomatoes are ripe.
update_log: []
aux: {{title: Zucchini harvest (Ana)}}
---
# {title}
## 2024-05-01 · quince jelly
- <seq=90{n},time=2024-05-01T10:00,speaker=Ana> The tomatoes are ripe.
"""
    for n, (doc_id, title) in enumerate((("made-000001", "Zucchini harvest (Ana)"),
                                         ("named-000002", "Allotment plot"))):
        (store_dir / "docs" / f"{doc_id}.md").write_text(page.format(id=doc_id, title=title, n=n))
    index = LibraryIndex(Store.open(Resolved(store_dir, "test")), partition_tokens=160)
    assert {hit.doc for hit in index.search("tomatoes", 5)} == {"made-000001", "named-000002"}
    assert not index.search("zucchini", 5) and not index.search("quince", 5)
    assert [hit.doc for hit in index.search("allotment", 5)] == ["named-000002"]
    index.close()
