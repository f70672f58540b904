"""memcli ask."""

from __future__ import annotations

import json as jsonlib
import sys
from typing import Annotated, Optional

import typer

from memcli.cli.app import app
from memcli.cli.common import ClockOpt, JsonOpt, QuietOpt, SinceOpt, UntilOpt, VerboseOpt, memory, output
from memcli.cli.output import Output, register
from memcli.errors import EXIT_NO_MATCH, UsageError
from memcli.retrieve.ask import AskResult


@app.command()
def ask(
    ctx: typer.Context,
    question: Annotated[str, typer.Argument(metavar="QUESTION|-", help="The question, or - to read it from stdin.")],
    reader: Annotated[Optional[str], typer.Option(
        "--reader", metavar="READER", help="agent | no-agent | evidence | evidence-only (default: ask.reader; "
                                           "auto: agent for a capable model, evidence for a small one).")] = None,
    evidence_only: Annotated[bool, typer.Option(
        "--evidence-only", help="Return the evidence only: no answer, no model needed (--reader evidence-only).")]
    = False,
    no_agent: Annotated[bool, typer.Option(
        "--no-agent", help="Hybrid reader: one model call selects documents by summary, BM25 does the rest "
                           "(--reader no-agent).")] = False,
    budget: Annotated[Optional[int], typer.Option(
        "--budget", metavar="TOKENS", help="Evidence budget in tokens (default: ask.budget, 2000).")] = None,
    answer_context: Annotated[Optional[int], typer.Option(
        "--answer-context", metavar="TOKENS",
        help="Evidence the answering model reads, best-ranked first; 0: all of it "
             "(default: ask.answer_context, 600; --kv-compose with the extractive answer: the budget).")] = None,
    max_rounds: Annotated[Optional[int], typer.Option(
        "--max-rounds", metavar="N", help="Tool-calling rounds of the agent (default: ask.max_rounds, 7).")] = None,
    trace: Annotated[bool, typer.Option(
        "--trace", help="Show each round's tool calls and results on stderr.")] = False,
    kv: Annotated[Optional[bool], typer.Option(
        "--kv/--no-kv", help="Restore shared prompt prefixes from KV blocks and save new ones "
                             "(local model; default: ask.kv, on).")] = None,
    kv_compose: Annotated[bool, typer.Option(
        "--kv-compose", help="Answer from memory units placed as composed KV blocks (local model): only the "
                             "question is prefilled; approximate (see kv.compose_recompute).")] = False,
    select: Annotated[Optional[str], typer.Option(
        "--select", metavar="HOW", help="How --kv-compose picks memory units: text, latent or fused "
                                        "(default: kv.select, text).")] = None,
    answer: Annotated[Optional[str], typer.Option(
        "--answer", metavar="HOW", help="extract (a span of the evidence, scored by the model) or generate "
                                        "(written by the model, checked against the evidence); default: "
                                        "ask.answer (auto: extract for a small model).")] = None,
    where: Annotated[Optional[list[str]], typer.Option(
        "--where", metavar="KEY=VALUE", help="Only entries whose signature has this value (project=/home/me/app, "
                                             "conv=..., speaker=...); repeatable; the evidence readers.")] = None,
    as_of: Annotated[Optional[str], typer.Option(
        "--as-of", metavar="DAY", help="Answer from what had been said by the end of DAY (YYYY-MM-DD): a fact "
                                       "replaced since is current again; the evidence readers.")] = None,
    since: SinceOpt = None, until: UntilOpt = None, clock: ClockOpt = None,
    show_stats: Annotated[bool, typer.Option(
        "--stats", help="Print tokens prefilled and restored, time to first token and generation speed "
                        "on stderr.")] = False,
    json: JsonOpt = False, quiet: QuietOpt = False, verbose: VerboseOpt = False,
) -> None:
    """Answer a question from memory, citing the document lines it used.

    The reader follows the model's profile (see `memcli status`) unless
    --reader or ask.reader says otherwise. agent (a capable model's
    default): the model searches the library for several rounds with grep,
    grep_doc, search, list_docs and read_lines, and cites the line ranges it
    found relevant; those are expanded to their heading block, the newest
    CURRENT entries are added, and BM25 fills the rest of --budget.
    evidence (a small model's default): the deterministic evidence reader
    (BM25 over heading sections and sentence embeddings), then one answer
    call. no-agent: one model call picks documents from the
    catalog, BM25 ranks entries. evidence-only: no model at all; outer agents
    get the evidence and answer themselves. The answer comes from the
    best-ranked --answer-context tokens of the evidence (listed as "read"
    in --json). A small model's answer is extractive (--answer extract): a
    span of those lines that memcli's own reader (a MiniLM trained for
    question answering, no chat model) picks, or for "when" the date of
    the line; --json says which line, span and scores decided. A capable model writes it (--answer generate); an
    answer holding a word, name or number the lines do not becomes "I
    don't know". "I don't know" also when the evidence does not support an
    answer (the person asked about never appears, no line holds the
    question's words, or the reader's no-answer output wins).
    --as-of DAY answers from what had been said by the end of that day;
    --since/--until read only entries of a stretch of time, said then or
    (--clock event) speaking of it.
    Exit 1 when no evidence is found or the answer is "I don't know" (the
    evidence is still printed).

    With a local model, the prompt parts other questions share (instructions,
    catalog, and the answer's evidence) are kept as KV blocks in the store's
    kv/ directory and restored instead of prefilled (--no-kv: not at all).
    --kv-compose goes further: the evidence ranking picks memory units (a
    topic document's section or a day of CURRENT, up to 512 tokens each)
    within --answer-context tokens (0: --budget), each unit's block (made
    once, after the instructions alone) is placed after the restored
    instructions, and only the question and the template tokens around it
    are prefilled. The result is close to,
    not identical with, reading the same text (docs/benchmarks.md); with
    kv.compose_check, a composition unsure of the answer's first token is
    prefilled in full instead (--json: check).
    --select latent ranks the units by the attention the model's retrieval
    heads would pay their blocks (the heads are found once per model, in a
    few seconds; every unit's block is made first, once); --select fused
    merges the two rankings by reciprocal rank.
    """
    out = output(ctx, json, quiet, verbose)
    if sum(bool(x) for x in (reader, evidence_only, no_agent)) > 1:
        raise UsageError("--reader, --evidence-only and --no-agent exclude each other")
    if question == "-":
        question = sys.stdin.read()
    reader = "evidence-only" if evidence_only else "no-agent" if no_agent else reader
    values = {}
    for item in where or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--where takes KEY=VALUE, not {item!r}")
        values[key.strip()] = value
    with out.stages() as progress:
        result = memory(ctx).ask(question, reader=reader, budget=budget, answer_context=answer_context,
                                 max_rounds=max_rounds, kv=kv, on_step=_trace_round if trace else None,
                                 progress=progress, kv_compose=kv_compose, select=select,
                                 answer=answer, where=values or None, as_of=as_of,
                                 since=since, until=until, clock=clock)
    if result.problems:
        out.debug("model problems: " + "; ".join(result.problems))
    for warning in result.warnings:
        out.warn(warning)
    if show_stats:
        t, n = result.timings, result.tokens
        composed = f", composed {n['composed']}" if "composed" in n else ""
        if result.check:
            composed += (f" (first-token margin {result.check['margin']}"
                         + ("; repaired by a full prefill)" if result.check["repaired"] else ")"))
        print(f"[stats] prompt {n['prompt']} tokens: prefilled {n['prefilled']}, restored {n['restored']}{composed}; "
              f"generated {n['generated']} in {n['model_calls']} calls; answer: first token "
              f"{t.get('answer_ttft_s', '-')} s, {t.get('answer_tokens_per_s', '-')} tokens/s; "
              f"total {t['total_s']} s", file=sys.stderr)
    out.emit(result)
    if not result.evidence or result.abstained:
        raise typer.Exit(EXIT_NO_MATCH)


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


