"""Extractive question-answering sets in their own formats, read into one shape (:class:`Example`).

- SQuAD 1.1 / 2.0: ``data[].paragraphs[].{context, qas[].{id, question, answers[].{text, answer_start},
  is_impossible}}``;
- Molweni: the same under ``data.dialogues[]``, with ``edus`` (``speaker``, ``text``) and a ``context``
  of ``speaker: text`` lines joined by spaces (read here with one line an utterance: the offsets are
  the same);
- FriendsQA: ``data[].paragraphs[]`` with ``"utterances:"`` (sic) of ``speakers`` and ``utterance``,
  and answers as an utterance and the words in it (``inner_start``..``inner_end``), or its speaker.

A dialogue is read as ``speaker: text`` lines, the way memcli shows memory to a reader.
"""

from __future__ import annotations

import gzip
from dataclasses import dataclass, field
from pathlib import Path

from memcli import parsing
from memcli.errors import InputError


@dataclass
class Example:
    id: str
    question: str
    context: str
    answers: list[str] = field(default_factory=list)  # gold texts (empty: no answer)
    starts: list[int] = field(default_factory=list)  # each gold text's character offset in context
    group: str = ""  # the article or dialogue (for splits that keep one passage on one side)
    dialogue: bool = False

    @property
    def impossible(self) -> bool:
        return not self.answers


def load(path: Path) -> tuple[str, list[Example]]:
    """``(format, examples)`` of a QA file (gzip or plain JSON): format ``squad``, ``molweni`` or
    ``friendsqa``. A file that cannot be read, or whose parts are not of the format's shape, is an
    :class:`InputError` naming the place (``data[3].paragraphs[0].qas[2].question``) and what is wrong."""
    try:
        opener = gzip.open if path.read_bytes()[:2] == b"\x1f\x8b" else open
        with opener(path, "rt", encoding="utf-8") as handle:
            data = parsing.load(handle)
    except (OSError, EOFError, ValueError) as exc:
        raise InputError(str(path), f"cannot be read as a QA set ({exc})") from None
    body = data.get("data") if isinstance(data, dict) else None
    shape = _Shape(str(path))
    if isinstance(body, dict) and isinstance(body.get("dialogues"), list):
        return "molweni", list(_molweni(body["dialogues"], shape))
    if isinstance(body, list) and body and isinstance(body[0], dict):
        paragraphs = body[0].get("paragraphs")
        first = paragraphs[0] if isinstance(paragraphs, list) and paragraphs and isinstance(paragraphs[0], dict) else {}
        if "utterances:" in first or "utterances" in first:
            return "friendsqa", list(_friendsqa(body, shape))
        if "context" in first:
            return "squad", list(_squad(body, shape))
    raise InputError(str(path), "not a QA set memcli reads (SQuAD, FriendsQA or Molweni format)", where="top level")


class _Shape:
    """Reads one file's parts, each checked for the type the format gives it; the first that is not is an
    :class:`InputError` with its place."""

    def __init__(self, source: str):
        self.source = source

    def wrong(self, where: str, needed: str, value) -> InputError:
        return InputError(self.source, f"{needed} is needed, not {type(value).__name__}", where=where)

    def object(self, value, where: str) -> dict:
        if not isinstance(value, dict):
            raise self.wrong(where, "an object", value)
        return value

    def items(self, value, where: str) -> list:
        if value is None:
            return []
        if not isinstance(value, list):
            raise self.wrong(where, "a list", value)
        return value

    def text(self, value, where: str) -> str:
        if not isinstance(value, str):
            raise self.wrong(where, "a string", value)
        return value

    def key(self, value, where: str) -> str:
        """An id or a title: a string or a number."""
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise self.wrong(where, "a string or a number", value)
        return str(value)


def _answers(qa: dict, context: str, shape: _Shape, where: str) -> tuple[list[str], list[int]]:
    if qa.get("is_impossible"):
        return [], []
    texts, starts = [], []
    for k, answer in enumerate(shape.items(qa.get("answers"), f"{where}.answers")):
        answer = shape.object(answer, f"{where}.answers[{k}]")
        text, start = answer.get("text", ""), answer.get("answer_start")
        text = shape.key(text, f"{where}.answers[{k}].text")
        if not text.strip():
            continue
        if isinstance(start, bool) or not isinstance(start, int) \
                or context[max(start, 0):max(start, 0) + len(text)].lower() != text.lower():
            start = context.lower().find(text.lower())  # some sets lower-cased the passage they cite
        if start >= 0:
            texts.append(context[start:start + len(text)])
            starts.append(start)
    return texts, starts


