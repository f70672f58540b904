"""Deterministic text helpers for consolidation: term vectors, similarity, salient terms, slugs.

These carry the deterministic path (``--no-llm`` and every fallback), so
memory stays organised with any model or none.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable
from functools import lru_cache
from math import log, sqrt

from memcli.terms import terms, words

Vector = dict[str, float]

def term_counts(texts: Iterable[str]) -> Counter:
    counts: Counter = Counter()
    for text in texts:
        counts.update(terms(text))
    return counts


class Weights(dict):
    """A tf-idf vector that remembers its length (it is compared with many others, and never changed)."""

    __slots__ = ("length",)


def tfidf(counts: Counter, idf: Callable[[str], float]) -> Vector:
    return Weights({t: (1 + log(c)) * idf(t) for t, c in counts.items() if c > 0})


def _length(vector: Vector) -> float:
    known = getattr(vector, "length", None)
    if known is None:
        known = sqrt(sum(w * w for w in vector.values()))
        if isinstance(vector, Weights):
            vector.length = known
    return known


def cosine(a: Vector, b: Vector) -> float:
    if not a or not b:
        return 0.0
    if len(a) > len(b):
        a, b = b, a
    dot = sum(w * b.get(t, 0.0) for t, w in a.items())
    if not dot:
        return 0.0
    return dot / (_length(a) * _length(b))


def salient_terms(counts: Counter, idf: Callable[[str], float], n: int = 5,
                  exclude: Iterable[str] = ()) -> list[str]:
    """The ``n`` terms with the highest tf-idf weight (ties by term), skipping ``exclude``."""
    skip = {t for name in exclude for t in terms(name or "")}
    ranked = sorted(((-(1 + log(c)) * idf(t), t) for t, c in counts.items()
                     if t not in skip and len(t) > 2 and not t.isdigit()))
    return [t for _, t in ranked[:n]]


def salient_words(texts: Iterable[str], idf: Callable[[str], float], n: int = 5,
                  exclude: Iterable[str] = ()) -> list[str]:
    """Like :func:`salient_terms`, but each term as the word people wrote ('family', not 'famili')."""
    best, counts = _word_counts(tuple(texts))
    return [best.get(t, t) for t in salient_terms(counts, idf, n, exclude)]


@lru_cache(maxsize=2048)
def _word_counts(texts: tuple[str, ...]) -> tuple[dict[str, str], Counter]:
    """The word most written for each term of ``texts``, and the terms' counts (remembered, not to be
    changed: what :func:`salient_words` weighs apart from the idf)."""
    surface: Counter = Counter()
    for text in texts:
        surface.update(words(text))
    best: dict[str, str] = {}
    for (term, word), _ in surface.most_common():
        best.setdefault(term, word)
    return best, term_counts(texts)


def normalized(text: str) -> str:
    """Text reduced for exact-duplicate detection: case, punctuation and spacing ignored."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(re.findall(r"[^\W_]+", folded))


def slug(title: str, max_len: int = 48) -> str:
    """A file-name-safe slug (ASCII letters, digits, hyphens) made from any text: its whole words while they
    fit in ``max_len`` characters (a first word longer than that alone is cut)."""
    ascii_text = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode()
    words = re.findall(r"[a-z0-9]+", ascii_text.lower())
    out = words[0][:max_len] if words else ""
    for word in words[1:]:
        if len(out) + 1 + len(word) > max_len:
            break
        out += "-" + word
    return out or "topic"


def make_doc_id(title: str, salt: str, taken: Callable[[str], bool]) -> str:
    """``slug-hash6``: made by memcli, never a path a model wrote; unique in the store."""
    base = slug(title)
    for attempt in range(1000):
        digest = hashlib.sha256(f"{title}\x00{salt}\x00{attempt}".encode()).hexdigest()[:6]
        candidate = f"{base}-{digest}"
        if not taken(candidate):
            return candidate
    raise RuntimeError("could not find a free document id")


def grounded(text: str, sources: Iterable[str], *, min_shared: int = 1, min_ratio: float = 0.0) -> bool:
    """Whether model-written ``text`` (a title, a summary) is about ``sources``.

    At least ``min_shared`` of its terms, and ``min_ratio`` of them, must occur
    in the sources: a small model's invented or off-topic text is rejected.
    """
    own = {t for t in terms(text) if t.isalpha() and len(t) > 2}  # numbers prove nothing
    if not own:
        return False
    shared = own & set(term_counts(sources))
    return len(shared) >= min_shared and len(shared) / len(own) >= min_ratio
