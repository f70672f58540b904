"""One consolidation: CURRENT, flush by flush, into the topic library.

CURRENT is consolidated oldest first in flushes of at most
``consolidate.threshold_tokens`` tokens, so the work of one flush depends on
the flush and the documents it touches, never on the size of the library
(the Akashic bound). Each flush: rewrite -> plan -> apply -> split -> merge
-> summaries -> the conservation guard -> one transaction that writes the new
documents and the shortened CURRENT. A flush whose model-assisted result
fails the guard is redone on the deterministic path; if that fails too,
nothing is written. The whole run holds the store's write lock.
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
from memcli.consolidate.apply import apply_blocks, finish, refresh_summary
from memcli.consolidate.draft import rewrite
from memcli.consolidate.plan import Planner, plan
from memcli.consolidate.report import ConsolidationResult, FlushReport
from memcli.consolidate.reshape import merge_small, split_document
from memcli.consolidate.workspace import Workspace
from memcli.errors import StoreError
from memcli.index import LibraryIndex
from memcli.llm.base import CallStats, ChatModel
from memcli.paths import Resolved, store_cache_dir
from memcli.store import CURRENT_ID, Store
from memcli.store.format import Document, Entry, parse_entry, parse_heading
from memcli.store.store import new_current, now_iso, refresh_token_count
from memcli.tokens import count_tokens

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
              progress: Progress) -> tuple[Workspace, FlushReport]:
    start = time.perf_counter()
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
    for doc_id in ws.touched():
        parts = split_document(ws, doc_id, split_limit)
        if parts:
            report.split[doc_id] = parts
    report.merged = merge_small(ws, ws.touched(), merge_limit=merge_limit, split_limit=split_limit,
                                similarity=cfg.consolidate_merge_similarity, candidates=cfg.consolidate_candidates)
    touched = ws.touched()
    for done, doc_id in enumerate(touched, 1):
        refresh_summary(ws, doc_id, model=model, stats=stats)
        finish(ws, doc_id)
        progress("summaries", done, len(touched))
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

def _current_entries(doc: Document, next_seq: int) -> tuple[list[tuple[Entry, str]], int]:
    """(entry, raw line) pairs of CURRENT; hand-written lines and seq-less entries get seqs."""
    out: list[tuple[Entry, str]] = []
    stamp = now_iso("minutes")
    for _, line in doc.lines():
        if not line.strip() or parse_heading(line):
            continue
        entry = parse_entry(line)
        if entry is None or entry.seq is None:
            text = entry.text if entry else line.strip().lstrip("-*+ ").strip()
            meta = dict(entry.meta) if entry else {}
            meta.pop("seq", None)
            entry = Entry({"seq": str(next_seq), "time": meta.pop("time", stamp), "source": meta.pop("source", "hand"),
                           **meta}, text)
            next_seq += 1
            line = entry.render()
        out.append((entry, line))
    out.sort(key=lambda pair: pair[0].seq)
    return out, next_seq


def _flushes(pairs: list[tuple[Entry, str]], limit: int) -> list[list[tuple[Entry, str]]]:
    out: list[list[tuple[Entry, str]]] = [[]]
    size = 0
    for pair in pairs:
        cost = count_tokens(pair[1])
        if out[-1] and size + cost > limit:
            out.append([])
            size = 0
        out[-1].append(pair)
        size += cost
    return [f for f in out if f]


def _rewrite_current(current: Document, remaining: list[tuple[Entry, str]], moved: list[int]) -> Document:
    doc = new_current()
    for key in ("created_time", "aux"):
        if key in current.meta:
            doc.meta[key] = current.meta[key]
    kept = {e.seq for e, _ in remaining}
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

def consolidate(store: Store, cfg: Settings, *, model: ChatModel | None, dry_run: bool = False,
                split_limit: int | None = None, merge_limit: int | None = None,
                progress: Progress | None = None, reason: str | None = None) -> ConsolidationResult:
    """Consolidate all of CURRENT; with ``dry_run`` on a scratch copy of the store."""
    if dry_run:
        return _dry_run(store, cfg, model=model, split_limit=split_limit, merge_limit=merge_limit,
                        progress=progress, reason=reason)
    progress = progress or (lambda stage, done, total: None)
    split_limit = split_limit or cfg.consolidate_split_tokens
    merge_limit = merge_limit if merge_limit is not None else cfg.consolidate_merge_tokens
    stats = CallStats()
    start = time.perf_counter()
    reports: list[FlushReport] = []
    moved_total = 0
    with store.writing() as txn:
        if not store.current_path.exists():
            return _result(store, cfg, model, reports, stats, start, 0, 0, reason)
        current = store.load(CURRENT_ID, strict=True).doc
        state = store.read_state()
        max_seq = max((e.seq or 0 for _, e in current.entries()), default=0)
        next_seq = max(int(state.get("next_seq", 1)), max_seq + 1)
        pairs, next_seq = _current_entries(current, next_seq)
        index = LibraryIndex(store, cfg.search_partition_tokens)
        chunks = _flushes(pairs, cfg.consolidate_threshold_tokens)
        for number, chunk in enumerate(chunks, 1):
            entries = [e for e, _ in chunk]
            stage = (lambda n: lambda s, d, t: progress(f"flush {n}/{len(chunks)}: {s}", d, t))(number)
            ws, report = run_flush(store, index, entries, model=model, stats=stats, cfg=cfg,
                                   split_limit=split_limit, merge_limit=merge_limit, progress=stage)
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
            for doc_id in ws.touched():
                txn.write(store.relpath(doc_id), ws.docs[doc_id].render())
            for doc_id in report.deleted:
                txn.delete(store.relpath(doc_id))
            remaining = [p for block in chunks[number:] for p in block]
            moved = [e.seq for e in entries]
            current = _rewrite_current(current, remaining, moved)
            txn.write("CURRENT.md", current.render())
            state["next_seq"] = next_seq
            txn.write("state.json", json.dumps(state) + "\n")
            txn.commit()
            moved_total += len(moved)
            reports.append(report)
        left = sum(1 for _ in current.entries())
    return _result(store, cfg, model, reports, stats, start, moved_total, left, reason)


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
    from memcli.kv import block_store
    from memcli.kv.context import stale_labels

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
        source_index = store_cache_dir(store.root) / "index.sqlite"
        copy.index_dir.mkdir(mode=0o700)
        if source_index.exists():
            shutil.copy2(source_index, copy.index_dir / "index.sqlite")
        result = consolidate(copy, cfg, dry_run=False, **kwargs)
    result.dry_run = True
    result.store = str(store.root)
    return result
