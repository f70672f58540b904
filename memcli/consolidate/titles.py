"""Titles and headings a person would write: noun phrases of the document's own text, not keyword lists.

A phrase is up to ``MAX_WORDS`` words of a noun phrase as memcli's tagger reads the entry
(:func:`memcli.tagging.tagger.noun_phrases`: adjectives, nouns and numbers ending in a noun, never a verb,
pronoun, determiner, nor a noun used as an adverb, "last week"), ending in a noun, with no filler
("really", "thanks") nor a speaker's name at its edges, never a part of a name cut from the rest ("Door
Adoptions" of "Open Door Adoptions"): "LGBTQ support group", "adoption agency", "Python
project". Each is scored by how central it is to the entries it names: the sum of its words' weights (a
word's library rarity, idf, times how many of these entries hold it, on a log scale) over the square root
of its length, times how many entries hold the phrase itself (on a log scale); phrases of ``MIN_WORDS``
words or more come first. A document's title is its best phrase and up to two more that share no word
with those before and score at least ``SECOND`` of the first, within ``TITLE_CHARS``, then the people who
speak in it: "Home study, adoption agencies and charity race (Caroline, Melanie)"; its first phrase is not
the first of another document of the same people (``taken``) while it has another, so titles tell the
documents of one conversation apart (c-TF-IDF's point, as topic models name topics). A section heading is
its date and its block's phrases chosen the same way, within ``HEADING_CHARS``. Every phrase occurs in the
text as written (the casing most used there). Three phrases rather than two (for titles: title-only
retrieval; for headings: consolidated evidence recall) were chosen on the development pair
(benchmarks/bench_topics.py; docs/benchmarks.md, "Titles").

What consolidation compares when it files a block or merges documents is each title's and heading's
*signature* (:func:`title_signature`, :func:`heading_signature`: the entries' most salient words), never
its phrases, and the search index does not read memcli's own titles and headings (:mod:`memcli.partitions`),
so how a document is named changes neither where its entries go nor what a question reads.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache
from math import log, sqrt

from memcli.consolidate.lexical import salient_words, slug
from memcli.ingest.turns import ROLES
from memcli.store.format import Entry
from memcli.tagging.tagger import NOUNS, noun_phrases, one_name
from memcli.terms import EDGE_STOP, stem

Idf = Callable[[str], float]

MAX_WORDS = 4  # the longest phrase
MIN_WORDS = 2  # a phrase of fewer words is chosen only when the text has no longer one
SECOND = 0.5  # a second phrase joins the title when it scores at least this share of the first
TITLE_CHARS = 80  # a document title's length at most
PHRASES = 3  # phrases in a title or heading at most
HEADING_CHARS = 60  # a section heading's length at most



@dataclass(frozen=True)
class Phrase:
    text: str  # as written, in the casing most used
    terms: frozenset[str]
    entries: int  # how many of the entries hold it
    score: float


@lru_cache(maxsize=1 << 16)
def _bare(word: str) -> str:
    return re.sub(r"['\u2019]s$", "", word.lower())


@lru_cache(maxsize=1 << 16)
def _chunks(text: str) -> tuple[tuple[tuple[int, int, str, str], ...], ...]:
    """The noun phrases of ``text`` as the tagger reads them (:func:`memcli.tagging.tagger.noun_phrases`):
    each a run of (start, end, word, tag); remembered, as consolidation titles the same entries again."""
    return tuple(tuple((m.start(), m.end(), m.group(), tag) for m, tag in run) for run in noun_phrases(text))


def _dull(word: str, names: set[str]) -> bool:
    low = word.lower()
    return low in EDGE_STOP or _bare(word) in names or len(low) < 2 or low.isdigit()


def _named(run, a: int, b: int) -> bool:
    """Whether words ``a`` and ``b`` of ``run`` are both capitalized, so a phrase may not begin at ``b``
    nor end at ``a``: it would cut a name ("Door Adoptions" of "Open Door Adoptions")."""
    return a >= 0 and b < len(run) and one_name(run[a][2], run[b][2])


def phrases(texts: list[str], idf: Idf, names: Iterable[str] = ()) -> list[Phrase]:
    """Every phrase of ``texts`` (see the module: up to ``MAX_WORDS`` words of a noun phrase, ending in its
    noun, holding a word that is not a name), best first."""
    out = []
    for text, terms, count, held in _candidates(tuple(texts), frozenset(names)):
        weight = sum(idf(t) * (1 + log(h)) for t, h in zip(terms, held)) / sqrt(len(terms))
        out.append(Phrase(text, frozenset(terms), count, weight * (1 + log(count))))
    out.sort(key=lambda p: (-(len(p.text.split()) >= MIN_WORDS), -p.score, len(p.text), p.text))
    return out


@lru_cache(maxsize=512)  # a document's phrases each (a large document's are thousands)
def _candidates(texts: tuple[str, ...], names: frozenset[str]) -> tuple[tuple[str, tuple[str, ...], int, tuple[int, ...]], ...]:
    """What :func:`phrases` weighs, apart from the library's idf (remembered: a document unchanged since
    the last flush is weighed again by the new idf only): each phrase as most often written, its terms,
    how many texts hold it, and how many texts hold each of its terms."""
    lowered = {n.lower() for n in names if n}
    held: Counter = Counter()  # a term: how many texts hold it
    holding: Counter = Counter()  # a phrase (its words, lower case): how many texts hold it
    surface: dict[tuple[str, ...], Counter] = {}
    for text in texts:
        text = " ".join(text.split())
        seen: set[tuple[str, ...]] = set()
        for run in _chunks(text):
            for last in range(len(run)):
                if run[last][3] not in NOUNS or _dull(run[last][2], lowered) or _named(run, last, last + 1):
                    continue
                for first in range(max(0, last - MAX_WORDS + 1), last + 1):
                    if run[first][3] == "NUM" or _dull(run[first][2], lowered) or _named(run, first - 1, first):
                        continue
                    key = tuple(word.lower() for _, _, word, _ in run[first:last + 1])
                    surface.setdefault(key, Counter())[text[run[first][0]:run[last][1]]] += 1
                    seen.add(key)
        holding.update(seen)
        held.update({stem(_bare(w)) for key in seen for w in key})
    out = []
    for key, count in holding.items():
        terms = tuple(stem(_bare(w)) for w in key)
        if not any(len(t) > 2 and not t.isdigit() and _bare(w) not in lowered for t, w in zip(terms, key)):
            continue
        text = max(surface[key].items(), key=lambda item: (item[1], item[0]))[0]
        out.append((text, terms, count, tuple(held[t] for t in terms)))
    return tuple(out)


def clean_title(text: str, max_len: int = 60) -> str:
    """A heading-safe one-line title: no control characters, no leading '#', bounded."""
    text = re.sub(r"[\x00-\x1f\x7f\u2028\u2029]+", " ", str(text))
    text = re.sub(r"\s+", " ", text).strip().lstrip("#").strip()
    return text[:max_len].rstrip()


def _people(entries: list[Entry]) -> list[str]:
    return sorted({s for e in entries if (s := e.meta.get("speaker", "")) and s not in ROLES})


def _capitalized(text: str) -> str:
    return text[:1].upper() + text[1:]


def document_title(entries: list[Entry], idf: Idf, taken: Iterable[str] = ()) -> str:
    """``Home study, adoption agencies and charity race (Caroline, Melanie)``: a document's title from its
    entries. ``taken``: the first phrases (:func:`lead`) of the other documents of the same people, which
    this one's title does not begin with while its text has another phrase: the first phrase tells a
    document from its siblings (a phrase that names each of them names none of them)."""
    people = _people(entries)
    suffix = f" ({', '.join(people[:2])})" if people else ""
    found = phrases([e.text for e in entries], idf, people)
    label = _label(found, TITLE_CHARS - len(suffix), {t.lower() for t in taken})
    return clean_title(_capitalized(label or "Notes") + suffix, TITLE_CHARS)


def subject(entries: list[Entry], idf: Idf) -> str | None:
    """What a document is about: its best phrase (:func:`phrases`), lower case; None when it has none."""
    found = phrases([e.text for e in entries], idf, _people(entries))
    return found[0].text.lower() if found else None


def lead(title: str) -> str:
    """A title's first phrase, lower case ("home study" of "Home study, adoption agencies and charity race
    (Caroline, Melanie)"): what :func:`document_title` keeps apart among the documents of the same people."""
    bare = re.sub(r"\s*\([^()]*\)\s*$", "", title).strip()
    return re.split(r",\s+|\s+and\s+", bare, maxsplit=1)[0].strip().lower()


