"""``ask --kv-compose``: answer from memory units placed as composed KV blocks, prefilling only the question.

The prompt is the answer's (:mod:`memcli.retrieve.answer`), rendered by the
model's chat template: system instructions, then one user message of
excerpts and the question. Token by token:

- the template's text up to the user message's content and ``Excerpts:``:
  an exact chain block, restored;
- one unit (:mod:`memcli.kv.units`) after another: each from its own block,
  made once after that prefix alone and moved to its place
  (:meth:`~memcli.kv.engine.KVEngine.compose`); with ``recompute`` N, the
  first N tokens of each unit after the first are prefilled in place;
- the question and the template's tokens closing the user message and
  opening the assistant's: prefilled. The composition then checks itself
  (:func:`checked`: an unsure first answer token, and the units are read in
  full instead), and the answer is generated after it. With the extractive
  answer (the ``small`` profile's) no model reads the composition: memcli's
  trained reader answers from the units' entries (:mod:`memcli.retrieve.reading`).

Units are ranked by the deterministic evidence ranking (their best-ranked
entry first), by the attention the question's retrieval heads pay their
blocks in latent space, or both fused (:func:`rank_units`); the best that fit ``budget``
tokens are placed best last, nearest the question. The evidence the result
cites is the units' entries.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from memcli.errors import ConfigError, UsageError
from memcli.kv import keeps_blocks
from memcli.kv.engine import KVEngine, Unit
from memcli.kv.latent import HEADS, BlockKeys, Summaries, head_scores, kv_heads_of, question_queries, retrieval_heads
from memcli.kv.units import MemoryUnit, Units, fill
from memcli.llm.base import CallStats
from memcli.retrieve.answer import ANSWER_SYSTEM, MAX_ANSWER_TOKENS, UNKNOWN, clean, grounded, speakers
from memcli.retrieve.ask import AskResult, check_options, respond
from memcli.retrieve.evidence_reader import ANSWERING, rank_fusion, ranked_entries
from memcli.semantic.upkeep import unembedded_note
from memcli.store.lines import Library

EXCERPTS = "Excerpts:\n"
_USER = "\x1eUSER\x1e"


class ComposedPrompt:
    """The token pieces of the answer prompt for one model: the restored prefix, then (per question)
    the units and the tail."""

    def __init__(self, engine: KVEngine):
        self.engine = engine
        text = engine.rt.render_chat([{"role": "system", "content": ANSWER_SYSTEM},
                                      {"role": "user", "content": _USER}])[0]
        if text.count(_USER) != 1:
            raise ConfigError("the model's chat template does not render a user message as given")
        before, after = text.split(_USER)
        self.prefix = Unit("ask-prefix", engine.tokenize(before, special=True, bos=True) + engine.tokenize(EXCERPTS))
        self.closing = engine.tokenize(after, special=True)

    def tail(self, question: str) -> list[int]:
        """The question and the template's tokens after it (what a composed ask prefills)."""
        return self.engine.tokenize(f"\nQuestion: {question}") + self.closing


SELECTIONS = ("text", "latent", "fused")
FUSION_K = 3  # reciprocal-rank fusion of the text and latent rankings (benchmarks/tune_latent.py)
LATENT_WEIGHT = 0.5


def rank_units(engine: KVEngine, prompt: ComposedPrompt, store, index, question: str, select: str,
               progress=None, order: list[tuple[str, int]] | None = None) -> list[MemoryUnit]:
    """The store's memory units for ``question``, best first, by ``select``:

    - ``text``: the evidence ranking (units in the order of their best-ranked entry; none when no word
      of the question is in memory);
    - ``latent``: every unit, by the attention the question's retrieval heads would pay its block
      (:mod:`memcli.kv.latent`); blocks not made yet are made first (``progress(what, done, total)``);
    - ``fused``: the two rankings by reciprocal rank (:func:`fuse`).

    ``order``: the evidence ranking of the entries, when the caller has it already.
    """
    if select not in SELECTIONS:
        raise UsageError(f"unknown selection {select!r} (choose from {', '.join(SELECTIONS)})")
    library = Library(store)
    units = Units(library)
    if select != "latent" and order is None:
        order = ranked_entries(library, index, question, tuning=ANSWERING)
    text = units.ranked(order) if select != "latent" else []
    if select == "text":
        return text
    latent = latent_ranking(engine, prompt, units.every(), question, progress)
    return latent if select == "latent" else fuse(text, latent)


