"""--since/--until on either clock: when an entry was said (its time=) or the day it speaks of (its when=,
else the day said), for ask (CLI, API, MCP in test_mcp), grep and forget."""

from __future__ import annotations

import re

import pytest
from test_current import chat

from memcli import Memory
from memcli.dates import Period
from memcli.errors import InputError, UsageError
from memcli.store.format import Entry


@pytest.fixture
def diary(tmp_path):
    return chat(tmp_path / "noor.json", [
        ("2024-01-10", "I live in Utrecht, close to the canal."),
        ("2024-02-20", "Work has been hectic this month."),
        ("2024-03-05", "We moved to Ghent last month, the new flat is lovely."),
        ("2024-03-06", "I bought a new bike for the commute yesterday."),
    ])


def entry(time: str | None, when: str | None = None) -> Entry:
    meta = {"seq": "1", **({"time": time} if time else {}), **({"when": when} if when else {})}
    return Entry(meta, "text")


def test_a_period_holds_entries_on_its_clock():
    said = Period.parse("2024-03-01", "2024-03-05")
    assert said.until == "2024-03-05T23:59"  # a day runs to its end
    assert said.holds(entry("2024-03-05T22:10")) and not said.holds(entry("2024-03-06T00:00"))
    assert not said.holds(entry("2024-02-29T23:59")) and not said.holds(entry(None))  # no time: in no period
    event = Period.parse("2024-02-10", "2024-02-12", "event")
    assert event.holds(entry("2024-03-05T10:00", "2024-02"))  # a month: in it when any of it is
    assert not event.holds(entry("2024-03-05T10:00", "2024-03"))
    assert event.holds(entry("2024-02-11T09:00"))  # no when=: the day it was said
    assert Period.parse("2024-02-11T08:00", None, "event").holds(entry("2024-02-11T07:00"))  # that whole day
    assert Period.parse("2024-03-05T12:00").holds(entry("2024-03-05T12:00"))  # inclusive to the minute
    assert Period.parse(None, None) is None


@pytest.mark.parametrize("since, until, clock, error", [
    ("yesterday", None, None, InputError), (None, "2024-13-01", None, InputError),  # a bad date: bad input (exit 4)
    ("2024-03-02", "2024-03-01", None, UsageError), ("2024-03-01", None, "wall", UsageError),
    (None, None, "event", UsageError),  # options that do not go together: a usage error (exit 2)
])
def test_a_bad_period_is_refused(since, until, clock, error):
    with pytest.raises(error):
        Period.parse(since, until, clock)


def test_grep_keeps_to_a_period_on_either_clock(store_dir, diary, cli):
    with Memory(store_dir, create=True) as memory:
        memory.ingest(diary, consolidate=False)
    said = cli("grep", "Ghent|bike", "--since", "2024-02-01", "--until", "2024-02-29", "--json")
    assert said.code == 1 and said.json["matches"] == []  # both were said in March
    event = cli("grep", "Ghent|bike", "--since", "2024-02-01", "--until", "2024-02-29", "--clock", "event", "--json")
    assert event.code == 0, event.stderr
    assert [m["text"] for m in event.json["matches"]] == [
        next(x for x in (store_dir / "CURRENT.md").read_text().splitlines() if "Ghent" in x)]  # last month
    bike = cli("grep", "bike", "--since", "2024-03-05", "--until", "2024-03-05", "--clock", "event")
    assert bike.code == 0 and "bike" in bike.stdout  # "yesterday", said on 6 March
    bad = cli("grep", "bike", "--clock", "event")
    assert bad.code == 2 and "--since/--until" in bad.stderr


def test_ask_reads_only_the_period(store_dir, diary, cli):
    with Memory(store_dir, create=True) as memory:
        memory.ingest(diary, consolidate=False)
        found = memory.ask("Where does Noor live?", since="2024-03-01")
        assert found.mode == "evidence"  # a period picks the evidence reader, as --as-of does
        days = [d for e in found.evidence for d in re.findall(r"\[(\d{4}-\d\d-\d\d)", e.text)]
        assert days and all(day >= "2024-03-01" for day in days)
        assert any("Ghent" in e.text for e in found.evidence) and not any("Utrecht" in e.text for e in found.evidence)
        with pytest.raises(UsageError):
            memory.ask("Where does Noor live?", since="2024-03-01", kv_compose=True)
        with pytest.raises(UsageError):
            memory.ask("Where does Noor live?", until="2024-02-01", reader="agent")
    early = cli("ask", "Where does Noor live?", "--evidence-only", "--until", "2024-02-29", "--clock", "event",
                "--json")
    assert early.code == 0, early.stderr
    texts = " ".join(e["text"] for e in early.json["evidence"])
    assert "Utrecht" in texts and "Ghent" in texts and "bike" not in texts  # Ghent: moved in February


def test_forget_keeps_to_a_period_on_the_event_clock(store_dir, diary, cli):
    with Memory(store_dir, create=True) as memory:
        memory.ingest(diary, consolidate=False)
    gone = cli("forget", "--grep", "Ghent|Utrecht", "--until", "2024-02-29", "--clock", "event", "--dry-run", "--json")
    assert gone.code == 0, gone.stderr
    listed = " ".join(e["text"] for e in gone.json["entries"])
    assert "Utrecht" in listed and "Ghent" in listed
    said = cli("forget", "--grep", "Ghent|Utrecht", "--until", "2024-02-29", "--dry-run", "--json")
    listed = " ".join(e["text"] for e in said.json["entries"])
    assert "Utrecht" in listed and "Ghent" not in listed
