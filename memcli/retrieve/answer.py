"""Answer a question from evidence, with every entry's time visible so relative dates resolve."""

from __future__ import annotations

import re

from memcli.llm.base import CallStats, ChatModel, ModelError
from memcli.retrieve.evidence import Evidence

ANSWER_SYSTEM = """You answer questions from an assistant's long-term memory.
You get excerpts; each line starts with [date time] and who said it.
Answer from the excerpts only, in a short phrase or one sentence.
Resolve relative dates ("yesterday", "last Sunday") against the date of the line that says them.
When the question asks when, answer with the date (for example: 7 May 2023).
If the excerpts do not contain the answer, say: I don't know."""


def answer(model: ChatModel, question: str, evidence: list[Evidence], stats: CallStats,
           max_tokens: int = 64) -> str | None:
    """The model's answer (one paragraph, bounded), or None when the call fails."""
    excerpts = "\n".join(e.text for e in evidence)  # citations are added by memcli, not written by the model
    messages = [{"role": "system", "content": ANSWER_SYSTEM},
                {"role": "user", "content": f"Excerpts:\n{excerpts or '(none)'}\n\nQuestion: {question}"}]
    try:
        completion = model.chat(messages, max_tokens=max_tokens)
    except ModelError as exc:
        stats.errors += 1
        stats.note_problem("answer", str(exc))
        return None
    stats.record(completion)
    text = re.sub(r"\s+", " ", completion.text).strip()
    return text[:600] or None
