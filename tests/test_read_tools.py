"""docs / read / grep / search through the real CLI, and the index's incremental refresh."""

from __future__ import annotations

import os
import time

from conftest import EXAMPLES

from memcli.index import LibraryIndex
from memcli.paths import Resolved
from memcli.store import Store

TOPIC = """---
id: priya-pottery-1a2b3c
summary: Priya's pottery class and the bowls she makes
token_count: 60
created_time: 2024-03-03T18:40:00
updated_time: 2024-04-21T10:15:00
update_log: []
aux: {}
---
# Priya
## Pottery
- <seq=900,time=2024-03-03T18:40,speaker=Priya,ref=D1:9> Priya takes a pottery class on Thursdays.
- <seq=901,time=2024-04-21T10:15,speaker=Priya,ref=D2:8> Priya is making a set of four bowls for her sister.
## Garden
- <seq=902,time=2024-04-21T10:15,speaker=Priya> Priya grows tomatoes on her balcony.
"""


def make_store(cli, store_dir):
    assert cli("ingest", EXAMPLES / "caroline-and-priya.json").code == 0
    (store_dir / "docs" / "priya-pottery-1a2b3c.md").write_text(TOPIC)


def test_docs_lists_catalog_with_current(cli, store_dir):
    make_store(cli, store_dir)
    result = cli("docs", "--json")
    assert result.code == 0, result.stderr
    data = result.json
    assert data["total"] == 2
    ids = [d["id"] for d in data["docs"]]
    assert ids == ["priya-pottery-1a2b3c", "CURRENT"]
    topic = data["docs"][0]
    assert topic["summary"].startswith("Priya's pottery") and topic["entries"] == 3
    assert topic["updated_time"] == "2024-04-21T10:15:00"
    page = cli("docs", "--json", "--offset", "1", "--limit", "1").json
    assert [d["id"] for d in page["docs"]] == ["CURRENT"] and page["total"] == 2
    text = cli("docs")
    assert "priya-pottery-1a2b3c" in text.stdout and text.code == 0


def test_read_with_line_numbers_and_ranges(cli, store_dir):
    make_store(cli, store_dir)
    whole = cli("read", "priya-pottery-1a2b3c", "--json").json
    assert whole["total_lines"] == TOPIC.count("\n")
    line12 = whole["lines"][11]
    assert line12["line"] == 12 and line12["entry"]["meta"]["seq"] == "900"
    part = cli("read", "priya-pottery-1a2b3c", "--lines", "12-13")
    assert part.code == 0
    assert part.stdout.splitlines()[0].startswith("12  - <seq=900")
    assert len(part.stdout.splitlines()) == 2
    current = cli("read", "CURRENT", "--lines", "1-3", "--json").json
    assert current["lines"][1]["text"] == "id: CURRENT"
    assert cli("read", "CURRENT", "--lines", "9-2").code == 2
    assert cli("read", "CURRENT", "--lines", "x").code == 2
    missing = cli("read", "no-such-doc", "--json")
    assert missing.code == 2 and missing.json["error"]["type"] == "not_found"
    hostile = cli("read", "../../etc/passwd")
    assert hostile.code == 2 and "invalid document id" in hostile.stderr


def test_grep_output_exit_codes_and_errors(cli, store_dir):
    make_store(cli, store_dir)
    result = cli("grep", "Open Door")
    assert result.code == 0
    lines = result.stdout.splitlines()
    assert lines and all(line.startswith("CURRENT:") for line in lines)
    assert all("Open Door" in line for line in lines)
    data = cli("grep", "pottery", "-i", "--json").json
    docs = {m["doc"] for m in data["matches"]}
    assert docs == {"priya-pottery-1a2b3c", "CURRENT"}
    # front matter is not searched: the summary mentions pottery but only body lines match
    assert all(m["line"] >= 10 for m in data["matches"] if m["doc"] == "priya-pottery-1a2b3c")
    ctx = cli("grep", "tomatoes", "-C", "1", "--json").json["matches"][0]
    assert ctx["doc"] == "priya-pottery-1a2b3c" and ctx["line"] == 15
    assert [b["line"] for b in ctx["before"]] == [14] and ctx["after"] == []
    limited = cli("grep", "Caroline", "--limit", "2", "--json").json
    assert limited["count"] == 2 and limited["truncated"] is True
    only = cli("grep", "Priya", "--doc", "priya-pottery-1a2b3c", "--json").json
    assert {m["doc"] for m in only["matches"]} == {"priya-pottery-1a2b3c"}
    none = cli("grep", "xylophone")
    assert none.code == 1 and none.stdout == ""
    bad = cli("grep", "([", "--json")
    assert bad.code == 2 and bad.json["error"]["type"] == "usage"
    assert "bad regular expression" in bad.stderr and "Traceback" not in bad.stderr


