"""The read-side tools: docs, read, grep, search.

These functions are what ``memcli docs|read|grep|search`` print and what the
retrieval agent calls. They only read, stay inside the store (document ids
are validated, never joined into paths unchecked) and bound their output.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

from memcli.dates import Period
from memcli.errors import UsageError
from memcli.index import CatalogRow, Hit, LibraryIndex
from memcli.results import Result, hidden, omit_empty, plain
from memcli.store import Store
from memcli.store.format import parse_entry, split_front_matter

# ---------------------------------------------------------------- docs

@dataclass
class DocsResult(Result):
    total: int
    offset: int
    docs: list[CatalogRow]
    refused: list[str] = omit_empty(list)  # symbolic links and special files where documents would be


def list_docs(index: LibraryIndex, offset: int = 0, limit: int | None = None) -> DocsResult:
    if offset < 0 or (limit is not None and limit < 0):
        raise UsageError("--offset and --limit must not be negative")
    rows = index.catalog()
    page = rows[offset: None if limit is None else offset + limit]
    return DocsResult(total=len(rows), offset=offset, docs=page)


# ---------------------------------------------------------------- read

@dataclass
class ContextLine(Result):
    line: int
    text: str


@dataclass
class Line(ContextLine):
    """A document line; a memory entry's signature and text are given parsed as well."""

    def extra(self) -> dict:
        entry = parse_entry(self.text)
        return {"entry": {"meta": entry.meta, "text": entry.text}} if entry is not None else {}


@dataclass
class ReadResult(Result):
    doc: str
    path: str
    start_line: int
    end_line: int
    total_lines: int
    lines: list[Line]
    warning: str | None = omit_empty()
    moved_from: str | None = omit_empty()  # the former id named (a renamed or merged document's)


def parse_range(spec: str) -> tuple[int, int | None]:
    """``"A-B"``, ``"A-"``, ``"A"`` -> (A, B or None); 1-based, inclusive."""
    match = re.fullmatch(r"\s*(\d+)\s*(?:(-)\s*(\d+)?)?\s*", spec or "")
    if not match:
        raise UsageError(f"bad line range {spec!r} (expected A-B, A- or A)")
    start = int(match.group(1))
    end = int(match.group(3)) if match.group(3) else (None if match.group(2) else start)
    if start < 1 or (end is not None and end < start):
        raise UsageError(f"bad line range {spec!r}: lines are numbered from 1 and A <= B")
    return start, end


def read_lines(store: Store, doc_id: str, start: int = 1, end: int | None = None,
               max_lines: int | None = None) -> ReadResult:
    """Lines ``start..end`` (file line numbers, front matter included) of a document; a former id (of a
    document renamed or merged since) reads the document it went to."""
    named, doc_id = doc_id, store.resolve(doc_id)
    loaded = store.load(doc_id)
    text = loaded.doc.render()
    all_lines = text.split("\n")
    if all_lines and all_lines[-1] == "":
        all_lines.pop()
    total = len(all_lines)
    last = total if end is None else min(end, total)
    if max_lines is not None and last - start + 1 > max_lines:
        last = start + max_lines - 1
    if start > total and total:
        raise UsageError(f"{doc_id} has {total} lines; range starts at {start}")
    lines = [Line(n, all_lines[n - 1].rstrip("\r")) for n in range(start, last + 1)]
    return ReadResult(doc=doc_id, path=str(loaded.path), start_line=start,
                      end_line=max(start, last) if lines else start - 1, total_lines=total,
                      lines=lines, warning=loaded.error, moved_from=named if named != doc_id else None)


# ---------------------------------------------------------------- grep

@dataclass
class GrepMatch(Result):
    doc: str
    line: int
    text: str
    before: list[ContextLine] = hidden(list)
    after: list[ContextLine] = hidden(list)

    def extra(self) -> dict:
        """Context lines, both lists, when ``-C`` gave any."""
        return {"before": plain(self.before), "after": plain(self.after)} if self.before or self.after else {}


@dataclass
class GrepResult(Result):
    pattern: str
    matches: list[GrepMatch]
    truncated: bool
    docs_searched: int

    def extra(self) -> dict:
        return {"count": len(self.matches)}


