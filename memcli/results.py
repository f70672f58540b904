"""The base of every result memcli returns: a dataclass whose ``to_dict`` is one ``asdict``-style walk.

A field whose metadata says ``omit_empty`` is left out of the dictionary when
it is empty or None; a class may add derived values (``extra()``) or leave
fields out (metadata ``hidden``). Nested results are rendered by their own
``to_dict``, so what ``--json`` prints, what the Python API returns and what
the MCP server will send are the same thing.
"""

from __future__ import annotations

from dataclasses import field, fields, is_dataclass
from pathlib import Path
from typing import Any


def omit_empty(default: Any = None, **kwargs) -> Any:
    """A field left out of ``to_dict`` when empty (None, "", [], {})."""
    if callable(default) and not isinstance(default, type(None)):
        return field(default_factory=default, metadata={"omit_empty": True}, **kwargs)
    return field(default=default, metadata={"omit_empty": True}, **kwargs)


def hidden(default: Any = None, **kwargs) -> Any:
    """A field kept on the object for callers but not part of ``to_dict``."""
    if callable(default):
        return field(default_factory=default, metadata={"hidden": True}, repr=False, **kwargs)
    return field(default=default, metadata={"hidden": True}, repr=False, **kwargs)


class Result:
    """Mixin for result dataclasses: ``to_dict()`` gives plain JSON-ready data."""

    def extra(self) -> dict:
        """Derived values added to ``to_dict`` (none by default)."""
        return {}

    def to_dict(self) -> dict:
        out: dict = {}
        for f in fields(self):  # type: ignore[arg-type]
            if f.metadata.get("hidden"):
                continue
            value = getattr(self, f.name)
            if f.metadata.get("omit_empty") and value in (None, "", [], {}):
                continue
            out[f.name] = plain(value)
        out.update(self.extra())
        return out


def plain(value: Any) -> Any:
    """JSON-ready data from results, dataclasses, paths, tuples, sets and containers of them."""
    if isinstance(value, Result):
        return value.to_dict()
    if hasattr(value, "to_dict") and callable(value.to_dict):
        return value.to_dict()
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted(plain(v) for v in value)
    if isinstance(value, Path):
        return str(value)
    return value
