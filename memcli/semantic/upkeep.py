"""The entries' vectors kept up to date for a store: now (``memcli embed``), by the background job
(:mod:`memcli.semantic.job`), as much as a question needs, and how far they are (``memcli status``).

Each function takes the store's search index (:class:`memcli.index.LibraryIndex`, whose
``vectors()`` are the entries' vectors and whose ``folder`` is the store's cache folder)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from memcli.semantic import job

Progress = Callable[[str, int, int], None]  # (stage, done, total)
INLINE_TEXTS = 128  # texts a question embeds itself rather than leave to the job (~15-20 ms each here)


def unembedded_note(count: int) -> str:
    return (f"{count} entries have no vector yet and were ranked by their words alone; the background job "
            "computes them (memcli status shows how far it is, memcli embed waits for it)")


def _stage(progress: Progress | None, stage: str):
    return (lambda done, total: progress(stage, done, total)) if progress else None


def embed(index, progress: Progress | None = None) -> float:
    """Bring the vectors up to date now, waiting first for a background job that is computing them;
    the seconds spent (nothing to do when the semantic signal is off or its model is missing)."""
    start = time.perf_counter()
    vectors = index.vectors()
    if vectors is not None:
        while (running := job.running(index.folder)) is not None:
            if progress and running.get("total"):
                progress("embedding memory (background job)", running.get("done", 0), running["total"])
            time.sleep(0.2)
        vectors.refresh(on_progress=_stage(progress, "embedding memory"))
    return time.perf_counter() - start


def compute(index, progress: Progress | None = None) -> dict:
    """The vectors job's work: every missing vector, under its lock; how it ended (raises
    :class:`memcli.semantic.job.AlreadyRunning` when another process runs it)."""
    vectors = index.vectors()
    if vectors is None:
        return {"state": "off", "why": index.semantic_missing or "search.semantic is off"}
    return job.run(vectors, index.folder, _stage(progress, "embedding memory"))


def status(store, index) -> dict | None:
    """``{missing, entries, job}`` (None: no semantic signal)."""
    vectors = index.vectors()
    if vectors is None:
        return None
    with store.reading():
        vectors.refresh(compute=False)
    return {"missing": vectors.missing, "entries": vectors.entries,
            "job": job.running(index.folder) or job.read_status(index.folder)}


def start_job(settings, root: Path, index) -> None:
    """Start the background job after a write (``search.vectors = background``)."""
    if not settings.search_semantic or settings.search_vectors == "inline":
        return
    if index.semantic_missing or index.path == ":memory:":
        return
    job.start(root, index.folder)


def for_question(settings, store, index, progress: Progress | None) -> tuple[float, int]:
    """What a question does about vectors: with ``search.vectors = inline`` computes the missing ones
    (seconds spent, 0); else computes them only when they are a few (``INLINE_TEXTS``: a note, a
    short session), otherwise starts the background job if none runs and returns (0, entries
    without a vector)."""
    if index.inline:
        return embed(index, progress), 0
    vectors = index.vectors()
    if vectors is None:
        return 0.0, 0
    start = time.perf_counter()
    with store.reading():
        vectors.refresh(compute=False)
        if vectors.missing_texts and vectors.missing_texts <= INLINE_TEXTS:
            vectors.refresh()
            return time.perf_counter() - start, 0
    if vectors.missing:
        start_job(settings, store.root, index)
    return 0.0, vectors.missing
