"""The retrieval agent's tools: the read-side functions, with checked arguments and bounded output.

Whatever a model (or text inside a memory document that a model repeats)
puts in a tool call is data: arguments are type-checked and bounded here, an
invalid one (a bad or too-costly regular expression, an unknown document, a
huge range) comes back as an error message for the model, and nothing here can
write to the store or read outside it (document ids go through
``Store.doc_path``, which refuses anything that is not an id of this store).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from memcli import tools
from memcli.errors import MemcliError
from memcli.index import LibraryIndex, terms
from memcli.retrieve.evidence import render_entry
from memcli.store import Store
from memcli.store.format import parse_entry
from memcli.tokens import count_tokens

TOOL_NAMES = ("grep", "grep_doc", "search", "list_docs", "read_lines")

MAX_PATTERN = 120
MAX_QUERY = 200
MAX_HITS = 12  # lines or partitions one call returns
MAX_READ = 40  # lines one read_lines call returns
CATALOG_PAGE = 20
RESULT_TOKENS = 450  # one call's rendered output

# A quantified group that itself contains a quantifier, e.g. (a+)+ : catastrophic backtracking.
_NESTED_QUANTIFIER = re.compile(r"\([^()]*[*+}][^()]*\)\s*[*+{]")


class ToolArgumentError(ValueError):
    """A tool call the model made cannot be run as given; the message goes back to the model."""


@dataclass
class ToolResult:
    name: str
    arguments: dict
    text: str  # what the model reads
    lines: list[tuple[str, int]] = field(default_factory=list)  # (doc, line) of entries shown
    error: str | None = None

    def to_dict(self) -> dict:
        out = {"name": self.name, "arguments": self.arguments, "lines": [f"{d}:{n}" for d, n in self.lines]}
        if self.error:
            out["error"] = self.error
        return out


class AgentTools:
    """Runs tool calls for one question over one store (read-only)."""

    def __init__(self, store: Store, index: LibraryIndex):
        self.store = store
        self.index = index

    def run(self, name: object, arguments: object) -> ToolResult:
        args = arguments if isinstance(arguments, dict) else {}
        shown = {k: v for k, v in args.items() if isinstance(k, str)} if isinstance(arguments, dict) else {}
        try:
            if not isinstance(arguments, dict):
                raise ToolArgumentError("arguments must be a JSON object")
            if name not in TOOL_NAMES:
                raise ToolArgumentError(f"unknown tool {name!r}; tools are {', '.join(TOOL_NAMES)}")
            result = getattr(self, f"_{name}")(args)
        except (ToolArgumentError, MemcliError) as exc:
            message = exc.message if isinstance(exc, MemcliError) else str(exc)
            return ToolResult(str(name)[:40], shown, f"error: {message}", error=message)
        result.arguments = shown
        return result

    # ------------------------------------------------------------ tools

    def _grep(self, args: dict) -> ToolResult:
        pattern = _pattern(args)
        found = tools.grep(self.store, pattern, ignore_case=True, limit=MAX_HITS)
        return self._lines("grep", [(m.doc, m.line, m.text) for m in found.matches], found.truncated)

    def _grep_doc(self, args: dict) -> ToolResult:
        doc_id = self._doc(args)
        pattern = _pattern(args)
        found = tools.grep(self.store, pattern, doc=doc_id, ignore_case=True, limit=MAX_HITS)
        return self._lines("grep_doc", [(m.doc, m.line, m.text) for m in found.matches], found.truncated)

    def _search(self, args: dict) -> ToolResult:
        query = _string(args, "query", MAX_QUERY)
        hits = self.index.search(query, 4)
        rows: list[tuple[str, int, str]] = []
        wanted = set(terms(query))
        for hit in hits:  # the best-matching entries of each partition, not whole partitions
            text = self.store.read_text(hit.doc).split("\n")
            scored = []
            for line in range(hit.start_line, min(hit.end_line, len(text)) + 1):
                raw = text[line - 1]
                if parse_entry(raw) is not None:
                    scored.append((-len(wanted & set(terms(raw))), line, raw))
            for _, line, raw in sorted(scored)[:3]:
                rows.append((hit.doc, line, raw))
        return self._lines("search", rows, False)

    def _list_docs(self, args: dict) -> ToolResult:
        offset = _integer(args, "offset", default=0, minimum=0)
        page = tools.list_docs(self.index, offset, CATALOG_PAGE)
        text = catalog_text(page.docs, page.offset, page.total)
        return ToolResult("list_docs", {}, text)

    def _read_lines(self, args: dict) -> ToolResult:
        doc_id = self._doc(args)
        start = _integer(args, "start_line", minimum=1)
        end = _integer(args, "end_line", default=start + MAX_READ - 1, minimum=start)
        read = tools.read_lines(self.store, doc_id, start, min(end, start + MAX_READ - 1))
        rows = [(doc_id, ln.line, ln.text) for ln in read.lines]
        return self._lines("read_lines", rows, end > start + MAX_READ - 1)

    # ------------------------------------------------------------ helpers

    def _doc(self, args: dict) -> str:
        doc_id = _string(args, "doc_id", 120)
        self.store.doc_path(doc_id)  # refuses anything that is not a document id
        if doc_id not in self.store.all_ids():
            raise ToolArgumentError(f"no document {doc_id!r}; list_docs shows the ids")
        return doc_id

    def _lines(self, name: str, rows: list[tuple[str, int, str]], truncated: bool) -> ToolResult:
        out: list[str] = []
        lines: list[tuple[str, int]] = []
        used = 0
        for doc_id, line, raw in rows:
            entry = parse_entry(raw)
            shown = render_entry(entry) if entry is not None else raw.strip()[:300]
            row = f"{doc_id}:{line}: {shown}"
            cost = count_tokens(row)
            if used + cost > RESULT_TOKENS:
                truncated = True
                break
            used += cost
            out.append(row)
            if entry is not None:
                lines.append((doc_id, line))
        if not out:
            return ToolResult(name, {}, "no matches")
        if truncated:
            out.append("(more results not shown: narrow the pattern or query)")
        return ToolResult(name, {}, "\n".join(out), lines)


def catalog_text(rows, offset: int, total: int) -> str:
    """Catalog lines ``id (N entries): summary`` with a paging note."""
    if not rows:
        return "(the library has no documents)"
    out = [f"{r.id} ({r.entries} entries): {' '.join((r.summary or '').split())[:160]}" for r in rows]
    if offset + len(rows) < total:
        out.append(f"(documents {offset + 1}-{offset + len(rows)} of {total}; "
                   f"call list_docs with offset {offset + len(rows)} for more)")
    return "\n".join(out)


def _string(args: dict, key: str, max_len: int) -> str:
    value = args.get(key)
    if not isinstance(value, str) or not value.strip():
        raise ToolArgumentError(f"{key!r} must be a non-empty string")
    if len(value) > max_len:
        raise ToolArgumentError(f"{key!r} is longer than {max_len} characters")
    return value.strip()


def _integer(args: dict, key: str, *, default: int | None = None, minimum: int = 0) -> int:
    value = args.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ToolArgumentError(f"{key!r} must be an integer")
    if value < minimum:
        raise ToolArgumentError(f"{key!r} must be at least {minimum}")
    return value


def _pattern(args: dict) -> str:
    pattern = _string(args, "pattern", MAX_PATTERN)
    if _NESTED_QUANTIFIER.search(pattern):
        raise ToolArgumentError("nested quantifiers like (a+)+ are not allowed; use a simpler pattern")
    return pattern

