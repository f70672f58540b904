"""A document's lines as the readers see them: its body's lines by file line number (front matter
skipped unparsed), its live entries and heading sections (:class:`DocLines`), the documents one
question loads (:class:`Library`), and an entry's text as evidence shows it and cuts it into
sentences. Below both the semantic signal (which computes a vector per sentence) and the readers."""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Iterable, Iterator

from memcli.store.folder import Store
from memcli.store.format import Document, Entry, parse_entry, parse_heading, split_front_matter

KEPT_DOCUMENTS = 4096  # parsed documents a long-lived process keeps between questions (Library)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=\S)")


def sentences(text: str) -> list[str]:
    """``text`` cut after each ``.``, ``!`` or ``?`` followed by white space (what compact evidence
    keeps or elides, and what the sentence vectors are computed for)."""
    return _SENTENCE_END.split(text)


def shown_text(entry: Entry) -> str:
    """An entry's text as evidence shows it (white space folded), and as its sentences are cut."""
    return " ".join(entry.text.split())


def body_lines(text: str) -> Iterator[tuple[int, str]]:
    """(file line number, line) of a document's body, its front matter skipped unparsed (what a
    reader of entries needs; :meth:`Document.lines` without the YAML)."""
    first, body = split_front_matter(text)
    lines = body.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    for offset, line in enumerate(lines):
        yield first + offset, line.rstrip("\r")


def chat_of(entry: Entry) -> str:
    """The conversation an entry was said in: its ``conv``, else the file its ``ref`` points into ("" if neither)."""
    return entry.meta.get("conv") or (entry.ref or "").split("#")[0]


class DocLines:
    """A document's entries by file line number, and its heading sections, loaded once."""

    def __init__(self, doc_id: str, lines: Document | Iterable[tuple[int, str]], as_of: str | None = None):
        """``lines``: a parsed document, or (file line number, line) of its body (:func:`body_lines`).
        ``as_of`` (``YYYY-MM-DD`` or a longer ISO time): the entries said by then, the superseded
        ones among them too unless what replaced them is a line of this document said by then (else it may
        be later, or elsewhere; :mod:`memcli.retrieve.current`)."""
        self.id = doc_id
        self.entries: dict[int, Entry] = {}
        self.replaced: dict[int, list[Entry]] = {}  # seq -> the entries of this document it superseded, not read
        self.sections: list[tuple[int, int]] = []  # (first line, last line) of each heading block
        start = None
        last = 0
        for lineno, line in (lines.lines() if hasattr(lines, "lines") else lines):
            last = lineno
            head = parse_heading(line)
            if head:
                if start is not None:
                    self.sections.append((start, lineno - 1))
                start = lineno
                continue
            entry = parse_entry(line)
            if entry is None or (as_of is not None and (entry.time or "")[:len(as_of)] > as_of):
                continue  # not an entry, or said after the day asked about
            by = entry.meta.get("superseded_by")
            if as_of is not None or by is None:
                self.entries[lineno] = entry
            elif by.isdigit():
                self.replaced.setdefault(int(by), []).append(entry)
        if start is not None:
            self.sections.append((start, last))
        if as_of is not None:  # what a line of this document said by then replaced is not read
            said = {e.seq for e in self.entries.values() if e.seq is not None}
            for line, e in list(self.entries.items()):
                by = e.meta.get("superseded_by", "")
                if by.isdigit() and int(by) in said:
                    self.replaced.setdefault(int(by), []).append(self.entries.pop(line))
        self.lines = sorted(self.entries)
        self._position = {line: at for at, line in enumerate(self.lines)}
        self._speakers: dict[str, set[str]] | None = None  # by chat

    def speakers(self, chat: str | None = None) -> set[str]:
        """The speakers of this document's entries, or of those of one chat (:func:`chat_of`)."""
        if self._speakers is None:  # built whole, then set: a thread beside it sees none or all of it
            by_chat: dict[str, set[str]] = {}
            for e in self.entries.values():
                if e.meta.get("speaker"):
                    by_chat.setdefault(chat_of(e), set()).add(e.meta["speaker"])
            self._speakers = by_chat
        if chat is not None:
            return self._speakers.get(chat, set())
        return {speaker for said in self._speakers.values() for speaker in said}

    def section_of(self, line: int) -> tuple[int, int] | None:
        for first, last in self.sections:
            if first <= line <= last:
                return first, last
        return None

    def neighbours(self, line: int, radius: int) -> list[int]:
        """Entry lines within ``radius`` entries of ``line`` (itself included)."""
        if line not in self.entries:
            return []
        at = self._position[line]
        return self.lines[max(0, at - radius): at + radius + 1]

    def previous(self, line: int) -> int | None:
        """The entry line before ``line`` (an entry's), or None for the first."""
        at = self._position[line]
        return self.lines[at - 1] if at else None

    def next(self, line: int) -> int | None:
        """The entry line after ``line`` (an entry's), or None for the last."""
        at = self._position[line] + 1
        return self.lines[at] if at < len(self.lines) else None


class Library:
    """Documents loaded on demand for one question."""

    def __init__(self, store: Store, kept: OrderedDict | None = None, as_of: str | None = None):
        """``kept``: documents parsed for earlier questions, by id (with their file signature), which a
        long-lived process (the MCP server, ``Memory``) reuses while the file is unchanged; the
        ``KEPT_DOCUMENTS`` used last are kept. ``as_of``: the entries said by then (:class:`DocLines`)."""
        self.store = store
        self._docs: dict[str, DocLines] = {}
        self._kept = kept if as_of is None else None
        self.as_of = as_of

    def doc(self, doc_id: str) -> DocLines:
        if doc_id not in self._docs:
            if self._kept is None:
                self._docs[doc_id] = DocLines(doc_id, body_lines(self.store.read_text(doc_id)), self.as_of)
                return self._docs[doc_id]
            signature = self.store.signature(doc_id)
            kept = self._kept.pop(doc_id, None)
            if kept is None or signature is None or kept[0] != signature:
                kept = (signature, DocLines(doc_id, body_lines(self.store.read_text(doc_id))))
            self._kept[doc_id] = kept
            while len(self._kept) > KEPT_DOCUMENTS:
                self._kept.popitem(last=False)
            self._docs[doc_id] = kept[1]
        return self._docs[doc_id]

    def history(self, pick: tuple[str, int]) -> list[Entry]:
        """The entries the entry at ``pick`` (document, line) superseded, in its document: read with it as
        what it replaced, never on their own."""
        doc = self.doc(pick[0])
        seq = doc.entries[pick[1]].seq
        return doc.replaced.get(seq, []) if seq is not None else []

    def speakers(self) -> set[str]:
        """The speakers of the entries of the documents loaded so far."""
        return {speaker for d in self._docs.values() for speaker in d.speakers()}
