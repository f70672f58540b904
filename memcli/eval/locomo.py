"""``memcli eval locomo``: memory quality and cost on LoCoMo, with baselines run the same way.

For each conversation: a fresh temporary store, ingest, optionally
consolidate, then every selected question through one mode:

- ``ask``: what ``memcli ask`` does by default (the reader of the model's profile);
- ``agent``: the agentic reader, then the answer;
- ``no-agent``: the hybrid reader (summary selection + BM25), then the answer;
- ``evidence``: the deterministic evidence policy, then the answer;
- ``evidence-only``: the deterministic evidence policy, no answer (recall only);
- ``kv-compose``: what ``memcli ask --kv-compose`` does (memory units as composed KV blocks,
  only the question prefilled; a local model);
- ``bm25-turns``: single memory entries ranked by BM25 until the budget, then the answer;
- ``full-context``: the newest entries that fit the model's context window, then the answer;
- ``oracle``: exactly the gold evidence turns, then the answer (the model's ceiling).

As in ``memcli ask``, the answer of the ranked modes (ask, agent, no-agent,
evidence, bm25-turns) reads the best-ranked ``answer_context`` tokens of the evidence
(0: all of it); full-context and oracle answers read all of theirs.

Every question gives one JSONL record (written and flushed as it is made, so
``--resume`` continues an interrupted run); the summary is computed from the
records.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from memcli import llm, parsing
from memcli.config import Settings
from memcli.errors import ConfigError, InputError, UsageError
from memcli.eval.metrics import answer_shown, bleu1, category_f1, evidence_recall, gold_dialog_ids
from memcli.ingest.formats import detect, locomo_samples
from memcli.kv import keep_prompt_prefixes, keeps_blocks
from memcli.llm.base import CallStats
from memcli.llm.profile import answer_for, consolidates_with_model, decide
from memcli.memory import Memory
from memcli.results import Result
from memcli.retrieve.ask import respond
from memcli.retrieve.evidence import assemble, best_part
from memcli.store.lines import Library
from memcli.terms import terms

MODES = ("ask", "agent", "no-agent", "evidence", "evidence-only", "kv-compose", "bm25-turns", "full-context",
         "oracle")
READER_MODES = {"ask": None, "agent": "agent", "no-agent": "no-agent", "evidence": "evidence",
                "evidence-only": "evidence-only"}  # mode -> ask's reader (None: the profile's default)
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
ANSWER_RESERVE = 600  # tokens of the context window kept for the prompt around full-context memory and the answer
WORDED = {1, 3, 4}  # categories whose answers are words of the conversation (temporal ones are dates it gives
# relative to a session's time; adversarial ones have none): where answer_shown is measured


@dataclass
class EvalResult(Result):
    mode: str
    memory: str
    budget: int
    answer_context: int
    model: dict | None
    conversations: list[str]
    out: str | None
    resumed: int
    summary: dict


def parse_categories(spec: str) -> set[int]:
    """``"1,2,3"`` -> {1, 2, 3}; categories are 1-5 (5: adversarial)."""
    try:
        chosen = {int(part) for part in spec.split(",") if part.strip()}
    except ValueError:
        raise UsageError(f"--categories takes numbers 1-5 separated by commas, not {spec!r}") from None
    if not chosen or not chosen <= {1, 2, 3, 4, 5}:
        raise UsageError("--categories takes numbers 1-5 (5: adversarial)")
    return chosen


def evaluate(files: list[Path], *, mode: str = "ask", memory: str = "raw", budget: int | None = None,
             answer_context: int | None = None, categories: set[int] = frozenset({1, 2, 3, 4}),
             questions: int | None = None, sample: str | None = None, consolidate_llm: bool = True,
             out_path: Path | None = None, resume: bool = False, settings: dict | None = None,
             model=None, progress: Callable[[int, int], None] | None = None, verbose: bool = False) -> EvalResult:
    """Run the selected LoCoMo questions through ``mode`` (see the module's docstring).

    ``settings``: overrides by dotted key; ``model``: the chat model (default: the configured one,
    opened once); ``progress(done, total)`` after each question; ``out_path``: one JSON record per
    question (``resume``: questions already recorded there are skipped and counted).
    """
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
    cfg = Settings.load(None, settings)
    limit = budget if budget is not None else cfg.ask_budget
    reading = answer_context if answer_context is not None else cfg.ask_answer_context
    if limit < 50:
        raise UsageError("--budget must be at least 50 tokens")
    if reading < 0:
        raise UsageError("--answer-context must be 0 (all the evidence) or a number of tokens")
    conversations = load_conversations(files, sample)
    consolidate_model = consolidate_llm and consolidates_with_model(cfg, decide(cfg, model))
    needs_model = mode != "evidence-only" or (memory == "consolidated" and consolidate_model)
    kv = cfg.ask_kv and mode != "evidence-only" and keeps_blocks(cfg)  # as ask runs: prefixes as KV blocks
    if mode == "kv-compose" and not keeps_blocks(cfg):
        raise ConfigError("--mode kv-compose needs the local llama.cpp backend, not an OpenAI-compatible server")
    if model is None and needs_model:
        model = llm.open_model(cfg, verbose=verbose, kv_sequences=2 if kv or mode == "kv-compose" else 1)
    kv = kv and getattr(model, "runtime", None) is not None
    if mode == "kv-compose" and answer_context is None:  # what `ask --kv-compose` reads unless told
        from memcli.kv.composed_ask import units_context  # here: it loads numpy, which the CLI's start does not

        reading = units_context(cfg, None, answer_for(cfg, decide(cfg, model)))
    runner = Runner(mode, memory, limit, cfg, model, consolidate_model=consolidate_model,
                    max_rounds=cfg.ask_max_rounds, kv=kv, answer_context=reading, settings=settings)
    done = read_done(out_path) if resume and out_path is not None else {}
    plan = [(conv, select(conv.questions, categories, questions)) for conv in conversations]
    total = sum(len(picked) for _, picked in plan)
    records: list[dict] = []

    def keep(record: dict) -> None:
        records.append(record)
        if out_path is not None:
            append_record(out_path, record)
        if progress:
            progress(len(records), total)  # resumed records included

    resumed = 0
    for conv, picked in plan:
        name = conversation_name(conv)
        prior = [done[k] for k in done if k[0] == name and k[2:] == runner.setting
                 and k[1] in {n for n, _ in picked}]
        records.extend(prior)
        resumed += len(prior)
        runner.run(conv, picked, done, keep)
    return EvalResult(mode=mode, memory=memory, budget=limit, answer_context=reading,
                      model=model.describe() if model is not None and needs_model else None,
                      conversations=[c.source + "#" + c.sample_id for c in conversations],
                      out=str(out_path) if out_path else None, resumed=resumed, summary=summarize(records))


@dataclass
class Conversation:
    source: str
    sample_id: str
    data: object  # the file's decoded JSON
    questions: list[dict]


def load_conversations(paths: list[Path], sample: str | None) -> list[Conversation]:
    out = []
    for path in paths:
        try:
            text = path.read_text(encoding="utf-8-sig")
        except OSError as exc:
            raise InputError(str(path), f"cannot read: {exc.strerror}") from None
        fmt, data = detect(text, str(path))
        if fmt != "locomo":
            raise InputError(str(path), f"not a LoCoMo file (looks like {fmt})")
        for sample_id, _conv, questions in locomo_samples(data, str(path)):
            if sample is None or sample_id == sample:
                out.append(Conversation(str(path), sample_id, data, checked_questions(questions, str(path), sample_id)))
    if not out:
        raise InputError(", ".join(map(str, paths)), f"no sample {sample!r}" if sample else "no conversations")
    return out


def checked_questions(questions: list, source: str, sample_id: str) -> list[dict]:
    """The sample's questions, each checked for what scoring it reads (an object with a non-empty ``question``
    string, a whole-number ``category``, a list of ``evidence``); the first that is not is an :class:`InputError`
    naming the file, the question and the field."""
    for index, qa in enumerate(questions):
        where = f"sample {sample_id}, qa[{index}]"
        if not isinstance(qa, dict):
            raise InputError(source, f"a question is a JSON object, not {type(qa).__name__}", where=where)
        question, category = qa.get("question"), qa.get("category")
        if not isinstance(question, str) or not question.strip():
            raise InputError(source, "a non-empty string is needed" if "question" in qa else "missing",
                             where=f"{where}.question")
        if category is not None and (isinstance(category, bool) or not isinstance(category, int)):
            raise InputError(source, f"a whole number 1-5 is needed, not {category!r}"[:200], where=f"{where}.category")
        if not isinstance(qa.get("evidence", []), list):
            raise InputError(source, "a list of dialog ids is needed", where=f"{where}.evidence")
    return questions


def select(questions: list[dict], categories: set[int], limit: int | None) -> list[tuple[int, dict]]:
    """(index in the file, question) of the selected categories; with ``limit``, the first ``limit``
    taken round-robin over the categories (so a small sample still covers all of them)."""
    chosen = [(i, q) for i, q in enumerate(questions) if q.get("category") in categories]
    if limit is None or limit >= len(chosen):
        return chosen
    queues = {c: [iq for iq in chosen if iq[1].get("category") == c] for c in sorted(categories)}
    picked: list[tuple[int, dict]] = []
    while len(picked) < limit:
        for c in queues:
            if queues[c] and len(picked) < limit:
                picked.append(queues[c].pop(0))
    return sorted(picked, key=lambda iq: iq[0])


def conversation_name(conv: Conversation) -> str:
    return f"{Path(conv.source).name}#{conv.sample_id}"


def record_key(record: dict) -> tuple:
    """(conversation, question index) + the run's setting (mode, memory, budget, answer context)."""
    return (record["conversation"], record["question_index"], record["mode"], record["memory"], record["budget"],
            record.get("answer_context", 0))  # records from before the setting read all the evidence


