"""Evidence: cited line ranges of documents, with the entries' times, seqs and refs, in a budget.

Every piece of evidence is a range of file lines of one document (so it can be
cited as ``doc:start-end`` and read back with ``memcli read``), rendered for a
model as ``[time] speaker: text`` lines; an entry with the same time as the
line above it in its range leaves the time out (``speaker: text``), so a run
of one session's entries does not pay for its date on every line. The budget
counts those rendered tokens.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from memcli.index import terms
from memcli.results import Result
from memcli.store import CURRENT_ID, Store
from memcli.store.format import Document, Entry, parse_entry, parse_heading
from memcli.tokens import count_tokens


@dataclass
class Evidence(Result):
    doc: str
    start_line: int
    end_line: int
    seqs: list[int] = field(default_factory=list)
    refs: list[str] = field(default_factory=list)
    time: str | None = None
    text: str = ""
    tokens: int = 0

    @property
    def citation(self) -> str:
        """``doc:start-end``, the form a range is cited in."""
        return f"{self.doc}:{self.start_line}-{self.end_line}"


ELISION = "…"
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=\S)")


def render_entry(entry: Entry, with_time: bool = True, focus: frozenset[str] = frozenset()) -> str:
    """``[2023-05-25 13:14] Caroline: text`` (the time is what lets "last Sunday" be resolved).

    ``focus``: search terms; when given, the entry is shown as its sentences that hold one of
    them, the others elided (:func:`compact`)."""
    who = entry.meta.get("speaker") or ("assistant" if entry.meta.get("source") == "AI" else "note")
    text = " ".join(entry.text.split())
    line = f"{who}: {compact(text, focus) if focus else text}"
    return f"[{(entry.time or '').replace('T', ' ')}] {line}" if with_time else line


def compact(text: str, focus: frozenset[str]) -> str:
    """``text`` as its sentences that hold a term of ``focus``, each run of the others replaced by
    ``…``; the whole text when it is one sentence, or when no sentence or every sentence holds one."""
    sentences = _SENTENCE_END.split(text)
    if len(sentences) < 2:
        return text
    keep = [bool(focus.intersection(terms(s))) for s in sentences]
    if not any(keep) or all(keep):
        return text
    parts: list[str] = []
    for sentence, kept in zip(sentences, keep):
        if kept:
            parts.append(sentence)
        elif not parts or parts[-1] != ELISION:
            parts.append(ELISION)
    return " ".join(parts)


def render_run(entries: list[Entry], focus: frozenset[str] = frozenset()) -> str:
    """Consecutive entries, one per line, each time shown only where it changes."""
    return "\n".join(render_entry(e, with_time=at == 0 or e.time != entries[at - 1].time, focus=focus)
                     for at, e in enumerate(entries))


class DocLines:
    """A document's entries by file line number, and its heading sections, loaded once."""

    def __init__(self, doc_id: str, doc: Document):
        self.id = doc_id
        self.entries: dict[int, Entry] = {}
        self.sections: list[tuple[int, int]] = []  # (first line, last line) of each heading block
        start = None
        last = 0
        for lineno, line in doc.lines():
            last = lineno
            head = parse_heading(line)
            if head:
                if start is not None:
                    self.sections.append((start, lineno - 1))
                start = lineno
                continue
            entry = parse_entry(line)
            if entry is not None and "superseded_by" not in entry.meta:
                self.entries[lineno] = entry
        if start is not None:
            self.sections.append((start, last))
        self.lines = sorted(self.entries)
        self._position = {line: at for at, line in enumerate(self.lines)}

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

    def __init__(self, store: Store):
        self.store = store
        self._docs: dict[str, DocLines] = {}

    def doc(self, doc_id: str) -> DocLines:
        if doc_id not in self._docs:
            self._docs[doc_id] = DocLines(doc_id, self.store.load(doc_id).doc)
        return self._docs[doc_id]


def assemble(library: Library, picks: list[tuple[str, int]], budget: int,
             count: Callable[[str], int] = count_tokens, focus: frozenset[str] = frozenset()) -> list[Evidence]:
    """Evidence for picked entry lines, best first until ``budget`` tokens, then in document order.

    Consecutive picked lines of one document merge into one range. An entry
    costs its line (with the line break) and its time unless the entry before
    it is picked with the same time; when the entry after it is picked with
    the same time, that entry's time is no longer shown and is given back.
    ``count`` counts the tokens (memcli's estimate; a model's tokenizer for what a model reads).
    ``focus``: search terms; entries are shown compact (:func:`compact`), their citations still
    cover the whole entry line.
    """
    chosen: dict[str, set[int]] = {}
    used = 0
    for doc_id, line in picks:
        doc = library.doc(doc_id)
        picked = chosen.get(doc_id, set())
        if line in picked or line not in doc.entries:
            continue
        entry = doc.entries[line]
        before, after = doc.previous(line), doc.next(line)
        shows_time = not (before in picked and doc.entries[before].time == entry.time)
        cost = count(render_entry(entry, with_time=shows_time, focus=focus) + "\n")
        if after in picked and doc.entries[after].time == entry.time:
            cost -= time_cost(doc.entries[after], count)
        if used + cost > budget:
            continue
        chosen.setdefault(doc_id, set()).add(line)
        used += cost
    return _ranges(library, chosen, count, focus)


