"""Plan: decide for each draft block which document it updates, or that it starts a new one.

The model chooses among the candidate documents it is shown (an enum in the
schema, checked again in code) or "new"; blocks it leaves out, and windows
whose answer is rejected twice, are routed deterministically: the candidate
with the most similar vocabulary (cosine of tf-idf vectors) when it clears
``consolidate.route_similarity``, else a new document. Candidates come from
the search index and from documents this flush already created, so the work
does not grow with the size of the library.
"""

from __future__ import annotations

from collections.abc import Callable

from memcli.consolidate.draft import Block, entry_line
from memcli.consolidate.lexical import Vector, cosine, grounded, term_counts, tfidf
from memcli.consolidate.titles import clean_title, document_title
from memcli.consolidate.workspace import Scope, Workspace
from memcli.llm.base import CallStats, ChatModel
from memcli.llm.prompts import PLAN_SYSTEM, plan_schema
from memcli.llm.structured import Invalid, ask_json


class Planner:
    def __init__(self, ws: Workspace, *, model: ChatModel | None, stats: CallStats,
                 candidates: int, route_similarity: float):
        self.ws = ws
        self.model = model
        self.stats = stats
        self.k = candidates
        self.threshold = route_similarity
        self.pending: dict[str, list[Vector]] = {}  # documents this flush creates -> their blocks' vectors
        self.pending_titles: dict[str, str] = {}
        self.pending_scopes: dict[str, Scope] = {}
        self._scopes: dict[int, Scope] = {}  # each block's scope, by its id (every block lives as long as the planner)

    def block_scope(self, block: Block) -> Scope:
        if id(block) not in self._scopes:
            self._scopes[id(block)] = Scope.of(block.entries)
        return self._scopes[id(block)]

    def block_vector(self, block: Block) -> Vector:
        return tfidf(term_counts(e.text for e in block.entries), self.ws.idf)

    def _candidates(self, blocks: list[Block]) -> list[str]:
        found: list[str] = []
        for block in blocks:
            for doc_id in self.ws.candidates([e.text for e in block.entries], self.k, self.block_scope(block)):
                if doc_id not in found:
                    found.append(doc_id)
        return found[: self.k * 2]

    def _new_document(self, block: Block, title: str | None) -> None:
        if not title:
            title = document_title(block.entries, self.ws.idf)
        doc_id = self.ws.new_id(title, str(block.seqs[0]))
        self.pending[doc_id] = [self.block_vector(block)]
        self.pending_titles[doc_id] = title
        self.pending_scopes[doc_id] = Scope.of(block.entries)
        block.target, block.new_title = doc_id, title

    def fits(self, block: Block, doc_id: str) -> bool:
        """Whether ``block`` may go into ``doc_id``: their scopes share a person or a conversation, and a
        project (:class:`~memcli.consolidate.workspace.Scope`)."""
        scope = self.pending_scopes.get(doc_id) or self.ws.scope(doc_id)
        return self.block_scope(block).fits(scope)

    def _route(self, block: Block, candidates: list[str]) -> None:
        vector = self.block_vector(block)
        scored = [(max((cosine(vector, part) for part in self.ws.profile(d)), default=0.0), d) for d in candidates
                  if self.fits(block, d)]
        scored += [(max(cosine(vector, v) for v in parts), d) for d, parts in self.pending.items()
                   if self.fits(block, d)]
        best = max(scored, default=(0.0, None), key=lambda sd: (sd[0], sd[1] or ""))
        if best[1] is not None and best[0] >= self.threshold:
            self._assign(block, best[1])
        else:
            self._new_document(block, None)

    def _assign(self, block: Block, doc_id: str) -> None:
        block.target = doc_id
        if doc_id in self.pending:
            block.new_title = self.pending_titles[doc_id]
            self.pending[doc_id].append(self.block_vector(block))
            self.pending_scopes[doc_id] = self.pending_scopes[doc_id] | Scope.of(block.entries)

    def plan_window(self, blocks: list[Block]) -> None:
        candidates = self._candidates(blocks)
        choices = None
        offered = [*candidates, *self.pending]
        if self.model is not None and blocks:
            choices = self._ask(blocks, offered)
            if choices is None:
                self.stats.fell_back("plan")
        for index, block in enumerate(blocks):
            choice = (choices or {}).get(index)
            if choice is not None and choice[0] != "new" and not self.fits(block, choice[0]):
                choice = None  # the model chose another person's or project's document: routed by code
            if choice is None:
                self._route(block, candidates)
            elif choice[0] == "new":
                self._new_document(block, choice[1])
            else:
                self._assign(block, choice[0])

    def _ask(self, blocks: list[Block], offered: list[str]) -> dict[int, tuple[str, str]] | None:
        lines = ["Documents:"]
        for doc_id in offered:
            summary = self.pending_titles.get(doc_id) or self.ws.summary(doc_id)
            lines.append(f"- {doc_id}: {summary[:160]}")
        if not offered:
            lines.append("(none yet)")
        lines.append("\nGroups:")
        for index, block in enumerate(blocks):
            sample = "; ".join(entry_line(e)[:140] for e in block.entries[:2])
            lines.append(f"{index}. {block.title} — {sample}")

        def validate(data) -> dict[int, tuple[str, str]]:
            out: dict[int, tuple[str, str]] = {}
            for action in data["actions"]:  # groups that exist and listed documents: the schema has checked
                group, doc = action["group"], action["doc"]
                if group in out:
                    raise Invalid(f"group {group} has two actions")
                title = clean_title(action.get("title") or "")
                sources = [e.text for e in blocks[group].entries] + [blocks[group].title]
                if doc == "new" and title and not grounded(title, sources):
                    title = ""  # an off-topic title is replaced by salient terms
                out[group] = (doc, title)
            return out

        messages = [{"role": "system", "content": PLAN_SYSTEM}, {"role": "user", "content": "\n".join(lines)}]
        return ask_json(self.model, messages, plan_schema(offered, len(blocks)), validate,
                        step="plan", stats=self.stats, max_tokens=96 + 48 * len(blocks))


def plan(blocks_by_window: list[list[Block]], planner: Planner,
         progress: Callable[[int, int], None] | None = None) -> None:
    for done, blocks in enumerate(blocks_by_window, 1):
        planner.plan_window(blocks)
        if progress:
            progress(done, len(blocks_by_window))