def fuse(text: list[MemoryUnit], latent: list[MemoryUnit], k: float = FUSION_K,
         weight: float = LATENT_WEIGHT) -> list[MemoryUnit]:
    """Units by 1/(k + text rank) + weight/(k + latent rank) (:func:`~memcli.retrieve.evidence_reader.rank_fusion`;
    a unit missing from a ranking gets nothing from it); ties keep the text ranking's order."""
    score = rank_fusion([u.label for u in text], [u.label for u in latent], k, weight)
    unit = {u.label: u for u in latent} | {u.label: u for u in text}
    return [unit[label] for label in sorted(score, key=lambda label: -score[label])]


def unit_blocks(engine: KVEngine, prompt: ComposedPrompt, units: list[MemoryUnit],
                on_unit=None) -> tuple[list[str], int]:
    """The keys of ``units``' composed blocks, each made first when it is not stored (after the
    prompt's prefix alone, as :meth:`KVEngine.compose` places them), and their tokens in all;
    ``on_unit(done, total)`` follows the units."""
    placed = [Unit(u.label, engine.tokenize(u.text)) for u in units]
    return engine.composed_blocks(prompt.prefix, placed, on_unit=on_unit), sum(len(u.tokens) for u in placed)


def unit_head_scores(engine: KVEngine, prompt: ComposedPrompt, every: list[MemoryUnit], question: str,
                     n_heads: int = HEADS, progress=None):
    """The units of ``every`` that have a block, and an array (units, heads): the score each of the
    model's ``n_heads`` best retrieval heads gives each unit's block (:func:`memcli.kv.latent.head_scores`)."""
    every = [u for u in every if u.lines]
    heads = retrieval_heads(engine, prompt.prefix, progress).best(n_heads)
    shape = engine.rt.attention_shape
    group = shape["n_head"] // shape["n_head_kv"]
    kv_heads = kv_heads_of(heads, group)
    told = (lambda done, total: progress("making memory blocks", done, total)) if progress else None
    keys, _ = unit_blocks(engine, prompt, every, told)
    summaries = Summaries(engine.blocks, engine, kv_heads)
    found = [(unit, summaries.get(key)) for unit, key in zip(every, keys)]
    found = [(unit, summary) for unit, summary in found if summary is not None]
    table = head_scores(question_queries(engine, question), BlockKeys([s for _, s in found]), heads, kv_heads, group)
    return [unit for unit, _ in found], table


def latent_ranking(engine: KVEngine, prompt: ComposedPrompt, every: list[MemoryUnit], question: str,
                   progress=None) -> list[MemoryUnit]:
    """``every`` unit by the attention the question's retrieval heads would pay its block, best first."""
    units, table = unit_head_scores(engine, prompt, every, question, progress=progress)
    score = table.mean(axis=1) if len(units) else []
    return [units[i] for i in sorted(range(len(units)), key=lambda i: -score[i])]


