"""Three-way merges of a store's files by entry identity: what ``memcli merge-driver`` runs for git.

Each function takes the common ancestor's text, ours and theirs, and returns the merged text and
the number of conflicts it left marked for a person (0 when the merge is clean):

* documents and CURRENT (:func:`merge_document`): the union of the entries, each seq once. An entry
  one side removed (consolidated elsewhere, forgotten) and the other left as it was goes; an entry
  one side changed and the other left as it was takes the change; an entry both sides changed
  differently is kept twice, theirs right after ours with ``merge=conflict`` in its signature.
  Our document is the skeleton; theirs' new entries and lines go after the nearest line both
  sides have. Front matter: our values, theirs where only theirs changed one; the update logs
  joined; the token count made anew.
* line sets (:func:`merge_lines`: ``ingested.txt``, ``forgotten.txt``, ``aliases.txt``): the union, less what one
  side removed.
* ``state.json`` (:func:`merge_state`): the larger counters and format, the union of origins.

Entries identical on both sides but in different files (both clones consolidated the same
CURRENT) are a whole-store matter, left to :mod:`memcli.share.reconcile`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from memcli import parsing
from memcli.store.folder import refresh_token_count
from memcli.store.format import Document, Entry, FormatError, parse_document, parse_entry
from memcli.store.identity import valid_values

CONFLICT_KEY = "merge"


def _parse(text: str) -> Document:
    try:
        return parse_document(text)
    except FormatError:  # a broken front matter: merge the lines as body
        doc = Document(meta={}, body=text.split("\n"))
        doc.mark_loaded()
        return doc


def _entries(doc: Document) -> dict[int, str]:
    out: dict[int, str] = {}
    for _, line in doc.lines():
        entry = parse_entry(line)
        if entry is not None and entry.seq is not None and entry.meta.get(CONFLICT_KEY) != "conflict":
            out.setdefault(entry.seq, line)
    return out


def _seq(line: str) -> int | None:
    entry = parse_entry(line)
    return entry.seq if entry is not None and entry.meta.get(CONFLICT_KEY) != "conflict" else None


def _ours_only(line: str, base: dict[int, str], theirs: dict[int, str]) -> bool:
    seq = _seq(line)
    return seq is not None and seq not in base and seq not in theirs


def _conflict(line: str) -> str:
    entry = parse_entry(line)
    assert entry is not None
    return Entry({**entry.meta, CONFLICT_KEY: "conflict"}, entry.text).render()


def merge_document(base: str, ours: str, theirs: str) -> tuple[str, int]:
    b, o, t = _parse(base), _parse(ours), _parse(theirs)
    b_entries, o_entries, t_entries = _entries(b), _entries(o), _entries(t)
    conflicts = 0

    body = o.body[:-1] if o.body and o.body[-1] == "" else list(o.body)
    ends_with_newline = bool(o.body) and o.body[-1] == ""
    base_lines = set(b.body)
    t_body = t.body[:-1] if t.body and t.body[-1] == "" else t.body
    their_lines = set(t_body)
    kept: list[list[str]] = []  # per ours line: what it becomes (nothing, itself, a change, or both)
    seen: set[int] = set()
    for line in body:
        seq = _seq(line)
        if seq is None:
            kept.append([line])
            continue
        if seq in seen:  # a second version of an entry a person kept (a settled conflict): kept as it is,
            kept.append([] if line in base_lines and line not in their_lines else [line])  # unless theirs took it out
            continue
        seen.add(seq)
        base_line, their_line = b_entries.get(seq), t_entries.get(seq)
        if their_line is None:
            kept.append([] if base_line == line else [line])  # theirs removed it, unless ours changed it
        elif their_line in (line, base_line):
            kept.append([line])
        elif line == base_line:
            kept.append([their_line])
        else:
            kept.append([line, _conflict(their_line)])
            conflicts += 1

    # theirs' additions, each after the nearest earlier line of theirs that ours also has
    anchors: dict[object, int] = {}
    for index, line in enumerate(body):
        seq = _seq(line)
        anchors.setdefault(("line", line), index)
        if seq is not None:
            anchors.setdefault(seq, index)
    after: dict[int, list[str]] = {}
    place = -1
    for line in t_body:
        seq = _seq(line)
        key = ("line", line) if seq is None or ("line", line) in anchors or t_entries.get(seq) != line else seq
        if key in anchors:
            place = anchors[key]
            while place + 1 < len(body) and _ours_only(body[place + 1], b_entries, t_entries):
                place += 1  # after what ours added there too: ours' new lines, then theirs'
            continue
        if seq is None:  # a heading, a person's line, a marked conflict
            if not line.strip() or line in base_lines:
                continue  # blank, or a line ours removed
        elif t_entries.get(seq) != line:  # another version of an entry theirs keeps beside the first
            if line in base_lines:
                continue  # ours removed it
        elif seq in o_entries or (seq in b_entries and b_entries[seq] == line):
            continue  # ours has it elsewhere, or ours removed what theirs left as it was
        after.setdefault(place, []).append(line)

    out: list[str] = list(after.get(-1, []))
    for index, lines in enumerate(kept):
        out.extend(lines)
        out.extend(after.get(index, []))
    merged = Document(meta=_merge_meta(b.meta, o.meta, t.meta), body=[*out, ""] if ends_with_newline else out,
                      front_raw=o.front_raw, _meta_snapshot=o._meta_snapshot)
    if merged.meta and "token_count" in merged.meta:
        refresh_token_count(merged)
    return merged.render(), conflicts


def _values(base: dict, ours: dict, theirs: dict) -> dict:
    """Our keys and values, with theirs where only they set or changed one."""
    out = dict(ours)
    for key, value in theirs.items():
        if key not in ours or (ours.get(key) == base.get(key) and value != base.get(key)):
            out[key] = value
    return out


def _merge_meta(base: dict, ours: dict, theirs: dict) -> dict:
    out = _values(base, ours, {k: v for k, v in theirs.items() if k != "update_log"})
    mine, their = (m.get("update_log") if isinstance(m.get("update_log"), list) else [] for m in (ours, theirs))
    if mine or their or isinstance(ours.get("update_log"), list):
        log = list(mine)
        log += [item for item in their if item not in log]
        out["update_log"] = sorted(log, key=lambda item: str(item.get("time", "")) if isinstance(item, dict) else "")
    times = [str(m["updated_time"]) for m in (ours, theirs) if m.get("updated_time")]
    if times:
        out["updated_time"] = max(times)
    return out


def merge_lines(base: str, ours: str, theirs: str) -> tuple[str, int]:
    b = set(base.split())
    o_lines, t_lines = ours.split(), theirs.split()
    o_set = set(o_lines)
    gone = (b - o_set) | (b - set(t_lines))
    out = [line for line in _unique([*o_lines, *t_lines]) if line not in gone]
    return "".join(line + "\n" for line in out), 0


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


def _valid_state(text: str) -> dict:
    """A side's state with only the values a state may hold (:func:`memcli.store.identity.valid_values`)."""
    try:
        return valid_values(parsing.loads(text) if text.strip() else {})
    except ValueError:
        return {}


def merge_state(base: str, ours: str, theirs: str) -> tuple[str, int]:
    b, o, t = _valid_state(base), _valid_state(ours), _valid_state(theirs)
    out = _values(b, o, t)
    for key in ("format", "next_seq", "next_tick"):
        values = [m[key] for m in (o, t) if key in m]
        if values:
            out[key] = max(values)
    origins = sorted({*o["origins"], *t["origins"]})
    if origins:
        out["origins"] = origins
    else:
        out.pop("origins", None)
    return json.dumps(out) + "\n", 0


def merge_file(path: str, base: str, ours: str, theirs: str) -> tuple[str, int]:
    """The merge for one of a store's files, chosen by its name (``path`` as git gives it)."""
    name = path.replace("\\", "/").rsplit("/", 1)[-1]
    if name == "state.json":
        return merge_state(base, ours, theirs)
    if name.endswith(".txt"):
        return merge_lines(base, ours, theirs)
    return merge_document(base, ours, theirs)
