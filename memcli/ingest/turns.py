"""What every transcript format parses into: turns (one observation each, with its time, speaker and
reference), the times they carry (LoCoMo dates, ISO 8601, epoch seconds) and JSON lines. The
formats themselves are in :mod:`memcli.ingest.formats` and :mod:`memcli.ingest.sessions`."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime

from memcli import parsing
from memcli.errors import InputError

ROLES = frozenset({"user", "assistant"})  # the speakers of an agent or chat session: roles, not people's names


@dataclass
class Turn:
    """One observation, ready to become a CURRENT entry."""

    text: str
    time: str
    speaker: str | None = None
    source: str | None = None
    ref: str | None = None
    conv: str | None = None
    time_given: bool = True  # False when the time is the ingest's default
    fingerprint: str = ""
    uid: str | None = None  # the message's own id in its format, where it has a stable one (not stored)
    project: str | None = None  # the project an agent session ran in (a store shared by projects)
    aliases: tuple[str, ...] = ()  # fingerprints it had under an earlier identity

    def meta(self) -> dict[str, str]:
        """Entry metadata in signature order (seq is added by the store)."""
        out = {"time": self.time}
        for key in ("speaker", "source", "conv", "ref", "project"):
            value = getattr(self, key)
            if value:
                out[key] = value
        return out


@dataclass
class Parsed:
    format: str
    turns: list[Turn]
    ignored: int = 0  # system/tool messages, which are not memories
    rejected: list[tuple[str, str]] = field(default_factory=list)  # (where, why) of records left out as bad input


# ---------------------------------------------------------------- times

_MONTHS = {m: i for i, m in enumerate(
    ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"], 1)}
_LOCOMO_TIME = re.compile(
    r"^\s*(\d{1,2}):(\d{2})\s*([ap])\.?m\.?\s+on\s+(\d{1,2})\s+([A-Za-z]+)\.?,?\s+(\d{4})\s*$", re.I)


def iso_minutes(moment: datetime) -> str:
    return moment.replace(second=0, microsecond=0, tzinfo=None).isoformat(timespec="minutes")


def parse_time(value, source: str, where: str) -> str:
    """A LoCoMo date ("1:56 pm on 8 May, 2023"), an ISO string or epoch seconds -> ISO minutes."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            return iso_minutes(datetime.fromtimestamp(value, tz=UTC))
        except (OverflowError, OSError, ValueError):
            raise InputError(source, f"timestamp {value!r} is out of range", where=where) from None
    if not isinstance(value, str):
        raise InputError(source, f"date {value!r} is not a string", where=where)
    match = _LOCOMO_TIME.match(value)
    if match:
        hour, minute, half, day, month, year = match.groups()
        month_no = _MONTHS.get(month[:3].lower())
        hour_no = int(hour) % 12 + (12 if half.lower() == "p" else 0)
        try:
            if month_no is None or int(hour) > 12:
                raise ValueError
            return iso_minutes(datetime(int(year), month_no, int(day), hour_no, int(minute)))
        except ValueError:
            raise InputError(source, f"date {value!r} does not parse", where=where) from None
    try:
        moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise InputError(source, f"date {value!r} does not parse "
                         "(expected e.g. '1:56 pm on 8 May, 2023' or ISO 8601)", where=where) from None
    if moment.tzinfo is not None:
        try:
            moment = moment.astimezone(UTC)
        except OverflowError:  # 0001-01-01T00:00+23:59: before the first representable instant
            raise InputError(source, f"date {value!r} is out of range", where=where) from None
    return iso_minutes(moment)


def json_lines(text: str, source: str, *, unfinished_last: bool = False):
    """(line number, decoded JSON) for each non-blank line. With ``unfinished_last``, a last line
    without its newline that is not JSON yet is skipped (a log still being written)."""
    lines = text.split("\n")
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            yield lineno, parsing.loads(line)
        except json.JSONDecodeError as exc:
            if unfinished_last and lineno == len(lines) and not text.endswith("\n"):
                return
            raise InputError(source, f"invalid JSON: {exc.msg}", where=f"line {lineno}, column {exc.colno}") from None