def composed_ask(engine: KVEngine, store, index, question: str, *, budget: int, recompute: int = 0,
                 select: str = "text", max_tokens: int = MAX_ANSWER_TOKENS, progress=None,
                 answer: str = "generate", check: float = 0.0) -> AskResult:
    """Answer ``question`` from composed memory units (see the module's description), as ``answer``
    says: ``extract`` (memcli's reader answers from the units' entries; nothing is composed) or
    ``generate``; a composition less sure of the answer's first token than ``check`` is repaired first
    (:func:`checked`)."""
    question = question.strip()
    begin = time.perf_counter()
    result = AskResult(question=question, mode="evidence", answer=None, evidence=[])
    before = engine.stats.restored, engine.stats.composed, engine.stats.prefilled
    prompt = ComposedPrompt(engine)
    with store.reading():
        order = ranked_entries(Library(store), index, question, tuning=ANSWERING) \
            if select != "latent" else None
        ranked = rank_units(engine, prompt, store, index, question, select, progress=progress, order=order)
        units = fill(ranked, budget, lambda text: len(engine.tokenize(text)))
    result.tool_calls = [{"tool": "select", "by": select, "query": question, "units": [u.label for u in units]}]
    result.evidence = [e for u in units for e in u.evidence]
    result.read = result.evidence
    retrieved = time.perf_counter()
    result.timings = {"retrieval_s": round(retrieved - begin, 3)}
    stats = CallStats()
    if not units:
        result.answer, result.abstained, result.why = UNKNOWN, True, "no evidence"
    elif answer == "extract":  # memcli's reader answers: no model reads the composition
        with store.reading():
            said = respond(None, store, question, result.read, Library(store), stats, answer="extract", index=index)
        result.answer, result.abstained, result.why, result.decided = said.text, said.abstained, said.why, \
            said.decided or {}
        result.timings["answer_s"] = round(time.perf_counter() - retrieved, 3)
    else:
        placed = list(reversed(units))  # the best nearest the question
        engine.compose(prompt.prefix, [Unit(u.label, engine.tokenize(u.text)) for u in placed], recompute=recompute)
        whole = engine.context_tokens() + prompt.tail(question)
        result.check = checked(engine, prompt.prefix, whole, check)
        composed_s = time.perf_counter() - retrieved
        done = engine.generate(whole, max_tokens=max_tokens, stop=["\n"])
        stats.calls, stats.prompt_tokens, stats.completion_tokens = 1, done.prompt_tokens, len(done.tokens)
        ttft_s = done.ttft_s
        result.answer = clean(done.text, speakers(result.evidence))[:600] or UNKNOWN
        if result.answer != UNKNOWN and not grounded(result.answer, result.evidence):
            result.answer, result.why = UNKNOWN, "the model's answer says what the evidence read does not"
        result.abstained = result.answer == UNKNOWN
        result.why = result.why or ("the model found no answer" if result.abstained else "written by the model")
        if done.tokens_per_s is not None:
            result.timings["answer_tokens_per_s"] = round(done.tokens_per_s, 2)
        result.timings.update({"compose_s": round(composed_s, 3), "answer_ttft_s": round(composed_s + ttft_s, 3),
                               "answer_s": round(time.perf_counter() - retrieved, 3)})
    restored = engine.stats.restored - before[0]
    composed = engine.stats.composed - before[1]
    result.tokens = {"evidence": sum(e.tokens for e in result.evidence), "read": sum(e.tokens for e in result.read),
                     "prompt": stats.prompt_tokens, "restored": restored - composed, "composed": composed,
                     "prefilled": engine.stats.prefilled - before[2], "generated": stats.completion_tokens,
                     "model_calls": stats.calls, "units": len(units)}
    result.timings["total_s"] = round(time.perf_counter() - begin, 3)
    return result


def margin(logits) -> float:
    """How sure a next-token distribution is: its top probability less its second."""
    import numpy as np

    values = np.asarray(logits, dtype=np.float64)
    probs = np.exp(values - values.max())
    probs /= probs.sum()
    top = np.partition(probs, -2)[-2:]
    return float(top[1] - top[0])


