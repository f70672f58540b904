"""Where a model's text starts to loop, so generation can stop there.

Small models repeat themselves until the token limit ("A: A: A: ...", the
same sentence three times) or start writing the other side of a dialogue
("User: ..."). :func:`loop_start` finds the first place such text begins;
generation stops there (``halt`` of :meth:`memcli.llm.runtime.LlamaRuntime.generate`)
and what came before it is kept.
"""

from __future__ import annotations

import re

NGRAM = 5  # a word n-gram seen before marks a loop
STUTTER = 3  # the same word this many times in a row marks a loop
_WORD = re.compile(r"[^\W_]+(?:['\u2019][^\W_]+)*")
_LABEL = re.compile(r"(?:^|\n)\s*(?:[A-Z][\w.'-]{0,24}(?: [A-Z][\w.'-]{0,24}){0,2}|[a-z]{1,12}):[ \t]*(?=\S|$)")


def loop_start(text: str, *, ngram: int = NGRAM, labels: bool = True) -> int | None:
    """The offset in ``text`` where it starts to repeat itself, or None: the first word of the first
    repeated ``ngram`` of words (case folded), the second of a word said three times in a row, a line
    (of at least three words) said before, or, with ``labels``, a speaker label ("User:", "A:") after
    the first line or at the start of a line after some text."""
    cuts: list[int] = []
    words = [(m.group().lower(), m.start()) for m in _WORD.finditer(text)]
    seen: set[tuple[str, ...]] = set()
    for at in range(len(words) - ngram + 1):
        gram = tuple(w for w, _ in words[at:at + ngram])
        if gram in seen:
            cuts.append(words[at][1])
            break
        seen.add(gram)
    for at in range(STUTTER - 1, len(words)):
        if len({w for w, _ in words[at - STUTTER + 1:at + 1]}) == 1:
            cuts.append(words[at - STUTTER + 2][1])  # the word is kept once
            break
    offset, lines = 0, set()
    for line in text.split("\n"):
        key = " ".join(w.lower() for w in _WORD.findall(line))
        if len(key.split()) >= 3 and key in lines:
            cuts.append(offset)
            break
        lines.add(key)
        offset += len(line) + 1
    if labels:
        for found in _LABEL.finditer(text):
            if text[:found.start()].strip():
                cuts.append(found.start())
                break
    return min(cuts) if cuts else None
