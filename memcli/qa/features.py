"""The reader's input: ``[CLS] question [SEP] passage [SEP]`` windows over a passage, and the spans read
back out of them. One module for training (``training/train_reader.py``) and for inference
(:mod:`memcli.qa.model`), so both cut text the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

from memcli.semantic.wordpiece import WordPiece, pieces_with_spans

MAX_QUESTION = 48  # question tokens kept (the first ones)
WINDOW = 192  # tokens in a window, [CLS] and [SEP]s included
STRIDE = 64  # passage tokens two neighbouring windows share
MAX_ANSWER = 30  # the longest span, in tokens


@dataclass
class Window:
    ids: list[int]
    first: int  # where the passage's tokens begin in ids
    starts: list[int]  # character span in the passage of each passage token
    ends: list[int]

    @property
    def types(self) -> list[int]:
        return [0] * self.first + [1] * (len(self.ids) - self.first)

    def char_span(self, i: int, j: int) -> tuple[int, int]:
        """The passage characters of the window's tokens ``i..j`` (positions in ``ids``)."""
        return self.starts[i - self.first], self.ends[j - self.first]

    def token_span(self, start: int, end: int) -> tuple[int, int] | None:
        """The window positions of the tokens covering characters ``start..end`` of the passage, or
        None when they are not all in this window."""
        if not self.starts:
            return None
        inside = [k for k, (s, e) in enumerate(zip(self.starts, self.ends)) if e > start and s < end]
        if not inside or self.starts[0] > start or self.ends[-1] < end:
            return None
        return inside[0] + self.first, inside[-1] + self.first


def question_ids(tokenizer: WordPiece, question: str) -> list[int]:
    return pieces_with_spans(tokenizer, question)[0][:MAX_QUESTION]


def windows(tokenizer: WordPiece, question: str | list[int], passage: str, *, window: int = WINDOW,
            stride: int = STRIDE) -> list[Window]:
    """The windows that read all of ``passage``: each at most ``window`` tokens, neighbours sharing
    ``stride`` passage tokens."""
    q = question_ids(tokenizer, question) if isinstance(question, str) else question
    ids, starts, ends = pieces_with_spans(tokenizer, passage)
    room = max(window - len(q) - 3, 16)
    head = [tokenizer.cls, *q, tokenizer.sep]
    out: list[Window] = []
    at = 0
    while True:
        part = slice(at, at + room)
        out.append(Window(head + ids[part] + [tokenizer.sep], len(head), starts[part], ends[part]))
        if at + room >= len(ids):
            return out
        at += max(room - stride, 1)
