"""What a forget leaves for the caches to do, and the notes that make sure it is done: after a forget (or another
clone's, merged by a sync) commits, the search index, the vectors and the KV folders lose what it took out
(:func:`purge_caches`); a note written before the commit (:func:`expect_purge`) makes a crash in between leave
the caches to be dropped by the next command (:func:`finish_interrupted`); and each cache keeps a note of the
tombstones it is clean of, so what was forgotten while it was not looking (a plain git pull, another cache
folder) is dropped from it (:func:`catch_up`). :mod:`memcli.forget` takes the entries out of the store."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Callable
from pathlib import Path

from memcli import parsing
from memcli.errors import StoreError
from memcli.kv import kv_root, read_only_root, used_folders
from memcli.kv.purge import forget_texts
from memcli.kv.purge import note_seen as kv_note_seen
from memcli.kv.purge import seen as kv_seen
from memcli.paths import ensure_private_dir
from memcli.store import Store
from memcli.store.atomic import atomic_write
from memcli.store.folder import now_iso, read_regular
from memcli.store.format import Entry
from memcli.store.identity import FORGOTTEN, tombstone_seqs

PREVIEW = "forget-preview.json"  # the seqs a dry run showed for each citation
PURGE = "forget-purge.json"  # written before a forget commits, removed once the caches are clean
SEEN = "forget-seen.json"  # the store's tombstones when this cache folder's caches were last clean of them
TREE_NOTES = (".forget-preview.json", ".forget-purge.json")  # where earlier versions kept them: never read now


def note_path(store: Store, name: str) -> Path:
    """Where this clone keeps one of forget's notes: in the store's own cache folder (keyed by the store's
    path, or the one its caller gave, ``Memory(cache_dir=...)``), outside the store's work tree. A note is
    this clone's word on what its own dry run showed or its own commit left to clean, so nothing that
    arrives with the store (``git add -f``, a copied folder, an archive) can stand in for it."""
    return store.cache_folder / name


def write_note(store: Store, name: str, text: str) -> None:
    atomic_write(ensure_private_dir(note_path(store, name).parent) / name, text)




def pending_purge(store: Store) -> bool:
    """A forget committed but its caches were not cleaned (a crash, a kill): they must be dropped."""
    return note_path(store, PURGE).exists()


def purge_done(store: Store, settings, before: str | None = None) -> None:
    """The caches are clean of every forgotten entry: the store's tombstones as they are now are noted as seen
    (:func:`catch_up`), by this cache folder and by each KV folder that was clean of those ``before`` the change
    (the purge note's when not given), then the purge note goes (a command that opens the caches in between
    finds the note still there, never tombstones unseen without it)."""
    seqs = tombstones(store)
    _note_seen(store, seqs)
    if before is None:
        try:
            note = parsing.loads(read_regular(note_path(store, PURGE)))
            before = note.get("before") if isinstance(note, dict) else None
        except (OSError, ValueError, StoreError):
            before = None
    if isinstance(before, str):
        _kv_advance(store, settings, before, _seen_digest(seqs))
    try:
        note_path(store, PURGE).unlink(missing_ok=True)
    except OSError:
        pass


def expect_purge(store: Store, documents: list[str], before: set[int]) -> None:
    """Note, before a change that takes entries out commits (a forget, or another clone's arriving through a
    sync), that the caches must then be cleaned of them: a crash in between leaves them to be dropped.
    ``before``: the store's tombstones before the change (:func:`purge_done`)."""
    try:
        write_note(store, PURGE, json.dumps({"time": now_iso(), "documents": sorted(set(documents)),
                                              "before": _seen_digest(before)}))
    except OSError:
        pass  # a cache folder that cannot be written: the caches are cleaned right after the commit
        # all the same; only a crash in between would leave them to the next forget


def tombstones(store: Store) -> set[int]:
    """The seqs forgotten in this store, by any of its clones (``forgotten.txt``)."""
    try:
        return tombstone_seqs(store.read_file(store.root / FORGOTTEN).decode("utf-8", "replace"))
    except FileNotFoundError:
        return set()


def held(store: Store, seqs: set[int]) -> list[tuple[str, Entry]]:
    """This clone's entries with one of ``seqs``, each with the document that holds it: what another
    clone's forget takes out here when a sync merges it, read before the merge."""
    if not seqs:
        return []
    found = []
    for doc_id in store.all_ids():
        loaded = store.load(doc_id)
        if loaded.error:
            continue
        found += [(doc_id, entry) for _, entry in loaded.doc.entries() if entry.seq in seqs]
    return found


def _seen_digest(seqs: set[int]) -> str:
    return hashlib.sha256(" ".join(map(str, sorted(seqs))).encode()).hexdigest()


NOTHING_SEEN = _seen_digest(set())  # what a KV folder without a note of its own is clean of