def _squad(articles: list, shape: _Shape) -> list[Example]:
    out = []
    for a, article in enumerate(articles):
        article = shape.object(article, f"data[{a}]")
        title = shape.key(article.get("title", a), f"data[{a}].title")
        for p, paragraph in enumerate(shape.items(article.get("paragraphs"), f"data[{a}].paragraphs")):
            where = f"data[{a}].paragraphs[{p}]"
            paragraph = shape.object(paragraph, where)
            context = shape.text(paragraph.get("context"), f"{where}.context")
            for q, qa in enumerate(shape.items(paragraph.get("qas"), f"{where}.qas")):
                at = f"{where}.qas[{q}]"
                qa = shape.object(qa, at)
                question = shape.text(qa.get("question"), f"{at}.question")
                texts, starts = _answers(qa, context, shape, at)
                if texts or qa.get("is_impossible"):
                    out.append(Example(shape.key(qa.get("id", at), f"{at}.id"), question, context, texts, starts, title))
    return out


def _molweni(dialogues: list, shape: _Shape) -> list[Example]:
    out = []
    for d, dialogue in enumerate(dialogues):
        where = f"data.dialogues[{d}]"
        dialogue = shape.object(dialogue, where)
        lines = []
        for e, edu in enumerate(shape.items(dialogue.get("edus"), f"{where}.edus")):
            edu = shape.object(edu, f"{where}.edus[{e}]")
            lines.append(f"{shape.key(edu.get('speaker', ''), f'{where}.edus[{e}].speaker')}: "
                         f"{shape.text(edu.get('text', ''), f'{where}.edus[{e}].text')}")
        context = "\n".join(lines)
        theirs = shape.text(dialogue.get("context", context), f"{where}.context")
        if len(context) != len(theirs):  # not the usual joining: keep theirs
            context = theirs
        for q, qa in enumerate(shape.items(dialogue.get("qas"), f"{where}.qas")):
            at = f"{where}.qas[{q}]"
            qa = shape.object(qa, at)
            question = shape.text(qa.get("question"), f"{at}.question")
            texts, starts = _answers(qa, context, shape, at)
            if texts or qa.get("is_impossible"):
                out.append(Example(shape.key(qa.get("id", at), f"{at}.id"), question, context, texts, starts, f"d{d}",
                                   True))
    return out


def _friendsqa(scenes: list, shape: _Shape) -> list[Example]:
    out = []
    for s, scene in enumerate(scenes):
        scene = shape.object(scene, f"data[{s}]")
        title = shape.key(scene.get("title", ""), f"data[{s}].title")
        for p, paragraph in enumerate(shape.items(scene.get("paragraphs"), f"data[{s}].paragraphs")):
            where = f"data[{s}].paragraphs[{p}]"
            paragraph = shape.object(paragraph, where)
            key = "utterances:" if "utterances:" in paragraph else "utterances"
            lines, offsets = [], []
            at = 0
            for u, utterance in enumerate(shape.items(paragraph.get(key), f"{where}.{key}")):
                utterance = shape.object(utterance, f"{where}.{key}[{u}]")
                speakers = [shape.key(x, f"{where}.{key}[{u}].speakers")
                            for x in shape.items(utterance.get("speakers"), f"{where}.{key}[{u}].speakers")]
                line = f"{', '.join(speakers or ['?'])}: {shape.text(utterance.get('utterance', ''), f'{where}.{key}[{u}].utterance')}"
                offsets.append(at)
                lines.append(line)
                at += len(line) + 1
            context = "\n".join(lines)
            for q, qa in enumerate(shape.items(paragraph.get("qas"), f"{where}.qas")):
                where_q = f"{where}.qas[{q}]"
                qa = shape.object(qa, where_q)
                question = shape.text(qa.get("question"), f"{where_q}.question")
                texts, starts = [], []
                for k, answer in enumerate(shape.items(qa.get("answers"), f"{where_q}.answers")):
                    span = _friends_span(shape.object(answer, f"{where_q}.answers[{k}]"), lines, offsets)
                    if span:
                        starts.append(span[0])
                        texts.append(context[span[0]:span[1]])
                if texts:
                    out.append(Example(shape.key(qa.get("id", where_q), f"{where_q}.id"), question, context, texts,
                                       starts, f"{title}#{p}", True))
    return out


def _friends_span(answer: dict, lines: list[str], offsets: list[int]) -> tuple[int, int] | None:
    u = answer.get("utterance_id")
    if isinstance(u, bool) or not isinstance(u, int) or not 0 <= u < len(lines):
        return None
    line, base = lines[u], offsets[u]
    head = line.index(": ") if ": " in line else 0
    if answer.get("is_speaker"):
        return base, base + head
    words, positions, at = [], [], head + 2
    for word in line[head + 2:].split(" "):
        words.append(word)
        positions.append(at)
        at += len(word) + 1
    first, last = answer.get("inner_start", -1), answer.get("inner_end", -1)
    if not (type(first) is int and type(last) is int and 0 <= first <= last < len(words)):
        return None
    return base + positions[first], base + positions[last] + len(words[last])
