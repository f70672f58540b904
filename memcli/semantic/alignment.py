"""Late interaction: each word of a question matched against the tokens of a line (MaxSim, as in ColBERT).

A whole-line signal (BM25's bag of words, or one averaged MiniLM vector) cannot tell which of two lines
about the same things answers a question: the question asks about one part of a line. Here every token
of the question and of the line keeps its own last-layer MiniLM vector (:meth:`Encoder.token_vectors`,
the weights memcli already ships); a question word's match in a line is its tokens' best cosine among
the line's tokens, and a line's score is the mean match of the question's content words (function
words and punctuation left out). The alignment also says which words of the line the question's words
found (:attr:`Alignment.matched`), and how well the question's worst-matched word is met anywhere
(:func:`weakest`): a question whose person, object or relation is nowhere in memory.

Token vectors are computed at question time for the lines a question reads (tens of lines; storing
them for a whole store would cost about 15 KB a line as int8, docs/benchmarks.md).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from memcli.semantic.encoder import MAX_TOKENS, Encoder
from memcli.terms import STOPWORDS


@dataclass
class Tokens:
    """A text cut into BERT words and tokens, with each token's vector."""

    words: list[str]  # the text's words as the tokenizer normalised them (lower case, punctuation apart)
    word_of: np.ndarray  # per token: its word's index in ``words``; -1 for [CLS] and [SEP]
    vectors: np.ndarray  # (tokens, 384) float32, rows of length 1

    def content(self) -> list[int]:
        """Indexes of the words a match is asked of: not function words, not punctuation."""
        return [i for i, w in enumerate(self.words) if w not in STOPWORDS and any(c.isalnum() for c in w)]


def tokenize(encoder: Encoder, texts: list[str]) -> list[Tokens]:
    """Every text's :class:`Tokens`, in one batched pass of the encoder."""
    cut = [encoder.tokenizer.encode_words(t, MAX_TOKENS) for t in texts]
    vectors = encoder.vectors_of([ids for ids, _, _ in cut])
    return [Tokens(words, np.asarray(word_of, np.int32), v) for (_, words, word_of), v in zip(cut, vectors)]


@dataclass
class Alignment:
    score: float  # mean over the question's content words of their match (0..1; 0 with no content word)
    matches: np.ndarray  # per content word of the question: its match, the best cosine of its tokens
    matched: np.ndarray  # per content word of the question: the index of the line's word it found best


def align(question: Tokens, line: Tokens, content: list[int] | None = None) -> Alignment:
    """How the question's content words (``content``; default :meth:`Tokens.content`) find ``line``."""
    content = question.content() if content is None else content
    inner = line.word_of >= 0
    if not content or not inner.any():
        return Alignment(0.0, np.zeros(len(content), np.float32), np.full(len(content), -1))
    sims = question.vectors @ line.vectors[inner].T  # (question tokens, line tokens)
    best, where = sims.max(axis=1), sims.argmax(axis=1)
    line_words = line.word_of[inner]
    matches = np.empty(len(content), np.float32)
    matched = np.empty(len(content), np.int64)
    for at, word in enumerate(content):
        mine = np.flatnonzero(question.word_of == word)
        matches[at] = best[mine].mean()
        matched[at] = line_words[where[mine[np.argmax(best[mine])]]]
    return Alignment(float(matches.mean()), matches, matched)


def asked_kind(question: Tokens, words: int = 2) -> np.ndarray | None:
    """What kind of answer the question asks for, as one vector: the mean of its first ``words`` words'
    token vectors ("How often", "What time", "How many"), of length 1; None for an empty question. In
    context those tokens lie near the tokens of a line that give such an answer ("every week", "6:00 pm")."""
    mine = np.flatnonzero((question.word_of >= 0) & (question.word_of < words))
    if not len(mine):
        return None
    vector = question.vectors[mine].mean(axis=0)
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm else None


def locate(line: Tokens, words: list[str]) -> int | None:
    """The index in ``line.words`` where ``words`` first occur in a row, or None."""
    n = len(words)
    if not n:
        return None
    for start in range(len(line.words) - n + 1):
        if line.words[start:start + n] == words:
            return start
    return None


def kind_match(line: Tokens, words: list[str], kind: np.ndarray) -> float:
    """How well the part of ``line`` made of ``words`` (as the tokenizer cuts them) gives the ``kind`` of
    answer asked (:func:`asked_kind`): the best cosine of its content words' tokens with it; 0 when the
    words are not found in the line or hold no content word."""
    start = locate(line, words)
    if start is None:
        return 0.0
    content = [i for i in range(start, start + len(words))
               if line.words[i] not in STOPWORDS and any(c.isalnum() for c in line.words[i])]
    tokens = np.isin(line.word_of, content)
    if not tokens.any():
        return 0.0
    return float((line.vectors[tokens] @ kind).max())


def best_matches(alignments: list[Alignment]) -> np.ndarray:
    """Per content word of the question: its best match in any of the lines these alignments are of."""
    return np.max([a.matches for a in alignments], axis=0)


def weakest(question: Tokens, lines: list[Tokens], content: list[int] | None = None) -> float:
    """The match, in the lines that best meet it, of the question's least-met content word (1.0 with none):
    low when some word of the question (a person, an object, a relation) is in none of them."""
    content = question.content() if content is None else content
    if not content or not lines:
        return 1.0 if not content else 0.0
    return float(best_matches([align(question, line, content) for line in lines]).min())


class Aligner:
    """Token vectors of questions and lines from one encoder, the lines' kept for the most recent
    ``cache`` distinct texts (a process asks many questions of the same lines: eval, MCP, chat)."""

    def __init__(self, encoder: Encoder, cache: int = 4096):
        self.encoder = encoder
        self.cache = cache
        self._lines: OrderedDict[str, Tokens] = OrderedDict()

    def question(self, text: str) -> Tokens:
        return tokenize(self.encoder, [text])[0]

    def lines(self, texts: list[str]) -> list[Tokens]:
        missing = list(dict.fromkeys(t for t in texts if t not in self._lines))
        for text, tokens in zip(missing, tokenize(self.encoder, missing) if missing else []):
            self._lines[text] = tokens
        for text in texts:
            self._lines.move_to_end(text)
        found = [self._lines[t] for t in texts]
        while len(self._lines) > self.cache:
            self._lines.popitem(last=False)
        return found

