"""The agentic reader (``memcli ask``, default mode): the model searches the library with tools.

Each round the model sees the question, the catalog, a first search for the
question, and every earlier round's tool results, and answers with JSON constrained by :func:`round_schema`:
the snippets it found relevant, documents it found relevant, tool calls to
make next, and whether it is done. The conversation only grows at the end,
so a local model reuses its cached prefix and prefills only the new results.

The loop stops when the model says done, at ``max_rounds``, when the cited
evidence fills the budget, when a round brings nothing new (no tool call
shows an entry or an error not seen before, and no new snippet), or when the model's
answer is invalid twice in a row.

Evidence: the cited snippets expanded to their heading block, then the
newest CURRENT entries, then the deterministic policy's ranking (the recall
guard) until ``budget`` tokens. The order an answer reads the evidence in
(``order``) takes the cited lines themselves and the ranking in turns.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field

from memcli.index import LibraryIndex
from memcli.llm.base import CallStats, ChatModel
from memcli.llm.structured import Invalid, ask_json
from memcli.results import Result, omit_empty
from memcli.retrieve.agent_tools import CATALOG_PAGE, AgentTools, ToolResult, calls_schema, catalog_text, tool_lines
from memcli.retrieve.evidence import Evidence, assemble, recent_current, snippet_lines
from memcli.retrieve.evidence_reader import ANSWERING, dedupe, interleave, ranked_entries
from memcli.store import Store
from memcli.store.lines import Library

MAX_CALLS_PER_ROUND = 3
MAX_SNIPPETS_PER_ROUND = 8
RECENT_SHARE = 10  # 1/10 of the budget goes to the newest CURRENT entries

AGENT_SYSTEM = """You search an assistant's long-term memory to find what answers a question.
The memory is a library of topic documents plus CURRENT (recent, unsorted memories).
Every memory line is shown as doc:line: [time] speaker: text.
Tools (call up to 3 per round):
{tools}
Each round answer with JSON:
- relevant_snippets: line ranges you have seen that help answer, as {doc_id, start_line, end_line};
- relevant_docs: ids of documents that look relevant;
- tool_calls: what to look up next (search for names, events and other key words of the question);
- done: true when the snippets found are enough to answer.
Answer with JSON only.""".replace("{tools}", tool_lines())  # the tools as their registry defines them


def round_schema() -> dict:
    string = {"type": "string", "minLength": 1, "maxLength": 120}
    line = {"type": "integer", "minimum": 1}
    return {
        "type": "object",
        "properties": {
            "relevant_snippets": {"type": "array", "maxItems": MAX_SNIPPETS_PER_ROUND, "items": {
                "type": "object", "properties": {"doc_id": string, "start_line": line, "end_line": line},
                "required": ["doc_id", "start_line", "end_line"]}},
            "relevant_docs": {"type": "array", "maxItems": 5, "items": string},
            "tool_calls": {"type": "array", "maxItems": MAX_CALLS_PER_ROUND, "items": calls_schema()},
            "done": {"type": "boolean"},
        },
        "required": ["relevant_snippets", "relevant_docs", "tool_calls", "done"],
    }


@dataclass
class Round(Result):
    """What the model asked for in one round and what it got back."""

    round: int
    relevant_snippets: list[dict] = field(default_factory=list)
    rejected_snippets: list[str] = omit_empty(list)
    relevant_docs: list[str] = field(default_factory=list)
    tool_calls: list[ToolResult] = field(default_factory=list)
    done: bool = False


@dataclass
class AgentRetrieval:
    evidence: list[Evidence]
    rounds: list[Round]
    stop: str  # done | max-rounds | budget | no-progress | invalid-answer | context
    order: list[tuple[str, int]] = field(default_factory=list)  # entries best first (what an answer reads first)
    library: Library | None = None  # the documents as the evidence was read (for best_part)


def _validate(data: object) -> dict:
    """A round's answer: the agent's own checks rather than the schema's, so that a call the schema
    would refuse (an unknown tool, a bad argument) reaches the tools and comes back to the model as
    that call's error, instead of costing the whole round."""
    if not isinstance(data, dict):
        raise Invalid("the answer must be a JSON object")
    for key, kind in (("relevant_snippets", list), ("tool_calls", list), ("done", bool)):
        if not isinstance(data.get(key), kind):
            raise Invalid(f"{key!r} is missing or not a {kind.__name__}")
    if len(data["tool_calls"]) > MAX_CALLS_PER_ROUND:
        raise Invalid(f"at most {MAX_CALLS_PER_ROUND} tool calls per round")
    if len(data["relevant_snippets"]) > MAX_SNIPPETS_PER_ROUND:
        raise Invalid(f"at most {MAX_SNIPPETS_PER_ROUND} snippets per round")
    docs = data.get("relevant_docs", [])
    data["relevant_docs"] = [d for d in docs if isinstance(d, str)][:5] if isinstance(docs, list) else []
    return data


