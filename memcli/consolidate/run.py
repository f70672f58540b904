"""One consolidation: CURRENT, flush by flush, into the topic library.

CURRENT is consolidated oldest first in flushes of at most
``consolidate.threshold_tokens`` tokens, so the work of one flush depends on
the flush and the documents it touches, never on the size of the library
(the Akashic bound). Each flush: rewrite -> plan -> apply -> split -> merge
-> summaries -> the conservation guard -> one transaction that writes the new
documents and the shortened CURRENT. A flush whose model-assisted result
fails the guard is redone on the deterministic path; if that fails too,
nothing is written.

One consolidation runs at a time (:mod:`memcli.consolidate.job`). A flush is
worked out without the store's lock (it may take minutes with a model) and
committed under it: the commit checks that every document the flush read is
unchanged and that its entries are still in CURRENT, removes just those
entries from CURRENT and keeps whatever was ingested meanwhile. A flush whose
inputs changed is worked out again.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from memcli.config import Settings
from memcli.consolidate import guard
from memcli.consolidate.apply import (
    apply_blocks,
    finish,
    refresh_headings,
    refresh_summary,
    refresh_title,
    rename_to_title,
)
from memcli.consolidate.draft import rewrite
from memcli.consolidate.job import Job
from memcli.consolidate.plan import Planner, plan
from memcli.consolidate.report import ConsolidationResult, FlushReport
from memcli.consolidate.reshape import merge_small, merge_subjects, split_document
from memcli.consolidate.workspace import Workspace
from memcli.errors import StoreError
from memcli.index import LibraryIndex
from memcli.kv import block_store
from memcli.kv.context import stale_labels
from memcli.llm.base import CallStats, ChatModel
from memcli.paths import Resolved
from memcli.store import CURRENT_ID, Store, aliases
from memcli.store.folder import new_current, now_iso, refresh_token_count
from memcli.store.format import Document, Entry, parse_entry, parse_heading
from memcli.store.identity import Seqs
from memcli.tokens import count_tokens, pack

Progress = Callable[[str, int, int], None]


# ---------------------------------------------------------------- when

def due(store: Store, cfg: Settings) -> str | None:
    """Why CURRENT should be consolidated now (size or age), or None."""
    if not store.current_path.exists():
        return None
    doc = store.load(CURRENT_ID).doc
    entries = sum(1 for _ in doc.entries())
    if not entries:
        return None
    tokens = doc.meta.get("token_count")
    if not isinstance(tokens, int):
        tokens = refresh_token_count(doc)
    if tokens >= cfg.consolidate_threshold_tokens:
        return f"CURRENT has {tokens} tokens (threshold {cfg.consolidate_threshold_tokens})"
    ingests = [op.get("time") for op in doc.meta.get("update_log") or []
               if isinstance(op, dict) and op.get("op") == "ingest"]
    try:
        oldest = min(datetime.fromisoformat(str(t)) for t in ingests if t)
    except ValueError:
        return None
    age = (datetime.now() - oldest).total_seconds()
    if age >= cfg.consolidate_threshold_age:
        return f"CURRENT's oldest entry was added {int(age)} s ago (threshold {cfg.consolidate_threshold_age} s)"
    return None


# ---------------------------------------------------------------- a flush

def run_flush(store: Store, index: LibraryIndex, entries: list[Entry], *, model: ChatModel | None,
              stats: CallStats, cfg: Settings, split_limit: int, merge_limit: int,
              progress: Progress, written: set[str] | None = None) -> tuple[Workspace, FlushReport]:
    """One flush worked out (nothing written). ``written``: the documents the previous flush wrote,
    the only ones the index re-reads (None: the whole folder)."""
    start = time.perf_counter()
    index.refresh(only=written)
    ws = Workspace(store, index)
    draft = rewrite(entries, model=model, stats=stats, idf=ws.idf, window_tokens=cfg.consolidate_window_tokens,
                    progress=lambda d, t: progress("rewrite", d, t))
    planner = Planner(ws, model=model, stats=stats, candidates=cfg.consolidate_candidates,
                      route_similarity=cfg.consolidate_route_similarity)
    plan(draft.windows, planner, progress=lambda d, t: progress("plan", d, t))
    added = apply_blocks(ws, draft)
    stamp = now_iso()
    for doc_id, seqs in added.items():
        op = "create" if doc_id in ws.created else "update"
        ws.note(doc_id, {"time": stamp, "op": op, "seqs": seqs, "note": "consolidated from CURRENT"})
    report = FlushReport(first_seq=entries[0].seq, last_seq=entries[-1].seq, entries=len(entries),
                         blocks=len(draft.blocks), superseded=len(draft.superseded))
    subjects = merge_subjects(ws, ws.touched(), split_limit=split_limit, candidates=cfg.consolidate_candidates)
    for doc_id in ws.touched():
        parts = split_document(ws, doc_id, split_limit)
        if parts:
            report.split[doc_id] = parts
    report.merged = merge_small(ws, ws.touched(), merge_limit=merge_limit, split_limit=split_limit,
                                similarity=cfg.consolidate_merge_similarity, candidates=cfg.consolidate_candidates)
    report.merged = subjects + report.merged
    touched = ws.touched()
    # the largest documents are titled first: of siblings with the same best phrase, the one it names most keeps it
    for done, doc_id in enumerate(sorted(touched, key=lambda d: (-sum(1 for _ in ws.docs[d].entries()), d)), 1):
        refresh_summary(ws, doc_id, model=model, stats=stats)
        if model is None:  # a model's titles are its plan's; the deterministic path names what is there now
            refresh_title(ws.docs[doc_id], ws.idf, ws.sibling_titles(doc_id))
        refresh_headings(ws.docs[doc_id], ws.idf)
        doc_id = rename_to_title(ws, doc_id)
        finish(ws, doc_id)
        progress("summaries", done, len(touched))
    touched = ws.touched()
    report.renamed = dict(sorted(ws.renamed.items()))
    report.created = sorted(d for d in ws.created if d not in ws.deleted)
    report.updated = sorted(d for d in touched if d not in ws.created)
    report.deleted = sorted(d for d in ws.deleted if ws.originals.get(d) is not None)
    for doc_id in sorted(set(touched) | set(report.deleted)):
        before = ws.originals.get(doc_id)
        old = int(before.meta.get("token_count") or 0) if before is not None else 0
        new = int(ws.docs[doc_id].meta["token_count"]) if doc_id in ws.docs and doc_id not in ws.deleted else 0
        report.token_delta[doc_id] = new - old
    report.seconds = round(time.perf_counter() - start, 3)
    return ws, report


def _guard(ws: Workspace, entries: list[Entry]) -> list[str]:
    before = [doc for doc in ws.originals.values() if doc is not None]
    after = {d: ws.docs[d] for d in ws.touched()}
    return guard.check(entries, before, after)


# ---------------------------------------------------------------- CURRENT

def _body(doc: Document):
    """(entry or None for a hand-written line, raw line) for each line of CURRENT's body."""
    for _, line in doc.lines():
        if line.strip() and not parse_heading(line):
            yield parse_entry(line), line


