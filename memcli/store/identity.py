"""Entry identities: the seq every new entry gets, unique across the clones of a shared store.

A store that is not shared numbers its entries 1, 2, 3... (``state.json``'s ``next_seq``). A store
shared through git (``memcli init --git`` sets ``"ids": "unique"`` in ``state.json``) gives each
clone an **origin**, a number from 1 to 9999 kept in ``origin.json`` (never committed: a new clone
draws its own, avoiding every origin the shared ``state.json`` lists), and numbers its entries

    seq = tick * 10000 + origin

where ``tick`` is the time of writing in milliseconds, raised to one more than the last tick this
clone used, so a clone's seqs only grow and two clones never write the same seq unless they drew
the same origin, which the list of known origins prevents once they have synced. Seqs stay
integers, sort by the time they were written, and are the entries' identity in every other part
of memcli (citations, the conservation guard, forget, the merge driver).

Old stores are read as they are: their small seqs stay; a shared store's state moves to format 2
on its first write after ``memcli init --git``.
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

from memcli import parsing
from memcli.store.atomic import atomic_write
from memcli.store_state import COUNTERS, ORIGINS, UNIQUE, is_origin, whole

ORIGIN_FILE = "origin.json"
FORGOTTEN = "forgotten.txt"  # forget's tombstones: seqs only, one a line


def tombstone_seqs(text: str) -> set[int]:
    """The seqs a ``forgotten.txt`` holds (a line that is not a number is left out)."""
    return {int(word) for word in text.split() if word.isdigit()}


def valid_values(state: object) -> dict:
    """A state with only the values :func:`state_problem` accepts (a damaged counter dropped, damaged
    origins left out): what the merge driver merges, so a merge never spreads the damage."""
    if not isinstance(state, dict):
        return {}
    out = {k: v for k, v in state.items() if k not in dict(COUNTERS) or whole(v, dict(COUNTERS)[k])}
    out["origins"] = [o for o in state.get("origins", []) if is_origin(o)] if isinstance(state.get("origins"), list) else []
    if out.get("ids", UNIQUE) != UNIQUE:
        del out["ids"]
    return out


def is_shared(state: dict) -> bool:
    return state.get("ids") == UNIQUE


def origin_of(seq: int) -> int | None:
    """The origin a unique seq was written by (None for a plain store's small seq)."""
    return seq % ORIGINS if seq >= ORIGINS * 10**9 else None


def _place(root: Path) -> dict:
    """What tells this copy of the store from another: its folder, the folder's inode and the machine
    (a home folder restored or copied, even to the same path, is another folder or another machine)."""
    try:
        machine = Path("/etc/machine-id").read_text(encoding="utf-8").strip()[:64]
    except OSError:
        machine = ""
    try:
        info = root.stat()
        inode = f"{info.st_dev}:{info.st_ino}"
    except OSError:
        inode = ""
    return {"path": str(root.absolute()), "folder": inode, "machine": machine}


def drawn_origin(root: Path) -> int | None:
    """This clone's origin if it has drawn one (for ``memcli status``), without drawing it."""
    try:
        data = parsing.loads((root / ORIGIN_FILE).read_text(encoding="utf-8"))
        place = _place(root)
        if all(data.get(key, place[key]) == place[key] for key in place) and 1 <= int(data["origin"]) < ORIGINS:
            return int(data["origin"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass
    return None


def local_origin(root: Path, state: dict, *, avoid: set[int] = frozenset()) -> int:
    """This clone's origin, drawn (and written to ``origin.json``) the first time it is needed.

    ``origin.json`` records the folder (path and inode) and machine it was drawn for: a store copied,
    restored or cloned elsewhere draws anew, so two copies never share one by accident (``memcli
    sync`` catches what this cannot: :func:`redraw`)."""
    drawn = drawn_origin(root)
    if drawn is not None and drawn not in avoid:
        return drawn
    taken = {int(o) for o in state.get("origins", [])} | set(avoid)
    free = [o for o in range(1, ORIGINS) if o not in taken]
    origin = random.SystemRandom().choice(free or list(range(1, ORIGINS)))
    atomic_write(root / ORIGIN_FILE, json.dumps({"origin": origin, **_place(root)}) + "\n")
    return origin


def redraw(root: Path, state: dict) -> int:
    """A new origin for this clone, when another clone turned out to write with the same one."""
    current = drawn_origin(root)
    return local_origin(root, state, avoid={current} if current is not None else set())


class Seqs:
    """Hands out the seqs of one write; :meth:`save` puts what it used into the state to commit.

    ``existing`` are seqs already in CURRENT (a hand-edited buffer may hold more than the state
    knows of)."""

    def __init__(self, root: Path, state: dict, existing: list[int]):
        self.state = state
        self.shared = is_shared(state)
        if self.shared:
            self.origin = local_origin(root, state)
            own = [s // ORIGINS for s in existing if origin_of(s) == self.origin]
            self._next = max(int(state.get("next_tick", 0)), max(own, default=0) + 1)
        else:
            self._next = max(int(state.get("next_seq", 1)), max(existing, default=0) + 1)
        self.first: int | None = None
        self.last: int | None = None

    def take(self) -> int:
        if self.shared:
            tick = max(self._next, int(time.time() * 1000))
            self._next = tick + 1
            seq = tick * ORIGINS + self.origin
        else:
            seq = self._next
            self._next += 1
        if self.first is None:
            self.first = seq
        self.last = seq
        return seq

    @property
    def used(self) -> bool:
        return self.first is not None

    def save(self) -> dict:
        """The state with this write's counters (and, shared, this clone's origin among the known)."""
        if self.shared:
            self.state["next_tick"] = self._next
            self.state["origins"] = sorted({*map(int, self.state.get("origins", [])), self.origin})
            self.state["format"] = max(int(self.state.get("format", 1)), 2)
        else:
            self.state["next_seq"] = self._next
        return self.state
