"""How memcli counts tokens: one documented estimate for everything kept in memory.

Every count that is stored or compared with a memory limit (a document's
``token_count``, CURRENT's size and the consolidation thresholds, flush and
split boundaries, search partitions, evidence budgets and the answer
context) is this estimate, whatever model is configured or was loaded
before in the same process: the same store gets the same numbers
everywhere. Limits on what a model reads at once (the agent's prompt) are
counted by that model's own tokenizer (``ChatModel.count_tokens``).

The estimate: a run of letters is one token plus one per 7 further letters,
a run of digits one token per 2 digits, every other non-space character one
token. Against SmolLM2's BPE tokenizer this was within 12% on English chat,
Markdown, memcli documents and Python source (``tests/test_tokens_and_bm25.py``
keeps it within 20% on the examples).
"""

from __future__ import annotations

import re
from functools import lru_cache

_PIECE = re.compile(r"[^\W\d_]+|\d+|[^\w\s]|_", re.UNICODE)


def count_tokens(text: str) -> int:
    """Tokens in ``text`` by memcli's estimate (0 for empty text). No piece spans a line, so the count is
    the sum of its lines' counts, each remembered: consolidation counts the same lines again and again."""
    if "\n" not in text:
        return _line_tokens(text)
    return sum(map(_line_tokens, text.split("\n")))


@lru_cache(maxsize=1 << 16)
def _line_tokens(text: str) -> int:
    total = 0
    for piece in _PIECE.findall(text):
        if piece[0].isdigit():
            total += (len(piece) + 1) // 2
        elif piece[0].isalpha():
            total += 1 + (len(piece) - 1) // 7
        else:
            total += 1
    return total


def pack(items: list, cost, limit: int, most: int | None = None) -> list[list]:
    """``items`` in order, cut into runs of at most ``limit`` tokens (``cost(item)`` each) and at most
    ``most`` items; an item larger than the limit is a run of its own."""
    out: list[list] = [[]]
    size = 0
    for item in items:
        spent = cost(item)
        if out[-1] and (size + spent > limit or (most is not None and len(out[-1]) >= most)):
            out.append([])
            size = 0
        out[-1].append(item)
        size += spent
    return [run for run in out if run]
