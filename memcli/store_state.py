"""What a store's ``state.json`` must hold, on ``json`` alone: the store reads its state through these
rules, and the MCP server's fast path (:mod:`memcli.mcp_start`) checks a store with them before it
answers a host, without importing the store's code."""

from __future__ import annotations

from memcli import parsing

STORE_FORMAT = 2  # the newest this memcli reads; 2: a shared store (unique seqs), a plain store stays 1
ORIGINS = 10_000
UNIQUE = "unique"
COUNTERS = (("format", 1), ("next_seq", 1), ("next_tick", 0))  # a state's whole-number values, each's least


def whole(value: object, least: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= least


def is_origin(value: object) -> bool:
    return whole(value, 1) and value < ORIGINS


def state_problem(state: object) -> str | None:
    """What is wrong with a ``state.json`` (it may come from a teammate's commit), or None."""
    if not isinstance(state, dict):
        return "not a JSON object"
    for key, least in COUNTERS:
        if key in state and not whole(state[key], least):
            return f"{key} must be a whole number of at least {least}, not {state[key]!r}"[:300]
    origins = state.get("origins", [])
    if not isinstance(origins, list) or not all(is_origin(o) for o in origins):
        return f"origins must be a list of numbers from 1 to {ORIGINS - 1}, not {origins!r}"[:300]
    if state.get("ids", UNIQUE) != UNIQUE:
        return f"ids must be {UNIQUE!r} or absent, not {state['ids']!r}"[:300]
    return None


def decode(raw: bytes) -> tuple[dict | None, str | None]:
    """(the state, None) or (None, what is wrong with it) for the bytes of a ``state.json``."""
    try:
        state = parsing.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as exc:
        return None, f"unreadable: {exc}"
    problem = state_problem(state)
    return (None, problem) if problem else (state, None)


def too_new(state: dict) -> bool:
    """A state written by a newer memcli, which this one must not read."""
    return state.get("format", STORE_FORMAT) > STORE_FORMAT
