"""Schema-constrained JSON from any backend: constrain, validate in code, retry once.

A caller passes a JSON schema (bounded strings and arrays, required fields:
small models loop inside unbounded strings) and a validator that turns the
decoded JSON into a checked value or raises :class:`Invalid`. The first
rejected answer is retried once with the reason appended to the prompt;
after that the caller gets ``None`` and takes its deterministic path.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TypeVar

from memcli.llm.base import CallStats, ChatModel, ModelError

T = TypeVar("T")


class Invalid(ValueError):
    """A model answer that decoded but does not pass validation."""


def ask_json(model: ChatModel, messages: list[dict], schema: dict, validate: Callable[[object], T], *,
             step: str, stats: CallStats, max_tokens: int = 512,
             shared: list[list[dict]] | None = None) -> T | None:
    """The validated answer, or None after two rejected answers (or a failed call).

    ``shared``: the prompt's prefixes other calls repeat (see :meth:`ChatModel.chat`).
    """
    attempt_messages = list(messages)
    for attempt in range(2):
        try:
            completion = model.chat(attempt_messages, schema=schema, max_tokens=max_tokens, shared=shared)
        except ModelError as exc:
            stats.errors += 1
            stats.note_problem(step, f"model call failed: {exc}")
            return None
        stats.record(completion)
        try:
            data = json.loads(completion.text)
        except ValueError as exc:
            reason = f"not valid JSON ({exc.msg}; finish_reason={completion.finish_reason})"
        else:
            try:
                return validate(data)
            except Invalid as exc:
                reason = str(exc)
        stats.invalid += 1
        stats.note_problem(step, reason)
        if attempt == 0:
            attempt_messages = [*messages, {"role": "assistant", "content": completion.text[:2000]},
                                {"role": "user", "content": f"That answer was rejected: {reason}. "
                                                            "Answer again with valid JSON only."}]
    return None
