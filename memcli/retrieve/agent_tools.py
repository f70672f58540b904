"""The retrieval agent's tools: the read-side functions, with checked arguments and bounded output.

Whatever a model (or text inside a memory document that a model repeats)
puts in a tool call is data: arguments are type-checked and bounded here, an
invalid one (a bad or too-costly regular expression, an unknown document, a
huge range) comes back as an error message for the model, and nothing here can
write to the store or read outside it (document ids go through
``Store.doc_path``, which refuses anything that is not an id of this store).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, get_args, get_type_hints

from memcli import read_tools
from memcli.errors import MemcliError
from memcli.index import LibraryIndex
from memcli.retrieve.evidence import render_entry
from memcli.store import Store
from memcli.store.format import parse_entry
from memcli.terms import terms
from memcli.tokens import count_tokens

MAX_PATTERN = 120
MAX_QUERY = 200
MAX_HITS = 12  # lines or partitions one call returns
MAX_READ = 40  # lines one read_lines call returns
CATALOG_PAGE = 20
RESULT_TOKENS = 450  # one call's rendered output

PATTERN_SECONDS = 0.5  # a model's pattern gets this long over the whole store (memcli.read_tools.Pattern)


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


# ---------------------------------------------------------------- the registry

@dataclass(frozen=True)
class Arg:
    """How a tool parameter is shown to the model (``placeholder``) and bounded."""

    placeholder: str
    max_len: int | None = None  # strings
    minimum: int | None = None  # integers


@dataclass(frozen=True)
class Param:
    name: str
    kind: type  # str or int
    arg: Arg
    required: bool
    default: object = None

    def schema(self) -> dict:
        if self.kind is str:
            return {"type": "string", "minLength": 1, "maxLength": self.arg.max_len or 120}
        out: dict = {"type": "integer"}
        if self.arg.minimum is not None:
            out["minimum"] = self.arg.minimum
        return out

    def check(self, args: dict):
        if self.name not in args:
            if self.required:
                raise ToolArgumentError(f"{self.name!r} is required")
            return self.default
        value = args[self.name]
        if self.kind is str:
            if not isinstance(value, str) or not value.strip():
                raise ToolArgumentError(f"{self.name!r} must be a non-empty string")
            if self.arg.max_len is not None and len(value) > self.arg.max_len:
                raise ToolArgumentError(f"{self.name!r} is longer than {self.arg.max_len} characters")
            return value.strip()
        if isinstance(value, bool) or not isinstance(value, int):
            raise ToolArgumentError(f"{self.name!r} must be an integer")
        if self.arg.minimum is not None and value < self.arg.minimum:
            raise ToolArgumentError(f"{self.name!r} must be at least {self.arg.minimum}")
        return value


@dataclass(frozen=True)
class AgentTool:
    """One tool: its name, what the model is told about it, its parameters and the function it runs."""

    name: str
    summary: str
    params: tuple[Param, ...]
    function: Callable

    def arguments_schema(self) -> dict:
        """JSON schema of this tool's arguments (only its own parameters)."""
        return {"type": "object", "properties": {p.name: p.schema() for p in self.params},
                "required": [p.name for p in self.params if p.required], "additionalProperties": False}

    def call_schema(self) -> dict:
        """JSON schema of one call of this tool, ``{"name": ..., "arguments": {...}}``."""
        return {"type": "object", "properties": {"name": {"const": self.name}, "arguments": self.arguments_schema()},
                "required": ["name", "arguments"]}

    def prompt_line(self) -> str:
        """``- name {"param": placeholder, ...}: summary`` for the agent's instructions."""
        shown = ", ".join(f'"{p.name}": {p.arg.placeholder}' for p in self.params)
        return f"- {self.name} {{{shown}}}: {self.summary}"

    def run(self, tools: AgentTools, args: dict) -> ToolResult:
        unknown = sorted(set(args) - {p.name for p in self.params})
        if unknown:
            raise ToolArgumentError(f"{self.name} takes no {', '.join(map(repr, unknown))}")
        return self.function(tools, **{p.name: p.check(args) for p in self.params})


TOOLS: dict[str, AgentTool] = {}  # in the order the agent's instructions list them


def agent_tool(function: Callable) -> Callable:
    """Register ``function(tools, **params)`` as an agent tool: its name, its docstring's first line
    (what the model is told) and its typed parameters (``Annotated[str, Arg(...)]``) define it."""
    hints = get_type_hints(function, include_extras=True)
    params = []
    for name, parameter in list(inspect.signature(function).parameters.items())[1:]:
        base, arg = get_args(hints[name])[:2]
        kind = next(t for t in (get_args(base) or (base,)) if t in (str, int))
        required = parameter.default is inspect.Parameter.empty
        params.append(Param(name, kind, arg, required, None if required else parameter.default))
    summary = (function.__doc__ or "").strip().split("\n")[0]
    TOOLS[function.__name__] = AgentTool(function.__name__, summary, tuple(params), function)
    return function


