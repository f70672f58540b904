"""The time a question asks about, when its words say one: "Where did Bram live as of 8 December 2023?",
"Which company did Bram work for in May 2023?", "What car did Bram drive before the Subaru Outback?".

Such a question asks what was true then, so it is answered as ``ask --as-of`` answers (from what had been said
by then: :mod:`memcli.retrieve.current`):

- a day, a month or a year written out with its year after "as of", "by", "on", "in" or "during" (:func:`dated`).
  "As of" and "by" only bound: what had been said by the end of it, read without those words. "On", "in"
  and "during" may also say which event is meant ("the painting Melanie showed on October 13, 2023"): what
  had been said within :data:`GRACE` days after it (what happened on a day is often told a few days later,
  "I just got accepted"), read with the date in the question. A date without a year, or a relative one
  ("last May"), sets no bound: which year it means is the question's, not memory's;
- "previous", "previously", "former", "formerly", "before that" (:func:`previous`): the value before the one true
  now, so what had been said before the line the question without the word is answered from (two readings:
  ``retrieve.ask`` answers that question first; only with memcli's reader, which says its line);
- "before" and what came after (:func:`before`): what had been said before the first line that says it (of
  the entries the ranking finds best for those words, those holding the rarest of the words they hold, or one
  of several as rare, and the most of them weighed by their rarity; the earliest said of those). The ranking
  and the reader read the question without those words ("before the Subaru Outback" names no fact of the
  answer). Nothing found sets no bound.
"""

from __future__ import annotations

import calendar
import datetime as dt
import re
from dataclasses import dataclass

from memcli.dates import MONTH, MONTHS
from memcli.store.format import Entry
from memcli.store.lines import Library
from memcli.terms import term_set

_DAY = r"(?:the )?(?P<day>\d{1,2})(?:st|nd|rd|th)?"
_DATE = (rf"(?P<iso>\d{{4}}-\d\d-\d\d)|{_DAY} (?:of )?(?P<month>{MONTH}),? (?P<year>\d{{4}})"
         rf"|(?P<month2>{MONTH}) (?P<day2>\d{{1,2}})(?:st|nd|rd|th)?,? (?P<year2>\d{{4}})"
         rf"|(?:the end of )?(?P<month3>{MONTH}),? (?P<year3>\d{{4}})|(?P<year4>\d{{4}})")
DATED = re.compile(rf"\b(?:as of|as at|by|on|in|during)\s+(?:{_DATE})\b", re.I)
BEFORE_WORD = re.compile(r"\bbefore\s+", re.I)
GRACE = 7  # days after a day, month or year asked "on"/"in"/"during" whose lines still count: the longest delay
# between an event's day and the day it was told on the development pair (the 31 entries whose relative date
# names a day, when= against time=: median 1, 9 in 10 within 3, at most 7)
STRICT = re.compile(r"(?:as of|as at|by)\b", re.I)  # "as of 8 December 2023": by the end of that day, no grace
DURATION = re.compile(r"\s*how (?:long|soon|much time|many (?:minutes|hours|days|weeks|months|years))\b", re.I)
# "How long before Caroline can be matched?" asks a duration: its "before" bounds nothing
PREVIOUS = re.compile(r"\b(?:previous(?:ly)?|former(?:ly)?|before that)\b", re.I)  # "Bram's previous car"
PLACES = 12  # the ranking's best entries for "before"'s words that are looked at for the first line saying it


@dataclass(frozen=True)
class AskedTime:
    as_of: str  # YYYY-MM-DD or YYYY-MM-DDTHH:MM: answered from what had been said by then
    phrase: str  # the words of the question that say it
    question: str  # the question as the ranking and the reader read it (without words that only bound it)
    line: tuple[str, int] | None = None  # "before": the first line that says what it names

    def to_dict(self) -> dict:
        said = {"as_of": self.as_of, "from": self.phrase}
        return said | ({"line": f"{self.line[0]}:{self.line[1]}"} if self.line else {})


def _month(name: str) -> int:
    return next(k for k, m in enumerate(MONTHS, 1) if m.lower().startswith(name.rstrip(".").lower()[:3]))


def _last_day(found: re.Match) -> str | None:
    g = found.groupdict()
    try:
        if g["iso"]:
            year, month, day = (int(x) for x in g["iso"].split("-"))
        elif g["year"] or g["year2"]:
            year = int(g["year"] or g["year2"])
            month, day = _month(g["month"] or g["month2"]), int(g["day"] or g["day2"])
        elif g["year3"]:
            year, month = int(g["year3"]), _month(g["month3"])
            day = calendar.monthrange(year, month)[1]
        else:
            year, month, day = int(g["year4"]), 12, 31
        if not 1900 <= year <= 2999:
            return None
        calendar.weekday(year, month, day)  # a day the calendar has
    except ValueError:
        return None
    return f"{year:04d}-{month:02d}-{day:02d}"


@dataclass(frozen=True)
class Clause:
    """Words of a question that bound its time: where they are, and what "before" names."""

    start: int
    end: int
    text: str
    what: str = ""


