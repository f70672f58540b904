"""The people a question asks about and whose a line is: what ``ask``'s person rule reads
(:func:`memcli.retrieve.reading.decide`). A question names someone memory knows by name or a short form
("Mel" for Melanie); a line is theirs, about them (a name that only addresses someone, "Thanks, Ana!", does
not count), or, in a chat of more than two speakers, said to them by name or in reply to them."""

from __future__ import annotations

import re
from functools import lru_cache

from memcli.ingest.turns import ROLES
from memcli.store.lines import Library, chat_of
from memcli.terms import terms

_WORD = re.compile(r"[^\W\d_][\w'\u2019-]*")
SHORT_NAME = 3  # letters of the shortest word a question calls someone by that begins their name ("Mel")


def _bare(word: str) -> str:
    return re.sub(r"['\u2019]s$", "", word)


def named_people(question: str, people: set[str]) -> set[str]:
    """The ones of ``people`` (the speakers memory knows; ``user`` and ``assistant`` are roles, not names) that
    a question names: every word of a name among the question's words ("Jon Smith"), or a capitalized word
    after its first, of ``SHORT_NAME`` letters or more, that begins a word of the name ("Mel" for Melanie; the
    first word is capitalized whatever it is: "How" names no Howard). The one rule of whom a question asks
    about, for the evidence's ranking and for the answer."""
    asked, short = set(terms(question)), short_forms(question)
    return {p for p in people - ROLES
            if (words := _name_terms(p)) and (words <= asked or any(w.startswith(short) for w in words))}


def short_forms(question: str) -> tuple[str, ...]:
    """The capitalized words of ``question`` after its first, of ``SHORT_NAME`` letters or more (lower-cased,
    without a possessive "'s"): what may call someone by the start of their name."""
    return tuple({_bare(w).lower() for w in _WORD.findall(question)[1:]
                  if len(_bare(w)) >= SHORT_NAME and w[0].isupper() and _bare(w)[1:].islower()})


@lru_cache(maxsize=4096)
def _name_terms(name: str) -> frozenset[str]:
    return frozenset(terms(name))


def _naming(text: str, people: set[str]):
    """The words of ``text`` that name one of ``people`` (a capitalized word of ``SHORT_NAME`` letters or more
    that begins a name: "Mel" names Melanie)."""
    for match in _WORD.finditer(text):
        word = _bare(match.group())
        if len(word) >= SHORT_NAME and word[0].isupper() and any(p.lower().startswith(word.lower()) for p in people):
            yield match


def addresses(text: str, people: set[str]) -> list[tuple[int, int]]:
    """The character ranges of ``text`` where a name of one of ``people`` only addresses them ("Thanks,
    Ana!", "Hey Mel, ..."): the name and the mark after it."""
    out = []
    for match in _naming(text, people):
        before = re.split(r"[.!?,;:]", text[:match.start()])[-1].split()
        after = text[match.end():].lstrip()
        if len(before) <= 1 and (not after or after[0] in ",.!?;:"):
            out.append((match.start(), len(text) - len(after) + (1 if after else 0)))
    return out


def unaddressed(text: str, people: set[str]) -> list[tuple[int, int]]:
    """``text``'s ranges around the names in it that only address someone (:func:`addresses`)."""
    out, at = [], 0
    for a, b in addresses(text, people):
        if a > at:
            out.append((at, a))
        at = b
    if at < len(text):
        out.append((at, len(text)))
    return out


def about(entry, people: set[str]) -> bool:
    """Whether an entry is one of ``people``'s or speaks of one of them (a name that only addresses them,
    "Thanks, Ana!", does not count)."""
    if entry.meta.get("speaker") in people:
        return True
    spoken_to = {start for start, _ in addresses(entry.text, people)}
    return any(match.start() not in spoken_to for match in _naming(entry.text, people))


def concerns(library: Library, x, people: set[str], group: bool = False) -> bool:
    """Whether line ``x`` (a :class:`memcli.retrieve.reading.Line`) is one of ``people``'s or about them
    (:func:`about`), or, with ``group``, in a chat of more than two speakers (the document's entries of its
    conversation, :func:`memcli.store.lines.chat_of`), said to one of them: by name ("Ross, count faster!") or
    right after a line of theirs, in reply. Between two people every line of one is said to the other."""
    doc = library.doc(x.doc)
    entry = doc.entries[x.line]
    if about(entry, people):
        return True
    if not group or len(doc.speakers(chat_of(entry))) <= 2:
        return False
    if addresses(entry.text, people):
        return True
    before = doc.previous(x.line)
    said = doc.entries[before] if before is not None else None
    return (said is not None and said.meta.get("speaker") in people and said.seq is not None
            and entry.seq == said.seq + 1 and chat_of(said) == chat_of(entry))
