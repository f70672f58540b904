"""memcli eval locomo."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Optional

import typer

from memcli.cli.app import app
from memcli.cli.common import JsonOpt, QuietOpt, VerboseOpt, load_model, output, settings
from memcli.cli.output import Output, register
from memcli.errors import UsageError

eval_app = typer.Typer(help="Benchmarks of memory quality and cost.", no_args_is_help=True)
app.add_typer(eval_app, name="eval")


@dataclass
class EvalResult:
    mode: str
    memory: str
    budget: int
    answer_context: int
    model: dict | None
    conversations: list[str]
    out: str | None
    resumed: int
    summary: dict

    def to_dict(self) -> dict:
        return {"mode": self.mode, "memory": self.memory, "budget": self.budget,
                "answer_context": self.answer_context, "model": self.model,
                "conversations": self.conversations, "out": self.out, "resumed": self.resumed,
                "summary": self.summary}


def _categories(spec: str) -> set[int]:
    try:
        chosen = {int(part) for part in spec.split(",") if part.strip()}
    except ValueError:
        raise UsageError(f"--categories takes numbers 1-5 separated by commas, not {spec!r}") from None
    if not chosen or not chosen <= {1, 2, 3, 4, 5}:
        raise UsageError("--categories takes numbers 1-5 (5: adversarial)")
    return chosen


@eval_app.command("locomo")
def locomo(
    ctx: typer.Context,
    files: Annotated[list[Path], typer.Argument(metavar="FILE...", help="LoCoMo files (a conversation, a sample or "
                                                "the locomo10 list).")],
    sample: Annotated[Optional[str], typer.Option("--sample", metavar="ID", help="Only this sample id.")] = None,
    questions: Annotated[Optional[int], typer.Option(
        "--questions", metavar="N", help="At most N questions per conversation, taken round-robin over the "
                                         "categories.")] = None,
    categories: Annotated[str, typer.Option("--categories", help="Question categories (5 = adversarial).")] = "1,2,3,4",
    mode: Annotated[str, typer.Option(
        "--mode", help="ask | evidence-only | no-agent | bm25-turns | full-context | oracle")] = "ask",
    memory: Annotated[str, typer.Option("--memory", help="raw (ingested turns) or consolidated.")] = "raw",
    budget: Annotated[Optional[int], typer.Option(
        "--budget", metavar="TOKENS", help="Evidence budget (default: ask.budget, 2000).")] = None,
    answer_context: Annotated[Optional[int], typer.Option(
        "--answer-context", metavar="TOKENS", help="Evidence the answer reads in the ranked modes, best first; "
                                                   "0: all (default: ask.answer_context, 600).")] = None,
    no_llm: Annotated[bool, typer.Option(
        "--no-llm", help="With --memory consolidated: consolidate without the model.")] = False,
    out_path: Annotated[Optional[Path], typer.Option(
        "--out", metavar="FILE", help="Write one JSON record per question to FILE (JSONL).")] = None,
    resume: Annotated[bool, typer.Option("--resume", help="Skip questions already recorded in --out.")] = False,
    json: JsonOpt = False, quiet: QuietOpt = False, verbose: VerboseOpt = False,
) -> None:
    """Score memory on LoCoMo questions: answer F1, BLEU-1, evidence recall, tokens, latency.

    For each conversation a fresh temporary store is built (ingest, and with
    --memory consolidated a consolidation), then every selected question
    goes through --mode. Baselines run the same way with the same model and
    budget: bm25-turns (single entries by BM25), full-context (the newest
    entries that fit the context window), oracle (exactly the gold evidence).
    Category 5 (adversarial) is left out unless --categories names it.
    Deterministic: temperature 0 and the configured seed. Your store is not
    touched.
    """
    from memcli.eval.locomo import (MODES, Runner, append_record, conversation_name, load_conversations, read_done,
                                    select, summarize)

    out = output(ctx, json, quiet, verbose)
    if mode not in MODES:
        raise UsageError(f"unknown --mode {mode!r} (modes: {', '.join(MODES)})")
    if memory not in ("raw", "consolidated"):
        raise UsageError("--memory is raw or consolidated")
    if resume and out_path is None:
        raise UsageError("--resume needs --out FILE")
    if out_path is not None and out_path.exists() and out_path.stat().st_size and not resume:
        raise UsageError(f"{out_path} exists", hint="pass --resume to continue it, or choose another --out")
    if questions is not None and questions < 1:
        raise UsageError("--questions must be at least 1")
    wanted = _categories(categories)
    cfg = settings(ctx)
    limit = budget if budget is not None else cfg.ask_budget
    reading = answer_context if answer_context is not None else cfg.ask_answer_context
    if limit < 50:
        raise UsageError("--budget must be at least 50 tokens")
    if reading < 0:
        raise UsageError("--answer-context must be 0 (all the evidence) or a number of tokens")
    conversations = load_conversations(files, sample)
    needs_model = mode != "evidence-only" or (memory == "consolidated" and not no_llm and cfg.consolidate_llm)
    from memcli.kv import keeps_blocks

    kv = cfg.ask_kv and mode != "evidence-only" and keeps_blocks(cfg)  # as ask runs: prefixes as KV blocks
    model = load_model(cfg, out, kv_sequences=2 if kv else 1) if needs_model else None
    kv = kv and getattr(model, "llm", None) is not None
    runner = Runner(mode, memory, limit, cfg, model, consolidate_model=not no_llm and cfg.consolidate_llm,
                    max_rounds=cfg.ask_max_rounds, kv=kv, answer_context=reading)
    done = read_done(out_path) if resume and out_path is not None else {}
    plan = [(conv, select(conv.questions, wanted, questions)) for conv in conversations]
    records = []

    total = sum(len(picked) for _, picked in plan)
    with out.progress(f"eval {mode}", total) as advance:
        def keep(record: dict) -> None:
            records.append(record)
            if out_path is not None:
                append_record(out_path, record)
            advance(len(records))  # resumed records included

        resumed = 0
        for conv, picked in plan:
            name = conversation_name(conv)
            prior = [done[k] for k in done if k[0] == name and k[2:] == runner.setting
                     and k[1] in {n for n, _ in picked}]
            records.extend(prior)
            resumed += len(prior)
            runner.run(conv, picked, done, keep)
    out.emit(EvalResult(mode=mode, memory=memory, budget=limit, answer_context=reading,
                        model=model.describe() if model else None,
                        conversations=[c.source + "#" + c.sample_id for c in conversations],
                        out=str(out_path) if out_path else None, resumed=resumed, summary=summarize(records)))


@register(EvalResult)
def _render(result: EvalResult, out: Output) -> None:
    from memcli.eval.locomo import CATEGORIES

    def num(value, pct=False) -> str:
        return "-" if value is None else f"{value:.1%}" if pct else f"{value:.3f}" if value < 10 else f"{value:.0f}"

    rows = []
    for key, row in result.summary.items():
        label = "all" if key == "all" else f"{CATEGORIES.get(int(key), key)} ({key})"
        rows.append([label, str(row["questions"]), num(row["f1"]), num(row["bleu1"]), num(row["recall_all"], True),
                     num(row["recall_partial"], True), num(row["evidence_tokens"]), num(row["read_tokens"]),
                     num(row["prompt_tokens"]),
                     num(row["prefilled_tokens"]), num(row["restored_tokens"]), num(row["latency_s"])])
    out.table(f"LoCoMo: mode {result.mode}, memory {result.memory}, budget {result.budget}, "
              f"answer context {result.answer_context or 'all'}",
              ["category", "questions", "F1", "BLEU-1", "recall (all)", "recall (partial)", "evidence tokens",
               "read tokens", "prompt tokens", "prefilled", "restored", "latency s"], rows)
    if result.out:
        out.info(f"records: {result.out}" + (f" ({result.resumed} from an earlier run)" if result.resumed else ""))
