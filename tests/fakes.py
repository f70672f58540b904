"""A scripted model behind the same interface as the real backends, for edge cases."""

from __future__ import annotations

import json
from collections.abc import Callable

from memcli.llm.base import Completion
from memcli.llm.prompts import EXTRACT_SYSTEM, PLAN_SYSTEM, REWRITE_SYSTEM, SUMMARY_SYSTEM
from memcli.retrieve.agent import AGENT_SYSTEM
from memcli.retrieve.answer import ANSWER_SYSTEM
from memcli.retrieve.catalog_reader import SELECT_SYSTEM
from memcli.tokens import count_tokens

STEPS = {REWRITE_SYSTEM: "rewrite", PLAN_SYSTEM: "plan", SUMMARY_SYSTEM: "summary", EXTRACT_SYSTEM: "extract",
         AGENT_SYSTEM: "agent", SELECT_SYSTEM: "select", ANSWER_SYSTEM: "answer"}


def step_of(messages: list[dict]) -> str:
    return STEPS.get(messages[0]["content"], "other")


class ScriptedModel:
    """Answers each call with ``responder(step, messages, schema)`` (a str, or an object to JSON-encode)."""

    name = "scripted"

    def __init__(self, responder: Callable[[str, list[dict], dict | None], object], n_params: int | None = None):
        """``n_params``: the parameter count ``describe()`` reports (it decides the model profile)."""
        self.responder = responder
        self.n_params = n_params
        self.calls: list[tuple[str, list[dict]]] = []
        self.shared: list[list[list[dict]] | None] = []  # each call's shared prefixes

    def chat(self, messages, *, schema=None, max_tokens=512, temperature=0.0, shared=None, stop=None) -> Completion:
        step = step_of(messages)
        self.calls.append((step, messages))
        self.shared.append(shared)
        answer = self.responder(step, messages, schema)
        text = answer if isinstance(answer, str) else json.dumps(answer)
        lead = len(text) - len(text.lstrip())
        cuts = [text.index(s, lead) for s in stop or () if s in text[lead:]]
        text = text[:min(cuts)] if cuts else text
        return Completion(text, count_tokens(json.dumps(messages)), count_tokens(text), "stop")

    def count_tokens(self, text: str) -> int:
        return count_tokens(text)

    def describe(self) -> dict:
        return {"backend": "scripted", **({"n_params": self.n_params} if self.n_params else {})}

    def steps(self) -> list[str]:
        return [s for s, _ in self.calls]


def seqs_in(messages: list[dict]) -> list[int]:
    """The seqs a rewrite prompt shows, in order."""
    import re

    return [int(m) for m in re.findall(r"^\[(\d+)\]", messages[-1]["content"], re.M)]
