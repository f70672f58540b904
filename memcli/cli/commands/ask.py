"""memcli ask."""

from __future__ import annotations

import json as jsonlib
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
    mode: str  # agent | no-agent | evidence-only
    answer: str | None
    evidence: list  # of memcli.retrieve.evidence.Evidence
    read: list = field(default_factory=list)  # the part of the evidence the answer was written from
    tool_calls: list[dict] = field(default_factory=list)  # the trace: one record per round or step
    rounds: int = 0
    stop: str | None = None
    tokens: dict = field(default_factory=dict)
    timings: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"question": self.question, "mode": self.mode, "answer": self.answer,
                "citations": [f"{e.doc}:{e.start_line}-{e.end_line}" for e in self.evidence],
                "read": [f"{e.doc}:{e.start_line}-{e.end_line}" for e in self.read],
                "evidence": [e.to_dict() for e in self.evidence], "rounds": self.rounds, "stop": self.stop,
                "tool_calls": self.tool_calls, "tokens": self.tokens, "timings": self.timings}


@app.command()
def ask(
    ctx: typer.Context,
    question: Annotated[str, typer.Argument(metavar="QUESTION|-", help="The question, or - to read it from stdin.")],
    evidence_only: Annotated[bool, typer.Option(
        "--evidence-only", help="Return the evidence only: no answer, no model needed.")] = False,
    no_agent: Annotated[bool, typer.Option(
        "--no-agent", help="Hybrid reader: one model call selects documents by summary, BM25 does the rest.")] = False,
    budget: Annotated[Optional[int], typer.Option(
        "--budget", metavar="TOKENS", help="Evidence budget in tokens (default: ask.budget, 2000).")] = None,
    answer_context: Annotated[Optional[int], typer.Option(
        "--answer-context", metavar="TOKENS",
        help="Evidence the answering model reads, best-ranked first; 0: all of it "
             "(default: ask.answer_context, 600).")] = None,
    max_rounds: Annotated[Optional[int], typer.Option(
        "--max-rounds", metavar="N", help="Tool-calling rounds of the agent (default: ask.max_rounds, 7).")] = None,
    trace: Annotated[bool, typer.Option(
        "--trace", help="Show each round's tool calls and results on stderr.")] = False,
    kv: Annotated[Optional[bool], typer.Option(
        "--kv/--no-kv", help="Restore shared prompt prefixes from KV blocks and save new ones "
                             "(local model; default: ask.kv, on).")] = None,
    show_stats: Annotated[bool, typer.Option(
        "--stats", help="Print tokens prefilled and restored, time to first token and generation speed "
                        "on stderr.")] = False,
    json: JsonOpt = False, quiet: QuietOpt = False, verbose: VerboseOpt = False,
) -> None:
    """Answer a question from memory, citing the document lines it used.

    Default (agentic): the model searches the library for several rounds
    with grep, grep_doc, search, list_docs and read_lines, and cites the line
    ranges it found relevant; those are expanded to their heading block,
    the newest CURRENT entries are added, and BM25 fills the rest of --budget.
    --no-agent: one model call picks documents from the catalog, BM25 ranks
    entries. --evidence-only: no model at all (BM25 over heading sections,
    entries ranked by the question's terms); outer agents get the evidence
    and answer themselves. The answer is written from the best-ranked
    --answer-context tokens of the evidence (listed as "read" in --json),
    each line showing its time so "last Sunday" resolves to a date. Exit 1
    when no evidence is found.

    With a local model, the prompt parts other questions share (instructions,
    catalog, and the answer's evidence) are kept as KV blocks in the store's
    kv/ directory and restored instead of prefilled (--no-kv: not at all).
    """
    from memcli.llm.base import CallStats
    from memcli.retrieve.answer import answer as answer_from

    out = output(ctx, json, quiet, verbose)
    if evidence_only and no_agent:
        raise UsageError("--evidence-only and --no-agent exclude each other")
    if question == "-":
        question = sys.stdin.read().strip()
    if not question.strip():
        raise UsageError("the question is empty")
    store = open_store(ctx)
    cfg = settings(ctx, store)
    limit = budget if budget is not None else cfg.ask_budget
    rounds_allowed = max_rounds if max_rounds is not None else cfg.ask_max_rounds
    reading = answer_context if answer_context is not None else cfg.ask_answer_context
    if limit < 50:
        raise UsageError("--budget must be at least 50 tokens")
    if reading < 0:
        raise UsageError("--answer-context must be 0 (all the evidence) or a number of tokens")
    if not 1 <= rounds_allowed <= 50:
        raise UsageError("--max-rounds must be between 1 and 50")
    mode = "evidence-only" if evidence_only else "no-agent" if no_agent else "agent"
    start = time.perf_counter()
    stats = CallStats()
    model = None if evidence_only else _open_model(store, cfg, out, cfg.ask_kv if kv is None else kv)
    loaded = time.perf_counter()
    result = AskResult(question=question, mode=mode, answer=None, evidence=[])
    with store.reading():
        index = LibraryIndex(store, cfg.search_partition_tokens)
        if mode == "agent":
            from memcli.retrieve.agent import Agent

            show = (lambda r: _trace_round(r.to_dict())) if trace else None
            found = Agent(model, store, index, budget=limit, max_rounds=rounds_allowed, on_round=show).run(
                question, stats)
            result.evidence, result.rounds, result.stop = found.evidence, len(found.rounds), found.stop
            result.tool_calls = [r.to_dict() for r in found.rounds]
        else:
            if mode == "no-agent":
                from memcli.retrieve.hybrid import hybrid

                found = hybrid(model, store, index, question, budget=limit, stats=stats)
            else:
                from memcli.retrieve.policy import evidence_only as policy

                found = policy(store, index, question, budget=limit)
            result.evidence, result.tool_calls = found.evidence, found.trace
            if trace:
                for step in found.trace:
                    _trace_round(step)
        if model is not None:
            from memcli.retrieve.evidence import best_part

            result.read = best_part(found.library, result.evidence, found.order, reading)
    retrieved = time.perf_counter()
    result.timings = {"model_load_s": round(loaded - start, 3), "retrieval_s": round(retrieved - loaded, 3)}
    retrieval_calls = stats.calls
    if model is not None:
        written = answer_from(model, question, result.read, stats)
        result.answer = written.text if written else None
        result.timings["answer_s"] = round(time.perf_counter() - retrieved, 3)
        if written is not None and written.ttft_s is not None:
            result.timings["answer_ttft_s"] = round(written.ttft_s, 3)
        if written is not None and written.tokens_per_s is not None:
            result.timings["answer_tokens_per_s"] = round(written.tokens_per_s, 2)
    result.tokens = {"evidence": sum(e.tokens for e in result.evidence),
                     "read": sum(e.tokens for e in result.read), "prompt": stats.prompt_tokens,
                     "prefilled": stats.prefilled_tokens, "restored": stats.restored_tokens,
                     "generated": stats.completion_tokens, "model_calls": stats.calls,
                     "retrieval_calls": retrieval_calls, "invalid": stats.invalid}
    result.timings["total_s"] = round(time.perf_counter() - start, 3)
    if stats.problems:
        out.debug("model problems: " + "; ".join(stats.problems[:5]))
    cache = getattr(model, "prefix_cache", None)
    if cache is not None:
        cache.engine.blocks.evict(cfg.kv_budget_mb * 1024 * 1024)
        for reason in cache.engine.stats.refused:
            out.warn(f"KV blocks: {reason}")
    if show_stats:
        t = result.timings
        print(f"[stats] prompt {stats.prompt_tokens} tokens: prefilled {stats.prefilled_tokens}, restored "
              f"{stats.restored_tokens}; generated {stats.completion_tokens} in {stats.calls} calls; answer: "
              f"first token {t.get('answer_ttft_s', '-')} s, {t.get('answer_tokens_per_s', '-')} tokens/s; "
              f"total {t['total_s']} s", file=sys.stderr)
    out.emit(result)
    if not result.evidence:
        raise typer.Exit(EXIT_NO_MATCH)