def checked(engine: KVEngine, prefix: Unit, whole: list[int], threshold: float) -> dict:
    """The composition checks itself: with the question read after the composed units, the answer's
    first token is predicted; when the top probability leads the second by less than ``threshold``
    (``kv.compose_check``), the composition is repaired (the units and the question prefilled in full
    after the restored instructions, as the evidence reader's answer reads them), as a draft is checked
    in speculative decoding. Returns ``{"margin", "repaired"}``; the context holds ``whole`` either way.

    Only a generated answer is checked: the extractive answer does not start with the model's first
    token, and on the default model (units within 2,000 tokens, 40 development questions) its two
    disagreements with a full prefill composed at margins 0.44 and 0.69 while every composition under
    0.3 gave the full prefill's answer, so a repair would cost a full prefill and change nothing
    (docs/benchmarks.md, "Composition that checks itself")."""
    engine.prefill(whole[engine.n_tokens:])
    sure = margin(engine.last_logits())
    repaired = sure < threshold
    if repaired:
        engine.reset()
        engine.load_chain([prefix])
        engine.prefill(whole[len(prefix.tokens):])
    return {"margin": round(sure, 4), "repaired": repaired}


def units_context(cfg, answer_context: int | None, answer: str) -> int:
    """The tokens of units a composed ask reads (0: its whole budget): ``answer_context`` when given;
    unset, a generated answer reads ``ask.answer_context`` (as the evidence reader's answer reads that
    much of its evidence), an extractive one the whole budget: its candidates are lines, and a unit
    holds up to 512 tokens of them, so within 600 tokens one or two units held all the gold turns of
    51% of the development questions against 66% within 2,000, and "I don't know" fell from 13.8% to
    8.8% (``ask``: 7.5%; docs/benchmarks.md, "ask --kv-compose answers with the extractive answer")."""
    if answer_context is not None:
        return answer_context
    return 0 if answer == "extract" else cfg.ask_answer_context


def ask_with_blocks(question: str, cfg, store, index, *, engine: Callable[[], KVEngine],
                    vectors: Callable[[], tuple[float, int]], reader: str | None, budget: int | None,
                    answer_context: int | None, progress, select: str, answer: str = "generate"):
    """``ask --kv-compose`` with its options checked: the units the model reads fit
    :func:`units_context` tokens (0: ``budget``), within ``budget``. ``engine()``: the KV engine
    (opens the model); ``vectors()``: what the question does about the entries' vectors
    (:func:`memcli.semantic.upkeep.for_question`)."""
    if select not in SELECTIONS:
        raise UsageError(f"unknown selection {select!r} (choose from {', '.join(SELECTIONS)})")
    if cfg.kv_compose_recompute < 0:
        raise ConfigError("kv.compose_recompute must be 0 or a number of tokens")
    if not 0 <= cfg.kv_compose_check <= 1:
        raise ConfigError("kv.compose_check must be a probability margin from 0 to 1")
    if reader not in (None, "evidence"):
        raise UsageError("--kv-compose answers with the evidence reader's ranking; leave out --reader")
    if not keeps_blocks(cfg):
        raise ConfigError("--kv-compose needs the local llama.cpp backend, not an OpenAI-compatible server",
                          hint="unset --base-url / MEMCLI_BASE_URL")
    budget = budget if budget is not None else cfg.ask_budget
    reading = units_context(cfg, answer_context, answer)
    check_options(reader="evidence", budget=budget, answer_context=reading, max_rounds=1)
    if not question.strip():
        raise UsageError("the question is empty")
    embedding, unembedded = vectors()
    begin = time.perf_counter()
    kv = engine()
    loaded = time.perf_counter() - begin
    result = composed_ask(kv, store, index, question, budget=min(budget, reading or budget),
                          recompute=cfg.kv_compose_recompute, select=select, progress=progress, answer=answer,
                          check=cfg.kv_compose_check)
    result.timings = {"embed_s": round(embedding, 3), "model_load_s": round(loaded, 3), **result.timings,
                      "total_s": round(result.timings["total_s"] + loaded, 3)}
    kv.blocks.evict(cfg.kv_budget_mb * 1024 * 1024)
    result.warnings = [f"KV blocks: {reason}" for reason in kv.stats.refused]
    if unembedded:
        result.warnings.append(unembedded_note(unembedded))
    kv.stats.refused.clear()
    return result
