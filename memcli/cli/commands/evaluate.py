"""memcli eval locomo."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from memcli.cli.app import app
from memcli.cli.common import JsonOpt, QuietOpt, VerboseOpt, output, overrides
from memcli.cli.output import Output, register
from memcli.eval.locomo import CATEGORIES, EvalResult, evaluate, parse_categories
from memcli.eval.qa import QaResult

eval_app = typer.Typer(help="Benchmarks of memory quality and cost.", no_args_is_help=True)
app.add_typer(eval_app, name="eval")


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
        "--mode", help="ask (the default reader) | agent | no-agent | evidence | evidence-only | kv-compose | "
                         "bm25-turns | full-context | oracle")] = "ask",
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
    out = output(ctx, json, quiet, verbose)
    wanted = parse_categories(categories)
    with out.stages() as progress:
        result = evaluate(files, mode=mode, memory=memory, budget=budget, answer_context=answer_context,
                          categories=wanted, questions=questions, sample=sample, consolidate_llm=not no_llm,
                          out_path=out_path, resume=resume, settings=overrides(ctx),
                          progress=lambda done, total: progress(f"eval {mode}", done, total), verbose=out.verbose)
    out.emit(result)


@register(EvalResult)
def _render(result: EvalResult, out: Output) -> None:
    def num(value, pct=False) -> str:
        return "-" if value is None else f"{value:.1%}" if pct else f"{value:.3f}" if value < 10 else f"{value:.0f}"

    rows = []
    for key, row in result.summary.items():
        label = "all" if key == "all" else f"{CATEGORIES.get(int(key), key)} ({key})"
        rows.append([label, str(row["questions"]), num(row["f1"]), num(row["bleu1"]), num(row.get("abstained"), True),
                     num(row["recall_all"], True),
                     num(row["recall_partial"], True), num(row.get("answer_shown"), True), num(row["evidence_tokens"]), num(row["read_tokens"]),
                     num(row["prompt_tokens"]),
                     num(row["prefilled_tokens"]), num(row["restored_tokens"]), num(row["latency_s"])])
    out.table(f"LoCoMo: mode {result.mode}, memory {result.memory}, budget {result.budget}, "
              f"answer context {result.answer_context or 'all'}",
              ["category", "questions", "F1", "BLEU-1", "I don't know", "recall (all)", "recall (partial)", "answer shown", "evidence tokens",
               "read tokens", "prompt tokens", "prefilled", "restored", "latency s"], rows)
    if result.out:
        out.info(f"records: {result.out}" + (f" ({result.resumed} from an earlier run)" if result.resumed else ""))


@eval_app.command("qa")
def qa(
    ctx: typer.Context,
    files: Annotated[list[Path], typer.Argument(metavar="FILE...", help="QA sets in the SQuAD, FriendsQA or Molweni "
                                                "format (JSON, or gzipped JSON).")],
    limit: Annotated[Optional[int], typer.Option(
        "--limit", metavar="N", help="A seeded sample of at most N questions a file.")] = None,
    seed: Annotated[int, typer.Option("--seed", help="The sample's seed.")] = 0,
    part: Annotated[Optional[str], typer.Option(
        "--part", metavar="I/N", help="Only the I-th of N runs of the file's passages (articles, dialogues), "
                                      "in file order: a split that keeps a passage on one side.")] = None,
    threshold: Annotated[Optional[float], typer.Option(
        "--threshold", help="No-answer margin (default: the one the reader was shipped with).")] = None,
    out_path: Annotated[Optional[Path], typer.Option(
        "--out", metavar="FILE", help="Write one JSON record per question to FILE (JSONL).")] = None,
    json: JsonOpt = False, quiet: QuietOpt = False, verbose: VerboseOpt = False,
) -> None:
    """Score memcli's reader (the answer of the small profile) on extractive QA sets: EM, F1, no-answer.

    Each question is read with its whole passage or dialogue, in windows with a stride, as ask reads
    memory; the answer is the best span, or none when the no-answer output wins. Scores are SQuAD's
    (exact match and token F1 against the best gold answer; a question without one is right when no
    answer is given). No chat model is loaded; your store is not touched.
    """
    import json as json_lib

    from memcli.eval.qa import evaluate as evaluate_qa

    out = output(ctx, json, quiet, verbose)
    records: list = []
    with out.stages() as progress:
        result = evaluate_qa(files, limit=limit, seed=seed, threshold=threshold, part=part, records=records,
                             progress=lambda name, done, total: progress(f"eval qa {name}", done, total))
    if out_path is not None:
        from memcli.store.atomic import atomic_write

        atomic_write(out_path, "".join(json_lib.dumps(r) + "\n" for r in records))
    out.emit(result)


@register(QaResult)
def _render_qa(result: QaResult, out: Output) -> None:
    def num(value) -> str:
        return "-" if value is None else f"{value:.3f}"

    rows = [[Path(f["file"]).name, f["format"], f"{f['questions']}/{f['of']}", num(f["em"]), num(f["f1"]),
             num(f["has_answer_f1"]), str(f["no_answer"]), num(f["no_answer_right"]), num(f["best_threshold"])]
            for f in result.files]
    out.table(f"memcli's reader (no-answer margin {result.threshold:.2f}), {result.seconds:.0f} s",
              ["file", "format", "questions", "EM", "F1", "answerable F1", "no answer", "no answer right",
               "best threshold"], rows)
