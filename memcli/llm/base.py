"""What every model backend provides, and the accounting of calls."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol


class ModelError(Exception):
    """A model call failed (server unreachable, context overflow, bad response)."""


@dataclass
class Completion:
    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str | None = None
    seconds: float = 0.0
    prefilled_tokens: int | None = None  # prompt tokens actually computed (None: not known, all of them)
    restored_tokens: int = 0  # prompt tokens restored from KV blocks before the call
    ttft_s: float | None = None  # time to first token: block restore + prompt prefill (None: not known)
    tokens_per_s: float | None = None  # generation speed after the first token (None: not known)


class ChatModel(Protocol):
    """A chat model: local llama.cpp, an OpenAI-compatible server, or a scripted fake."""

    name: str

    def chat(self, messages: list[dict], *, schema: dict | None = None, max_tokens: int = 512,
             temperature: float = 0.0, shared: list[list[dict]] | None = None,
             stop: list[str] | None = None) -> Completion:
        """One completion; with ``schema`` the output is constrained to that JSON schema; it ends at
        the model's end of turn, ``max_tokens``, or a ``stop`` string (one that follows some text).

        ``shared``: prefixes of ``messages`` (lists of messages, the last one possibly cut short)
        that other calls repeat; a local model with KV blocks keeps them, other backends ignore them.
        """
        ...

    def count_tokens(self, text: str) -> int:
        ...

    def describe(self) -> dict[str, Any]:
        ...


@dataclass
class CallStats:
    """Model calls made by one operation: how many, tokens in and out, time, failures."""

    calls: int = 0
    prompt_tokens: int = 0
    prefilled_tokens: int = 0  # prompt tokens computed, not reused from the model's cached prefix
    restored_tokens: int = 0  # prompt tokens restored from KV blocks
    completion_tokens: int = 0
    seconds: float = 0.0
    invalid: int = 0  # answers rejected by validation
    errors: int = 0  # calls that failed outright
    fallbacks: dict[str, int] = field(default_factory=dict)  # step -> deterministic fallbacks
    problems: list[str] = field(default_factory=list)  # the first few rejection reasons

    def record(self, completion: Completion) -> None:
        self.calls += 1
        self.prompt_tokens += completion.prompt_tokens
        self.prefilled_tokens += (completion.prompt_tokens if completion.prefilled_tokens is None
                                  else completion.prefilled_tokens)
        self.completion_tokens += completion.completion_tokens
        self.restored_tokens += completion.restored_tokens
        self.seconds += completion.seconds

    def note_problem(self, step: str, reason: str) -> None:
        if len(self.problems) < 20:
            self.problems.append(f"{step}: {reason}")

    def fell_back(self, step: str) -> None:
        self.fallbacks[step] = self.fallbacks.get(step, 0) + 1

    def to_dict(self) -> dict:
        return {"calls": self.calls, "prompt_tokens": self.prompt_tokens, "prefilled_tokens": self.prefilled_tokens,
                "restored_tokens": self.restored_tokens,
                "completion_tokens": self.completion_tokens, "seconds": round(self.seconds, 3),
                "invalid": self.invalid, "errors": self.errors, "fallbacks": dict(self.fallbacks),
                "problems": list(self.problems)}
