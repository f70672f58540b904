"""What is true now, and what was true on a day: the evidence readers' order when a fact changed.

Two entries say the same kind of thing about the same subject when one speaker said both, neither asks,
and their sentence vectors are close (:func:`same_fact`): a home city stated and then a move, a job and the
next one. For a question about what is true now (in the present tense, :func:`asks_now`: "Which company
does Idris work for?", not "What did Caroline research?"), among the entries it ranks best, a newer such
entry said at a later time and about as near the question in meaning is put before the older ones it
restates, or whose corrected entries it restates (:func:`newer_first`), so the reader sees the current value
first and the earlier ones after it, as history. (Both stay: a sentence vector does not tell a changed fact
from two events of one kind, so nothing is marked superseded by this measure; docs/benchmarks.md. What is
marked without a model is a correction: :mod:`memcli.ingest.corrections`.)

The reader's answer follows the same order (:func:`latest`, :func:`newest`): of the lines that answer nearly as
well with a value of the same kind (:func:`kinship`), the latest said; of the newer lines the ranking found
restating the answer's, the latest in which the reader finds a value of the same kind; of a line that names the
answer's value beside a new one, the new one (:func:`moved_on`). Lines there are the
reader's (:class:`memcli.retrieve.reading.Line`: ``doc``, ``line``, ``span``, ``margin``).

``as_of``: a question asked as of a day reads only what had been said by the end of it
(:class:`memcli.store.lines.Library` with ``as_of``), so what replaced a fact later is not there and
the fact is current again.

The constants are chosen on the tune half of a knowledge-update suite, ties broken on the development
pair's evidence order (``benchmarks/bench_updates.py --grid``; docs/benchmarks.md, "Facts that change").
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import lru_cache

from memcli.clauses import asking
from memcli.dates import calendar_kind
from memcli.index import LibraryIndex
from memcli.retrieve.evidence import speaker_of
from memcli.store.format import Entry
from memcli.store.lines import Library

Pick = tuple[str, int]  # (document, line) of an entry


@dataclass(frozen=True)
class Tuning:
    window: int = 8  # the ranking's best entries in which a newer restatement moves ahead (0: off)
    same: float = 0.4  # the cosine at which two entries of one speaker state the same kind of fact
    near: int = 3  # only an entry among this many nearest the question in meaning moves
    near_in: str = "head"  # ... of the ranking's best ``window`` entries ("head"), or of the whole store ("store")
    lag: float = 0.2  # how much less near the question in meaning a newer restatement may be and still count
    stating: bool = True  # only between entries that state (neither ends in a question)
    later: bool = True  # only a newer entry said at a later time than the older one (not the same time) moves
    present: bool = True  # only for a question in the present tense (:func:`asks_now`) ...
    past_same: float = math.inf  # ... or, for one in the past tense, between entries at least this similar (inf: none)
    corrected: bool = False  # an older entry that corrected another is also restated by what is close to that other


# Chosen by ``bench_updates.py --grid``: the best mean of the tune half's four ranking measures among the tunings
# that lower the development pair's gold entry first in the evidence order by at most 0.03 on each conversation;
# ties to the better gold-first, then the larger ``same``. Without the three gates (stating, later, present) the
# stage lowered it 0.395 / 0.420 -> 0.289 / 0.333 (conv-26 / conv-30) and shipped off; with them 0.388 / 0.407,
# and 0.395 / 0.407 with the near entries counted among the ranking's best rather than the whole store, where
# a short reply said to everyone ("Good to know, tell me more.") can be nearer a question than the line that
# answers it (docs/benchmarks.md, "Facts that change: the newer line first, for questions about now").
# A question in the past tense ("Where did Ana move to most recently?", as people also ask what is current)
# moves only entries at least 0.8 similar: the grid's second stage on the suite's past-tense
# questions (0.7 and under lowered conv-30's gold-first past the guard; docs/benchmarks.md, "... in the past tense").
# An entry that corrected another ("Correction: the company is Orbital Foods, not Northwind.") is restated by what
# is close to the entry it corrected too ("New job alert: Tessel hired me!" against "I've been at Northwind ...":
# the correction says the value, the corrected line what it is the value of).
# No constant; it moves no entry of the development pair nor of the update suite's tune half, one current line of
# its report half (docs/benchmarks.md, "Support by a line's meaning ... a correction's history").
DEFAULT = Tuning(past_same=0.8, corrected=True)
OFF = Tuning(window=0)


def when(entry: Entry) -> tuple[str, int]:
    """The order of what was said: its time, then its seq."""
    return entry.time or "", entry.seq or 0


def same_fact(a: Entry, b: Entry, va, vb, threshold: float) -> bool:
    """Whether ``b`` restates what ``a`` says of the same subject (one speaker, and the cosine of their
    normalized vectors ``va``/``vb`` at least ``threshold``)."""
    speaker = a.meta.get("speaker")
    return bool(speaker) and speaker == b.meta.get("speaker") and float(va @ vb) >= threshold


_AUX = re.compile(r"\b(do|does|is|are|has|have|did|was|were|had|will|would)\b", re.IGNORECASE)


def asks_now(question: str) -> bool:
    """Whether a question asks what is true now: its first auxiliary verb is in the present tense."""
    found = _AUX.search(question)
    return found is not None and found.group(1).lower() in {"do", "does", "is", "are", "has", "have"}


def newer_first(library: Library, index: LibraryIndex, ranked: list[Pick], similar: Mapping[Pick, float],
                tuning: Tuning | None = None, moves: list[tuple[Pick, Pick]] | None = None,
                question: str = "", now: bool = False) -> list[Pick]:
    """``ranked`` with each of its best ``tuning.window`` entries that is among the ``tuning.near``
    entries nearest the question in meaning (``similar``; of those best entries, or of the whole store:
    ``tuning.near_in``) moved just before the best-ranked older entry
    it restates (:func:`restates`); the rest of the ranking as it was. ``moves`` gets each (older, newer)
    pair that moved. A question in the past tense ("Where did Ana move to most recently?") asks about events
    as often as about what is true now, so with ``tuning.present`` its entries move only when they are at
    least ``tuning.past_same`` similar; ``now``: it asks what is true now, or was on a day (``as_of``), whatever
    its tense ("Where did Bram live in May 2023?")."""
    tuning = tuning or DEFAULT
    head = ranked[:tuning.window]
    if tuning.present and not now and not asks_now(question):  # a question in the past tense: only closer restatements
        if math.isinf(tuning.past_same):
            return ranked
        tuning = replace(tuning, same=tuning.past_same)
    if len(head) < 2 or not similar:
        return ranked
    entries = {pick: library.doc(pick[0]).entries[pick[1]] for pick in head}
    vectors = entry_vectors(index, entries)
    replaced = corrected_vectors(library, index, head) if tuning.corrected and vectors else {}
    if tuning.near_in == "head":
        nearest = set(sorted(head, key=lambda key: (-similar.get(key, 0.0), key))[:tuning.near])
    else:
        nearest = set(similar.top(tuning.near) if hasattr(similar, "top")
                      else sorted(similar, key=lambda key: (-similar[key], key))[:tuning.near])
    out: list[Pick] = []
    for pick in head:
        place = next((at for at, other in enumerate(out) if pick in nearest
                      and restates(entries, vectors, similar, other, pick, tuning, replaced.get(other, ()))),
                     len(out))
        if moves is not None and place < len(out):
            moves.append((out[place], pick))
        out.insert(place, pick)
    return out + ranked[len(head):]


def entry_vectors(index: LibraryIndex, entries: dict[Pick, Entry]) -> dict:
    """The sentence vectors of these entries (numpy arrays by pick); empty without the semantic signal."""
    vectors = index.vectors()
    return vectors.of(entries) if vectors is not None else {}


def corrected_vectors(library: Library, index: LibraryIndex, picks: list[Pick]) -> dict[Pick, list]:
    """For each of ``picks`` that corrected other entries (:meth:`Library.history`), those entries with their
    sentence vectors: a correction says the value, the entry it corrects what the value is of. An entry's
    exact repeats (also kept as its history) say nothing it does not, and are not encoded (a question's path)."""
    found = {}
    for pick in picks:
        own = library.doc(pick[0]).entries[pick[1]].text
        history = list({e.text: e for e in library.history(pick) if e.text != own}.values())
        if history:
            found[pick] = history
    keyed = {(pick, at): entry for pick, history in found.items() for at, entry in enumerate(history)}
    vectors = entry_vectors(index, keyed) if keyed else {}
    return {pick: [(entry, vectors[(pick, at)]) for at, entry in enumerate(history) if (pick, at) in vectors]
            for pick, history in found.items()}


def restates(entries: dict, vectors: dict, similar: Mapping[Pick, float], old: Pick, new: Pick,
             tuning: Tuning, replaced=()) -> bool:
    """Whether entry ``new`` is a later statement of what ``old`` says (:func:`same_fact`), or of what an
    entry ``old`` corrected says (``replaced``: (entry, vector) pairs), and about as near the question in
    meaning (``similar``: cosine with the question; within ``tuning.lag``)."""
    a, b = entries[old], entries[new]
    if tuning.stating and (asking(a.text) or asking(b.text)):  # a question states no fact to restate
        return False
    if tuning.later and not (a.time or "") < (b.time or ""):
        return False
    return (old in vectors and new in vectors and when(a) < when(b)
            and similar.get(new, 0.0) >= similar.get(old, 0.0) - tuning.lag
            and (same_fact(a, b, vectors[old], vectors[new], tuning.same)
                 or any(same_fact(e, b, v, vectors[new], tuning.same) for e, v in replaced)))


# ---------------------------------------------------------------- the reader's answer when a fact changed

def latest(library: Library, lines: list, threshold: float, within: float, kin: float | None = None,
           alike=None):
    """The best line, or when others answer nearly as well (a margin within ``within`` of the best's, and
    over the threshold) the latest said of them: a fact that changed is answered with its current value.
    ``kin``: only lines whose span is at least this alike to the best's by ``alike`` (a value of the same
    kind) count."""
    best = lines[0]
    if within <= 0 or best.margin < threshold:
        return best
    close = [x for x in lines if x.margin >= max(threshold, best.margin - within)
             and (x is best or kin is None or alike is None or alike(best.span, x.span) >= kin)]
    return max(close, key=lambda x: said(library, x))


def moved_on(library: Library, best, pool: list, threshold: float, floor: float | None, kin: float | None = None,
             alike=None):
    """``best``, or the new value of the latest line of ``pool`` that says ``best``'s value changed: a line, said
    no earlier than ``best``'s, in which the reader finds ``best``'s value and another value (its best span and the
    best beside it, ``Line.second``) that no line said before it answers with ("I quit badminton and took up
    cricket." after "Badminton is my way to unwind."; "Morgan and I split up; I'm with Jordan now." after "Morgan
    and I have been together two years."). The new value's margin is at least ``floor`` (None: never moved) and,
    with ``kin``, it is a value of the same kind by ``alike``; an earlier line of the same speaker answers with the
    old value (in a group chat another's line naming a value is no change of it)."""
    if floor is None:
        return best
    start = said(library, best)
    answering = [x for x in pool if x.margin >= threshold]

    def new_value(x) -> tuple[str, float] | None:
        if not x.second:
            return None
        if same_value(x.span, best.span):
            old, new, margin = x.span, x.second, x.margin - x.gap
        elif x is not best and same_value(x.second, best.span):
            old, new, margin = x.second, x.span, x.margin
        else:
            return None
        now, who = said(library, x), speaker_of(entry_of(library, x))
        before = [y for y in answering if y is not x and said(library, y) < now]
        if (margin < floor or any(same_value(y.span, new) for y in before)
                or not any(same_value(y.span, old) for y in before if speaker_of(entry_of(library, y)) == who)
                or (kin is not None and alike is not None and alike(old, new) < kin)):
            return None
        return new, margin

    changed = [(x, found) for x in pool if (x is best or said(library, x) > start) and (found := new_value(x))]
    if not changed:
        return best
    x, (new, margin) = max(changed, key=lambda pair: said(library, pair[0]))
    return replace(x, span=new, margin=margin, second="", gap=float("inf"))


_WORD = re.compile(r"\w+")


def same_value(a: str, b: str) -> bool:
    """Whether two spans name the same value: the words of one are among the other's ("a tortoise", "Tortoise")."""
    x, y = set(_WORD.findall(a.lower())), set(_WORD.findall(b.lower()))
    return bool(x and y) and (x <= y or y <= x)


def entry_of(library: Library, x) -> Entry:
    """A line's entry."""
    return library.doc(x.doc).entries[x.line]


def said(library: Library, x) -> tuple[str, int]:
    """When a line's entry was said (:func:`when`)."""
    return when(entry_of(library, x))


_NAMED = frozenset({"PROPN", "NUM"})  # a name or a number (the tagger's reading of a span)


@lru_cache(maxsize=4096)
def _named(span: str) -> frozenset[str]:
    from memcli.tagging.tagger import tagged

    return frozenset(tag for _, tag in tagged(span)) & _NAMED


def kinship(reader):
    """How alike two spans are as values: 1 when both hold a name or both a number (memcli's tagger: a
    company for a company, a rent for a rent, which sentence vectors tell apart poorly), else the likeness of
    their meaning (``Reader.alike``); 0 for two parts of the calendar of different kinds ("on Thursdays" and
    "June": :func:`memcli.dates.calendar_kind`), which are no two values of one thing."""

    def alike(a: str, b: str) -> float:
        if (one := calendar_kind(a)) and (other := calendar_kind(b)) and one != other:
            return 0.0
        return 1.0 if _named(a) & _named(b) else reader.alike(a, b)

    return alike


def newest(library: Library, best, pool: list, restated: dict, floor: float | None,
           kin: float | None = None, alike=None):
    """``best``, or the latest of the newer lines that restate it (``restated``: an older entry to the newer
    ones, :func:`newer_first`) in which the reader finds a span with a margin of at
    least ``floor`` (and, with ``kin``, a span at least that alike to the one it replaces by ``alike``: a
    value of the same kind), and so on from that one: a fact that changed is answered with its current value."""
    if floor is None or not restated:
        return best
    at = {(x.doc, x.line): x for x in pool}
    seen = {(best.doc, best.line)}
    while newer := [at[n] for n in restated.get((best.doc, best.line), ())
                    if n in at and n not in seen and at[n].margin >= floor
                    and (kin is None or alike is None or alike(best.span, at[n].span) >= kin)]:
        best = max(newer, key=lambda x: said(library, x))
        seen.add((best.doc, best.line))
    return best
