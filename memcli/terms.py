"""Words into search terms: lower-cased, stop words and chat filler dropped, plurals and -ed/-ing folded
(Porter's step 1). One definition for BM25, the evidence ranking, compact evidence and the LoCoMo metrics."""

from __future__ import annotations

import re
from functools import lru_cache

STOPWORDS = frozenset(["a", "about", "above", "after", "again", "against", "all", "am", "an", "and", "any", "are", "as", "at", "be", "because", "been", "before", "being", "below", "between", "both", "but", "by", "can", "could", "did", "do", "does", "doing", "down", "during", "each", "few", "for", "from", "further", "had", "has", "have", "having", "he", "her", "here", "hers", "herself", "him", "himself", "his", "how", "i", "if", "in", "into", "is", "it", "its", "itself", "just", "me", "more", "most", "my", "myself", "no", "nor", "not", "now", "of", "off", "on", "once", "only", "or", "other", "our", "ours", "ourselves", "out", "over", "own", "same", "she", "should", "so", "some", "such", "than", "that", "the", "their", "theirs", "them", "themselves", "then", "there", "these", "they", "this", "those", "through", "to", "too", "under", "until", "up", "very", "was", "we", "were", "what", "when", "where", "which", "while", "who", "whom", "why", "will", "with", "would", "you", "your", "yours", "yourself", "yourselves", "s", "t", "don", "ll", "re", "ve", "d", "m", "o", "y", "isn", "aren", "wasn", "weren", "hasn", "haven", "hadn", "doesn", "didn", "won", "wouldn", "shan", "shouldn", "couldn", "mustn", "ain", "oh", "hey", "hi", "hello", "yeah", "yep", "yes", "ok", "okay", "wow", "lol", "btw", "fyi", "aww", "hmm", "gonna", "wanna", "gotta"])
# What a span of text (an answer, a title phrase) neither starts nor ends with: function words and filler.
EDGE_STOP = STOPWORDS | {
    "really", "also", "much", "many", "well", "like", "um", "uh", "thanks", "thank", "totally", "definitely",
    "pretty", "quite", "lot", "lots", "got", "get", "gets", "getting", "might", "must", "rather", "instead",
    "even", "still", "already", "maybe", "probably", "actually", "finally", "super", "kind", "sort",
    "something", "anything", "everything", "one", "ones"}
_TERM_RE = re.compile(r"[^\W_]+", re.UNICODE)

_VOWELS = frozenset("aeiou")


def _cons(word: str, i: int) -> bool:
    ch = word[i]
    if ch in _VOWELS:
        return False
    if ch == "y":
        return i == 0 or not _cons(word, i - 1)
    return True


def _measure(stem_: str) -> int:
    """Porter's m: the number of vowel-consonant sequences."""
    pattern = "".join("c" if _cons(stem_, i) else "v" for i in range(len(stem_)))
    return pattern.count("vc")


def _has_vowel(stem_: str) -> bool:
    return any(not _cons(stem_, i) for i in range(len(stem_)))


def _cvc(word: str) -> bool:
    return (len(word) >= 3 and _cons(word, len(word) - 3) and not _cons(word, len(word) - 2)
            and _cons(word, len(word) - 1) and word[-1] not in "wxy")


@lru_cache(maxsize=1 << 16)
def stem(word: str) -> str:
    """Porter's step 1: plurals, -ed, -ing and final -y ('camped', 'camping' -> 'camp').

    Enough to match the inflections of everyday English without the
    over-merging of the full algorithm.
    """
    if len(word) <= 3 or not word.isalpha():
        return word
    if word.endswith("sses") or word.endswith("ies"):
        word = word[:-2]
    elif word.endswith("s") and not word.endswith("ss") and not word.endswith(("us", "is")):
        word = word[:-1]
    if word.endswith("eed"):
        if _measure(word[:-3]) > 0:
            word = word[:-1]
    else:
        for suffix in ("ed", "ing"):
            if word.endswith(suffix) and _has_vowel(word[: -len(suffix)]) and len(word) - len(suffix) >= 3:
                word = word[: -len(suffix)]
                if word.endswith(("at", "bl", "iz")):
                    word += "e"
                elif len(word) >= 2 and word[-1] == word[-2] and word[-1] not in "lsz" and _cons(word, len(word) - 1):
                    word = word[:-1]
                elif _measure(word) == 1 and _cvc(word):
                    word += "e"
                break
    if word.endswith("y") and _has_vowel(word[:-1]) and len(word) > 3:
        word = word[:-1] + "i"
    return word


def words(text: str) -> list[tuple[str, str]]:
    """(term, the word it came from) pairs: what :func:`terms` keeps, with the surface form."""
    return [(stem(w), w) for w in _TERM_RE.findall(text.lower()) if w not in STOPWORDS]


def terms(text: str) -> list[str]:
    """BM25 terms: lower-cased words, stop words dropped, plurals folded."""
    return [stem(w) for w in _TERM_RE.findall(text.lower()) if w not in STOPWORDS]


@lru_cache(maxsize=1 << 16)
def term_set(text: str) -> frozenset[str]:
    """:func:`terms` of ``text`` as a set, remembered: the evidence ranking reads the same entries'
    and sentences' terms for every question."""
    return frozenset(terms(text))