def _current_entries(doc: Document, seqs: Seqs) -> list[tuple[Entry, str]]:
    """(entry, raw line) pairs of CURRENT; hand-written lines and seq-less entries get seqs."""
    out: list[tuple[Entry, str]] = []
    stamp = now_iso("minutes")
    for entry, line in _body(doc):
        if entry is None or entry.seq is None:
            text = entry.text if entry else line.strip().lstrip("-*+ ").strip()
            meta = dict(entry.meta) if entry else {}
            meta.pop("seq", None)
            entry = Entry({"seq": str(seqs.take()), "time": meta.pop("time", stamp),
                           "source": meta.pop("source", "hand"), **meta}, text)
            line = entry.render()
        out.append((entry, line))
    out.sort(key=lambda pair: pair[0].seq)
    return out


def _flushes(pairs: list[tuple[Entry, str]], limit: int) -> list[list[tuple[Entry, str]]]:
    return pack(pairs, lambda pair: count_tokens(pair[1]), limit)


def _rewrite_current(current: Document, moved: list[int]) -> Document:
    """CURRENT without the entries ``moved`` into documents (every other line is kept as it is)."""
    gone = set(moved)
    remaining = [(entry, line) for entry, line in _body(current) if entry is None or entry.seq not in gone]
    doc = new_current()
    for key in ("created_time", "aux"):
        if key in current.meta:
            doc.meta[key] = current.meta[key]
    kept = {e.seq for e, _ in remaining if e is not None and e.seq is not None}
    log = [op for op in current.meta.get("update_log") or []
           if isinstance(op, dict) and op.get("op") == "ingest"
           and isinstance(op.get("seq_range"), list) and len(op["seq_range"]) == 2
           and any(op["seq_range"][0] <= s <= op["seq_range"][1] for s in kept)]
    log.append({"time": now_iso(), "op": "consolidate", "seq_range": [min(moved), max(moved)],
                "count": len(moved), "note": "moved to topic documents"})
    doc.meta["update_log"] = log
    doc.meta["updated_time"] = now_iso()
    doc.body = ["# CURRENT", *(line for _, line in remaining), ""]
    refresh_token_count(doc)
    return doc


