"""Answer a question from evidence, with every entry's time visible so relative dates resolve.

The answer is one short phrase or sentence. Small models drift past the end
of their answer (they echo the evidence's ``Speaker:`` labels, start a new
line, or repeat themselves until the token limit), so generation stops at
the first line break and :func:`clean` keeps only the answer: no speaker
label, no repeated 4-gram, one sentence.
"""

from __future__ import annotations

import re

from memcli.dates import MONTHS, WEEKDAYS, event_time, spoken_date
from memcli.llm.base import CallStats, ChatModel, Completion, ModelError
from memcli.retrieve.evidence import Evidence
from memcli.terms import term_set

ANSWER_SYSTEM = """You answer questions from an assistant's long-term memory.
You get excerpts; each line says who said it, after the [date time] it was said
(a line without a date has the date of the line above).
Answer from the excerpts only, in a short phrase or one sentence.
Resolve relative dates ("yesterday", "last Sunday") against the date of the line that says them.
When the question asks when, answer with the date (for example: 14 March 2021).
If the excerpts do not contain the answer, say: I don't know."""

UNKNOWN = "I don't know"
MAX_ANSWER_TOKENS = 48
_LABEL = re.compile(r"^(?:\[[^\]\n]*\]\s*)?([^\s:\[\]][^:\n\[\]]{0,39}):\s", re.M)  # "[time] Speaker: " in evidence
_SENTENCE_END = re.compile(r"(?<=[^\s.!?]{4}[.!?])\s+|(?<=\d[.!?])\s+")
_FRAME = re.compile(r"^[^:\n]{1,60}?:\s+(?=\S)")  # "The answer is: ...", "Answer: ..."
_ISO_DATE = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})(?:[ T]\d{1,2}:\d{2}(?::\d{2})?)?\b")


def speakers(evidence: list[Evidence]) -> set[str]:
    """The speaker labels the evidence shows (``Caroline`` of ``[time] Caroline: text``)."""
    return {m.group(1).strip() for e in evidence for m in _LABEL.finditer(e.text)}


def _words(text: str) -> list[tuple[str, int]]:
    """(normalised word, start offset) pairs."""
    return [(m.group().lower(), m.start()) for m in re.finditer(r"[\w']+", text)]


def _spoken_date(match: re.Match) -> str:
    return spoken_date(match.group()) or match.group()


def clean(text: str, labels: set[str] = frozenset()) -> str:
    """The answer part of a model's reply: its first line, without a leading speaker label or a short
    framing clause before a colon ("The answer is: "), cut before a later label, before the first
    repeated 4-gram and after the first sentence; a date copied from the evidence's ISO times is
    written as people write dates (7 March 2021), without the time of day."""
    text = text.strip().split("\n", 1)[0].strip()
    if labels:
        names = "|".join(re.escape(label) for label in sorted(labels, key=len, reverse=True))
        text = re.sub(rf"^(?:\[[^\]]*\]\s*)?(?:{names}):\s*", "", text, flags=re.I)
        later = re.search(rf"(?:^|\s)(?:{names}):(?:\s|$)", text, flags=re.I)
        if later:
            text = text[:later.start()]
    framed = _FRAME.match(text)
    if framed and len(framed.group().split()) <= 6 and not re.search(r"\d:\s*$", framed.group()):
        text = text[framed.end():]
    text = _ISO_DATE.sub(_spoken_date, text)
    words = _words(text)
    seen: set[tuple[str, ...]] = set()
    for at in range(len(words) - 3):
        gram = tuple(w for w, _ in words[at:at + 4])
        if gram in seen:  # the repetition starts at the first word of the repeated 4-gram
            text = text[:words[at][1]]
            break
        seen.add(gram)
    text = _SENTENCE_END.split(text.strip(), maxsplit=1)[0]
    text = text.strip().strip("\"'`*").rstrip(",;:-– ").strip()
    return text if re.search(r"\w", text) else ""


def prompt(question: str, evidence: list[Evidence], keep_evidence: bool = True) -> tuple[list[dict], list[list[dict]]]:
    """(messages, shared prefixes) of an answer call: the instructions, the evidence, the question.

    The instructions, and with ``keep_evidence`` the instructions plus the evidence, are marked as
    shared prefixes: a local model with KV blocks restores them when a later question brings the
    same evidence."""
    excerpts = "Excerpts:\n" + "\n".join(e.text for e in evidence) + "\n\n"
    messages = [{"role": "system", "content": ANSWER_SYSTEM},
                {"role": "user", "content": f"{excerpts}Question: {question}"}]
    shared = [messages[:1]] + ([[messages[0], {"role": "user", "content": excerpts}]] if keep_evidence else [])
    return messages, shared


_TIME_WORDS = frozenset(term_set(" ".join(MONTHS + WEEKDAYS)
                                 + " day days week weeks weekend month months year years ago last next"))


def grounded(text: str, evidence: list[Evidence]) -> bool:
    """Whether every content word, name and number of an answer occurs in the evidence it read (its
    lines, or the dates of its entries' times, said as people say them) or is a word of time."""
    said = term_set(text)
    if not said:
        return True
    seen = set(_TIME_WORDS)
    for e in evidence:
        seen |= term_set(_ISO_DATE.sub(lambda m: f"{m.group()} {_spoken_date(m)}", e.text))
        seen |= term_set(" ".join(_event_dates(e.text)))
    return said <= seen


def _event_dates(text: str) -> list[str]:
    """The days the lines of an evidence text speak of, from their relative dates read against the time
    shown above them (:func:`memcli.dates.event_time`; "yesterday" under [2023-05-08 ...] is 7 May 2023)."""
    out, time = [], None
    for line in text.split("\n"):
        shown = _ISO_DATE.match(line.lstrip("["))
        time = shown.group() if shown else time
        event = event_time(line, time)
        if event is not None:
            out.append(event.spoken)
    return out


def answer(model: ChatModel, question: str, evidence: list[Evidence], stats: CallStats,
           max_tokens: int = MAX_ANSWER_TOKENS, keep_evidence: bool = True) -> Completion | None:
    """The model's answer (``text`` cleaned by :func:`clean`; "I don't know" without evidence, when
    nothing is left, or when the answer says what the evidence does not (:func:`grounded`;
    ``finish_reason`` "ungrounded")), or None when the call fails. ``keep_evidence``: see :func:`prompt`.
    """
    if not evidence:
        return Completion(UNKNOWN, 0, 0, "no evidence")
    messages, shared = prompt(question, evidence, keep_evidence)
    try:
        completion = model.chat(messages, max_tokens=max_tokens, shared=shared, stop=["\n"])
    except ModelError as exc:
        stats.errors += 1
        stats.note_problem("answer", str(exc))
        return None
    stats.record(completion)
    completion.text = clean(completion.text, speakers(evidence))[:600] or UNKNOWN
    if completion.text != UNKNOWN and not grounded(completion.text, evidence):
        stats.note_problem("answer", f"not in the evidence read: {completion.text!r}")
        completion.text, completion.finish_reason = UNKNOWN, "ungrounded"
    return completion
