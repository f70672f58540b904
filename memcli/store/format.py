"""The on-disk text format: entry signatures, entry lines and topic documents.

An entry is one line::

    - <seq=40,time=2023-05-25T13:14,speaker=Caroline,ref=D2:8> Caroline is researching adoption agencies.

Signature values escape ``% , = < >`` and control characters as ``%XX``;
entry text escapes backslash and line breaks as ``\\\\``, ``\\n``, ``\\r`` and
``\\uXXXX`` (for the other characters Python treats as line breaks), so an
entry is always exactly one line and every text reads back unchanged.

A document is YAML front matter between ``---`` lines followed by a Markdown
body. Parsing keeps every original line, so rendering an unmodified document
gives back the same bytes; only lines and metadata that were changed are
re-rendered. Unknown metadata keys (in the front matter or in signatures)
are kept as they are.
"""

from __future__ import annotations

import copy
import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

# ---------------------------------------------------------------- signatures

_SIG_ESCAPES = {"%": "%25", ",": "%2C", "=": "%3D", "<": "%3C", ">": "%3E"}
_KEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")
_PCT_RE = re.compile(r"%([0-9A-Fa-f]{2})")


def escape_value(value: str) -> str:
    out = []
    for ch in value:
        if ch in _SIG_ESCAPES:
            out.append(_SIG_ESCAPES[ch])
        elif ord(ch) < 0x20 or ch in "\x7f\x85\u2028\u2029":
            out.append("".join(f"%{b:02X}" for b in ch.encode("utf-8")))
        else:
            out.append(ch)
    return "".join(out)


def unescape_value(value: str) -> str:
    if "%" not in value:
        return value
    # decode runs of %XX as UTF-8 bytes so multi-byte escapes come back whole
    def repl(match: re.Match) -> str:
        raw = bytes(int(h, 16) for h in re.findall(r"%([0-9A-Fa-f]{2})", match.group(0)))
        return raw.decode("utf-8", errors="replace")

    return re.sub(r"(?:%[0-9A-Fa-f]{2})+", repl, value)


def render_signature(meta: dict[str, str]) -> str:
    parts = []
    for key, value in meta.items():
        if not _KEY_RE.match(key):
            raise ValueError(f"invalid metadata key {key!r}")
        parts.append(f"{key}={escape_value(str(value))}")
    return "<" + ",".join(parts) + ">"


def parse_signature(sig: str) -> dict[str, str] | None:
    """``seq=1,time=...`` (without the angle brackets) -> ordered dict, or None if malformed."""
    items = _signature_items(sig)
    return None if items is None else dict(items)


@functools.lru_cache(maxsize=1 << 16)
def _signature_items(sig: str) -> tuple[tuple[str, str], ...] | None:
    """A signature's (key, value) pairs, remembered: the same entries are read again and again."""
    meta: dict[str, str] = {}
    if not sig:
        return None
    for part in sig.split(","):
        key, eq, value = part.partition("=")
        key = key.strip()
        if not eq or not _KEY_RE.match(key) or key in meta:
            return None
        meta[key] = unescape_value(value)
    return tuple(meta.items())


# ---------------------------------------------------------------- entry text

_LINE_BREAKS = "\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"


_TO_ESCAPE_RE = re.compile("[\\\\\n\r" + _LINE_BREAKS + "]")


def escape_text(text: str) -> str:
    if not _TO_ESCAPE_RE.search(text):
        return text
    out = []
    for ch in text:
        if ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch in _LINE_BREAKS:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return "".join(out)


_TEXT_ESC_RE = re.compile(r"\\(\\|n|r|u([0-9a-fA-F]{4}))")


def unescape_text(text: str) -> str:
    if "\\" not in text:
        return text

    def repl(match: re.Match) -> str:
        code = match.group(1)
        if code == "\\":
            return "\\"
        if code == "n":
            return "\n"
        if code == "r":
            return "\r"
        char = chr(int(match.group(2), 16))
        # only the escapes memcli writes are decoded; a hand-typed \u00e9 stays literal
        return char if char in _LINE_BREAKS else match.group(0)

    return _TEXT_ESC_RE.sub(repl, text)


