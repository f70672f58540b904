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
import json
from dataclasses import dataclass, field
from pathlib import Path

from memcli.errors import UsageError


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
    ``friendsqa``."""
    try:
        opener = gzip.open if path.read_bytes()[:2] == b"\x1f\x8b" else open
        with opener(path, "rt", encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, EOFError, ValueError) as exc:
        raise UsageError(f"{path} cannot be read as a QA set ({exc})") from exc
    body = data.get("data") if isinstance(data, dict) else None
    if isinstance(body, dict) and isinstance(body.get("dialogues"), list):
        return "molweni", list(_molweni(body["dialogues"]))
    if isinstance(body, list) and body and isinstance(body[0], dict):
        paragraphs = body[0].get("paragraphs") or [{}]
        if "utterances:" in paragraphs[0] or "utterances" in paragraphs[0]:
            return "friendsqa", list(_friendsqa(body))
        if "context" in paragraphs[0]:
            return "squad", list(_squad(body))
    raise UsageError(f"{path} is not a QA set memcli reads (SQuAD, FriendsQA or Molweni format)")


def _answers(qa: dict, context: str) -> tuple[list[str], list[int]]:
    if qa.get("is_impossible"):
        return [], []
    texts, starts = [], []
    for answer in qa.get("answers") or []:
        text, start = str(answer.get("text", "")), answer.get("answer_start")
        if not text.strip():
            continue
        if not isinstance(start, int) or context[start:start + len(text)].lower() != text.lower():
            start = context.lower().find(text.lower())  # some sets lower-cased the passage they cite
        if start >= 0:
            texts.append(context[start:start + len(text)])
            starts.append(start)
    return texts, starts


def _squad(articles: list) -> list[Example]:
    out = []
    for a, article in enumerate(articles):
        for paragraph in article.get("paragraphs", []):
            context = paragraph["context"]
            for qa in paragraph.get("qas", []):
                texts, starts = _answers(qa, context)
                if texts or qa.get("is_impossible"):
                    out.append(Example(str(qa["id"]), qa["question"], context, texts, starts,
                                       str(article.get("title", a))))
    return out


def _molweni(dialogues: list) -> list[Example]:
    out = []
    for d, dialogue in enumerate(dialogues):
        lines = [f"{edu['speaker']}: {edu['text']}" for edu in dialogue["edus"]]
        context = "\n".join(lines)
        if len(context) != len(dialogue.get("context", context)):  # not the usual joining: keep theirs
            context = dialogue["context"]
        for qa in dialogue.get("qas", []):
            texts, starts = _answers(qa, context)
            if texts or qa.get("is_impossible"):
                out.append(Example(str(qa["id"]), qa["question"], context, texts, starts, f"d{d}", True))
    return out


def _friendsqa(scenes: list) -> list[Example]:
    out = []
    for scene in scenes:
        for p, paragraph in enumerate(scene.get("paragraphs", [])):
            utterances = paragraph.get("utterances:") or paragraph.get("utterances") or []
            lines, offsets = [], []
            at = 0
            for u in utterances:
                speaker = ", ".join(u.get("speakers") or ["?"])
                line = f"{speaker}: {u.get('utterance', '')}"
                offsets.append(at)
                lines.append(line)
                at += len(line) + 1
            context = "\n".join(lines)
            for qa in paragraph.get("qas", []):
                texts, starts = [], []
                for answer in qa.get("answers", []):
                    span = _friends_span(answer, lines, offsets)
                    if span:
                        starts.append(span[0])
                        texts.append(context[span[0]:span[1]])
                if texts:
                    out.append(Example(str(qa["id"]), qa["question"], context, texts, starts,
                                       f"{scene.get('title', '')}#{p}", True))
    return out


def _friends_span(answer: dict, lines: list[str], offsets: list[int]) -> tuple[int, int] | None:
    u = answer.get("utterance_id")
    if not isinstance(u, int) or not 0 <= u < len(lines):
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
    if not (isinstance(first, int) and isinstance(last, int) and 0 <= first <= last < len(words)):
        return None
    return base + positions[first], base + positions[last] + len(words[last])