def _note_seen(store: Store, seqs: set[int]) -> None:
    if not seqs and not note_path(store, SEEN).exists():
        return  # a store no clone forgot anything of: no note
    try:
        write_note(store, SEEN, json.dumps({"tombstones": len(seqs), "sha256": _seen_digest(seqs)}))
    except OSError:
        pass  # the next command compares again and drops again: nothing is kept that should go


def tombstone_digest(store: Store) -> str:
    """The digest of the store's tombstones now, as the seen notes keep it (:func:`purge_done` ``before``)."""
    return _seen_digest(tombstones(store))


def catch_up(store: Store, settings, drop_files: Callable[[], list[str]]) -> str | None:
    """When the store's tombstones differ from those a cache was last clean of, an entry went from the files
    without its cache rows going with it (a forget merged by a plain ``git pull``, or made through another cache
    folder, ``Memory(cache_dir=...)``), and its text is no longer known. Each cache keeps its own note: this
    cache folder's (the index's and the vectors' files, dropped with ``drop_files``) and each KV folder's
    (:func:`memcli.kv.purge.seen`: blocks of changed documents and every chat session go,
    :func:`memcli.kv.purge.forget_texts` with no texts), so a KV folder a forget through another cache folder
    already cleaned keeps its chat sessions. What was dropped notes the tombstones read before it (a forget
    since makes the next command look again). What to tell the user, or None."""
    try:
        seqs = tombstones(store)
    except StoreError as exc:  # forgotten.txt is no regular file (a link, a FIFO): nothing to compare with
        return f"the caches were not checked for entries forgotten elsewhere: {exc.message}"
    if not seqs:
        return None  # nothing was ever forgotten here
    digest = _seen_digest(seqs)
    try:
        seen = parsing.loads(read_regular(note_path(store, SEEN)))
    except (OSError, ValueError, StoreError):
        seen = None
    cleared = 0
    caught_up = isinstance(seen, dict) and seen.get("sha256") == digest
    if not caught_up:
        cleared = len(drop_files())
        _note_seen(store, seqs)  # once: what could be dropped was
    kv, refused = _kv_catch_up(store, settings, digest, everything=False, adopt=caught_up)
    if refused:
        return f"entries forgotten elsewhere may still be in KV blocks here: {refused}"
    cleared += kv
    return (f"entries were forgotten since this clone's caches were last cleaned (through another cache folder, "
            f"or merged by a plain git pull); the caches were dropped ({cleared} files and blocks) and are rebuilt "
            "when needed") if cleared else None


def _kv_catch_up(store: Store, settings, digest: str | None, *, everything: bool,
                 adopt: bool = False) -> tuple[int, str | None]:
    """In each KV folder of the store (:func:`kv_folders`) whose note is not ``digest`` (every one with
    ``everything``), the blocks of changed documents and every chat session go; then the folder notes
    ``digest`` (when known). A missing folder is made with the note (what is made in it later starts clean of these
    tombstones), except by a read-only reader. ``adopt``: this cache folder's own note is ``digest``, so a KV
    folder without a note of its own (kept by a memcli from before the note, whose forgets and catch-ups
    cleaned the KV folders with the cache folder) takes it without a drop. (Blocks and sessions dropped,
    why a folder was not cleaned.)"""
    dropped = 0
    try:
        for each in kv_folders(store, settings):
            root = kv_root(store, each)
            noted = kv_seen(root, store) if root.is_dir() else None
            if not root.is_dir():
                if store.read_only or digest is None:
                    continue
            elif adopt and noted is None and not everything:
                pass  # the cache folder's word for it: noted below, nothing dropped
            elif everything or (noted or NOTHING_SEEN) != digest:
                counts = forget_texts(store, each, None)
                dropped += counts.get("kv_blocks", 0) + counts.get("chat_sessions", 0)
            else:
                continue
            if digest is not None:
                kv_note_seen(root, store, digest)
    except (OSError, StoreError) as exc:  # a link where a KV folder would be: never followed, so never cleaned
        return dropped, str(exc)
    return dropped, None


def _kv_advance(store: Store, settings, before: str, after: str) -> None:
    """After a forget or a merge cleaned the KV folders of what it took out (by text): a folder that was clean
    of the tombstones ``before`` it is clean of those ``after``; any other is left to :func:`catch_up`."""
    if before == after:
        return
    try:
        for each in kv_folders(store, settings):
            root = kv_root(store, each)
            if root.is_dir() and (kv_seen(root, store) or NOTHING_SEEN) == before:
                kv_note_seen(root, store, after)
    except (OSError, StoreError):
        pass  # the note stays behind: the next command drops that folder's sessions, nothing kept that should go