# ---------------------------------------------------------------- entries

_ENTRY_RE = re.compile(r"^(?P<indent>[ \t]*)(?P<bullet>[-*+]) <(?P<sig>[^<>\r\n]*)>(?: (?P<text>.*))?$")
_HEADING_RE = re.compile(r"^(#{1,6})[ \t]+(.*?)[ \t#]*$")


@dataclass
class Entry:
    """One fact: metadata (ordered, values are strings) and one logical text."""

    meta: dict[str, str]
    text: str

    @property
    def seq(self) -> int | None:
        try:
            return int(self.meta["seq"])
        except (KeyError, ValueError):
            return None

    @property
    def time(self) -> str | None:
        return self.meta.get("time")

    @property
    def ref(self) -> str | None:
        return self.meta.get("ref")

    def render(self) -> str:
        return f"- {render_signature(self.meta)} {escape_text(self.text)}"

    def to_dict(self) -> dict:
        return {"meta": dict(self.meta), "seq": self.seq, "text": self.text}


def parse_entry(line: str) -> Entry | None:
    """An entry line -> Entry; anything else (or a malformed signature) -> None."""
    line = line.rstrip("\r")
    match = _ENTRY_RE.match(line)
    if not match:
        return None
    meta = parse_signature(match.group("sig"))
    if meta is None:
        return None
    return Entry(meta, unescape_text(match.group("text") or ""))


def parse_heading(line: str) -> tuple[int, str] | None:
    match = _HEADING_RE.match(line.rstrip("\r"))
    if not match:
        return None
    return len(match.group(1)), match.group(2)


# ---------------------------------------------------------------- YAML


@functools.cache
def _yaml():
    """PyYAML with a loader/dumper pair that keep ISO times as strings (imported on first use).

    The safe loader would turn ``2023-05-25T13:14:00`` into a datetime and the
    dumper would write it back in another form; to us times are strings. The
    C (libyaml) classes are used when PyYAML was built with them.
    """
    import yaml

    loader_base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    dumper_base = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    loader = type("MemcliLoader", (loader_base,), {})
    dumper = type("MemcliDumper", (dumper_base,), {})
    for cls in (loader, dumper):
        cls.yaml_implicit_resolvers = {
            first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
            for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
        }
    dumper.add_representer(_FlowDict, lambda d, data: d.represent_mapping(
        "tag:yaml.org,2002:map", data.items(), flow_style=True))
    return yaml, loader, dumper


class _FlowDict(dict):
    """A mapping written on one line ({time: ..., op: ...}), as update_log items are."""


class YAMLError(ValueError):
    """Front matter that is not valid YAML; ``line`` is 0-based within the YAML text."""

    def __init__(self, problem: str, line: int | None):
        super().__init__(problem)
        self.problem = problem
        self.line = line


def load_yaml(text: str) -> Any:
    yaml, loader, _ = _yaml()
    try:
        return yaml.load(text, Loader=loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "context_mark", None) or getattr(exc, "problem_mark", None)
        raise YAMLError(getattr(exc, "problem", None) or "not valid YAML",
                        mark.line if mark is not None else None) from None


def dump_yaml(data: Any) -> str:
    yaml, _, dumper = _yaml()
    return yaml.dump(data, Dumper=dumper, sort_keys=False, allow_unicode=True,
                     default_flow_style=None, width=1 << 30)


# ---------------------------------------------------------------- documents

FRONT_KEYS = ("id", "summary", "token_count", "created_time", "updated_time", "update_log", "aux")


class FormatError(ValueError):
    """A document whose front matter cannot be read; ``line`` is 1-based."""

    def __init__(self, message: str, line: int | None = None):
        super().__init__(message)
        self.line = line


