"""Questions that ask when, and the date a line answers them with.

A span a reader picks ("last week", "on Thursday", a clause about the event) is rarely the date itself:
the date is what the line writes out, else what it says relative to its entry's time, else the
entry's day (:func:`dated`).
"""

from __future__ import annotations

import re

from memcli.dates import NAMED_DAY, WEEKDAYS, event_time, named_month, recurring_day, spoken_date, stated_date

_WHEN = re.compile(r"^\W*when\b|\bwhat (?:year|date|month|day)\b|\bwhich (?:year|month|day)\b", re.I)
_WHICH_DAY = re.compile(r"\b(?:which|what) day\b", re.I)


def asks_when(question: str) -> bool:
    return bool(_WHEN.search(question))


def asks_weekday(question: str) -> bool:
    return bool(_WHICH_DAY.search(question))


def dated(clause: str, when: str | None, weekday: bool = False, sentence: str | None = None) -> str | None:
    """The date a clause speaks of: a date it writes out ("April 18"), else its relative date read
    against its entry's time (:func:`memcli.dates.event_time`: "yesterday" is that day, "last week"
    "the week before 7 May 2023"), else a month it names ("in June": June of that year,
    :func:`memcli.dates.named_month`), else the same of its ``sentence``, else the entry's date.
    ``weekday`` (the question asks which day): a day of the week the clause (else its sentence) names
    ("on Thursday"), as it names it. A clause (else its sentence) that says a thing happens on a day
    each week ("every Wednesday evening") and writes no date says when with that day
    (:func:`memcli.dates.recurring_day`), not its entry's date."""
    texts = [clause] + ([sentence] if sentence and sentence != clause else [])
    for text in texts if weekday else ():
        named = NAMED_DAY.search(text)
        if named and not re.match(r"last\b", named.group(), re.I):
            return named.group()
    date = spoken_date(when)
    if date is None:
        return None
    for text in texts:
        found = event_time(text, when)
        said = stated_date(text) or (found.spoken if found else None) or named_month(text, when)
        if said:
            return said
    for text in texts:
        if weekly := recurring_day(text):
            return weekly
    return date


def names_a_day(text: str, when: str | None) -> bool:
    """Whether a text names a day: a day of the week ("on Thursday", "Mondays"), a date it writes out ("June 12"),
    or a relative date that is one day or a named weekday read against ``when`` ("yesterday", "last Friday").
    What a question that asks which day needs of the line that answers it: the day that line was said is no
    answer to it."""
    if NAMED_DAY.search(text) or stated_date(text):
        return True
    found = event_time(text, when)
    return found is not None and ((found.when or "").count("-") == 2 or any(d in found.spoken for d in WEEKDAYS))