def _leading(question: str, start: int) -> int:
    """``start`` moved back over the blanks and the one comma before it (", before ...", " in May 2023")."""
    while start > 0 and question[start - 1].isspace():
        start -= 1
    return start - 1 if start > 0 and question[start - 1] == "," else start


def before_clause(question: str) -> Clause | None:
    """The "before X" that ends a question ("Where did Umar live before Porto?"): the first "before" after the
    last sentence's stop, found in one pass (a question of any length costs its length)."""
    core = question.rstrip("?!. \t\r\n")
    cut = max(core.rfind("?"), core.rfind("!"), core.rfind(".")) + 1
    found = BEFORE_WORD.search(core, cut)
    if found is None or not (what := core[found.end():].strip()):
        return None
    start = _leading(question, found.start())
    return Clause(start, len(core), question[start:len(core)], what)


def _without(question: str, found: Clause | re.Match) -> str:
    start = found.start if isinstance(found, Clause) else _leading(question, found.start())
    end = found.end if isinstance(found, Clause) else found.end()
    rest = re.sub(r"\s+([?!.,])", r"\1", question[:start] + question[end:])
    return re.sub(r"  +", " ", rest).strip(" ,") or question


def dated(question: str) -> AskedTime | None:
    """The bound a day, month or year written with its year sets ("as of 8 December 2023", "in May 2023",
    "on 2023-05-07", "in 2023"): the last day of it, the question read without the words (after "as of", "by"),
    or :data:`GRACE` days more, the question read as asked; None when the question writes none."""
    for found in DATED.finditer(question):
        if (day := _last_day(found)) is not None:
            phrase = found.group().strip(" ,")
            if STRICT.match(phrase):
                return AskedTime(day, phrase, _without(question, found))
            return AskedTime((dt.date.fromisoformat(day) + dt.timedelta(days=GRACE)).isoformat(), phrase, question)
    return None


def before(question: str, store, index) -> AskedTime | None:
    """The bound "before ..." sets: the minute before the first line that says what follows the word, as
    the module's text says it is found; None when the question has no such clause (or asks how long: a
    duration, :data:`DURATION`), its words name nothing memory holds, or that line has no time."""
    found = None if DURATION.match(question) else before_clause(question)
    if found is None or not (wanted := term_set(found.what)):
        return None
    from memcli.retrieve.evidence_reader import ranked_entries

    library = Library(store, index.parsed)
    idf = index.idf()
    weight = {t: idf(t) for t in wanted}
    entries: dict[tuple[str, int], Entry] = {}
    words: dict[tuple[str, int], set[str]] = {}  # the clause's words each of them holds
    for pick in ranked_entries(library, index, found.what)[:PLACES]:
        entry = library.doc(pick[0]).entries.get(pick[1])
        if entry is not None and entry.time and (own := wanted & term_set(entry.text)):
            entries[pick], words[pick] = entry, own
    if not entries:
        return None
    rarest = max(weight[t] for own in words.values() for t in own)  # of its words said ("going" may never be)
    held = {pick: sum(weight[t] for t in own) for pick, own in words.items() if any(weight[t] == rarest for t in own)}
    most = max(held.values())
    pick = min((p for p in held if held[p] == most), key=lambda p: (entries[p].time, entries[p].seq or 0))
    return AskedTime(_minute_before(entries[pick].time), found.text.strip(" ,"), _without(question, found), pick)


def previous(question: str) -> tuple[str, str] | None:
    """For a question that asks the value before the current one ("What was Bram's previous car?", "Where did
    Bram live previously?"): the question without those words ("What was Bram's car?", every one of them: asked
    twice is asked once) and the first; else None."""
    clause = before_clause(question)
    if clause and term_set(clause.what):
        return None
    found = list(PREVIOUS.finditer(question))
    if not found:
        return None
    pieces, at = [], 0
    for each in found:  # one pass over the question, however many times it says the word
        pieces.append(question[at:max(at, _leading(question, each.start()))])
        at = each.end()
    rest = re.sub(r"\s+([?!.,])", r"\1", "".join(pieces) + question[at:])
    return re.sub(r"  +", " ", rest).strip(" ,") or question, found[0].group()


def before_line(phrase: str, question: str, line: tuple[str, int], time: str | None) -> AskedTime | None:
    """The bound just before ``line`` (said at ``time``), which answers ``question`` now: :func:`previous`'s."""
    return AskedTime(_minute_before(time), phrase, question, line) if time else None


def _minute_before(time: str) -> str:
    """The moment just before an entry's ``time`` as ``as_of`` reads one: the minute before, or the day before."""
    try:
        moment = dt.datetime.fromisoformat(time[:16] if "T" in time else time[:10])
        if "T" not in time:
            return (moment - dt.timedelta(days=1)).strftime("%Y-%m-%d")
        return (moment - dt.timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M")
    except (ValueError, OverflowError):  # no time memcli reads, or the calendar's first minute: nothing before it
        return time


def asked_time(question: str, store, index) -> AskedTime | None:
    """The time ``question`` asks about (:func:`dated`, else :func:`before`), or None."""
    return dated(question) or before(question, store, index)
