"""Event time: the day a line speaks of, from the relative date in it ("yesterday", "last Friday", "two
days ago", "next month") read against the time it was said.

Ingest keeps the result in the entry's signature (``when=2023-05-07``; a month ``2023-04``, a year
``2022``) beside the record time (``time=``, when it was said); an answer to "when" says it
the way people write dates: a day resolved exactly is its date ("7 May 2023"), a month "April 2023", a
year "2022", and what stays relative keeps its anchor ("the week before 9 June 2023", "the friday before
15 July 2023"), since a week or the day of a week named from another day is what the line says.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

from memcli.errors import InputError, UsageError

WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")
_COUNTS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7}
_SHORT_DAYS = {"Mon": "monday", "Tue": "tuesday", "Tues": "tuesday", "Wed": "wednesday", "Thu": "thursday",
               "Thur": "thursday", "Thurs": "thursday", "Fri": "friday", "Sat": "saturday", "Sun": "sunday"}
_DAY = "(?:" + "|".join(WEEKDAYS) + "|(?-i:" + "|".join(sorted(_SHORT_DAYS, key=len, reverse=True)) + r")\b\.?)"
RELATIVE = re.compile(
    r"\b(yesterday|today|tonight|this morning|last night|"
    r"(?:last|next) (?:week(?:end)?|month|year|" + _DAY + r")|"
    r"(?:this |the )?past (?:week(?:end)?|" + _DAY + r")|this (?:week|month|year)|"
    r"(?:\d+|an?|one|two|three|four|five|six|seven|(?:a )?couple of|(?:a )?few) (?:days?|weeks?|months?|years?) ago)\b",
    re.I)


# a month's name or its first three letters ("Sep.")
MONTH = r"(?:" + "|".join(m[:3] + (r"(?:" + m[3:] + r")?" if len(m) > 3 else "") for m in MONTHS) + r")\.?"
STATED = re.compile(r"\b(?:\d{4}-\d\d-\d\d|\d{1,2}(?:st|nd|rd|th)? (?:of )?" + MONTH + r"(?:,? \d{4})?|"
                    + MONTH + r" \d{1,2}(?:st|nd|rd|th)?\b(?:,? \d{4})?)", re.I)


RECURRING = re.compile(r"\b(?:(?:every|each) (?:" + "|".join(WEEKDAYS) + r")(?: (?:morning|afternoon|evening|night))?|"
                       r"(?:" + "|".join(WEEKDAYS) + r")s)\b", re.I)


def recurring_day(text: str) -> str | None:
    """A day of the week the text says something happens on each week ("every Wednesday evening", "on
    Thursdays"), as written, or None: the answer to when a weekly thing is, which no one date is."""
    found = RECURRING.search(text)
    return found.group() if found else None


_MONTH_NAMED = re.compile(r"\b(?:(last|next|this) )?(" + "|".join(MONTHS) + r")\b(?:,? (\d{4})\b)?")
NAMED_DAY = re.compile(r"\b(?:(?:next|this|last) )?(?:" + "|".join(WEEKDAYS) + r")s?\b", re.I)  # "on Thursday(s)"


def _months(text: str):
    """The months a text names by name and not as part of a day it writes out (:data:`STATED`): each match of
    :data:`_MONTH_NAMED`. "May" counts only with a year or after "in"/"of" ("May I ..." is no month)."""
    days = [found.span() for found in STATED.finditer(text)]
    for found in _MONTH_NAMED.finditer(text):
        relation, name, year = found.groups()
        if name == "May" and not year and not relation and text[:found.start()].lower().split()[-1:] not in (["in"], ["of"]):
            continue
        if not any(a <= found.start(2) < b for a, b in days):
            yield found


def named_month(text: str, time: str | None) -> str | None:
    """The month a text names by its name ("in June", "June, 2023", "last March"), as "June 2023": its year the one
    written, else read against ``time`` (the entry's ISO time): "last" the latest before that month, "next" the
    first after it, else its own year; None when it names none, or when no year is written and ``time`` is
    not a date. Only a capitalised name counts."""
    day = said_day(time)
    for found in _months(text):
        relation, name, year = found.groups()
        month = MONTHS.index(name) + 1
        if year:
            return f"{name} {year}"
        if day is None:
            return None
        if relation == "last":
            return f"{name} {day.year - (month >= day.month)}"
        if relation == "next":
            return f"{name} {day.year + (month <= day.month)}"
        return f"{name} {day.year}"
    return None


def calendar_kind(text: str) -> str | None:
    """What a span names of the calendar, by its words: a "date" (one written out, "21 April", or a month, "June",
    "June 2023"), a "weekday" ("Thursday", "on Thursdays"), else None. Two values of different kinds ("on
    Thursdays", "June") are not two values of one thing; a deadline moved from "June" to "July 7" is."""
    if STATED.search(text) or next(_months(text), None):
        return "date"
    if NAMED_DAY.search(text):
        return "weekday"
    return None


def stated_date(text: str) -> str | None:
    """A date the text writes out ("April 18", "18 April 2024", "2024-04-18"), as written, or None."""
    found = STATED.search(text)
    return found.group() if found else None


@dataclass(frozen=True)
class EventTime:
    when: str | None  # for the signature: YYYY-MM-DD, YYYY-MM or YYYY; None for a week (no one day)
    spoken: str  # for an answer: "7 May 2023", "April 2023", "2022", "the week before 9 June 2023"
    phrase: str  # the words of the line it was read from


def said_day(time: str | None) -> dt.date | None:
    try:
        return dt.date.fromisoformat((time or "")[:10])
    except ValueError:
        return None


def spoken(day: dt.date) -> str:
    return f"{day.day} {MONTHS[day.month - 1]} {day.year}"


def spoken_date(time: str | None) -> str | None:
    """``2023-05-07`` (or an ISO time starting so) -> ``7 May 2023``, as people write dates; None when it
    is not a date."""
    day = said_day(time)
    return spoken(day) if day is not None else None


def _month(day: dt.date, step: int) -> tuple[int, int]:
    index = day.year * 12 + day.month - 1 + step
    return index // 12, index % 12 + 1


def _plain(phrase: str) -> str:
    """A relative date's words as :func:`event_time` reads them: lower case, a short day's name whole ("Tues" is
    "tuesday"), "(this) past weekend" as "last weekend"."""
    words = [_SHORT_DAYS.get(w.rstrip("."), w) for w in phrase.split()]
    said = " ".join(words).lower()
    return re.sub(r"^(?:this |the )?past ", "last ", said)


def event_time(text: str, time: str | None) -> EventTime | None:
    """The first relative date of ``text`` read against ``time`` (the entry's ISO time), or None when
    the text holds none or the time is not a date."""
    day = said_day(time)
    found = RELATIVE.search(text) if day is not None else None
    if found is None:
        return None
    phrase = found.group(1)
    said = _plain(phrase)
    if said in ("today", "tonight", "this morning"):
        return EventTime(day.isoformat(), spoken(day), phrase)
    if said == "this month":
        return EventTime(f"{day.year:04d}-{day.month:02d}", f"{MONTHS[day.month - 1]} {day.year}", phrase)
    if said == "this year":
        return EventTime(str(day.year), str(day.year), phrase)
    if said == "this week":
        return EventTime(None, f"the week of {spoken(day)}", phrase)
    if said in ("yesterday", "last night"):
        back = day - dt.timedelta(days=1)
        return EventTime(back.isoformat(), spoken(back), phrase)
    if said.endswith(" ago"):
        amount, unit = said[:-4].rsplit(" ", 1)
        if "few" in amount or "couple" in amount:  # no number: said as it was
            return EventTime(None, f"{said} from {spoken(day)}", phrase)
        count = int(amount) if amount.isdigit() else _COUNTS.get(amount, 1)
        unit = unit.rstrip("s")
        if unit == "day":
            back = day - dt.timedelta(days=count)
            return EventTime(back.isoformat(), spoken(back), phrase)
        if unit == "year":
            return EventTime(str(day.year - count), str(day.year - count), phrase)
        if unit == "month":
            year, month = _month(day, -count)
            return EventTime(f"{year:04d}-{month:02d}", f"{MONTHS[month - 1]} {year}", phrase)
        return EventTime(None, f"{said} from {spoken(day)}", phrase)  # weeks: no one day
    direction, unit = said.split(" ", 1)
    step = -1 if direction == "last" else 1
    if unit == "year":
        return EventTime(str(day.year + step), str(day.year + step), phrase)
    if unit == "month":
        year, month = _month(day, step)
        return EventTime(f"{year:04d}-{month:02d}", f"{MONTHS[month - 1]} {year}", phrase)
    relation = "before" if step < 0 else "after"
    if unit in WEEKDAYS:
        gap = (day.weekday() - WEEKDAYS.index(unit)) % 7 or 7
        target = day - dt.timedelta(days=gap) if step < 0 else day + dt.timedelta(days=(7 - gap) or 7)
        return EventTime(target.isoformat(), f"the {unit} {relation} {spoken(day)}", phrase)
    return EventTime(None, f"the {unit} {relation} {spoken(day)}", phrase)  # a week or a weekend


CLOCKS = ("said", "event")


def moment(value: str, option: str) -> str:
    """An ISO 8601 day or time as memcli stores times (``2023-05-07`` or ``2023-05-07T10:30``, UTC), or an
    InputError (exit 4) naming ``option`` (``--since``, ``--as-of``) and what is wrong with ``value``."""
    text = value.strip()
    shown = repr(value) if len(value) <= 80 else repr(value[:80]) + "..."
    try:
        parsed = dt.datetime.fromisoformat(text)
    except ValueError:
        raise InputError(option, f"wants a day or time as YYYY-MM-DD[THH:MM], not {shown}") from None
    if parsed.tzinfo is not None:
        try:
            parsed = parsed.astimezone(dt.UTC).replace(tzinfo=None)
        except (OverflowError, ValueError):
            raise InputError(option, f"{shown} is outside the calendar (years 1-9999) once moved to UTC") from None
    return parsed.strftime("%Y-%m-%d" if len(text) <= 10 else "%Y-%m-%dT%H:%M")


@dataclass(frozen=True)
class Period:
    """Entries of a stretch of time, on either clock: ``said`` (the entry's ``time=``, when it was
    said) or ``event`` (its ``when=``, the day it speaks of, else the day it was said). Both ends are
    inclusive; a day as ``until`` runs to its end. An event dated by a month or a year is in the period
    when any of it is. An entry with no time is in no period."""

    since: str | None = None
    until: str | None = None
    clock: str = "said"

    @classmethod
    def parse(cls, since: str | None = None, until: str | None = None, clock: str | None = None) -> Period | None:
        """The period ``--since``/``--until``/``--clock`` name, or None when neither end is given;
        a UsageError for a bad time, an unknown clock, or a start after the end."""
        if clock is not None and clock not in CLOCKS:
            raise UsageError(f"--clock is said or event, not {clock!r}")
        if since is None and until is None:
            if clock is not None:
                raise UsageError("--clock says which time --since/--until read; give one of them")
            return None
        start = moment(since, "--since") if since is not None else None
        end = moment(until, "--until") if until is not None else None
        if end is not None and len(end) == 10:
            end += "T23:59"
        if start is not None and end is not None and start > end:
            raise UsageError(f"--since {since} is after --until {until}")
        return cls(start, end, clock or "said")

    def holds(self, entry) -> bool:
        """Whether ``entry`` (a :class:`memcli.store.format.Entry`) is in the period on its clock."""
        said = entry.time or ""
        first = (entry.meta.get("when") or said[:10]) if self.clock == "event" else said
        if not first:
            return False
        last = first + "\uffff" if self.clock == "event" else first  # the whole day, month or year
        return (self.since is None or last >= self.since) and (self.until is None or first <= self.until)