def kv_folders(store: Store, settings) -> list:
    """The settings of each KV folder memcli keeps for this store: the one configured; when there is one, a
    read-only MCP server's (:func:`memcli.kv.read_only_root`), which no other command writes or cleans; and
    those outside the store it was used with under another setting (:func:`memcli.kv.used_folders`: one
    shell's ``MEMCLI_KV_DIR``)."""
    out = [settings]
    seen = {kv_root(store, settings).resolve()}
    private = read_only_root(store)
    if private.is_dir() and not private.is_symlink() and private.resolve() not in seen:
        out.append(settings.with_overrides({"kv.dir": str(private)}, "a read-only MCP server's KV folder"))
        seen.add(private.resolve())
    for folder in used_folders(store):
        if folder.resolve() not in seen:
            out.append(settings.with_overrides({"kv.dir": str(folder)}, "a KV folder this store was used with"))
            seen.add(folder.resolve())
    return out


def _forget_kv(store: Store, settings, texts: list[str] | None) -> dict:
    """:func:`memcli.kv.purge.forget_texts` in every KV folder of the store (:func:`kv_folders`), counts summed."""
    out: dict = {}
    for each in kv_folders(store, settings):
        for key, value in forget_texts(store, each, texts).items():
            out[key] = out.get(key, 0) + value
    return out


def purge_caches(store: Store, settings, index, entries: list[Entry], docs: list[str]) -> dict:
    """After a forget of ``entries`` from ``docs``: each cache drops what it held of them (the index
    re-indexes, the vectors and every KV block or chat cache that could hold their tokens go).
    Returns what each dropped."""
    out: dict = {}
    with store.reading():
        out["index_documents"] = index.refresh()
    vectors = index.vectors()
    if vectors is not None:
        out["vectors"] = vectors.forget(entries, docs)
    elif index.path != ":memory:":  # the signal off here: what a run with it on kept (a job may be running)
        from memcli.semantic.encoder import MODEL_NAME, Encoder
        from memcli.semantic.vectors import forget_kept

        out["vectors"] = forget_kept(store, index.folder, entries, docs, MODEL_NAME, Encoder.dimensions)
    try:
        out.update(_forget_kv(store, settings, [e.text for e in entries]))
    except StoreError as exc:  # a link where the KV folder would be: never followed, so never cleaned
        out["kv_refused"] = exc.message
    return out


def clean_caches(store: Store, settings, index, result, entries: list[Entry], documents: list[str],
                 drop_files: Callable[[], list[str]]) -> None:
    """After a commit that took ``entries`` out of ``documents`` (a forget, or a sync that merged another
    clone's): :func:`purge_caches` into ``result.caches`` (a cache that cannot be cleaned is dropped whole
    with ``drop_files``, with a warning in ``result.warnings``), then the purge note goes."""
    try:
        result.caches = purge_caches(store, settings, index, entries, documents)
    except (OSError, sqlite3.Error) as exc:  # the caches are disposable: dropped whole instead
        result.caches = {"dropped": drop_files()}
        result.warnings.append(f"the caches could not be cleaned ({exc}); they were removed and are rebuilt when "
                               "needed")
    if "kv_refused" in result.caches:
        result.warnings.append(f"KV blocks were not cleaned: {result.caches['kv_refused']}")
    purge_done(store, settings)


def finish_interrupted(store: Store, settings, drop_files: Callable[[], list[str]], *,
                       read_only: bool) -> str | None:
    """A forget whose cache cleaning was cut short (a kill): every cache that could hold the forgotten
    text is dropped (``drop_files``: the index's and the vectors' files; rebuilt when needed), then
    the note goes (a read-only reader drops the caches, which are not the store, and leaves the note
    for a writer). What to tell the user, or None when there was nothing to finish."""
    if not pending_purge(store):
        return None
    try:
        digest = tombstone_digest(store)
    except StoreError:  # forgotten.txt no regular file: everything is dropped all the same, nothing noted
        digest = None
    dropped = len(drop_files())
    kv, refused = _kv_catch_up(store, settings, digest, everything=True)
    dropped += kv
    if refused:
        return f"a forget's KV blocks could not all be dropped: {refused}"
    if not read_only:
        purge_done(store, settings)
    return (f"a forget was interrupted before its caches were cleaned; they were dropped ({dropped} files and "
            "blocks) and are rebuilt when needed")


def drop_cache_files(folder: Path) -> list[str]:
    """Remove a store's search index and vector cache files from its cache ``folder`` (a forget whose
    cleaning was cut short, or failed): they are rebuilt on the next question. The paths removed."""
    from memcli.semantic.vectors import drop_snapshots

    gone = []
    for name in ("index.sqlite", "vectors.sqlite"):
        for path in (folder / name, folder / f"{name}-journal"):
            if path.exists():
                path.unlink()
                gone.append(str(path))
    return gone + drop_snapshots(folder, wipe=True)  # the matrix of every vector, as a file