# ---------------------------------------------------------------- the run

class _Changed(Exception):
    """What a flush read changed before it could be committed."""


def consolidate(store: Store, cfg: Settings, *, model: ChatModel | None, dry_run: bool = False,
                split_limit: int | None = None, merge_limit: int | None = None,
                progress: Progress | None = None, reason: str | None = None, job: Job | None = None
                ) -> ConsolidationResult:
    """Consolidate all of CURRENT (the entries it holds when the run starts); with ``dry_run`` on a
    scratch copy of the store. ``job``: the job lock, when the caller holds it (a background worker)."""
    if dry_run:
        return _dry_run(store, cfg, model=model, split_limit=split_limit, merge_limit=merge_limit,
                        progress=progress, reason=reason)
    with job or Job(store.root) as held:
        held.status["model"] = getattr(model, "name", None)
        result = _run(store, cfg, model=model, split_limit=split_limit or cfg.consolidate_split_tokens,
                      merge_limit=merge_limit if merge_limit is not None else cfg.consolidate_merge_tokens,
                      progress=progress or (lambda stage, done, total: None), reason=reason, job=held)
        held.finish({"entries_consolidated": result.entries_consolidated, "flushes": len(result.flushes),
                     "seconds": result.seconds, "current_entries_left": result.current_entries_left})
    return result


def _numbered(store: Store) -> list[tuple[Entry, str]]:
    """CURRENT's entries, after giving hand-written lines and seq-less entries their seqs (committed)."""
    with store.writing() as txn:
        if not store.current_path.exists():
            return []
        current = store.load(CURRENT_ID, strict=True).doc
        state = store.read_state()
        seqs = Seqs(store.root, state, [e.seq for _, e in current.entries() if e.seq is not None])
        pairs = _current_entries(current, seqs)
        if seqs.used:
            current.body = ["# CURRENT", *(line for _, line in pairs), ""]
            refresh_token_count(current)
            txn.write("CURRENT.md", current.render())
            txn.write("state.json", json.dumps(seqs.save()) + "\n")
    return pairs


def _run(store: Store, cfg: Settings, *, model, split_limit: int, merge_limit: int, progress: Progress,
         reason: str | None, job: Job) -> ConsolidationResult:
    stats = CallStats()
    start = time.perf_counter()
    reports: list[FlushReport] = []
    moved_total = 0
    chunks = _flushes(_numbered(store), cfg.consolidate_threshold_tokens)
    index = LibraryIndex(store, cfg.search_partition_tokens)
    written: set[str] | None = None  # what the last flush wrote (see _since)
    stamp: int | None = None  # the folder's modification time right after that write
    try:
        for number, chunk in enumerate(chunks, 1):
            entries = [e for e, _ in chunk]
            job.begin_flush(number, len(chunks))

            def stage(s: str, d: int, t: int, n: int = number) -> None:
                job.progress(n, len(chunks), s, d, t)
                progress(f"flush {n}/{len(chunks)}: {s}", d, t)

            for attempt in range(3):
                ws, report = _work_out(store, index, entries, model, stats, cfg, split_limit, merge_limit, stage,
                                       _since(store, written, stamp))
                try:
                    stamp = _commit(store, ws, report, chunk)
                    written = {*ws.touched(), *report.deleted, CURRENT_ID}
                    break
                except _Changed as exc:
                    written = None  # someone else changed the store: it is read whole again
                    if attempt == 2:
                        raise StoreError(f"consolidation stopped: {exc} while flush {number} was worked out, "
                                         "three times", hint="run `memcli consolidate` again") from None
            moved_total += len(entries)
            reports.append(report)
    finally:
        index.close()
    left = sum(1 for _ in store.load(CURRENT_ID).doc.entries()) if store.current_path.exists() else 0
    return _result(store, cfg, model, reports, stats, start, moved_total, left, reason)


def _work_out(store, index, entries, model, stats, cfg, split_limit, merge_limit, stage, written=None):
    """One flush's new documents (nothing written), redone deterministically if the model's fail the guard."""
    ws, report = run_flush(store, index, entries, model=model, stats=stats, cfg=cfg,
                           split_limit=split_limit, merge_limit=merge_limit, progress=stage, written=written)
    problems = _guard(ws, entries)
    if problems and model is not None:
        ws, report = run_flush(store, index, entries, model=None, stats=stats, cfg=cfg,
                               split_limit=split_limit, merge_limit=merge_limit, progress=stage)
        report.deterministic_redo, report.guard_problems = True, problems[:10]
        stats.fell_back("guard")
        problems = _guard(ws, entries)
    if problems:
        raise StoreError("consolidation failed its conservation check, so nothing was written: "
                         + "; ".join(problems[:5]), hint="please report this with the store attached")
    return ws, report


