"""One question through a reader and, unless only the evidence is wanted, the answer.

The readers (:data:`READERS`):

- ``agent``: the agentic reader (the model searches with tools, cites lines;
  the deterministic ranking fills the rest of the budget);
- ``no-agent``: the hybrid reader (one model call picks documents by summary,
  BM25 ranks entries);
- ``evidence``: the deterministic evidence reader, then the model's answer
  (the default for a small model: one model call per question);
- ``evidence-only``: the deterministic evidence reader, no model, no answer.

The answer is written from the best-ranked ``answer_context`` tokens of the
evidence (0: all of it). ``memcli ask``, :meth:`memcli.Memory.ask` and
``memcli eval locomo`` all run this function, so eval scores exactly what
users get.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from memcli.config import READERS
from memcli.dates import Period, moment
from memcli.errors import UsageError
from memcli.llm.base import CallStats, ChatModel
from memcli.results import Result, hidden, omit_empty
from memcli.retrieve.asked_time import AskedTime, asked_time, before_line, previous
from memcli.retrieve.evidence import Evidence, best_part, rank
from memcli.store.lines import Library


@dataclass
class AskResult(Result):
    question: str
    mode: str  # one of READERS
    answer: str | None
    evidence: list[Evidence]
    read: list[Evidence] = field(default_factory=list)  # the part of the evidence the answer was written from
    rounds: int = 0
    stop: str | None = None
    tool_calls: list[dict] = field(default_factory=list)  # the trace: one record per round or step
    tokens: dict = field(default_factory=dict)
    timings: dict = field(default_factory=dict)
    abstained: bool = False  # the answer is "I don't know": the evidence does not support one
    why: str | None = None  # how the answer was reached (or why none was given)
    unembedded: int = 0  # entries ranked by their words alone: the background job has not reached them
    decided: dict = omit_empty(dict)  # the trained reader's answer: the line, the span and the scores that decided it
    asked_time: dict = omit_empty(dict)  # the time the question's words ask about, read as --as-of (:mod:`asked_time`)
    check: dict = omit_empty(dict)  # ask --kv-compose: the composition's first-token margin, and whether repaired
    problems: list[str] = hidden(list)  # the model's rejected answers (first few), for -v
    warnings: list[str] = hidden(list)  # e.g. KV blocks refused and rebuilt

    def extra(self) -> dict:
        return {"citations": [e.citation for e in self.evidence], "read": [e.citation for e in self.read]}

    @property
    def unread(self) -> list[Evidence]:
        """Evidence ranges the answer did not read."""
        return [e for e in self.evidence if not any(r.doc == e.doc and r.start_line <= e.end_line
                                                    and e.start_line <= r.end_line for r in self.read)]


def check_options(*, reader: str, budget: int, answer_context: int, max_rounds: int) -> None:
    if reader not in READERS:
        raise UsageError(f"unknown reader {reader!r} (readers: {', '.join(READERS)})")
    if budget < 50:
        raise UsageError("--budget must be at least 50 tokens")
    if answer_context < 0:
        raise UsageError("--answer-context must be 0 (all the evidence) or a number of tokens")
    if not 1 <= max_rounds <= 50:
        raise UsageError("--max-rounds must be between 1 and 50")


@dataclass
class Said:
    """An answer, or why there is none."""

    text: str | None  # None: the model call failed
    abstained: bool = False  # "I don't know": the evidence does not support an answer
    why: str | None = None
    ttft_s: float | None = None
    tokens_per_s: float | None = None
    read: list[Evidence] | None = None  # what the answer read, when only part of the evidence given
    decided: dict | None = None  # the trained reader's line, span and scores


def respond(model: ChatModel | None, store, question: str, read: list[Evidence], library, stats: CallStats, *,
            answer: str = "generate", keep_evidence: bool = True, restated: dict | None = None,
            order: list | None = None, index=None) -> Said:
    """The answer to ``question`` from the evidence ``read``, as ``answer`` says: ``extract`` (memcli's
    trained reader picks a span of a line, :mod:`memcli.retrieve.reading`; no chat model) or
    ``generate`` (the model writes it, checked against the evidence); ``restated``: the ranking's older entries
    to the newer ones that restate them (:class:`memcli.retrieve.evidence_reader.Retrieval`), which the
    reader answers from instead; ``index``: the library's, for the lines' likeness in meaning to the question
    (:func:`memcli.retrieve.reading.likeness`). ``eval`` answers its baselines
    (the gold evidence too) with it, so they are scored with the same answer code as ``ask``."""
    from memcli.retrieve.answer import UNKNOWN
    from memcli.retrieve.answer import answer as generate

    if answer == "extract":
        from memcli.retrieve.reading import read_answer

        picked = read_answer(question, library or Library(store), read, restated=restated, order=order, index=index)
        return Said(picked.text, picked.abstained, picked.reason, decided=picked.decided())
    written = generate(model, question, read, stats, keep_evidence=keep_evidence)
    if written is None:
        return Said(None, why="the model call failed")
    said = Said(written.text, why="written by the model", ttft_s=written.ttft_s, tokens_per_s=written.tokens_per_s)
    if written.text == UNKNOWN:
        said.abstained = True
        said.why = {"ungrounded": "the model's answer says what the evidence read does not",
                    "no evidence": "no evidence"}.get(written.finish_reason or "", "the model found no answer")
    return said


def _checked(question: str, model, *, reader: str, budget: int, answer_context: int, max_rounds: int, answer: str,
             where, recent: bool, period, as_of: str | None) -> str | None:
    """UsageError for options that do not go together (before anything is read); ``as_of`` as memcli stores
    times."""
    if not question:
        raise UsageError("the question is empty")
    check_options(reader=reader, budget=budget, answer_context=answer_context, max_rounds=max_rounds)
    if reader != "evidence-only" and model is None and (answer != "extract" or reader in ("agent", "no-agent")):
        raise UsageError(f"the {reader} reader needs a model")
    if answer not in ("extract", "generate"):
        raise UsageError(f"unknown answer style {answer!r} (extract or generate)")
    if (where or recent) and reader not in ("evidence", "evidence-only"):
        raise UsageError("only the evidence readers keep to entries with given values (--where)")
    if period is not None and reader not in ("evidence", "evidence-only"):
        raise UsageError("only the evidence readers keep to a stretch of time (--since/--until)")
    if as_of is not None:
        as_of = moment(as_of, "--as-of")
        if reader not in ("evidence", "evidence-only"):
            raise UsageError("only the evidence readers answer as of a day (--as-of)")
    return as_of


def _previous(store, index, question: str, **options) -> AskedTime | None:
    """"Bram's previous car" (:func:`memcli.retrieve.asked_time.previous`): the question without those words
    answered about now by memcli's reader, then the bound just before the line that answer came from; None
    when the question has no such word or that answer is "I don't know"."""
    if (plain := previous(question)) is None:
        return None
    today = ask(store, index, None, plain[0], reader="evidence", keep_evidence=False, answer="extract", now=True,
                **options)
    if today.abstained or not (cited := (today.decided or {}).get("line")):
        return None
    doc, line = cited.rsplit(":", 1)
    with store.reading():
        entry = Library(store, index.parsed).doc(doc).entries.get(int(line))
    return before_line(plain[1], plain[0], (doc, int(line)), entry and entry.time)


def ask(store, index, model: ChatModel | None, question: str, *, reader: str, budget: int, answer_context: int,
        max_rounds: int = 7, on_step: Callable[[dict], None] | None = None,
        keep_evidence: bool = True, compact: bool | None = None, answer: str = "generate",
        where: dict[str, str] | None = None, recent: bool = False, as_of: str | None = None,
        period: Period | None = None, now: bool = False) -> AskResult:
    """Retrieve evidence for ``question`` with ``reader`` and answer from it (no answer for
    ``evidence-only``, which needs no model). ``on_step`` sees each round or retrieval step as it
    happens; ``keep_evidence``: the answer's evidence may be kept as a KV block (a local model);
    ``compact``: the evidence readers show entries as their sentences that hold a term of the
    question (default: the ranking's tuning); ``answer``: ``extract`` (a span of the evidence memcli's
    trained reader picks, :mod:`memcli.retrieve.reading`; no model) or ``generate`` (the model writes it, checked
    against the evidence by :func:`memcli.retrieve.answer.grounded`); ``where``, ``recent``: only
    entries with these signature values, the unranked ones newest first (the evidence readers,
    :func:`memcli.retrieve.evidence_reader.evidence_only`); ``as_of`` (``YYYY-MM-DD``): answered from
    what had been said by the end of that day (:mod:`memcli.retrieve.current`; the evidence readers);
    ``period``: only entries of that stretch of time, on its clock (:class:`memcli.dates.Period`; the
    evidence readers); ``now``: the question asks what is true now, whatever its tense (the evidence readers;
    :mod:`memcli.retrieve.asked_time`'s "previous" asks its question without the word so first)."""
    question = question.strip()
    as_of = _checked(question, model, reader=reader, budget=budget, answer_context=answer_context,
                     max_rounds=max_rounds, answer=answer, where=where, recent=recent, period=period, as_of=as_of)
    answering = reader != "evidence-only"
    start = time.perf_counter()
    stats = CallStats()
    result = AskResult(question=question, mode=reader, answer=None, evidence=[])
    if (as_of is None and period is None and not now and reader == "evidence" and answer == "extract"
            and (bound := _previous(store, index, question, budget=budget, answer_context=answer_context,
                                    compact=compact, where=where, recent=recent)) is not None):
        question, as_of, result.asked_time = bound.question, bound.as_of, bound.to_dict()
    with store.reading():
        if (as_of is None and period is None and reader in ("evidence", "evidence-only")
                and (bound := asked_time(question, store, index)) is not None):  # "in May 2023", "before ..."
            question, as_of, result.asked_time = bound.question, bound.as_of, bound.to_dict()
        if reader == "agent":
            from memcli.retrieve.agent import Agent

            show = (lambda r: on_step(r.to_dict())) if on_step else None
            found = Agent(model, store, index, budget=budget, max_rounds=max_rounds, on_round=show).run(
                question, stats)
            result.rounds, result.stop = len(found.rounds), found.stop
            result.tool_calls = [r.to_dict() for r in found.rounds]
        else:
            if reader == "no-agent":
                from memcli.retrieve.catalog_reader import hybrid

                found = hybrid(model, store, index, question, budget=budget, stats=stats)
            else:
                from memcli.retrieve.evidence_reader import ANSWERING, DEFAULT, evidence_only

                found = evidence_only(store, index, question, budget=budget, compact=compact, where=where,
                                      recent=recent, as_of=as_of, period=period, now=now,
                                      tuning=ANSWERING if answering else DEFAULT)
            result.tool_calls = found.trace
            for step in found.trace if on_step else ():
                on_step(step)
        result.evidence = found.evidence
        rank(result.evidence, getattr(found, "order", None) or [])
        if answering:
            count = model.count_tokens if model is not None else None
            result.read = best_part(found.library, result.evidence, found.order, answer_context,
                                    **({"count": count} if count else {}))  # what the answer reads: whole entries
    retrieved = time.perf_counter()
    result.timings = {"retrieval_s": round(retrieved - start, 3)}
    retrieval_calls = stats.calls
    if answering:
        said = respond(model, store, question, result.read, found.library, stats, answer=answer,
                       keep_evidence=keep_evidence, restated=getattr(found, "restated", None),
                       order=getattr(found, "order", None), index=index)  # documents loaded already
        result.answer, result.abstained, result.why = said.text, said.abstained, said.why
        result.decided = said.decided or {}
        result.read = said.read if said.read is not None else result.read
        result.timings["answer_s"] = round(time.perf_counter() - retrieved, 3)
        if said.ttft_s is not None:
            result.timings["answer_ttft_s"] = round(said.ttft_s, 3)
        if said.tokens_per_s is not None:
            result.timings["answer_tokens_per_s"] = round(said.tokens_per_s, 2)
    result.tokens = {"evidence": sum(e.tokens for e in result.evidence),
                     "read": sum(e.tokens for e in result.read), "prompt": stats.prompt_tokens,
                     "prefilled": stats.prefilled_tokens, "restored": stats.restored_tokens,
                     "generated": stats.completion_tokens, "model_calls": stats.calls,
                     "retrieval_calls": retrieval_calls, "invalid": stats.invalid}
    result.timings["total_s"] = round(time.perf_counter() - start, 3)
    result.problems = stats.problems[:5]
    return result
