"""What is true now, and what was true on a day: the evidence readers' order when a fact changed.

Two entries say the same kind of thing about the same subject when one speaker said both and their
sentence vectors are close (:func:`same_fact`): a home city stated and then a move, a meeting day and
its correction. Among the entries a question ranks best, a newer such entry that is about as near the
question in meaning is put before the older ones it restates (:func:`newer_first`), so the answer reads
the current value first and the earlier ones after it, as history. (Both stay: a sentence vector does
not tell a changed fact from two events of one kind, so nothing is marked superseded by this measure;
docs/benchmarks.md. What is marked without a model is a correction: :mod:`memcli.ingest.corrections`.)

``as_of``: a question asked as of a day reads only what had been said by the end of it
(:class:`memcli.store.lines.Library` with ``as_of``), so what replaced a fact later is not there and
the fact is current again.

The constants are chosen on the tune half of a knowledge-update suite and checked on the development
pair (``benchmarks/bench_updates.py``; docs/benchmarks.md, "Facts that change").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from memcli.index import LibraryIndex
from memcli.store.format import Entry
from memcli.store.lines import Library

Pick = tuple[str, int]  # (document, line) of an entry


@dataclass(frozen=True)
class Tuning:
    window: int = 8  # the ranking's best entries in which a newer restatement moves ahead (0: off)
    same: float = 0.5  # the cosine at which two entries of one speaker state the same kind of fact
    near: int = 3  # only an entry among this many nearest the question in meaning moves
    lag: float = 0.2  # how much less near the question in meaning a newer restatement may be and still count


# Off by default: it ranks the current line first for 0.80 / 0.73 of the knowledge-update suite's
# current-value questions (0.48 / 0.23 without), but the default answer's accuracy there barely moves, it
# cost the development pair's single-hop answers 0.014 F1, and the example's --kv-compose answer to
# "Which agency did Caroline choose?" became "I don't know" (docs/benchmarks.md, "Facts that change").
# ON (the constants chosen on the suite's tune half) is what the benchmark and the tests measure.
ON = Tuning()
DEFAULT = Tuning(window=0)


def when(entry: Entry) -> tuple[str, int]:
    """The order of what was said: its time, then its seq."""
    return entry.time or "", entry.seq or 0


def same_fact(a: Entry, b: Entry, va, vb, threshold: float) -> bool:
    """Whether ``b`` restates what ``a`` says of the same subject (one speaker, and the cosine of their
    normalized vectors ``va``/``vb`` at least ``threshold``)."""
    speaker = a.meta.get("speaker")
    return bool(speaker) and speaker == b.meta.get("speaker") and float(va @ vb) >= threshold


def newer_first(library: Library, index: LibraryIndex, ranked: list[Pick], similar: Mapping[Pick, float],
                tuning: Tuning | None = None, moves: list[tuple[Pick, Pick]] | None = None) -> list[Pick]:
    """``ranked`` with each of its best ``tuning.window`` entries that is among the ``tuning.near``
    entries nearest the question in meaning (``similar``) moved just before the best-ranked older entry
    it restates (:func:`restates`); the rest of the ranking as it was. ``moves`` gets each (older,
    newer) pair that moved."""
    tuning = tuning or DEFAULT
    head = ranked[:tuning.window]
    if len(head) < 2 or not similar:
        return ranked
    entries = {pick: library.doc(pick[0]).entries[pick[1]] for pick in head}
    vectors = entry_vectors(index, entries)
    nearest = set(similar.top(tuning.near) if hasattr(similar, "top")
                  else sorted(similar, key=lambda key: (-similar[key], key))[:tuning.near])
    out: list[Pick] = []
    for pick in head:
        place = next((at for at, other in enumerate(out) if pick in nearest
                      and restates(entries, vectors, similar, other, pick, tuning)), len(out))
        if moves is not None and place < len(out):
            moves.append((out[place], pick))
        out.insert(place, pick)
    return out + ranked[len(head):]


def entry_vectors(index: LibraryIndex, entries: dict[Pick, Entry]) -> dict:
    """The sentence vectors of these entries (numpy arrays by pick); empty without the semantic signal."""
    vectors = index.vectors()
    return vectors.of(entries) if vectors is not None else {}


def restates(entries: dict, vectors: dict, similar: Mapping[Pick, float], old: Pick, new: Pick,
             tuning: Tuning) -> bool:
    """Whether entry ``new`` is a later statement of what ``old`` says (:func:`same_fact`) and about as
    near the question in meaning (``similar``: cosine with the question; within ``tuning.lag``)."""
    a, b = entries[old], entries[new]
    return (old in vectors and new in vectors and when(a) < when(b)
            and similar.get(new, 0.0) >= similar.get(old, 0.0) - tuning.lag
            and same_fact(a, b, vectors[old], vectors[new], tuning.same))