def _open_model(store, cfg, out: Output, kv: bool):
    """The configured model; a local one keeps ask's shared prompt prefixes as KV blocks when ``kv``."""
    from memcli.kv import block_store, keep_prompt_prefixes, keeps_blocks

    keep = kv and keeps_blocks(cfg)
    model = load_model(cfg, out, kv_sequences=2 if keep else 1)
    if keep and getattr(model, "llm", None) is not None:
        keep_prompt_prefixes(model, block_store(store, cfg))
    return model


def _trace_round(record: dict) -> None:
    """One round (or retrieval step) on stderr: what was called and what came back."""
    if "round" not in record:
        print(f"[trace] {jsonlib.dumps(record, ensure_ascii=False)}", file=sys.stderr)
        return
    cited = ", ".join("{doc_id}:{start_line}-{end_line}".format(**s) for s in record["relevant_snippets"])
    print(f"[round {record['round']}] done={record['done']} snippets: {cited or '-'}", file=sys.stderr)
    for call in record["tool_calls"]:
        shown = jsonlib.dumps(call["arguments"], ensure_ascii=False)[:200]
        outcome = f"error: {call['error']}" if "error" in call else f"{len(call['lines'])} lines " + \
            " ".join(call["lines"][:8])
        print(f"  {call['name']} {shown} -> {outcome}", file=sys.stderr)
    for reason in record.get("rejected_snippets", []):
        print(f"  snippet rejected: {reason}", file=sys.stderr)
    sys.stderr.flush()


@register(AskResult)
def _render(result: AskResult, out: Output) -> None:
    if result.answer is not None:
        out.write(result.answer)
        out.write("")
        out.write("sources: " + ", ".join(f"{e.doc}:{e.start_line}-{e.end_line}" for e in result.read))
        rest = [e for e in result.evidence if not any(r.doc == e.doc and r.start_line <= e.end_line
                                                      and e.start_line <= r.end_line for r in result.read)]
        if rest:
            out.write("more evidence: " + ", ".join(f"{e.doc}:{e.start_line}-{e.end_line}" for e in rest))
        return
    for item in result.evidence:
        out.write(f"{item.doc}:{item.start_line}-{item.end_line}")
        out.write(item.text)
        out.write("")
