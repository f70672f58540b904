"""Schema-constrained JSON from any backend: constrain, validate in code, retry once.

A caller passes a JSON schema (bounded strings and arrays, required fields:
small models loop inside unbounded strings) and a validator that turns the
decoded JSON into a checked value or raises :class:`Invalid`. The answer is
first checked against the schema itself (jsonschema: a server that ignores
the schema, or a grammar the backend could not apply, cannot slip a wrong
shape through), so a validator keeps only the checks of meaning. The first
rejected answer is retried once with the reason appended to the prompt;
after that the caller gets ``None`` and takes its deterministic path.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from memcli import parsing
from memcli.llm.base import CallStats, ChatModel, ModelError

T = TypeVar("T")


class Invalid(ValueError):
    """A model answer that decoded but does not pass validation."""


def ask_json(model: ChatModel, messages: list[dict], schema: dict, validate: Callable[[object], T], *,
             step: str, stats: CallStats, max_tokens: int = 512,
             shared: list[list[dict]] | None = None, check_schema: bool = True) -> T | None:
    """The validated answer, or None after two rejected answers (or a failed call).

    ``shared``: the prompt's prefixes other calls repeat (see :meth:`ChatModel.chat`);
    ``check_schema=False``: ``validate`` checks the shape itself (the agent's rounds, whose bad tool
    calls are answered one by one).
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
            data = parsing.loads(completion.text)
        except ValueError as exc:
            reason = f"not valid JSON ({exc.msg}; finish_reason={completion.finish_reason})"
        else:
            reason = schema_problem(data, schema) if check_schema else None
            if reason is None:
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


def schema_problem(data: object, schema: dict) -> str | None:
    """Where ``data`` breaks ``schema`` (the first place, as ``path: message``), or None."""
    from jsonschema import Draft202012Validator

    error = next(iter(sorted(Draft202012Validator(schema).iter_errors(data), key=lambda e: list(map(str, e.path)))),
                 None)
    if error is None:
        return None
    where = "/".join(map(str, error.absolute_path)) or "the answer"
    return f"{where}: {error.message}"[:300]