_MADE_ID = re.compile(r"(.+)-([0-9a-f]{6})")  # an id memcli made (lexical.make_doc_id): its slug, its suffix


def retitled_id(doc_id: str, title: str) -> str | None:
    """The id a document titled ``title`` is renamed to: the title's words (:func:`lexical.slug`) and the
    id's own six-character suffix. None when the name still begins with the title's first phrase (a
    name is not changed for every phrase a title gains or loses), or the id is not one memcli made."""
    made = _MADE_ID.fullmatch(doc_id)
    if made is None:
        return None
    base, suffix = made.groups()
    first = slug(lead(title))
    if base == first or base.startswith(first + "-"):
        return None
    wanted = slug(title)
    return None if wanted == base else f"{wanted}-{suffix}"


def _label(found: list[Phrase], room: int, taken: set[str] = frozenset()) -> str:
    """The best phrase (the best that is not one of ``taken`` nor within one, where there is one) and up
    to ``PHRASES`` - 1 more (see the module), within ``room`` characters."""
    if not found:
        return ""
    held = [set(t.split()) for t in taken]  # a phrase within a taken one ("studio" of "dance studio") is not another
    first = next((p for p in found if not any(set(p.text.lower().split()) <= other for other in held)), found[0])
    found = [first, *(p for p in found if p is not first)]
    chosen = [first]
    words = set(first.terms)
    for other in found[1:]:
        if len(chosen) == PHRASES or other.score < SECOND * first.score:
            break
        if other.terms & words or len(other.text.split()) < min(MIN_WORDS, len(first.text.split())):
            continue
        if len(_joined([p.text for p in [*chosen, other]])) <= room:
            chosen.append(other)
            words |= other.terms
    return _joined([p.text for p in chosen])


