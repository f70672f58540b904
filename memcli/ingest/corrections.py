"""Corrections: a later entry of one party's that denies what an earlier entry of theirs says supersedes it.

"Correction: the company is Orbital Foods, not Northwind." after "I've been at Northwind for three years.":
a clause of the later entry begins by denying (:func:`memcli.clauses.denied`) and names a value ("not
Northwind"; "not a Ford Fiesta" is "Ford Fiesta": function words at its edges are not the value), and the
nearest earlier entry of the same party (the same speaker; the owner's notes and a session's ``user`` and
``assistant`` are one party, as for exact duplicates) that writes the value's words in a row is superseded
by it, when it is one sentence (a long message is not replaced whole for a word of it) and the correcting
entry is not an assistant's (its "use X, not Y" corrects no one). Ingest marks such an entry in CURRENT,
consolidation in the documents it writes; nothing is deleted (the entry stays, with ``superseded_by``, and
``ask --as-of`` a day before the correction reads it).

This is the one kind of update memcli marks without a model: a later line that only states another value
of the same kind ("New job alert: Tessel hired me!") is not told apart from two events of one kind by any
measure tried (docs/benchmarks.md, "Facts that change"). On the development pair no entry is marked.
"""

from __future__ import annotations

from collections.abc import Iterable

from memcli.clauses import WORD, clauses, denied
from memcli.ingest.turns import ROLES
from memcli.store.format import Entry, parse_entry
from memcli.store.lines import sentences
from memcli.terms import EDGE_STOP


def party(entry: Entry) -> tuple[str | None, str | None]:
    """Who said an entry, as updates and duplicates count it: its speaker, or ``None`` for the owner (a
    note, or a session's user or assistant), within its project."""
    speaker = entry.meta.get("speaker")
    return (None if speaker in ROLES else speaker), entry.meta.get("project")


def _words(text: str) -> list[str]:
    return [w.lower() for w in WORD.findall(text)]


def denied_values(text: str) -> list[tuple[str, ...]]:
    """The values the text's clauses deny, each as its lower-cased words without function words at its
    edges: "It's a Fairphone 5, not a iPhone 13, my mistake." -> [("iphone", "13")]."""
    out = []
    for sentence in sentences(text):
        for clause in clauses(sentence, drop_denied=False):
            if not denied(clause):
                continue
            words = _words(clause)[1:]  # after "not"
            while words and words[0] in EDGE_STOP:
                words.pop(0)
            while words and words[-1] in EDGE_STOP:
                words.pop()
            if words:
                out.append(tuple(words))
    return out


def _writes(text: str, value: tuple[str, ...]) -> bool:
    """Whether ``text`` is one sentence (one thing said, which a correction can replace whole: never a long
    message of which it denies a word) that writes the value's words in a row, not as a value it denies."""
    if len([s for s in sentences(text) if s.strip()]) != 1:
        return False
    words = _words(text)
    n = len(value)
    return any(tuple(words[at:at + n]) == value for at in range(len(words) - n + 1)) \
        and value not in denied_values(text)


def _order(entry: Entry) -> tuple[str, int]:
    return entry.time or "", entry.seq or 0


def may_supersede(old: Entry, new: Entry) -> bool:
    """Whether ``new`` can be what replaced ``old``: the same party said it, later. What any rule or model
    proposes as an update is checked by this (:func:`memcli.consolidate.draft.rewrite`'s validator)."""
    return party(old) == party(new) and _order(old) < _order(new)


def corrections(entries: Iterable[Entry], earlier: Iterable[Entry] = ()) -> dict[int, int]:
    """older seq -> the seq of the entry that corrects it, for each entry of ``entries`` that denies a value
    the nearest earlier entry of the same party (among ``earlier`` and ``entries``: live ones) writes."""
    new = [e for e in entries if e.seq is not None]
    if not any(denied_values(e.text) for e in new):  # the common case: nothing to read the earlier entries for
        return {}
    fresh = {e.seq for e in new}
    pool = sorted({e.seq: e for e in [*earlier, *new] if e.seq is not None}.values(), key=_order)
    out: dict[int, int] = {}
    for at, entry in enumerate(pool):
        if entry.seq not in fresh or entry.meta.get("source") == "AI":
            continue
        for value in denied_values(entry.text):
            older = next((e for e in reversed(pool[:at])
                          if may_supersede(e, entry) and _writes(e.text, value)), None)
            if older is not None and older.seq not in out:
                out[older.seq] = entry.seq
    return out


def mark_in_place(body: list[str], new_lines: list[str]) -> int:
    """Mark in place, with ``superseded_by``, each entry of a CURRENT ``body`` or of the ``new_lines`` about
    to be appended to it that one of the new lines corrects (the line stays where it is, still read by
    ``ask --as-of`` a day before the correction). Both lists are changed; returns how many were marked."""
    fresh = [(new_lines, at, parse_entry(line)) for at, line in enumerate(new_lines)]
    if not any(e is not None and denied_values(e.text) for _, _, e in fresh):
        return 0  # no new line denies anything: CURRENT is not read
    parsed = [(body, at, parse_entry(line)) for at, line in enumerate(body)] + fresh
    live = [(where, at, e) for where, at, e in parsed if e is not None and "superseded_by" not in e.meta]
    found = corrections([e for where, _, e in live if where is new_lines], [e for where, _, e in live if where is body])
    for where, at, entry in live:
        if entry.seq in found:
            where[at] = Entry({**entry.meta, "superseded_by": str(found[entry.seq])}, entry.text).render()
    return len(found)
