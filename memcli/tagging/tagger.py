"""An averaged-perceptron part-of-speech tagger (Collins 2002; the feature set of Honnibal's "A good POS
tagger in about 200 lines of Python"), trained on the Universal Dependencies English Web Treebank by
``training/train_tagger.py``; its weights ship as package data (``tagger.json.gz``) and its card is
docs/tagger.md. It tags words with universal parts of speech (NOUN, PROPN, VERB, ADJ, ...), greedily left
to right, in pure Python: memcli's titles are read off its noun phrases (:func:`noun_phrases`).

The features and the tokenizer live here, so that training and tagging cannot disagree.
"""

from __future__ import annotations

import gzip
import json
import re
import threading
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import numpy as np

from memcli import parsing
from memcli.errors import ConfigError

START = ("-START-", "-START2-")
END = ("-END-", "-END2-")

# words as the treebank splits them ("don't" -> "do" "n't", "Caroline's" -> "Caroline" "'s"), but a word
# joined by hyphens is one ("self-care": the treebank's parts are joined so at training)
_TOKEN = re.compile(r"\w+(?=n['\u2019]t\b)|n['\u2019]t\b|['\u2019](?:s|re|ve|ll|d|m)\b"
                    r"|\w+(?=['\u2019](?:s|re|ve|ll|d|m)\b)|\w+(?:[-.'\u2019]\w+)*|[^\w\s]", re.IGNORECASE)
ADVERBIAL = "NOUN-ADV"  # a noun used as an adverb of time or measure ("last week", "a lot"): the treebank's
# obl:unmarked and nmod:unmarked nouns, learnt as a tag of their own; its part of speech is NOUN (upos())
NOUNS = {"NOUN", "PROPN"}
INSIDE = {"NOUN", "PROPN", "ADJ", "NUM"}  # what a noun phrase's words before its noun may be


def upos(tag: str) -> str:
    """The universal part of speech of a tag (an adverbial noun is a NOUN)."""
    return "NOUN" if tag == ADVERBIAL else tag


def tokens(text: str) -> list[re.Match]:
    """The words and punctuation of ``text`` as the treebank splits them (matches: their offsets kept)."""
    return list(_TOKEN.finditer(text))


def normal(word: str) -> str:
    """The form a word's features use: lower case, numbers and years as one symbol each."""
    if word.isdigit() and len(word) == 4:
        return "!YEAR"
    if word[:1].isdigit():
        return "!DIGITS"
    return word.lower()


def shape(word: str) -> str:
    """``Xx``, ``x``, ``X``, ``d`` or ``o``: its first character's kind, and whether the rest is lower."""
    first = word[:1]
    if first.isupper():
        return "X" if word.isupper() and len(word) > 1 else "Xx"
    if first.islower():
        return "x"
    return "d" if first.isdigit() else "o"


def features(i: int, word: str, context: list[str], words: list[str], prev: str, prev2: str) -> list[str]:
    """The features of the ``i``-th word (``context``: the normal forms with two start and end symbols
    either side; ``words``: the words as written, likewise padded; ``prev``/``prev2``: the tags before)."""
    i += len(START)
    return ["bias", "i suffix " + word[-3:], "i pref1 " + word[:1], "i shape " + shape(words[i]),
            "i-1 tag " + prev, "i-2 tag " + prev2, "i tag+i-2 tag " + prev + " " + prev2,
            "i word " + context[i], "i-1 tag+i word " + prev + " " + context[i],
            "i-1 word " + context[i - 1], "i-1 suffix " + context[i - 1][-3:], "i-2 word " + context[i - 2],
            "i+1 word " + context[i + 1], "i+1 suffix " + context[i + 1][-3:], "i+2 word " + context[i + 2],
            "i+1 shape " + shape(words[i + 1]), "i-1 shape " + shape(words[i - 1])]


def padded(words: list[str]) -> tuple[list[str], list[str]]:
    """(the normal forms, the words) each with the start and end symbols around them."""
    return [*START, *(normal(w) for w in words), *END], [*START, *words, *END]


class TaggerMissing(ConfigError):
    """The tagger's weights are not installed (a broken installation: they are package data)."""


def weights_path() -> Path:
    return Path(str(resources.files("memcli.tagging") / "tagger.json.gz"))