def read_done(out_path: Path) -> dict[tuple, dict]:
    """Records already in ``out_path``; a partial last line (a crash mid-write) is cut off the file."""
    done = {}
    if out_path.exists():
        data = out_path.read_bytes()
        if data and not data.endswith(b"\n"):
            with open(out_path, "r+b") as handle:
                handle.truncate(data.rfind(b"\n") + 1)
        for line in out_path.read_text(encoding="utf-8").splitlines():
            try:
                record = parsing.loads(line)
                done[record_key(record)] = record
            except (ValueError, KeyError, TypeError):
                continue
    return done


class Runner:
    """Runs the questions of one conversation in one mode and yields a record per question."""

    def __init__(self, mode: str, memory: str, budget: int, cfg, model, *, consolidate_model: bool,
                 max_rounds: int = 7, kv: bool = False, answer_context: int = 0, settings: dict | None = None):
        """``kv``: the model (local, opened with ``kv_sequences=2``) keeps shared prompt prefixes as
        KV blocks in the conversation's temporary store, as ``memcli ask`` does."""
        if mode not in MODES:
            raise UsageError(f"unknown mode {mode!r} (modes: {', '.join(MODES)})")
        self.mode, self.memory, self.budget = mode, memory, budget
        self.answer_context = answer_context
        self.setting = (mode, memory, budget, answer_context)  # the tail of its records' keys
        self.cfg, self.model = cfg, model
        self.consolidate_model = consolidate_model
        self.max_rounds = max_rounds
        self.kv = kv
        self.overrides = settings

    def run(self, conv: Conversation, picked: list[tuple[int, dict]], done: dict[tuple, dict],
            on_record: Callable[[dict], None]) -> None:
        name = conversation_name(conv)
        todo = [(n, qa) for n, qa in picked if (name, n, *self.setting) not in done]
        if not todo:
            return
        work = Path(tempfile.mkdtemp(prefix="memcli-eval-"))
        try:
            memory = self._build(conv, work)
            if self.kv:
                from memcli.kv.blocks import BlockStore

                keep_prompt_prefixes(self.model, BlockStore(work / "kv"))
            try:
                for number, qa in todo:
                    on_record(self._question(memory, (name, number), qa))
            finally:
                memory.close()
                if self.kv:
                    self.model.prefix_cache = None
        finally:
            shutil.rmtree(work, ignore_errors=True)

    def _build(self, conv: Conversation, work: Path):
        """A fresh store of the conversation (ingested, and consolidated for ``--memory consolidated``)."""
        # every question ranks with every entry's vector (not with what a background job reached so far)
        memory = Memory(work / "store", create=True, settings={"search.vectors": "inline", **(self.overrides or {})},
                        model=self.model, cache_dir=work / "index")
        memory.ingest(conv.source, format="locomo", sample=conv.sample_id, consolidate=False,
                      time="2000-01-01T00:00")  # LoCoMo sessions carry their own dates
        if self.memory == "consolidated":
            memory.consolidate(llm=self.consolidate_model)
        return memory

    def _question(self, memory, key: tuple, qa: dict) -> dict:
        from memcli.retrieve.answer import grounded
        start = time.perf_counter()
        if self.mode in READER_MODES or self.mode == "kv-compose":  # exactly what `memcli ask` returns
            if self.mode == "kv-compose":
                asked = memory.ask(qa["question"], budget=self.budget, answer_context=self.answer_context,
                                   kv_compose=True)
            else:
                asked = memory.ask(qa["question"], reader=READER_MODES[self.mode], budget=self.budget,
                                   answer_context=self.answer_context, max_rounds=self.max_rounds,
                                   keep_evidence=False)
            evidence, read, reply, rounds = asked.evidence, asked.read, asked.answer, asked.rounds
            abstained = asked.abstained
            tokens = asked.tokens
            counts = {"prompt_tokens": tokens["prompt"], "prefilled_tokens": tokens["prefilled"],
                      "restored_tokens": tokens["restored"], "generated_tokens": tokens["generated"]}
        else:
            stats = CallStats()
            found = self._baseline(memory.store, qa)
            evidence = found.evidence
            read = best_part(found.library, evidence, found.order, self.answer_context,
                             count=self.model.count_tokens)
            said = respond(self.model, memory.store, qa["question"], read, found.library, stats,
                           answer=memory.answer_style(), keep_evidence=False, index=memory.index)
            reply, rounds, abstained = said.text, 0, said.abstained
            counts = {"prompt_tokens": stats.prompt_tokens, "prefilled_tokens": stats.prefilled_tokens,
                      "restored_tokens": stats.restored_tokens, "generated_tokens": stats.completion_tokens}
        latency = time.perf_counter() - start
        gold_ids = gold_dialog_ids(qa.get("evidence", []))
        all_in, partial = evidence_recall(gold_ids, {r for e in evidence for r in e.refs})
        category = qa.get("category")
        gold = qa.get("answer", qa.get("adversarial_answer"))
        shown = answer_shown(gold, gold_texts(Library(memory.store), evidence, gold_ids)) \
            if category in WORDED and gold_ids else None
        return {
            "conversation": key[0], "question_index": key[1], "mode": self.mode, "memory": self.memory,
            "budget": self.budget, "answer_context": self.answer_context, "category": category,
            "question": qa["question"], "gold": gold,
            "answer": reply, "abstained": None if reply is None else abstained,
            "grounded": None if reply is None or abstained else grounded(reply, read),
            "f1": None if reply is None else round(category_f1(reply, gold, category), 4),
            "bleu1": None if reply is None else round(bleu1(reply, gold), 4),
            "recall_all": all_in, "recall_partial": round(partial, 4),
            "answer_shown": None if shown is None else round(shown, 4),
            "evidence_tokens": sum(e.tokens for e in evidence), "evidence": [
                f"{e.doc}:{e.start_line}-{e.end_line}" for e in evidence],
            "read_tokens": sum(e.tokens for e in read),
            "rounds": rounds, **counts,
            "latency_s": round(latency, 3),
        }

    def _baseline(self, store, qa: dict):
        """The evidence of a baseline mode; one without an order has its answer read all of it."""
        from memcli.retrieve.evidence_reader import Retrieval
        question = qa["question"]
        library = Library(store)
        entries = [(doc_id, line, entry) for doc_id in store.all_ids()
                   for line, entry in library.doc(doc_id).entries.items()]
        if self.mode == "oracle":
            wanted = gold_dialog_ids(qa.get("evidence", []))
            picks = [(d, n) for d, n, e in entries if set((e.ref or "").split(";")) & wanted]
            return Retrieval(assemble(library, picks, 10 ** 9))
        if self.mode == "bm25-turns":
            ranked = bm25_turns(entries, question)
            return Retrieval(assemble(library, ranked, self.budget), order=ranked, library=library)
        # full-context: the newest entries that fit the context window, in time order
        window = int(self.model.describe().get("n_ctx") or self.cfg.model_n_ctx) - ANSWER_RESERVE
        newest_first = sorted(entries, key=lambda dne: (dne[2].time or "", dne[2].seq or 0), reverse=True)
        return Retrieval(assemble(library, [(d, n) for d, n, _ in newest_first], window))


