"""Forgetting: entries taken out of memory for good.

An entry is chosen by what :class:`Selection` names (citations ``doc:start-end``, seqs, a conversation
or session, a time range, a regular expression over its text; every criterion given must hold). The
documents and CURRENT lose those lines in one transaction, as consolidation's changes are made (a
crash leaves the old state or the new one); a topic document left without entries is removed. The
update log records which seqs were forgotten, never their text. The ingest fingerprints stay, so
ingesting the same file again does not bring the entries back.

A document that keeps entries is renamed from what is left: a section that lost entries gets a new
heading from its remaining ones (an emptied section goes), the title, summary and id are made again
the way deterministic consolidation makes them (a new id moves the file), and every update log note
naming an id that went is replaced; so a forgotten text leaves no trace in names either.

After the commit the caches follow (:func:`memcli.forget_caches.purge_caches`): the search index re-indexes the changed
documents with SQLite's ``secure_delete`` (the old rows are overwritten, not just unlinked), the
vector cache drops the forgotten texts' vectors, and the KV store drops every block made from a
changed document, chat's token caches and any chat session that holds a forgotten text or was
computed over memory blocks that went.
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from memcli import parsing
from memcli.consolidate.layout import Layout
from memcli.dates import Period
from memcli.errors import StoreError, UsageError
from memcli.forget_caches import PREVIEW, expect_purge, note_path, tombstones, write_note
from memcli.read_tools import Pattern
from memcli.results import Result
from memcli.store import CURRENT_ID, Store
from memcli.store.folder import now_iso, read_regular, refresh_token_count
from memcli.store.format import Entry, parse_entry
from memcli.store.identity import FORGOTTEN

_CITATION = re.compile(r"^(?P<doc>[^:\s]+):(?P<start>\d+)(?:-(?P<end>\d+))?$")
_SEQS = re.compile(r"^(?:seq[:=])?(?P<first>\d+)(?:-(?P<last>\d+))?$")


@dataclass
class Selection:
    """What to forget. Targets (citations and seqs) add up; every other criterion narrows."""

    citations: list[tuple[str, int, int]] = field(default_factory=list)  # (doc, first line, last line)
    seqs: list[tuple[int, int]] = field(default_factory=list)  # inclusive seq ranges (never expanded)
    conv: str | None = None  # a conversation or session id (the entries' conv)
    period: Period | None = None  # --since/--until on a clock
    pattern: object | None = None  # a memcli.read_tools.Pattern (a time limit on the whole search)
    everything: bool = False  # --all: the whole memory may go

    @classmethod
    def parse(cls, targets: list[str], *, conv: str | None = None, since: str | None = None,
              until: str | None = None, clock: str | None = None, grep: str | None = None, ignore_case: bool = False,
              everything: bool = False) -> Selection:
        """From the command's words: ``doc:12-14`` citations and ``17`` / ``17-20`` / ``seq:17`` seqs.
        A pattern that matches the empty string (``""``, ``(?i)``, ``x*``) matches every entry: it is
        refused unless ``everything`` (``--all``) says so."""
        sel = cls(conv=conv or None, everything=everything)
        for target in targets:
            if (m := _SEQS.match(target)) is not None:
                first, last = int(m["first"]), int(m["last"] or m["first"])
                if last < first:
                    raise UsageError(f"bad seq range {target!r}")
                sel.seqs.append((first, last))
            elif (m := _CITATION.match(target)) is not None:
                first, last = int(m["start"]), int(m["end"] or m["start"])
                if last < first:
                    raise UsageError(f"bad line range {target!r}")
                sel.citations.append((m["doc"], first, last))
            else:
                raise UsageError(f"{target!r} is neither a citation (doc:start-end) nor a seq (17, 17-20)")
        sel.period = Period.parse(since or None, until or None, clock)
        if grep is not None:
            sel.pattern = Pattern(grep, ignore_case=ignore_case)
            if not everything and next(iter(sel.pattern.finditer("")), None) is not None:
                raise UsageError(f"the pattern {grep!r} matches the empty string, so every entry: refused",
                                 hint="give a pattern that names what to forget, or --all to forget everything")
        if not (sel.citations or sel.seqs or sel.conv or sel.period or sel.pattern or everything):
            raise UsageError("say what to forget: citations (doc:12-14), seqs, --conv, --since/--until, --grep "
                             "or --all")
        return sel

    def matches(self, doc_id: str, lineno: int, entry: Entry) -> bool:
        if self.citations or self.seqs:
            cited = any(doc == doc_id and first <= lineno <= last for doc, first, last in self.citations)
            if not cited and not (entry.seq is not None and self._in_ranges(entry.seq)):
                return False
        if self.conv is not None and entry.meta.get("conv") != self.conv:
            return False
        if self.period is not None and not self.period.holds(entry):
            return False
        return self.pattern is None or next(iter(self.pattern.finditer(entry.text)), None) is not None

    def _in_ranges(self, seq: int) -> bool:
        """Whether ``seq`` is in one of the ranges (merged and searched by bisection: the cost is the
        store's entries times log of the ranges, never the ranges' width)."""
        if getattr(self, "_starts", None) is None:
            merged: list[list[int]] = []
            for first, last in sorted(self.seqs):
                if merged and first <= merged[-1][1] + 1:
                    merged[-1][1] = max(merged[-1][1], last)
                else:
                    merged.append([first, last])
            self._starts, self._ends = [a for a, _ in merged], [b for _, b in merged]
        at = bisect.bisect_right(self._starts, seq) - 1
        return at >= 0 and seq <= self._ends[at]

    def cited(self, doc_id: str, lineno: int) -> list[str]:
        """The citations (as written) that name this line."""
        return [f"{doc}:{first}-{last}" for doc, first, last in self.citations
                if doc == doc_id and first <= lineno <= last]


@dataclass
class Forgotten(Result):
    """What a forget took out (or, with ``dry_run``, would take out)."""

    dry_run: bool
    count: int
    seqs: list[int]
    entries: list[dict]  # {doc, line, seq, time, speaker, conv, text}: shown by a dry run only
    documents_changed: list[str]
    documents_removed: list[str]
    caches: dict = field(default_factory=dict)  # what each cache dropped
    warnings: list[str] = field(default_factory=list)


def forget(store: Store, selection: Selection, *, dry_run: bool = False,
           idf: Callable[[str], float] = lambda term: 1.0) -> tuple[Forgotten, list[Entry]]:
    """Take the selected entries out of the documents and CURRENT (one transaction). Returns the result
    and the forgotten entries (for the caches; never stored). ``idf``: the library's, for new names.

    A citation is a place, and places move (a consolidation, an ingest): a dry run records the seqs
    each citation named, and a forget with the same citation is refused when it now names others.
    Before the commit a purge note is written, so caches a crash left holding forgotten text are
    dropped by the next command (:func:`pending_purge`)."""
    if dry_run:
        with store.reading():
            found, total = _find(store, selection)
        _guard_everything(selection, found, total)
        _record_preview(store, selection, found)
        return _result(found, True, [], []), []
    with store.writing() as txn:
        found, total = _find(store, selection)
        _guard_everything(selection, found, total)
        _check_preview(store, selection, found)
        changed, removed, renamed, edited = [], [], {}, {}
        stamp = now_iso()
        taken = set(store.all_ids())
        for doc_id, (loaded, hits) in found.items():
            doc = loaded.doc
            drop = {lineno - doc.body_start for lineno, _ in hits}
            doc.body = [line for i, line in enumerate(doc.body) if i not in drop]
            if doc_id != CURRENT_ID and not any(True for _ in doc.entries()):
                removed.append(doc_id)
                continue
            _log(doc, {"time": stamp, "op": "forget", "count": len(hits),
                       "seqs": seq_ranges(sorted(e.seq for _, e in hits if e.seq is not None))})
            if doc_id != CURRENT_ID:
                new_id = _renamed(doc, idf, taken)
                if new_id != doc_id:
                    renamed[doc_id] = new_id
            edited[doc_id] = doc
            changed.append(renamed.get(doc_id, doc_id))
        gone = {*removed, *renamed}
        forgotten = {e.seq for _, hits in found.values() for _, e in hits if e.seq is not None}
        for doc_id in store.all_ids():
            if doc_id in removed:
                txn.delete(store.relpath(doc_id))
                continue
            loaded = None if doc_id in edited else store.load(doc_id)
            if loaded is not None and loaded.error:
                continue  # a front matter memcli cannot read: left as it is (its entries were not selected)
            doc = edited[doc_id] if loaded is None else loaded.doc
            revived = _revive(doc, forgotten)
            if _scrub_log(doc, gone) or doc_id in edited or revived:  # a log note naming an id that went is rewritten too
                refresh_token_count(doc)
                if doc_id in renamed:
                    txn.delete(store.relpath(doc_id))
                txn.write(store.relpath(renamed.get(doc_id, doc_id)), doc.render())
        entries = [entry for _, hits in found.values() for _, entry in hits]
        if entries:  # tombstones: a clone's copy goes too on merge, and a cache folder that did not see this
            # forget drops what it held (:func:`memcli.forget_caches.catch_up`)
            before = tombstones(store)
            _tombstone(store, txn, [e.seq for e in entries if e.seq is not None])
            expect_purge(store, [*changed, *removed], before)
    _clear_preview(store)
    return _result(found, False, changed, removed), entries


def _revived(line: str, seqs: set[int]) -> str | None:
    """The line without ``superseded_by`` when a forgotten entry (``seqs``) superseded it, else None."""
    entry = parse_entry(line)
    by = entry.meta.get("superseded_by", "") if entry is not None else ""
    if by.isdigit() and int(by) in seqs:
        return Entry({k: v for k, v in entry.meta.items() if k != "superseded_by"}, entry.text).render()
    return None


def _revive(doc, seqs: set[int]) -> bool:
    """Entries a forgotten entry superseded are current again: their lines leave the Superseded section
    for the end of the document's last section, without ``superseded_by``; one marked where it stands
    (CURRENT's corrections: :mod:`memcli.ingest.corrections`) loses the mark there. Whether any did."""
    layout = Layout.of(doc)
    back, kept = [], []
    for line in layout.superseded:
        again = _revived(line, seqs)
        if again is None:
            kept.append(line)
        else:
            back.append(again)
    in_place = False
    for lines in [layout.preamble, *(section.lines for section in layout.sections)]:
        for at, line in enumerate(lines):
            again = _revived(line, seqs)
            if again is not None:
                lines[at], in_place = again, True
    if not back:
        if in_place:
            doc.body = layout.body()
        return in_place
    layout.superseded = kept
    if layout.sections:
        layout.add(layout.sections[-1].title, back)
    else:
        layout.preamble.extend(back)
    doc.body = layout.body()
    return True


def _guard_everything(selection: Selection, found: dict, total: int) -> None:
    count = sum(len(hits) for _, hits in found.values())
    if total > 1 and count == total and not selection.everything:
        raise UsageError(f"this would forget every entry in memory ({total}); nothing was forgotten",
                         hint="narrow the selection, or add --all if the whole memory is to go")


def _citation_seqs(selection: Selection, found: dict) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {f"{d}:{a}-{b}": [] for d, a, b in selection.citations}
    for doc_id, (_, hits) in found.items():
        for lineno, entry in hits:
            for key in selection.cited(doc_id, lineno):
                out[key].append(entry.seq if entry.seq is not None else -1)
    return out


def _record_preview(store: Store, selection: Selection, found: dict) -> None:
    if not selection.citations:
        return
    try:
        write_note(store, PREVIEW, json.dumps(_citation_seqs(selection, found)))
    except OSError:
        pass  # a cache folder that cannot be written: the dry run still answers


def _check_preview(store: Store, selection: Selection, found: dict) -> None:
    if not selection.citations:
        return
    try:
        shown = parsing.loads(read_regular(note_path(store, PREVIEW)))
    except (OSError, ValueError, StoreError):
        return  # no dry run: the citations are taken as they are now
    if not isinstance(shown, dict):
        return
    for key, seqs in _citation_seqs(selection, found).items():
        if key in shown and shown[key] != seqs:
            raise UsageError(f"{key} no longer holds what the dry run showed (seq {shown[key]} then, {seqs} now: "
                             "the store changed since); nothing was forgotten",
                             hint="run the dry run again, or forget by seq (the dry run shows each entry's seq)")


def _clear_preview(store: Store) -> None:
    try:
        note_path(store, PREVIEW).unlink(missing_ok=True)
    except OSError:
        pass


def _tombstone(store: Store, txn, seqs: list[int]) -> None:
    try:
        previous = store.read_file(store.root / FORGOTTEN).decode("utf-8", "replace")
    except FileNotFoundError:
        previous = ""
    known = set(previous.split())
    txn.write(FORGOTTEN, previous + "".join(f"{seq}\n" for seq in sorted(set(seqs)) if str(seq) not in known))


def _log(doc, record: dict) -> None:
    doc.meta["updated_time"] = record["time"]
    if not isinstance(doc.meta.get("update_log"), list):
        doc.meta["update_log"] = []
    doc.meta["update_log"].append(record)


def _scrub_log(doc, gone: set[str]) -> bool:
    """Replace the names of documents that went in ``doc``'s update log notes; whether any was."""
    changed = False
    for record in doc.meta.get("update_log") or []:
        if isinstance(record, dict) and isinstance(record.get("note"), str):
            note = record["note"]
            for doc_id in gone:
                note = note.replace(doc_id, "a document since forgotten")
            if note != record["note"]:
                record["note"], changed = note, True
    return changed


def _renamed(doc, idf: Callable[[str], float], taken: set[str]) -> str:
    """Headings, title, summary and id of a document made again from the entries it kept; its id."""
    from memcli.consolidate.apply import deterministic_summary
    from memcli.consolidate.layout import Layout
    from memcli.consolidate.lexical import make_doc_id, slug
    from memcli.consolidate.titles import block_title, document_title

    layout = Layout.of(doc)
    kept = []
    for section in layout.sections:
        entries = section.entries()
        if not entries and not any(line.strip() for line in section.lines):
            continue  # every entry of it went
        if entries:
            section.title, section.heading = block_title(entries, idf), None
        kept.append(section)
    layout.sections = kept
    live = layout.live_entries()
    title = document_title(live, idf)  # as consolidation titles a new document
    layout.title, layout.title_line = title, None
    doc.body = layout.body()
    if isinstance(doc.meta.get("aux"), dict):
        doc.meta["aux"]["title"] = title  # memcli's title now (the one it replaces may name what went)
    doc.meta["summary"] = deterministic_summary(doc, idf)
    old = str(doc.meta.get("id") or "")
    if old.rsplit("-", 1)[0] == slug(title):  # the name still says what is left: kept
        return old
    new_id = make_doc_id(title, str(live[0].seq if live else 0), lambda c: c in taken)
    taken.add(new_id)
    doc.meta["id"] = new_id
    return new_id


def _find(store: Store, selection: Selection) -> tuple[dict, int]:
    """{doc id: (loaded document, [(line, entry)])} of the documents holding a selected entry, and
    how many entries the store holds."""
    known = set(store.all_ids())
    for doc, _, _ in selection.citations:
        if doc not in known:
            now = store.resolve(doc)  # a former id is not followed here: its line numbers may have moved
            hint = (f"{doc} is now {now}: `memcli read {now}` shows which lines to cite" if now != doc
                    else "`memcli docs` lists the documents")
            raise UsageError(f"no document {doc!r}", hint=hint)
    found = {}
    total = 0
    for doc_id in store.all_ids():
        loaded = store.load(doc_id)
        entries = list(loaded.doc.entries())
        total += len(entries)
        hits = [(lineno, entry) for lineno, entry in entries if selection.matches(doc_id, lineno, entry)]
        if hits and loaded.error:
            raise StoreError(f"{loaded.error}: this document holds entries to forget, and memcli does not rewrite "
                             "a document whose front matter it cannot read", hint="repair its front matter first")
        if hits:
            found[doc_id] = (loaded, hits)
    return found, total


def _result(found: dict, dry_run: bool, changed: list[str], removed: list[str]) -> Forgotten:
    hits = [(doc_id, lineno, e) for doc_id, (_, rows) in found.items() for lineno, e in rows]
    shown = [{"doc": d, "line": n, "seq": e.seq, "time": e.time, "speaker": e.meta.get("speaker"),
              "conv": e.meta.get("conv"), "text": e.text} for d, n, e in hits] if dry_run else []
    return Forgotten(dry_run=dry_run, count=len(hits), seqs=sorted(e.seq for _, _, e in hits if e.seq is not None),
                     entries=shown, documents_changed=changed if not dry_run else sorted(found),
                     documents_removed=removed)


def seq_ranges(seqs: list[int]) -> list[str]:
    """[3, 4, 5, 9] -> ["3-5", "9"]: the update log's record of what went."""
    out: list[list[int]] = []
    for seq in seqs:
        if out and seq == out[-1][1] + 1:
            out[-1][1] = seq
        else:
            out.append([seq, seq])
    return [f"{a}-{b}" if a != b else str(a) for a, b in out]


def newest_seqs(store: Store, *, conv: str, texts: list[str]) -> list[int]:
    """The seqs of CURRENT's newest entries of ``conv`` with each of ``texts`` (as stored: scrubbed), for
    a chat exchange saved before its messages noted their seqs."""
    if not texts or not store.current_path.exists():
        return []
    with store.reading():
        current = store.load(CURRENT_ID, strict=True).doc
    wanted, seqs = list(texts), []
    for _, entry in reversed(list(current.entries())):
        if entry.meta.get("conv") == conv and entry.text in wanted and entry.seq is not None:
            wanted.remove(entry.text)
            seqs.append(entry.seq)
        if not wanted:
            break
    return seqs


def forget_from(memory, selection: Selection, *, dry_run: bool = False) -> Forgotten:
    """:meth:`memcli.memory.Memory.forget`'s work: the entries taken out (``dry_run``: listed), a shared store's
    change recorded, then every cache cleaned of them (:func:`memcli.forget_caches.clean_caches`)."""
    from memcli.forget_caches import clean_caches

    index = None
    if dry_run:
        result, entries = forget(memory.store, selection, dry_run=True)
    else:
        index = memory.index  # settled before the commit; its own tombstones are not news to it after
        with memory.store.reading():
            idf = index.idf()  # names made again from what is left use the library's word weights
        result, entries = forget(memory.writable(), selection, idf=idf)
        if entries:
            memory.record("forget", f"memcli forget: {len(entries)} entries from "
                          f"{len(result.documents_changed) + len(result.documents_removed)} documents")
    if entries:
        clean_caches(memory.store, memory.settings, index, result, entries,
                     result.documents_changed + result.documents_removed, memory.drop_caches)
    return result