@dataclass
class Document:
    """A topic document (or CURRENT): front matter plus raw body lines.

    ``body`` holds the body's lines without their newlines; the file's last
    line ends with a newline when ``body[-1] == ""``. Line numbers used by the
    read-side tools are file line numbers: ``body_start + index``.
    """

    meta: dict[str, Any] = field(default_factory=dict)
    body: list[str] = field(default_factory=list)
    front_raw: str | None = None
    _meta_snapshot: Any = None

    @property
    def body_start(self) -> int:
        """File line number (1-based) of ``body[0]``."""
        if self.front_raw is None and not self.meta:
            return 1
        return self._front_text().count("\n") + 1

    def _front_text(self) -> str:
        if self.front_raw is not None and self.meta == self._meta_snapshot:
            return self.front_raw
        if not self.meta:
            return ""
        ordered = {k: self.meta[k] for k in FRONT_KEYS if k in self.meta}
        ordered.update({k: v for k, v in self.meta.items() if k not in ordered})
        if isinstance(ordered.get("update_log"), list):
            ordered["update_log"] = [_FlowDict(i) if isinstance(i, dict) else i for i in ordered["update_log"]]
        # kept as the raw front matter is kept when loaded: dumped again only once the metadata changes
        self.front_raw, self._meta_snapshot = "---\n" + dump_yaml(ordered) + "---\n", copy.deepcopy(self.meta)
        return self.front_raw

    def render(self) -> str:
        return self._front_text() + "\n".join(self.body)

    def lines(self) -> Iterator[tuple[int, str]]:
        """(file line number, line text) for every body line, without a trailing empty line."""
        start = self.body_start
        body = self.body[:-1] if self.body and self.body[-1] == "" else self.body
        for offset, line in enumerate(body):
            yield start + offset, line.rstrip("\r")

    def entries(self) -> Iterator[tuple[int, Entry]]:
        for lineno, line in self.lines():
            entry = parse_entry(line)
            if entry is not None:
                yield lineno, entry

    def append_lines(self, new_lines: list[str]) -> None:
        if self.body and self.body[-1] == "":
            self.body[-1:] = [*new_lines, ""]
        else:
            self.body.extend([*new_lines, ""])

    def mark_loaded(self) -> None:
        self._meta_snapshot = copy.deepcopy(self.meta)


def split_front_matter(text: str) -> tuple[int, str]:
    """(file line number of the body's first line, body text) without parsing YAML.

    The cheap path for scanning many documents (grep): a front matter that is
    never closed is treated as body, as :func:`parse_document`'s callers do.
    """
    if text.startswith("---\n") or text.startswith("---\r\n"):
        match = _FRONT_END_RE.search(text, 3)
        if match:
            return text.count("\n", 0, match.end()) + 1, text[match.end():]
    return 1, text


_FRONT_END_RE = re.compile(r"\n---\r?(?:\n|$)")


# front matter keys memcli reads, and the type each must have (a document may come from a teammate)
FRONT_TYPES: dict[str, type] = {"update_log": list, "token_count": int, "aux": dict}
FRONT_NAMES = {list: "list", int: "whole number", dict: "mapping"}


def parse_document(text: str) -> Document:
    """Parse a document; raises FormatError for a broken front-matter block."""
    if text.startswith("---\n") or text.startswith("---\r\n"):
        lines = text.split("\n")
        for index in range(1, len(lines)):
            if lines[index].rstrip("\r") == "---":
                front_raw = "\n".join(lines[: index + 1]) + "\n"
                yaml_text = "\n".join(lines[1:index])
                try:
                    meta = load_yaml(yaml_text) if yaml_text.strip() else {}
                except YAMLError as exc:
                    line = exc.line + 2 if exc.line is not None else None  # +1 for '---', +1 for 1-based
                    raise FormatError(f"invalid YAML front matter: {exc.problem}", line) from None
                if not isinstance(meta, dict):
                    raise FormatError("front matter is not a mapping", 2)
                for key, kind in FRONT_TYPES.items():
                    if key in meta and meta[key] is not None and (
                            not isinstance(meta[key], kind) or (kind is int and isinstance(meta[key], bool))):
                        raise FormatError(f"front matter: {key} must be a {FRONT_NAMES[kind]}, not "
                                          f"{type(meta[key]).__name__}", 2)
                doc = Document(meta=meta, body=lines[index + 1:], front_raw=front_raw)
                doc.mark_loaded()
                return doc
        raise FormatError("front matter starts with '---' but never ends", 1)
    doc = Document(meta={}, body=text.split("\n"), front_raw=None)
    doc.mark_loaded()
    return doc
