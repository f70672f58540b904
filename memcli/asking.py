"""``Memory.ask``'s work: the reader and the answer style chosen from the options and the store's profile, the
entries' vectors brought up to date, a model opened only when the answer needs one, the question asked
(:func:`memcli.retrieve.ask.ask`, or from composed KV blocks), and the model's KV blocks kept within their
budget. The CLI, the MCP server and ``eval`` reach it through :meth:`memcli.memory.Memory.ask`."""

from __future__ import annotations

import time
from collections.abc import Callable

from memcli.dates import Period
from memcli.errors import UsageError
from memcli.retrieve.ask import AskResult, ask, check_options
from memcli.semantic import upkeep


def ask_memory(memory, question: str, *, reader: str | None, budget: int | None, answer_context: int | None,
               max_rounds: int | None, kv: bool | None, on_step: Callable[[dict], None] | None, keep_evidence: bool,
               progress, kv_compose: bool, select: str | None, answer: str | None, where: dict[str, str] | None,
               recent: bool, period: Period | None, as_of: str | None) -> AskResult:
    """``memory.ask(...)`` (its docstring says what each option does); ``period`` parsed already."""
    cfg = memory.settings
    if not isinstance(question, str) or not question.strip():  # said before any model or index loads
        raise UsageError("the question is empty")
    if kv_compose and (where or recent or as_of or period):
        raise UsageError("--where, --as-of and --since/--until keep to entries of the evidence readers, "
                         "not --kv-compose")
    if kv_compose:
        from memcli.kv.composed_ask import ask_with_blocks

        return ask_with_blocks(question, memory.settings, memory.store, memory.index, engine=memory.kv_engine,
                               vectors=lambda: upkeep.for_question(cfg, memory.store, memory.index, progress),
                               reader=reader, budget=budget, answer_context=answer_context, progress=progress,
                               select=select or cfg.kv_select, answer=answer or memory.answer_style())
    if select is not None:
        raise UsageError("--select chooses the memory units of --kv-compose")
    reader = reader or ("evidence" if where or as_of or period else memory.default_reader())
    budget = budget if budget is not None else cfg.ask_budget
    reading = answer_context if answer_context is not None else cfg.ask_answer_context
    rounds = max_rounds if max_rounds is not None else cfg.ask_max_rounds
    check_options(reader=reader, budget=budget, answer_context=reading, max_rounds=rounds)
    embedding, unembedded = upkeep.for_question(memory.settings, memory.store, memory.index, progress)
    # no model answers the evidence-only reader: its profile (read from the GGUF) is not needed
    style = answer or ("generate" if reader == "evidence-only" else memory.answer_style())
    begin = time.perf_counter()
    # memcli's trained reader answers the evidence reader's extractive answer: no chat model loads
    reads_alone = reader == "evidence-only" or (reader == "evidence" and style == "extract")
    model = None if reads_alone else memory.answer_model(cfg.ask_kv if kv is None else kv)
    loaded = time.perf_counter() - begin
    result = ask(memory.store, memory.index, model, question, reader=reader, budget=budget,
                 answer_context=reading, max_rounds=rounds, on_step=on_step, keep_evidence=keep_evidence,
                 compact=cfg.ask_compact, where=where, recent=recent, answer=style, as_of=as_of,
                 period=period)
    result.timings = {"embed_s": round(embedding, 3), "model_load_s": round(loaded, 3), **result.timings,
                      "total_s": round(result.timings["total_s"] + loaded, 3)}
    result.unembedded = unembedded
    cache = getattr(model, "prefix_cache", None)
    if cache is not None:
        cache.engine.blocks.evict(cfg.kv_budget_mb * 1024 * 1024)
        result.warnings = [f"KV blocks: {reason}" for reason in cache.engine.stats.refused]
        cache.engine.stats.refused.clear()
    if unembedded:
        result.warnings.append(upkeep.unembedded_note(unembedded))
    return result