def best_part(library: Library | None, evidence: list[Evidence], order: list[tuple[str, int]],
              tokens: int, count: Callable[[str], int] = count_tokens) -> list[Evidence]:
    """The part of ``evidence`` an answering model reads: its entries in ``order`` (best first) until
    ``tokens``, in document order. All of it when it fits, when ``tokens`` is 0 or without an order;
    its first entries when ``order`` names none of them.

    A small model answers better from its few best entries than from a full budget of them
    (README, "ask"); what it reads is always part of the evidence returned, so citations cover it.
    ``library`` is the one the evidence was read from (needed only with an order). ``count``: the
    answering model's tokenizer (this is a limit on what that model reads); the ranges returned
    carry token counts by it. Entries are read whole, also from compact evidence (answers of the
    default model were no worse, and the answer sees every sentence of what it cites).
    """
    if tokens <= 0 or not order or library is None or sum(count(e.text) for e in evidence) <= tokens:
        return evidence
    inside = [(e.doc, line) for e in evidence for line in library.doc(e.doc).lines
              if e.start_line <= line <= e.end_line]
    wanted = set(inside)
    return assemble(library, [pick for pick in order if pick in wanted] or inside, tokens, count)


def time_cost(entry: Entry, count: Callable[[str], int] = count_tokens) -> int:
    """Tokens an entry's line spends on its time."""
    return count(render_entry(entry) + "\n") - count(render_entry(entry, with_time=False) + "\n")


def _ranges(library: Library, chosen: dict[str, set[int]], count: Callable[[str], int],
            focus: frozenset[str] = frozenset()) -> list[Evidence]:
    out: list[Evidence] = []
    for doc_id in sorted(chosen, key=lambda d: (d == "CURRENT", d)):
        doc = library.doc(doc_id)
        run: list[int] = []
        for line in sorted(chosen[doc_id]):
            if run and doc.previous(line) != run[-1]:
                out.append(_evidence(doc, run, count, focus))
                run = []
            run.append(line)
        if run:
            out.append(_evidence(doc, run, count, focus))
    return out


def _evidence(doc: DocLines, lines: list[int], count: Callable[[str], int],
              focus: frozenset[str] = frozenset()) -> Evidence:
    entries = [doc.entries[n] for n in lines]
    text = render_run(entries, focus)
    refs = [r for e in entries for r in (e.ref or "").split(";") if r]
    return Evidence(doc=doc.id, start_line=lines[0], end_line=lines[-1], seqs=[e.seq for e in entries],
                    refs=refs, time=entries[0].time, text=text, tokens=count(text))


def snippet_lines(library: Library, doc_id: str, start: int, end: int, budget: int) -> list[tuple[str, int]]:
    """Entry lines for a cited range, expanded to its enclosing heading block.

    The cited entries come first (they survive a tight budget); the rest of
    the block follows when the whole block costs at most a quarter of
    ``budget``, otherwise only the two entries either side of the range.
    """
    doc = library.doc(doc_id)
    inside = [n for n in doc.lines if start <= n <= end]
    if not inside:
        return []
    block = doc.section_of(inside[0])
    around = [n for n in doc.lines if block and block[0] <= n <= block[1]]
    if not around or sum(count_tokens(render_entry(doc.entries[n])) for n in around) > budget // 4:
        first, last = doc.lines.index(inside[0]), doc.lines.index(inside[-1])
        around = doc.lines[max(0, first - 2): last + 3]
    return [(doc_id, n) for n in inside] + [(doc_id, n) for n in around if n not in inside]


def recent_current(library: Library, budget: int) -> list[tuple[str, int]]:
    """The newest CURRENT entries that fit ``budget`` tokens, newest first."""
    if CURRENT_ID not in library.store.all_ids():
        return []
    doc = library.doc(CURRENT_ID)
    picks, used = [], 0
    for line in reversed(doc.lines):
        used += count_tokens(render_entry(doc.entries[line]))
        if used > budget:
            break
        picks.append((CURRENT_ID, line))
    return picks
