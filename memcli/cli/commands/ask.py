"""memcli ask."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import Annotated, Optional

import typer

from memcli.cli.app import app
from memcli.cli.common import JsonOpt, QuietOpt, VerboseOpt, load_model, open_store, output, settings
from memcli.cli.output import Output, register
from memcli.errors import EXIT_NO_MATCH, UsageError
from memcli.index import LibraryIndex


@dataclass
class AskResult:
    question: str
    mode: str
    answer: str | None
    evidence: list  # of memcli.retrieve.evidence.Evidence
    tool_calls: list[dict] = field(default_factory=list)
    rounds: int = 0
    tokens: dict = field(default_factory=dict)
    timings: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"question": self.question, "mode": self.mode, "answer": self.answer,
                "citations": [f"{e.doc}:{e.start_line}-{e.end_line}" for e in self.evidence],
                "evidence": [e.to_dict() for e in self.evidence], "rounds": self.rounds,
                "tool_calls": self.tool_calls, "tokens": self.tokens, "timings": self.timings}


@app.command()
def ask(
    ctx: typer.Context,
    question: Annotated[str, typer.Argument(metavar="QUESTION|-", help="The question, or - to read it from stdin.")],
    evidence_only: Annotated[bool, typer.Option(
        "--evidence-only", help="Return the evidence only: no answer, no model needed.")] = False,
    budget: Annotated[Optional[int], typer.Option(
        "--budget", metavar="TOKENS", help="Evidence budget in tokens (default: ask.budget, 2000).")] = None,
    json: JsonOpt = False, quiet: QuietOpt = False, verbose: VerboseOpt = False,
) -> None:
    """Answer a question from memory, citing the document lines it used.

    Evidence is chosen without a model: BM25 over the library's heading
    sections and CURRENT picks regions, entries in them are ranked by the
    question's terms, and the best are taken until --budget tokens. Then the
    configured model answers from that evidence, where each line carries its
    time so "last Sunday" resolves to a date. With --evidence-only no model is
    loaded: outer agents get the evidence (doc, lines, seqs, refs, time, text)
    and answer themselves. Exit 1 when no evidence is found.
    """
    from memcli.llm.base import CallStats
    from memcli.retrieve.answer import answer as answer_from
    from memcli.retrieve.policy import evidence_only as retrieve_evidence

    out = output(ctx, json, quiet, verbose)
    if question == "-":
        question = sys.stdin.read().strip()
    if not question.strip():
        raise UsageError("the question is empty")
    store = open_store(ctx)
    cfg = settings(ctx, store)
    limit = budget if budget is not None else cfg.ask_budget
    if limit < 50:
        raise UsageError("--budget must be at least 50 tokens")
    start = time.perf_counter()
    with store.reading():
        index = LibraryIndex(store, cfg.search_partition_tokens)
        found = retrieve_evidence(store, index, question, budget=limit)
    retrieved = time.perf_counter() - start
    result = AskResult(question=question, mode="evidence-only" if evidence_only else "answer",
                       answer=None, evidence=found.evidence, tool_calls=found.trace,
                       timings={"retrieval_s": round(retrieved, 3)})
    stats = CallStats()
    if not evidence_only:
        model = load_model(cfg, out)
        begin = time.perf_counter()
        result.answer = answer_from(model, question, found.evidence, stats)
        result.timings["answer_s"] = round(time.perf_counter() - begin, 3)
    result.tokens = {"evidence": sum(e.tokens for e in found.evidence), "prompt": stats.prompt_tokens,
                     "generated": stats.completion_tokens}
    result.timings["total_s"] = round(time.perf_counter() - start, 3)
    out.emit(result)
    if not found.evidence:
        raise typer.Exit(EXIT_NO_MATCH)


@register(AskResult)
def _render(result: AskResult, out: Output) -> None:
    if result.answer is not None:
        out.write(result.answer)
        out.write("")
        out.write("sources: " + ", ".join(f"{e.doc}:{e.start_line}-{e.end_line}" for e in result.evidence))
        return
    for item in result.evidence:
        out.write(f"{item.doc}:{item.start_line}-{item.end_line}")
        out.write(item.text)
        out.write("")