def tool_lines() -> str:
    """The tool list of the agent's instructions."""
    return "\n".join(tool.prompt_line() for tool in TOOLS.values())


def calls_schema() -> dict:
    """JSON schema of one tool call: any registered tool with its own arguments."""
    return {"anyOf": [tool.call_schema() for tool in TOOLS.values()]}


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
            if name not in TOOLS:
                raise ToolArgumentError(f"unknown tool {name!r}; tools are {', '.join(TOOLS)}")
            result = TOOLS[name].run(self, args)
        except (ToolArgumentError, MemcliError) as exc:
            message = exc.message if isinstance(exc, MemcliError) else str(exc)
            return ToolResult(str(name)[:40], shown, f"error: {message}", error=message)
        result.arguments = shown
        return result

    # ------------------------------------------------------------ helpers

    def doc(self, doc_id: str) -> str:
        self.store.doc_path(doc_id)  # refuses anything that is not a document id
        doc_id = self.store.resolve(doc_id)  # a former id (a renamed or merged document's) reads where it went
        if doc_id not in self.store.all_ids():
            raise ToolArgumentError(f"no document {doc_id!r}; list_docs shows the ids")
        return doc_id

    def lines(self, name: str, rows: list[tuple[str, int, str]], truncated: bool) -> ToolResult:
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


# ---------------------------------------------------------------- the tools (in the order the model sees them)

Query = Annotated[str, Arg("words", max_len=MAX_QUERY)]
Pattern = Annotated[str, Arg("regex", max_len=MAX_PATTERN)]
DocId = Annotated[str, Arg("id", max_len=120)]


@agent_tool
def search(tools: AgentTools, query: Query) -> ToolResult:
    """best-matching lines, ranked (BM25)."""
    hits = tools.index.search(query, 4)
    rows: list[tuple[str, int, str]] = []
    wanted = set(terms(query))
    for hit in hits:  # the best-matching entries of each partition, not whole partitions
        text = tools.store.read_text(hit.doc).split("\n")
        scored = []
        for line in range(hit.start_line, min(hit.end_line, len(text)) + 1):
            raw = text[line - 1]
            if parse_entry(raw) is not None:
                scored.append((-len(wanted & set(terms(raw))), line, raw))
        for _, line, raw in sorted(scored)[:3]:
            rows.append((hit.doc, line, raw))
    return tools.lines("search", rows, False)


@agent_tool
def grep(tools: AgentTools, pattern: Pattern) -> ToolResult:
    """lines matching a regular expression, case-insensitive, all documents."""
    found = read_tools.grep(tools.store, pattern, ignore_case=True, limit=MAX_HITS, seconds=PATTERN_SECONDS)
    return tools.lines("grep", [(m.doc, m.line, m.text) for m in found.matches], found.truncated)


@agent_tool
def grep_doc(tools: AgentTools, doc_id: DocId, pattern: Pattern) -> ToolResult:
    """the same inside one document."""
    found = read_tools.grep(tools.store, pattern, doc=tools.doc(doc_id), ignore_case=True, limit=MAX_HITS,
                            seconds=PATTERN_SECONDS)
    return tools.lines("grep_doc", [(m.doc, m.line, m.text) for m in found.matches], found.truncated)


@agent_tool
def read_lines(tools: AgentTools, doc_id: DocId, start_line: Annotated[int, Arg("n", minimum=1)],
               end_line: Annotated[int | None, Arg("m", minimum=1)] = None) -> ToolResult:
    """read lines of a document (40 at most)."""
    doc_id = tools.doc(doc_id)
    end = start_line + MAX_READ - 1 if end_line is None else end_line
    if end < start_line:
        raise ToolArgumentError(f"'end_line' must be at least {start_line}")
    read = read_tools.read_lines(tools.store, doc_id, start_line, min(end, start_line + MAX_READ - 1))
    rows = [(doc_id, ln.line, ln.text) for ln in read.lines]
    return tools.lines("read_lines", rows, end > start_line + MAX_READ - 1)


@agent_tool
def list_docs(tools: AgentTools, offset: Annotated[int, Arg("n", minimum=0)] = 0) -> ToolResult:
    """more of the catalog."""
    page = read_tools.list_docs(tools.index, offset, CATALOG_PAGE)
    return ToolResult("list_docs", {}, catalog_text(page.docs, page.offset, page.total))


def catalog_text(rows, offset: int, total: int) -> str:
    """Catalog lines ``id (N entries): summary`` with a paging note."""
    if not rows:
        return "(the library has no documents)"
    out = [f"{r.id} ({r.entries} entries): {' '.join((r.summary or '').split())[:160]}" for r in rows]
    if offset + len(rows) < total:
        out.append(f"(documents {offset + 1}-{offset + len(rows)} of {total}; "
                   f"call list_docs with offset {offset + len(rows)} for more)")
    return "\n".join(out)