def _since(store: Store, written: set[str] | None, stamp: int | None) -> set[str] | None:
    """The documents the index must look at before the next flush: those the last one wrote, when no
    other writer has added, replaced or removed a document since (the documents folder's modification
    time is still the one read under the lock right after that write); None (every document)
    otherwise. A document a person edits in place during a consolidation is seen by the next
    question's refresh; until then only the ranking of candidate documents can be out of date, and a
    flush never writes over a document that changed since it read it (:func:`_commit`)."""
    return written if written is not None and stamp is not None and store.folder_stamp() == stamp else None


def _commit(store: Store, ws: Workspace, report: FlushReport, chunk: list[tuple[Entry, str]]) -> int | None:
    """Write the flush if what it read is unchanged: the documents, and its entries in CURRENT. Returns
    the documents folder's modification time once written, read under the lock (see :func:`_since`)."""
    with store.writing() as txn:
        for doc_id, before in ws.originals.items():
            exists = store.doc_path(doc_id).exists()
            if before is None and exists and doc_id in ws.docs:
                raise _Changed(f"document {doc_id} was created")
            if before is not None and (not exists or store.load(doc_id, strict=True).doc.render() != before.render()):
                raise _Changed(f"document {doc_id} changed")
        current = store.load(CURRENT_ID, strict=True).doc
        present = {line for _, line in current.lines()}
        if any(line not in present for _, line in chunk):
            raise _Changed("CURRENT's entries changed")
        for doc_id in ws.touched():
            txn.write(store.relpath(doc_id), ws.docs[doc_id].render())
        for doc_id in report.deleted:
            txn.delete(store.relpath(doc_id))
        aliases.record(store, txn, ws.moved)  # what cited a renamed or merged document still resolves
        txn.write("CURRENT.md", _rewrite_current(current, [e.seq for e, _ in chunk]).render())
        txn.commit()  # applied here, under the lock, so the stamp is this write's
        return store.folder_stamp()


def _result(store, cfg, model, reports, stats, start, moved, left, reason) -> ConsolidationResult:
    index = LibraryIndex(store, cfg.search_partition_tokens)
    docs = [{"id": r.id, "tokens": r.token_count, "entries": r.entries}
            for r in index.catalog() if r.id != CURRENT_ID]
    index.close()
    kv_blocks, kv_tokens = _invalidate_kv(store, cfg) if moved else (0, 0)
    return ConsolidationResult(
        store=str(store.root), dry_run=False, llm=model is not None,
        model=getattr(model, "name", None), flushes=reports, calls=stats.to_dict(),
        seconds=round(time.perf_counter() - start, 3), entries_consolidated=moved,
        current_entries_left=left, documents=docs, reason=reason,
        kv_invalidated_blocks=kv_blocks, kv_invalidated_tokens=kv_tokens)


def _invalidate_kv(store: Store, cfg: Settings) -> tuple[int, int]:
    """Delete the KV blocks of documents that changed, and every block chained after them."""
    blocks = block_store(store, cfg)
    labels = {b.header.unit for b in blocks.blocks()}
    stale = stale_labels(store, labels) if labels else set()
    return blocks.invalidate(stale) if stale else (0, 0)


def _dry_run(store: Store, cfg: Settings, **kwargs) -> ConsolidationResult:
    """Run the real consolidation on a scratch copy (with a copy of the index) and report it."""
    with store.reading(), tempfile.TemporaryDirectory(prefix="memcli-dry-run-") as scratch:
        root = Path(scratch) / "store"
        shutil.copytree(store.root, root, ignore=shutil.ignore_patterns(".lock", ".txn", "kv"), copy_function=shutil.copy2)
        copy = Store.open(Resolved(root, "dry run"))
        copy.index_dir = Path(scratch) / "index"  # the scratch copy gets its own index
        source_index = store.cache_folder / "index.sqlite"
        copy.index_dir.mkdir(mode=0o700)
        if source_index.exists():
            shutil.copy2(source_index, copy.index_dir / "index.sqlite")
        result = consolidate(copy, cfg, dry_run=False, **kwargs)
    result.dry_run = True
    result.store = str(store.root)
    return result