class Agent:
    def __init__(self, model: ChatModel, store: Store, index: LibraryIndex, *, budget: int, max_rounds: int = 7,
                 max_prompt_tokens: int = 6000, on_round: Callable[[Round], None] | None = None):
        self.model = model
        self.store = store
        self.index = index
        self.budget = budget
        self.max_rounds = max_rounds
        self.max_prompt_tokens = max_prompt_tokens
        self.on_round = on_round
        self.tools = AgentTools(store, index)
        self.library = Library(store)

    def run(self, question: str, stats: CallStats) -> AgentRetrieval:
        seen: set[tuple[str, int]] = set()
        catalog, rest = self._opening(question, seen)
        messages = [{"role": "system", "content": AGENT_SYSTEM}, {"role": "user", "content": catalog + rest}]
        shared = [[messages[0], {"role": "user", "content": catalog}]]  # the same for every question
        schema = round_schema()
        rounds: list[Round] = []
        cited: list[tuple[str, int]] = []  # cited lines, then their expansion
        direct: list[tuple[str, int]] = []  # the cited lines only
        stop = "max-rounds"
        for number in range(1, self.max_rounds + 1):
            reply = ask_json(self.model, messages, schema, _validate, step="agent", stats=stats, max_tokens=400, check_schema=False,
                             shared=shared)
            if reply is None:
                stop = "invalid-answer"
                break
            current = Round(number, done=reply["done"], relevant_docs=reply["relevant_docs"])
            new_citations = self._cite(reply["relevant_snippets"], current, cited, direct)
            new_lines = False
            for call in reply["tool_calls"]:
                name = call.get("name") if isinstance(call, dict) else None
                result = self.tools.run(name, call.get("arguments") if isinstance(call, dict) else None)
                current.tool_calls.append(result)
                fresh = set(result.lines) - seen
                if result.error:  # an error is news once: the model may correct the call
                    fresh = {("error", hash((result.name, result.error)))} - seen
                new_lines = new_lines or bool(fresh)
                seen |= fresh
            rounds.append(current)
            if self.on_round:
                self.on_round(current)
            if current.done:
                stop = "done"
                break
            if self._cited_tokens(cited) >= self.budget:
                stop = "budget"
                break
            if not new_lines and not new_citations:
                stop = "no-progress"
                break
            messages += [{"role": "assistant", "content": json.dumps(reply, ensure_ascii=False)},
                         {"role": "user", "content": _results_message(current)}]
            if sum(self.model.count_tokens(m["content"]) for m in messages) > self.max_prompt_tokens:
                stop = "context"
                break
        agent_picks = dedupe(cited)
        ranked = ranked_entries(self.library, self.index, question, tuning=ANSWERING)
        picks = dedupe(agent_picks + recent_current(self.library, self.budget // RECENT_SHARE) + ranked)
        evidence = assemble(self.library, picks, self.budget)
        return AgentRetrieval(evidence, rounds, stop,
                              order=interleave(dedupe(direct), ranked), library=self.library)

    def _opening(self, question: str, seen: set[tuple[str, int]]) -> tuple[str, str]:
        """The first user message as (the catalog's first page, the same for every question;
        the question and a search for it as round 0's result)."""
        page = self.index.catalog()
        first = self.tools.run("search", {"query": question[:200]})
        seen.update(first.lines)
        return (f"Catalog (id (entries): summary):\n{catalog_text(page[:CATALOG_PAGE], 0, len(page))}\n\n",
                f"Question: {question}\n\nsearch for the question:\n{first.text}\n\n"
                "Cite the lines that help as relevant_snippets; search for other key words if needed.")

    def _cite(self, snippets: list, current: Round, cited: list[tuple[str, int]],
              direct: list[tuple[str, int]]) -> bool:
        """Check each snippet against the store and add its lines to ``direct`` and, expanded, to ``cited``;
        True when any is new."""
        before = len(set(cited))
        known = set(self.store.all_ids())
        for snippet in snippets:
            if not isinstance(snippet, dict):
                current.rejected_snippets.append("not an object")
                continue
            doc_id, start, end = snippet.get("doc_id"), snippet.get("start_line"), snippet.get("end_line")
            if doc_id not in known:
                current.rejected_snippets.append(f"unknown document {str(doc_id)[:60]!r}")
                continue
            if not (isinstance(start, int) and isinstance(end, int)) or isinstance(start, bool) \
                    or isinstance(end, bool) or not 1 <= start <= end or end - start > 200:
                current.rejected_snippets.append(f"bad range {start!r}-{end!r} in {doc_id}")
                continue
            lines = snippet_lines(self.library, doc_id, start, end, self.budget)
            if not lines:
                current.rejected_snippets.append(f"{doc_id}:{start}-{end} holds no memory entries")
                continue
            current.relevant_snippets.append({"doc_id": doc_id, "start_line": start, "end_line": end})
            cited.extend(lines)
            direct.extend(pick for pick in lines if start <= pick[1] <= end)
        return len(set(cited)) > before

    def _cited_tokens(self, cited: list[tuple[str, int]]) -> int:
        return sum(e.tokens for e in assemble(self.library, dedupe(cited), self.budget * 2))


def _results_message(current: Round) -> str:
    parts = []
    for call in current.tool_calls:
        args = json.dumps(call.arguments, ensure_ascii=False)[:200]
        parts.append(f"{call.name} {args}:\n{call.text}")
    if current.rejected_snippets:
        parts.append("Snippets not accepted: " + "; ".join(current.rejected_snippets[:5]))
    if not parts:
        parts.append("(no tool calls this round)")
    return "Results:\n\n" + "\n\n".join(parts) + "\n\nNext round: JSON only."
