"""JSON and TOML parsed as data: input nested too deep for the parser (``[[[[...`` 100,000 times) is a
:class:`TooDeep`, a ``ValueError`` like any other malformed input (and still a ``RecursionError`` for the readers
that say "nested too deeply" in their own words), never an internal error. Every place memcli parses JSON or
TOML goes through here."""

from __future__ import annotations

import json


class TooDeep(ValueError, RecursionError):
    """The document nests deeper than the parser can follow."""


def loads(text: str | bytes, **options) -> object:
    """``json.loads`` (with its options), raising :class:`TooDeep` (a ``ValueError``) for nesting too deep."""
    try:
        return json.loads(text, **options)
    except RecursionError:
        raise TooDeep("JSON nested too deeply") from None


def load(handle, **options) -> object:
    """``json.load`` of an open file, as :func:`loads`."""
    return loads(handle.read(), **options)


def toml_loads(text: str) -> dict:
    """``tomllib.loads``, raising ``tomllib.TOMLDecodeError`` for nesting too deep (as for any bad TOML)."""
    import tomllib  # not on the fast paths' way: they read JSON only

    try:
        return tomllib.loads(text)
    except RecursionError:
        raise tomllib.TOMLDecodeError("TOML nested too deeply") from None