def gold_texts(library: Library, evidence: list, gold_ids: set[str]) -> list[str]:
    """The text the evidence shows of each entry whose ref is a gold id (a range shows one line an entry)."""
    out = []
    for e in evidence:
        doc = library.doc(e.doc)
        lines = [n for n in sorted(doc.entries) if e.start_line <= n <= e.end_line]
        for line, text in zip(lines, e.text.split("\n")):
            if set((doc.entries[line].ref or "").split(";")) & gold_ids:
                out.append(text)
    return out


def bm25_turns(entries: list, question: str) -> list[tuple[str, int]]:
    """Entries ranked by BM25 of the question over single entries (speaker and text)."""
    from rank_bm25 import BM25Okapi

    if not entries:
        return []
    corpus = [terms(f"{e.meta.get('speaker', '')} {e.text}") or ["_"] for _, _, e in entries]
    scores = BM25Okapi(corpus).get_scores(terms(question))
    order = sorted(range(len(entries)), key=lambda i: (-scores[i], i))
    return [(entries[i][0], entries[i][1]) for i in order if scores[i] > 0]


def summarize(records: list[dict]) -> dict:
    """Means by category and overall: F1, BLEU-1, the share of answers that are "I don't know"
    (``abstained``: for category 5, questions about what was never said, the share that should be),
    the share of the other answers whose every content word, name and number is in the evidence they
    read (``grounded``), recall, the share of the gold answer's words the evidence shows in its gold
    entries (``answer_shown``, categories :data:`WORDED`), tokens, latency."""
    groups: dict[str, list[dict]] = {}
    for record in records:
        groups.setdefault(str(record["category"]), []).append(record)
        groups.setdefault("all", []).append(record)

    def mean(rows: list[dict], field: str) -> float | None:
        values = [float(r[field]) for r in rows if r.get(field) is not None]
        return round(statistics.mean(values), 4) if values else None

    return {key: {"questions": len(rows), "f1": mean(rows, "f1"), "bleu1": mean(rows, "bleu1"),
                  "abstained": mean(rows, "abstained"), "grounded": mean(rows, "grounded"),
                  "recall_all": mean(rows, "recall_all"), "recall_partial": mean(rows, "recall_partial"),
                  "answer_shown": mean(rows, "answer_shown"),
                  "evidence_tokens": mean(rows, "evidence_tokens"), "read_tokens": mean(rows, "read_tokens"),
                  "prompt_tokens": mean(rows, "prompt_tokens"),
                  "prefilled_tokens": mean(rows, "prefilled_tokens"), "restored_tokens": mean(rows, "restored_tokens"),
                  "generated_tokens": mean(rows, "generated_tokens"), "latency_s": mean(rows, "latency_s")}
            for key, rows in sorted(groups.items(), key=lambda kv: (kv[0] == "all", kv[0]))}


def append_record(out_path: Path, record: dict) -> None:
    """One JSON line, flushed to disk before the next question starts."""
    with open(out_path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(record, ensure_ascii=False) + "\n")
        handle.flush()
        os.fsync(handle.fileno())