def test_search_ranks_partitions(cli, store_dir):
    make_store(cli, store_dir)
    result = cli("search", "adoption agencies", "-k", "3", "--json")
    assert result.code == 0, result.stderr
    hits = result.json["hits"]
    assert 1 <= len(hits) <= 3
    assert hits[0]["doc"] == "CURRENT"
    assert "adoption agencies" in hits[0]["snippet"]
    assert hits == sorted(hits, key=lambda h: -h["score"])
    pottery = cli("search", "bowls pottery", "--json").json["hits"][0]
    assert pottery["doc"] == "priya-pottery-1a2b3c" and pottery["heading"] == "Priya > Pottery"
    assert (pottery["start_line"], pottery["end_line"]) == (12, 13)
    restricted = cli("search", "bowls", "--doc", "CURRENT", "--json").json["hits"]
    assert restricted and {h["doc"] for h in restricted} == {"CURRENT"}
    assert cli("search", "xylophone").code == 1
    assert cli("search", "the and of").code == 1  # only stop words


def test_index_refreshes_only_changed_documents(cli, store_dir):
    make_store(cli, store_dir)
    second = store_dir / "docs" / "garden-notes-000001.md"
    second.write_text(TOPIC.replace("priya-pottery-1a2b3c", "garden-notes-000001"))
    store = Store.open(Resolved(store_dir, "test"))
    index = LibraryIndex(store, partition_tokens=160)
    assert index.refresh() == 3  # two topics + CURRENT, first time
    assert index.refresh() == 0  # nothing changed
    assert not index.search("kayak", 5)

    path = store_dir / "docs" / "priya-pottery-1a2b3c.md"
    path.write_text(TOPIC.replace("grows tomatoes on her balcony", "bought a red kayak"))
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 1_000_000))
    assert index.refresh() == 1  # only the edited document is re-indexed
    hits = index.search("kayak", 5)
    assert [h.doc for h in hits] == ["priya-pottery-1a2b3c"]

    second.unlink()
    assert index.refresh() == 1
    assert all(h.doc != "garden-notes-000001" for h in index.search("pottery", 10))
    index.close()

    # the CLI sees a hand edit immediately as well
    assert cli("search", "kayak", "--json").json["hits"][0]["doc"] == "priya-pottery-1a2b3c"


def test_broken_front_matter_still_readable(cli, store_dir):
    make_store(cli, store_dir)
    broken = store_dir / "docs" / "broken-doc.md"
    broken.write_text("---\nsummary: [unclosed\n---\n# Notes\n- plain line about a walrus\n")
    docs = cli("docs", "--json").json["docs"]
    entry = next(d for d in docs if d["id"] == "broken-doc")
    assert "error" in entry and "broken-doc.md:2" in entry["error"]
    assert cli("grep", "walrus").code == 0
    assert cli("search", "walrus", "--json").json["hits"][0]["doc"] == "broken-doc"
    read = cli("read", "broken-doc")
    assert read.code == 0 and "walrus" in read.stdout and "warning" in read.stderr


def test_status_reports_store_and_thresholds(cli, store_dir):
    make_store(cli, store_dir)
    data = cli("status", "--json").json
    assert data["store"] == str(store_dir) and data["store_source"] == "--store"
    assert data["documents"] == 1 and data["entries"] == 25 + 3
    assert data["current_entries"] == 25 and data["next_seq"] == 26
    assert data["settings"]["consolidate.threshold_tokens"]["value"] == 5000
    assert cli("status").code == 0


def test_settings_precedence(cli, store_dir, isolated_env, monkeypatch):
    make_store(cli, store_dir)
    config = isolated_env / "xdg-config" / "memcli" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text("[consolidate]\nthreshold_tokens = 7000\n")
    data = cli("status", "--json").json["settings"]["consolidate.threshold_tokens"]
    assert data["value"] == 7000 and data["source"].endswith("config.toml")
    monkeypatch.setenv("MEMCLI_CONSOLIDATE_TOKENS", "9000")
    data = cli("status", "--json").json["settings"]["consolidate.threshold_tokens"]
    assert data == {"value": 9000, "source": "$MEMCLI_CONSOLIDATE_TOKENS", "env": "MEMCLI_CONSOLIDATE_TOKENS",
                    "help": "CURRENT size (tokens) that triggers consolidation"}
    monkeypatch.setenv("MEMCLI_CONSOLIDATE_TOKENS", "lots")
    bad = cli("status", "--json")
    assert bad.code == 3 and bad.json["error"]["type"] == "config"


def test_a_pattern_that_backtracks_without_end_is_stopped_and_reported(cli, store_dir, monkeypatch):
    assert cli("ingest", "-", "--format", "text", stdin=b"a" * 5000 + b"b\n").code == 0
    monkeypatch.setenv("MEMCLI_GREP_TIMEOUT", "0.5")
    start = time.monotonic()
    result = cli("grep", "(a+)+$", "--json")
    assert time.monotonic() - start < 10  # stopped, not left running (Python's re runs for hours here)
    assert result.code == 2 and result.json["error"]["type"] == "usage"
    assert "did not finish in 0.5 s" in result.stderr
    assert cli("ingest", "-", "--format", "text", stdin=b"the lock was released\n").code == 0
    assert cli("grep", "a{3}b").code == 0  # an ordinary pattern over the same line is fine