def _joined(parts: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def block_title(entries: list[Entry], idf: Idf, taken: Iterable[str] = ()) -> str:
    """``2023-05-25 · adoption agency and home study``: the session's date and the block's phrases.
    ``taken``: the first phrases of the other sections' headings (:func:`heading_lead`), which this one
    does not begin with while its entries have another phrase (as :func:`document_title`)."""
    date = (entries[0].time or "")[:10]
    label = _label(phrases([e.text for e in entries], idf, _people(entries)), HEADING_CHARS - len(date) - 3,
                   {t.lower() for t in taken})
    return clean_title(f"{date} · {label or 'notes'}" if date else label or "notes", HEADING_CHARS)


def heading_lead(heading: str) -> str:
    """A section heading's first phrase, its date aside ("dance studio" of "2023-01-20 · dance studio and
    grand opening")."""
    return lead(heading.split(" · ", 1)[-1])


def memcli_heading(heading: str, entries: list[Entry]) -> bool:
    """Whether a heading has the shape :func:`block_title` gives (the date of its section's first entry, a
    middle dot, phrases): one memcli may rename; any other was written by a person or a model, and stays."""
    date = (entries[0].time or "")[:10] if entries else ""
    return bool(date) and heading.startswith(f"{date} · ") and len(heading) > len(date) + 3


def heading_signature(entries: list[Entry], idf: Idf) -> str:
    """What routing and merging compare for a section's heading: its date and its entries' three most
    salient words ("2024-03-03 · adoption, agency, study"). Where a block is filed depends on what the
    entries say, not on the phrases its heading shows, so a better title never moves a block."""
    words = salient_words((e.text for e in entries), idf, 3, exclude={e.meta.get("speaker", "") for e in entries})
    date = (entries[0].time or "")[:10] if entries else ""
    label = ", ".join(words) or "notes"
    return f"{date} · {label}" if date else label


def title_signature(entries: list[Entry], idf: Idf) -> str:
    """What routing and merging compare for a document's title: the entries' three most salient words and
    the people (see :func:`heading_signature`)."""
    people = _people(entries)
    words = salient_words((e.text for e in entries), idf, 3, exclude=[e.meta.get("speaker", "") for e in entries])
    return ", ".join(words) + (f" ({', '.join(people[:2])})" if people else "")
