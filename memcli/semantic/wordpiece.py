"""BERT's uncased WordPiece tokenizer (what all-MiniLM-L6-v2 was trained with), read from tokenizer.json.

Normalisation as BERT's: control characters dropped, whitespace folded, CJK ideographs split off,
lower case, accents stripped; then split at whitespace and punctuation, and each word cut
greedily into the longest vocabulary pieces (``##`` continues a word); a word with no cut, or
longer than 100 characters, is ``[UNK]``.
"""

from __future__ import annotations

import unicodedata
from functools import lru_cache
from pathlib import Path

from memcli import parsing

MAX_WORD_CHARS = 100


def _is_punctuation(char: str) -> bool:
    code = ord(char)
    if 33 <= code <= 47 or 58 <= code <= 64 or 91 <= code <= 96 or 123 <= code <= 126:
        return True
    return unicodedata.category(char).startswith("P")


def _is_cjk(code: int) -> bool:
    return (0x4E00 <= code <= 0x9FFF or 0x3400 <= code <= 0x4DBF or 0x20000 <= code <= 0x2A6DF
            or 0x2A700 <= code <= 0x2B73F or 0x2B740 <= code <= 0x2B81F or 0x2B820 <= code <= 0x2CEAF
            or 0xF900 <= code <= 0xFAFF or 0x2F800 <= code <= 0x2FA1F)


def basic_words(text: str) -> list[str]:
    """The words and punctuation marks of ``text`` after BERT's normalisation."""
    out: list[str] = []
    for char in text:
        code = ord(char)
        if code == 0 or code == 0xFFFD:
            continue
        category = unicodedata.category(char)
        if char in "\t\n\r" or category == "Zs":
            out.append(" ")
        elif category.startswith("C"):
            continue
        elif _is_cjk(code):
            out.append(f" {char} ")
        else:
            out.append(char)
    text = unicodedata.normalize("NFD", "".join(out).lower())
    text = "".join(c for c in text if unicodedata.category(c) != "Mn")
    words: list[str] = []
    for word in text.split():
        current = []
        for char in word:
            if _is_punctuation(char):
                if current:
                    words.append("".join(current))
                    current = []
                words.append(char)
            else:
                current.append(char)
        if current:
            words.append("".join(current))
    return words


class WordPiece:
    def __init__(self, vocab: dict[str, int]):
        self.vocab = vocab
        self.cls, self.sep, self.unk = vocab["[CLS]"], vocab["[SEP]"], vocab["[UNK]"]
        self._pieces = lru_cache(maxsize=65536)(self._word)

    @classmethod
    def from_file(cls, path: Path) -> WordPiece:
        data = parsing.loads(path.read_text(encoding="utf-8"))
        return cls({str(k): int(v) for k, v in data["model"]["vocab"].items()})

    def _word(self, word: str) -> tuple[int, ...]:
        if len(word) > MAX_WORD_CHARS:
            return (self.unk,)
        pieces: list[int] = []
        start = 0
        while start < len(word):
            end = len(word)
            while end > start:
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                if piece in self.vocab:
                    pieces.append(self.vocab[piece])
                    break
                end -= 1
            else:
                return (self.unk,)
            start = end
        return tuple(pieces)

    def encode(self, text: str, max_tokens: int) -> list[int]:
        """``[CLS] pieces… [SEP]``, at most ``max_tokens`` ids (the pieces cut at the end)."""
        ids = [self.cls]
        for word in basic_words(text):
            ids.extend(self._pieces(word))
            if len(ids) >= max_tokens - 1:
                break
        return ids[: max_tokens - 1] + [self.sep]

    def encode_words(self, text: str, max_tokens: int) -> tuple[list[int], list[str], list[int]]:
        """:meth:`encode` with the words: ``(ids, words, word_of)``, ``words`` as :func:`basic_words` gives
        them and ``word_of[i]`` the index in ``words`` of token ``i`` (-1 for ``[CLS]`` and ``[SEP]``)."""
        ids, words, word_of = [self.cls], [], [-1]
        for word in basic_words(text):
            pieces = self._pieces(word)
            words.append(word)
            ids.extend(pieces)
            word_of.extend([len(words) - 1] * len(pieces))
            if len(ids) >= max_tokens - 1:
                break
        return ids[: max_tokens - 1] + [self.sep], words, word_of[: max_tokens - 1] + [-1]



def words_with_spans(text: str) -> list[tuple[str, int, int]]:
    """:func:`basic_words` with where each word lies in ``text``: ``(word, start, end)`` character
    offsets, so a span of tokens maps back to the original characters (an answer quoted exactly)."""
    out: list[tuple[str, int, int]] = []
    current: list[str] = []
    start = end = 0
    for at, char in enumerate(text):
        code = ord(char)
        category = unicodedata.category(char)
        if char in "\t\n\r" or category == "Zs" or char.isspace():
            if current:
                out.append(("".join(current), start, end))
                current = []
            continue
        if code == 0 or code == 0xFFFD or category.startswith("C"):
            continue
        folded = "".join(c for c in unicodedata.normalize("NFD", char.lower()) if unicodedata.category(c) != "Mn")
        if not folded:
            continue
        if _is_punctuation(char) or _is_cjk(code):
            if current:
                out.append(("".join(current), start, end))
                current = []
            out.append((folded, at, at + 1))
            continue
        if not current:
            start = at
        current.append(folded)
        end = at + 1
    if current:
        out.append(("".join(current), start, end))
    return out


def pieces_with_spans(tokenizer: WordPiece, text: str) -> tuple[list[int], list[int], list[int]]:
    """The WordPiece ids of ``text`` (no ``[CLS]``/``[SEP]``) and each one's character span in ``text``
    (the span of the word it is part of): ``(ids, starts, ends)``."""
    ids: list[int] = []
    starts: list[int] = []
    ends: list[int] = []
    for word, start, end in words_with_spans(text):
        pieces = tokenizer._pieces(word)
        ids.extend(pieces)
        starts.extend([start] * len(pieces))
        ends.extend([end] * len(pieces))
    return ids, starts, ends