class Pattern:
    """The one guard for regular expressions from users and models: Python's syntax, run by the
    ``regex`` engine with a time limit for the whole search (a pattern such as ``(a+)+$`` that
    backtracks without end is stopped and reported, never left holding the store's lock)."""

    def __init__(self, pattern: str, *, ignore_case: bool = False, seconds: float = 2.0):
        import regex

        if len(pattern) > MAX_PATTERN:
            raise UsageError(f"the regular expression is longer than {MAX_PATTERN} characters")
        try:
            self.compiled = regex.compile(pattern, regex.MULTILINE | regex.VERSION0
                                          | (regex.IGNORECASE if ignore_case else 0))
        except (regex.error, ValueError, OverflowError, RecursionError) as exc:
            raise UsageError(f"bad regular expression {pattern!r}: {exc}") from None
        self.pattern = pattern
        self.seconds = seconds
        self.deadline = time.monotonic() + seconds

    def finditer(self, text: str):
        """Matches in ``text`` while the pattern's time lasts (a :class:`UsageError` after that)."""
        try:
            yield from self.compiled.finditer(text, timeout=max(0.001, self.deadline - time.monotonic()))
        except TimeoutError:
            raise UsageError(f"the regular expression {self.pattern!r} did not finish in {self.seconds:g} s",
                             hint="use a simpler pattern (nested repeats such as (a+)+ backtrack without end)") \
                from None


MAX_PATTERN = 1000


def grep(store: Store, pattern: str, *, doc: str | None = None, ignore_case: bool = False,
         context: int = 0, limit: int = 100, seconds: float = 2.0, period: Period | None = None) -> GrepResult:
    """Lines of document bodies (front matter excluded) that match ``pattern``, within ``seconds``;
    with ``period``, only entries in it (:class:`memcli.dates.Period`).

    Works on the raw text (no YAML parsing, no per-line loop) so a large
    library is scanned at regex speed; line numbers are counted only up to
    the matches.
    """
    regex = Pattern(pattern, ignore_case=ignore_case, seconds=seconds)
    if limit < 1 or context < 0:
        raise UsageError("--limit must be at least 1 and --context not negative")
    doc_ids = [store.resolve(doc)] if doc else store.all_ids()
    matches: list[GrepMatch] = []
    truncated = False
    for doc_id in doc_ids:
        first_line, body = split_front_matter(store.read_text(doc_id))
        if body.endswith("\n"):
            body = body[:-1]
        hit_lines: list[int] = []  # 0-based body line indexes
        line_no, scanned = 0, 0
        for match in regex.finditer(body):
            line_no += body.count("\n", scanned, match.start())
            scanned = match.start()
            if hit_lines and hit_lines[-1] == line_no:
                continue
            if period is not None and not _in_period(body, match.start(), period):
                continue
            if len(matches) + len(hit_lines) >= limit:
                truncated = True
                break
            hit_lines.append(line_no)
        if hit_lines:
            lines = body.split("\n")
            for idx in hit_lines:
                def numbered(i: int) -> ContextLine:
                    return ContextLine(first_line + i, lines[i].rstrip("\r"))

                matches.append(GrepMatch(
                    doc_id, first_line + idx, lines[idx].rstrip("\r"),
                    [numbered(i) for i in range(max(0, idx - context), idx)],
                    [numbered(i) for i in range(idx + 1, min(len(lines), idx + 1 + context))]))
        if truncated:
            break
    return GrepResult(pattern=pattern, matches=matches, truncated=truncated, docs_searched=len(doc_ids))


def _in_period(body: str, at: int, period: Period) -> bool:
    """Whether the line of ``body`` holding offset ``at`` is an entry in ``period``."""
    end = body.find("\n", at)
    entry = parse_entry(body[body.rfind("\n", 0, at) + 1:end if end >= 0 else len(body)].rstrip("\r"))
    return entry is not None and period.holds(entry)


# ---------------------------------------------------------------- search

@dataclass
class SearchResult(Result):
    query: str
    hits: list[Hit]


def search(index: LibraryIndex, query: str, k: int = 10, doc: str | None = None) -> SearchResult:
    if k < 1:
        raise UsageError("-k must be at least 1")
    if doc is not None:
        doc = index.store.resolve(doc)
        index.store.doc_path(doc)  # validates the id
    return SearchResult(query=query, hits=index.search(query, k, doc=doc))