DECIDING_TEXT = 200  # characters of the deciding line shown under the answer (--json has it whole)


def deciding_line(decided: dict | None) -> str | None:
    """The line that decided an answer, for a person to check it: ``-- Caroline, 2024-03-03 18:40 (CURRENT:28):
    "text"`` (None when no one line did: a model's answer)."""
    said = (decided or {}).get("said")
    if not said:
        return None
    text = " ".join(str(said.get("text", "")).split())
    text = text if len(text) <= DECIDING_TEXT else text[:DECIDING_TEXT - 1].rstrip() + "…"
    when = f", {said['time'].replace('T', ' ')}" if said.get("time") else ""
    return f"-- {said.get('speaker') or 'note'}{when} ({decided['line']}): \"{text}\""


@register(AskResult)
def _render(result: AskResult, out: Output) -> None:
    said = result.asked_time  # the question's words bounded what was read
    bound = f"as of {said['as_of']} (\"{said['from']}\")" if said else ""
    if result.answer is not None:
        out.write(result.answer)
        out.write("")
        if result.abstained:  # the evidence read, for the person to judge
            out.write(f"(no answer: {result.why})")
            out.write("")
            for item in result.read:
                out.write(item.citation)
                out.write(item.text)
                out.write("")
        else:
            if line := deciding_line(result.decided):
                out.write(line)
                out.write("")
            out.write("sources: " + ", ".join(e.citation for e in result.read))
        if result.unread:
            out.write("more evidence: " + ", ".join(e.citation for e in result.unread))
        if bound:
            out.write(bound)
        return
    if bound:
        out.write(bound)
        out.write("")
    for item in result.evidence:
        out.write(item.citation)
        out.write(item.text)
        for old in item.replaced:  # what the range's entries superseded: their history
            when = f"[{old['time'].replace('T', ' ')}] " if old.get("time") else ""
            out.write(f"  (replaced by seq {old['by']}: {when}{old['text']})")
        out.write("")
