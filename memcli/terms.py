"""Words into search terms: lower-cased, stop words and chat filler dropped, plurals and -ed/-ing folded
(Porter's step 1). One definition for BM25, the evidence ranking, compact evidence and the LoCoMo metrics;
the extractive answer's terms (:func:`answer_term_set`) also fold an irregular verb's past forms to the verb
("went", "gone" -> "go")."""

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
# English verbs whose past tense or participle the suffix rules cannot fold ("When did she go?" / "I went"),
# as (verb, its forms; and "going", which they leave whole as too short). A form that is as often another
# word is left out ("left", "saw", "rose", "bit", "won").
_IRREGULAR = (
    ("become", "became"), ("begin", "began begun"), ("bring", "brought"), ("build", "built"), ("buy", "bought"),
    ("catch", "caught"), ("choose", "chose chosen"), ("come", "came"), ("drink", "drank drunk"),
    ("drive", "drove driven"), ("eat", "ate eaten"), ("fall", "fell fallen"), ("feed", "fed"), ("feel", "felt"),
    ("fight", "fought"), ("find", "found"), ("fly", "flew flown"), ("forget", "forgot forgotten"),
    ("get", "got gotten"), ("give", "gave given"), ("go", "went gone going"), ("grow", "grew grown"),
    ("hear", "heard"), ("hold", "held"), ("keep", "kept"), ("know", "knew known"), ("lead", "led"),
    ("lose", "lost"), ("make", "made"), ("mean", "meant"), ("meet", "met"), ("pay", "paid"),
    ("ride", "rode ridden"), ("run", "ran"), ("say", "said"), ("see", "seen"), ("sell", "sold"),
    ("send", "sent"), ("sing", "sang sung"), ("sit", "sat"), ("sleep", "slept"), ("speak", "spoke spoken"),
    ("spend", "spent"), ("stand", "stood"), ("swim", "swam swum"), ("take", "took taken"),
    ("teach", "taught"), ("tell", "told"), ("think", "thought"), ("throw", "threw thrown"),
    ("understand", "understood"), ("wear", "wore worn"), ("write", "wrote written"))
_VERB_OF = {form: verb for verb, forms in _IRREGULAR for form in forms.split()}


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


def answer_term(word: str) -> str:
    """A lower-cased word's term for the extractive answer: its verb when it is an irregular past form, stemmed."""
    return stem(_VERB_OF.get(word, word))


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


@lru_cache(maxsize=1 << 16)
def answer_term_set(text: str) -> frozenset[str]:
    """The extractive answer's terms of ``text`` (:func:`answer_term`), as a set, remembered: "What did she
    sell?" is answered by "I sold my car", though search, measured, ranks better without the folding
    (docs/benchmarks.md, "Questions a new user asks of the examples")."""
    return frozenset(answer_term(w) for w in _TERM_RE.findall(text.lower()) if w not in STOPWORDS)