@dataclass
class Tagger:
    """The trained tagger: each feature's weights as stored (``rows``: "tag index:weight ..."), read into
    numbers the first time a word has the feature (a process that titles a few documents reads a fraction
    of them: loading parses one string a feature, not a dictionary), and the ``tagdict`` of words that
    always take one tag."""

    rows: dict[str, str]
    tagdict: dict[str, str]
    classes: list[str]
    _read: dict[str, np.ndarray] = field(default_factory=dict, repr=False)

    @classmethod
    def from_weights(cls, weights: dict[str, dict[str, float]], tagdict: dict[str, str], classes: list[str]) -> Tagger:
        """From ``weights[feature][tag]`` (what training makes)."""
        at = {tag: i for i, tag in enumerate(classes)}
        return cls({feat: " ".join(f"{at[tag]}:{weight!r}" for tag, weight in row.items())
                    for feat, row in weights.items()}, tagdict, classes)

    @classmethod
    def load(cls, path: Path | None = None) -> Tagger:
        path = path or weights_path()
        try:
            data = parsing.loads(gzip.decompress(path.read_bytes()))
            return cls(data["rows"], data["tagdict"], data["classes"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise TaggerMissing(f"memcli's tagger weights cannot be read ({path}): {exc}; reinstall memcli") from exc

    def save(self) -> bytes:
        """The weights file (gzip'd JSON, the same bytes for the same weights)."""
        return gzip.compress(json.dumps({"rows": self.rows, "tagdict": self.tagdict, "classes": self.classes},
                                        separators=(",", ":"), sort_keys=True).encode(), mtime=0)

    def row(self, feat: str) -> np.ndarray:
        """A feature's weight for each class (0 where it has none)."""
        read = self._read.get(feat)
        if read is None:
            read = np.zeros(len(self.classes))
            for part in self.rows.get(feat, "").split():
                at, weight = part.split(":")
                read[int(at)] = float(weight)
            self._read[feat] = read
        return read

    def predict(self, feats: list[str]) -> str:
        """The class whose weights over ``feats`` sum highest (ties: the greater name). The sums are added
        feature by feature, in order, as training added them."""
        scores = np.zeros(len(self.classes))
        for feat in feats:
            scores += self.row(feat)
        best = scores.max()
        return max(tag for tag, score in zip(self.classes, scores) if score == best)

    def tag(self, words: list[str]) -> list[str]:
        """The universal part of speech of each word."""
        context, written = padded(words)
        prev, prev2 = START
        out = []
        for i, word in enumerate(words):
            tag = self.tagdict.get(word) or self.predict(features(i, word, context, written, prev, prev2))
            out.append(tag)
            prev2, prev = prev, tag
        return out


_loaded: dict[str, Tagger] = {}
_lock = threading.Lock()


def shared() -> Tagger:
    """The process's tagger, loaded once."""
    with _lock:
        if "tagger" not in _loaded:
            _loaded["tagger"] = Tagger.load()
        return _loaded["tagger"]


def tagged(text: str, tagger: Tagger | None = None) -> list[tuple[re.Match, str]]:
    """Each token of ``text`` with its tag."""
    found = tokens(text)
    return list(zip(found, (tagger or shared()).tag([m.group() for m in found])))


def noun_phrases(text: str, tagger: Tagger | None = None) -> list[list[tuple[re.Match, str]]]:
    """The noun phrases of ``text``, each the run of tagged tokens the tagger reads as adjectives, nouns,
    proper nouns or numbers, from its first word that is not a number to its last noun or proper noun; an
    adjective after a noun begins the next phrase (:func:`_after_noun`). No determiner, pronoun, verb or
    possessive mark is inside: a possessive's owner ends a phrase of its own ("Caroline" of "Caroline's
    adoption agency")."""
    out = []
    run: list[tuple[re.Match, str]] = []
    for item in [*tagged(text, tagger), None]:
        inside = item is not None and item[1] in INSIDE and item[0].group()[:1].isalnum()
        if inside and not (run and _after_noun(run[-1], item)):
            run.append(item)
            continue
        while run and run[-1][1] not in NOUNS:
            run.pop()
        while run and run[0][1] == "NUM":
            run.pop(0)
        if run:
            out.append(run)
        run = [item] if inside else []
    return out


def _after_noun(before: tuple[re.Match, str], item: tuple[re.Match, str]) -> bool:
    """Whether ``item``, an adjective after a noun, begins a phrase of its own: in English an adjective
    comes before its noun, so one after a noun belongs to what follows ("Open Door Adoptions | last
    Tuesday"); not inside a name (:func:`one_name`)."""
    return item[1] == "ADJ" and before[1] in NOUNS and not one_name(before[0].group(), item[0].group())


def one_name(word: str, then: str) -> bool:
    """Whether two words in a row may be parts of one name: both capitalized ("Open Door")."""
    return word[:1].isupper() and then[:1].isupper()
