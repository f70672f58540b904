"""Answer a question from evidence, with every entry's time visible so relative dates resolve."""

from __future__ import annotations

import re

from memcli.llm.base import CallStats, ChatModel, Completion, ModelError
from memcli.retrieve.evidence import Evidence

ANSWER_SYSTEM = """You answer questions from an assistant's long-term memory.
You get excerpts; each line says who said it, after the [date time] it was said
(a line without a date has the date of the line above).
Answer from the excerpts only, in a short phrase or one sentence.
Resolve relative dates ("yesterday", "last Sunday") against the date of the line that says them.
When the question asks when, answer with the date (for example: 7 May 2023).
If the excerpts do not contain the answer, say: I don't know."""


def answer(model: ChatModel, question: str, evidence: list[Evidence], stats: CallStats,
           max_tokens: int = 64, keep_evidence: bool = True) -> Completion | None:
    """The model's answer (one paragraph, bounded; ``text`` is cleaned), or None when the call fails.

    The instructions, and with ``keep_evidence`` the instructions plus the evidence, are marked
    as shared prefixes: a local model with KV blocks restores them when a later question brings
    the same evidence.
    """
    excerpts = "Excerpts:\n" + ("\n".join(e.text for e in evidence) or "(none)") + "\n\n"
    messages = [{"role": "system", "content": ANSWER_SYSTEM},
                {"role": "user", "content": f"{excerpts}Question: {question}"}]
    shared = [messages[:1]] + ([[messages[0], {"role": "user", "content": excerpts}]] if keep_evidence else [])
    try:
        completion = model.chat(messages, max_tokens=max_tokens, shared=shared)
    except ModelError as exc:
        stats.errors += 1
        stats.note_problem("answer", str(exc))
        return None
    stats.record(completion)
    completion.text = re.sub(r"\s+", " ", completion.text).strip()[:600]
    return completion if completion.text else None
