"""The entries' sentence vectors, kept in the store's cache beside the search index.

``vectors.sqlite`` holds, per document, the file signature (mtime, size) it was computed for, its
live entries' line numbers and their vectors (float16), plus every vector by the hash of the text
it was computed from: the entries' and, for an entry of several sentences, each sentence's (what
compact evidence shows of an entry found by its meaning). A document that changed is parsed again
and only its texts that are new are run through the model; nothing is computed per question but
the question's own vector.
Like the search index it is a cache: it can be deleted, and when it cannot be written the vectors
are kept in memory for the process.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path

import numpy as np

from memcli.cache import file_signatures, open_cache
from memcli.semantic.similarities import Similarities, row_index
from memcli.semantic.snapshots import SNAPSHOT, drop_snapshots, wipe_file
from memcli.store import Store
from memcli.store.format import Entry
from memcli.store.lines import DocLines, body_lines, sentences, shown_text

VERSION = "2"  # 2: sentences of entries of several sentences
QUESTIONS_KEPT = 1024  # questions' vectors kept in memory (1.5 KB each)
CHUNK = 256  # texts embedded between two commits (a stopped job loses at most this many)
PARTIAL_EVERY = 2.0  # seconds between two snapshots of the vectors a running job has so far (at least)
PARTIAL_COST = 20  # ... and at least this many times what writing the last one took
_SCHEMA = """
CREATE TABLE IF NOT EXISTS info(key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS docs(doc TEXT PRIMARY KEY, mtime_ns INTEGER, size INTEGER, lines BLOB, vecs BLOB);
CREATE TABLE IF NOT EXISTS texts(key BLOB PRIMARY KEY, vec BLOB);
"""


def entry_text(entry: Entry) -> str:
    """What an entry's vector is computed from: its speaker and its text."""
    who = entry.meta.get("speaker") or ""
    text = " ".join(entry.text.split())
    return f"{who}: {text}" if who else text


def forget_kept(store: Store, folder: Path, entries: list[Entry], doc_ids: list[str], model: str,
                dimensions: int) -> int:
    """:meth:`EntryVectors.forget` in a process that computes no vectors (the semantic signal off): the cache
    a run with it on kept in ``folder`` drops the entries' vectors in the transaction a running job's next
    chunk waits for (the job then stores nothing it read before), and every snapshot is wiped. ``model``
    and ``dimensions``: the encoder's, whose weights are not read (a forget embeds nothing). A cache that
    cannot be opened is overwritten with zeros and removed. Returns the vectors dropped."""
    path = folder / "vectors.sqlite"
    if not path.exists():
        drop_snapshots(folder, wipe=True)
        return 0
    vectors = EntryVectors(store, folder, _Keyed(model, dimensions))
    try:
        if vectors.path == ":memory:":  # the file could not be opened as a cache
            drop_snapshots(folder, wipe=True)
            wipe_file(path)
            return 0
        return vectors.forget(entries, doc_ids)
    finally:
        vectors.close()


class _Keyed:
    """What a forget needs of an encoder: the name the cache's rows are keyed by, and the vectors' size."""

    def __init__(self, name: str, dimensions: int):
        self.name, self.dimensions = name, dimensions


def _key(model: str, text: str) -> bytes:
    return hashlib.sha1(f"{model}\n{text}".encode()).digest()


class EntryVectors:
    """Vectors of every live entry of a store, refreshed from the documents' file signatures."""

    def __init__(self, store: Store, folder: Path | None, encoder,
                 on_warning: Callable[[str], None] | None = None):
        """``folder``: where ``vectors.sqlite`` lives (None: in memory for this process)."""
        self.store, self.encoder, self.on_warning = store, encoder, on_warning
        self.path: Path | str = folder / "vectors.sqlite" if folder is not None else ":memory:"
        try:
            self.db = self._connect(self.path)
        except (OSError, sqlite3.Error) as exc:
            self._warn(exc)
            self.path = ":memory:"
            self.db = self._connect(self.path)
        self._signature: tuple = ()
        self._questions: OrderedDict[str, np.ndarray] = OrderedDict()  # recent questions' vectors
        self._query_map: object = None  # memcli.semantic.query_map.QueryMap, read with the first question
        self._sentences: dict[bytes, np.ndarray] = {}  # sentence vectors read so far, by key
        self.inline = True  # a question may embed what is missing (False: never; see refresh(compute=False))
        self.missing = 0  # entries without a vector at the last refresh (only when refresh may not compute)
        self.missing_texts = 0  # texts (entries and their sentences) without one then
        self._version = -1
        self._partial = ""  # the keys file of the partial snapshot the matrix was mapped from ("": none)
        self.changed = False  # a document changed while the last refresh ran: the next one looks again
        self._keys: list[tuple[str, int]] = []
        self._position: dict[tuple[str, int], int] = {}
        self._doc_rows: dict[str, np.ndarray] = {}
        self._matrix = np.zeros((0, encoder.dimensions), np.float32)

    def _warn(self, exc: Exception) -> None:
        if self.on_warning:
            self.on_warning(f"the vector cache {self.path} cannot be used ({exc}); vectors are kept in memory")

    def _connect(self, path) -> sqlite3.Connection:
        return open_cache(path, _SCHEMA, f"{VERSION}:{self.encoder.name}", ("docs", "texts"))

    def close(self) -> None:
        self.db.close()

    @property
    def entries(self) -> int:
        """Entries with a vector, as of the last refresh."""
        return len(self._keys)

    def refresh(self, on_progress: Callable[[int, int], None] | None = None, compute: bool = True) -> int:
        """Bring the vectors up to date with the documents; returns how many texts were embedded.
        ``compute=False``: embed nothing; entries whose text has no vector yet are left out of
        :meth:`similarities` (ranked by their words alone) and counted in :attr:`missing`."""
        on_disk = file_signatures(self.store)
        signature = tuple(sorted(on_disk.items()))
        version = self._data_version()
        if signature == self._signature and (not self.missing or (not compute and version == self._version)):
            return 0  # nothing changed: no document, and no vector another process (the job) stored
        # nothing loaded yet, or not every entry's vector: a snapshot of these documents first (mapped, not read)
        if (not self._keys or self.missing) and self._from_snapshot(signature, partial=not compute):
            self._signature, self._version = signature, version
            return 0
        try:
            embedded, extra = self._update(on_disk, on_progress, compute)
        except sqlite3.Error as exc:
            if self.path == ":memory:":
                raise
            self._warn(exc)
            self.db.close()
            self.path = ":memory:"
            self.db = self._connect(self.path)
            embedded, extra = self._update(on_disk, on_progress, compute)
        self._load(list(on_disk), extra)
        self._partial = ""
        self._signature = signature if not self.changed else ()
        self._version = self._data_version()
        if not extra and not self.missing and not self.changed:
            self._save_snapshot(signature, on_disk)
        return embedded

    # A new process (a CLI question) would read every vector out of the SQLite rows and build the
    # matrix (about 300 ms at 10^5 entries); instead, once every entry has its vector, the matrix is
    # kept as one file named by what it was built from (the documents' signatures, the model) and
    # mapped, not read. While the job computes vectors it also keeps the matrix of those it has so
    # far, every few seconds, as a partial snapshot (named by the texts it holds as well), so that a
    # question asked meanwhile maps that rather than parse the documents and look up every text
    # (0.3 s of a question at 10^4 entries). Snapshots are written under the cache's write lock and
    # only while their documents are unchanged, and a forget removes them under the same lock: none
    # outlives the forget of an entry it holds.

    def _snapshot_paths(self, signature: tuple, done: int | None = None) -> tuple[Path, Path] | None:
        """The matrix's and its keys' files for these documents (``done``: a partial snapshot holding the
        vectors of that many texts)."""
        if self.path == ":memory:":
            return None
        token = hashlib.sha1(repr((VERSION, self.encoder.name, signature)).encode()).hexdigest()[:16]
        name = f"{SNAPSHOT}-{token}" + (f"-partial-{done}" if done is not None else "")
        folder = Path(self.path).parent
        return folder / f"{name}.npy", folder / f"{name}.npz"

    def _newest_partial(self, signature: tuple) -> tuple[Path, Path] | None:
        complete = self._snapshot_paths(signature)
        if complete is None:
            return None
        done = []
        for path in complete[1].parent.glob(f"{complete[1].stem}-partial-*.npz"):
            count = path.stem.rsplit("-", 1)[-1]
            if count.isdigit():
                done.append(int(count))
        return self._snapshot_paths(signature, max(done)) if done else None

    def _from_snapshot(self, signature: tuple, partial: bool = False) -> bool:
        """Take the matrix from the snapshot of exactly these documents, when there is one; ``partial``:
        else from the newest partial snapshot (the entries it lacks counted in :attr:`missing`)."""
        paths = self._snapshot_paths(signature)
        if paths is not None and paths[1].exists() and self._map(paths):
            return True
        paths = self._newest_partial(signature) if partial else None
        if paths is None:
            return False
        if str(paths[1]) == self._partial:
            return True  # the one already mapped: nothing newer yet
        return self._map(paths)

    def _map(self, paths: tuple[Path, Path]) -> bool:
        try:
            with np.load(paths[1]) as data:
                docs, counts, lines = data["docs"].tolist(), data["counts"].tolist(), data["lines"].tolist()
                missing = tuple(data["missing"].tolist()) if "missing" in data else (0, 0)
            matrix = np.load(paths[0], mmap_mode="r")
        except (OSError, ValueError, KeyError):
            return False  # removed meanwhile (a newer one was written), or not written whole
        if matrix.shape != (len(lines), self.encoder.dimensions) or sum(counts) != len(lines):
            return False
        ends = np.cumsum(counts).tolist()
        self._set_rows(zip(docs, (lines[end - count:end] for count, end in zip(counts, ends))))
        self._matrix = matrix
        self.missing, self.missing_texts = missing
        self._partial = str(paths[1]) if any(missing) else ""
        return True

    def _set_rows(self, runs) -> None:
        """The matrix's keys from (document, its entries' lines) in row order: each document's rows are
        one run."""
        self._keys, self._doc_rows, self._position = row_index(runs)

    def _save_snapshot(self, signature: tuple, on_disk: dict[str, tuple[int, int]]) -> None:
        """Keep the matrix of these documents as a snapshot (and drop older ones); a cache, so a failure
        to write it only costs the next process the read from SQLite."""
        paths = self._snapshot_paths(signature)
        if paths is None or paths[1].exists() or not self._keys:
            return
        try:
            self.db.execute("BEGIN IMMEDIATE")  # no forget between the check below and the files
        except sqlite3.Error:
            return
        try:
            if not self._moved(on_disk, list(on_disk)):
                try:
                    self._drop_snapshots()
                except OSError:
                    pass
                self._write_snapshot(paths, [(d, [self._keys[i][1] for i in rows]) for d, rows in self._doc_rows.items()],
                                     self._matrix, (0, 0))
        finally:
            self.db.execute("COMMIT")

    def _write_snapshot(self, paths: tuple[Path, Path], runs: list[tuple[str, list[int]]], matrix: np.ndarray,
                        missing: tuple[int, int]) -> bool:
        """Write a snapshot: ``runs`` (document, its lines) in the rows' order, their vectors ``matrix``,
        and (entries, texts) that have none yet; the keys file last (a reader needs both)."""
        docs = [doc for doc, _ in runs]
        try:
            for path, write in ((paths[0], lambda f: np.save(f, np.ascontiguousarray(matrix, np.float32))),
                                (paths[1], lambda f: np.savez(
                                    f, docs=np.array(docs), counts=np.array([len(lines) for _, lines in runs]),
                                    lines=np.array([line for _, lines in runs for line in lines], np.int64),
                                    missing=np.array(missing, np.int64)))):
                partial = path.with_name(f".{path.name}.{os.getpid()}")
                with open(partial, "wb") as handle:
                    write(handle)
                os.chmod(partial, 0o600)
                os.replace(partial, path)
        except OSError:
            return False
        return True

    def _partial_writer(self, signature: tuple, parsed: dict[str, list[tuple[int, str]]], known: dict[bytes, np.ndarray],
                        on_disk: dict[str, tuple[int, int]], generation: str) -> Callable[[int], None]:
        """What the job calls inside a write transaction of the cache, with the texts still missing: before
        its first chunk and after each one it stored, at most every ``PARTIAL_EVERY`` seconds, a partial
        snapshot of every entry's vector known so far (the documents stored whole, read once, and the
        rows of the changed ones that have a vector), unless a document changed since ``on_disk`` or a
        forget came since ``generation``."""
        model = self.encoder.name
        keyed = {doc_id: [(line, _key(model, text)) for line, text in rows] for doc_id, rows in parsed.items()}
        state: dict = {"next": 0.0, "stored": None}

        def write(remaining: int) -> None:
            now = time.monotonic()
            if (remaining <= CHUNK or now < state["next"] or self._forgets() != generation
                    or self._moved(on_disk, list(on_disk))):
                return  # the job ends within a chunk; or it wrote one lately; or it would be of other documents
            if state["stored"] is None:
                state["stored"] = {
                    doc_id: (np.frombuffer(lines, np.int32).tolist(),
                             np.frombuffer(vecs, np.float16).reshape(-1, self.encoder.dimensions))
                    for doc_id, lines, vecs in self.db.execute("SELECT doc, lines, vecs FROM docs")
                    if doc_id in on_disk and doc_id not in keyed}
            runs, parts, missing = [], [], 0
            for doc_id in sorted(set(state["stored"]) | set(keyed)):
                if doc_id in keyed:
                    have = [(line, key) for line, key in keyed[doc_id] if key in known]
                    missing += len(keyed[doc_id]) - len(have)
                    lines = [line for line, _ in have]
                    vectors = np.array([known[key] for _, key in have], np.float16).reshape(-1, self.encoder.dimensions)
                else:
                    lines, vectors = state["stored"][doc_id]
                if lines:
                    runs.append((doc_id, lines))
                    parts.append(vectors)
            paths = self._snapshot_paths(signature, len(known))
            if paths is None or paths[1].exists():
                return
            matrix = (np.concatenate(parts).astype(np.float32) if parts
                      else np.zeros((0, self.encoder.dimensions), np.float32))
            if self._write_snapshot(paths, runs, matrix, (missing, remaining)):
                for path in paths[0].parent.glob(f"{SNAPSHOT}-*-partial-*"):
                    if path not in paths:
                        try:
                            path.unlink(missing_ok=True)  # an older one (a question mapping it keeps its pages)
                        except OSError:
                            pass
            took = time.monotonic() - now
            state["next"] = time.monotonic() + max(PARTIAL_EVERY, PARTIAL_COST * took)

        return write

    def _drop_snapshots(self, wipe: bool = False) -> list[str]:
        return drop_snapshots(Path(self.path).parent, wipe) if self.path != ":memory:" else []

    def _data_version(self) -> int:
        """SQLite's count of commits by other connections to the cache (the background job's)."""
        try:
            return self.db.execute("PRAGMA data_version").fetchone()[0]
        except sqlite3.Error:
            return -1

    def _update(self, on_disk: dict[str, tuple[int, int]], on_progress,
                compute: bool) -> tuple[int, dict[str, tuple[list[int], np.ndarray]]]:
        """Embed what the changed documents need (in chunks, each stored as it is done, so a job that
        is stopped resumes where it was), store each document whose entries all have vectors, and return
        (texts embedded, the rows of documents still missing some, for this process)."""
        self.missing, self.missing_texts, self.changed = 0, 0, False
        generation = self._forgets()  # before anything is read: a forget after it keeps this pass from storing
        cached = {d: (m, s) for d, m, s in self.db.execute("SELECT doc, mtime_ns, size FROM docs")}
        stale = [d for d, sig in on_disk.items() if cached.get(d) != sig]
        gone = [d for d in cached if d not in on_disk]
        if not stale and not gone:
            return 0, {}
        parsed, parts = self._read_changed(stale, on_disk)
        model = self.encoder.name
        wanted = {_key(model, text): text for rows in parsed.values() for _, text in rows}
        wanted.update((_key(model, text), text) for text in parts)
        known = self._known(list(wanted))
        missing = [k for k in wanted if k not in known]
        self.missing_texts = len(missing)
        writer = (self._partial_writer(tuple(sorted(on_disk.items())), parsed, known, on_disk, generation)
                  if compute else None)
        if writer is not None and len(missing) > CHUNK:
            self.db.execute("BEGIN IMMEDIATE")  # what the documents have before the first chunk
            try:
                writer(len(missing))
            finally:
                self.db.execute("COMMIT")
        embedded = self._embed(missing if compute else [], wanted, known, on_disk, list(parsed), on_progress,
                               generation, writer)
        extra: dict[str, tuple[list[int], np.ndarray]] = {}
        complete = {}
        for doc_id, rows in parsed.items():
            have = [(line, text) for line, text in rows if _key(model, text) in known]
            self.missing += len(rows) - len(have)
            if len(have) == len(rows):
                complete[doc_id] = rows
            elif have:
                extra[doc_id] = ([line for line, _ in have],
                                 np.array([known[_key(model, t)] for _, t in have], np.float16))
        self._store_documents(complete, gone, known, on_disk)
        for doc_id in set(complete) if self.changed else ():
            rows = complete[doc_id]
            extra[doc_id] = ([line for line, _ in rows], np.array([known[_key(model, t)] for _, t in rows], np.float16))
        return embedded, extra

    def _read_changed(self, stale: list[str], on_disk: dict[str, tuple[int, int]]
                      ) -> tuple[dict[str, list[tuple[int, str]]], list[str]]:
        """The entry texts of the changed documents, by line, and the sentences of entries of several
        sentences; under the store's shared lock only while reading it, never while embedding."""
        parsed: dict[str, list[tuple[int, str]]] = {}
        parts: list[str] = []
        with self.store.reading():
            for doc_id in stale:
                if self.store.signature(doc_id) != on_disk[doc_id]:
                    self.changed = True  # changed since the signatures were read: the next refresh sees it
                    continue
                doc = DocLines(doc_id, body_lines(self.store.read_text(doc_id)))
                parsed[doc_id] = [(line, entry_text(doc.entries[line])) for line in doc.lines]
                for line in doc.lines:
                    split = sentences(shown_text(doc.entries[line]))
                    if len(split) > 1:
                        parts.extend(split)
        return parsed, parts

    def _known(self, keys: list[bytes]) -> dict[bytes, np.ndarray]:
        """The stored vectors of these texts (by key)."""
        known: dict[bytes, np.ndarray] = {}
        for at in range(0, len(keys), 500):
            chunk = keys[at:at + 500]
            marks = ",".join("?" * len(chunk))
            for key, blob in self.db.execute(f"SELECT key, vec FROM texts WHERE key IN ({marks})", chunk):
                known[key] = np.frombuffer(blob, np.float16)
        return known

    def _embed(self, missing: list[bytes], wanted: dict[bytes, str], known: dict[bytes, np.ndarray],
               on_disk: dict[str, tuple[int, int]], doc_ids: list[str], on_progress, generation: str,
               on_chunk: Callable[[int], None] | None = None) -> int:
        """Embed the missing texts in chunks, each stored (and added to ``known``) as it is done, unless
        a forget came since ``generation`` (:meth:`_forgets`: the chunk may hold a forgotten text's vector);
        after a chunk, it stops when one of the documents changed (the next refresh reads them again); how
        many were embedded. ``on_chunk``: called with the texts still missing after each chunk, before it
        commits (:meth:`_partial_writer`)."""
        embedded = 0
        for at in range(0, len(missing), CHUNK):
            chunk = missing[at:at + CHUNK]
            base = embedded
            vectors = self.encoder.encode(
                [wanted[k] for k in chunk],
                on_batch=(lambda done: on_progress(base + done, len(missing))) if on_progress else None)
            self.db.execute("BEGIN IMMEDIATE")
            try:
                if self._forgets() != generation:  # a forget since the documents were read: store nothing
                    self.db.execute("ROLLBACK")
                    self.changed = True
                    break
                self.db.executemany("INSERT OR REPLACE INTO texts VALUES(?, ?)",
                                    ((k, v.tobytes()) for k, v in zip(chunk, vectors.astype(np.float16))))
                known.update(zip(chunk, vectors.astype(np.float16)))
                embedded += len(chunk)
                if on_chunk is not None:
                    on_chunk(len(missing) - at - len(chunk))
                self.db.execute("COMMIT")
            except BaseException:
                if self.db.in_transaction:
                    self.db.execute("ROLLBACK")
                raise
            if self._moved(on_disk, doc_ids):  # written to since: the chunk is kept (a text's vector is the
                self.changed = True  # text's), and the next refresh reads the documents again
                break
        return embedded

    def _store_documents(self, complete: dict[str, list[tuple[int, str]]], gone: list[str],
                         known: dict[bytes, np.ndarray], on_disk: dict[str, tuple[int, int]]) -> None:
        """Each document whose entries all have vectors stored as one matrix (unless one changed
        meanwhile), and the rows of documents that went removed."""
        model = self.encoder.name
        self.db.execute("BEGIN IMMEDIATE")
        try:
            for doc_id in gone:
                self.db.execute("DELETE FROM docs WHERE doc=?", (doc_id,))
            if not self._moved(on_disk, list(complete)):
                for doc_id, rows in complete.items():
                    lines = np.array([line for line, _ in rows], np.int32)
                    matrix = np.array([known[_key(model, text)] for _, text in rows], np.float16).reshape(
                        len(rows), self.encoder.dimensions)
                    self.db.execute("INSERT OR REPLACE INTO docs VALUES(?,?,?,?,?)",
                                    (doc_id, *on_disk[doc_id], lines.tobytes(), matrix.tobytes()))
            else:
                self.changed = True
            self.db.execute("COMMIT")
        except BaseException:
            if self.db.in_transaction:
                self.db.execute("ROLLBACK")
            raise

    def _forgets(self) -> str:
        """How many forgets this cache has seen (counted in each one's transaction)."""
        row = self.db.execute("SELECT value FROM info WHERE key='forgets'").fetchone()
        return row[0] if row else "0"

    def _moved(self, on_disk: dict[str, tuple[int, int]], doc_ids: list[str]) -> bool:
        """Whether any of ``doc_ids`` changed on disk since ``on_disk`` was read."""
        return any(self.store.signature(doc_id) != on_disk[doc_id] for doc_id in doc_ids)

    def forget(self, entries: list[Entry], doc_ids: list[str]) -> int:
        """Drop the vectors of ``entries`` (their texts and sentences) and the cached rows of the documents
        that held them (recomputed from what is left on the next refresh). Returns the vectors dropped."""

        model = self.encoder.name
        keys = {_key(model, entry_text(e)) for e in entries}
        keys.update(_key(model, part) for e in entries for part in sentences(shown_text(e)))
        self.db.execute("BEGIN IMMEDIATE")  # after any chunk (and partial snapshot) a job is writing
        try:
            self._drop_snapshots(wipe=True)
            self.db.execute("INSERT OR REPLACE INTO info VALUES('forgets', ?)", (str(int(self._forgets()) + 1),))
            dropped = sum(self.db.execute("DELETE FROM texts WHERE key=?", (k,)).rowcount for k in keys)
            self.db.executemany("DELETE FROM docs WHERE doc=?", ((d,) for d in doc_ids))
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self._signature, self._partial = (), ""
        self._sentences.clear()  # vectors read into memory so far may be the forgotten ones'
        self._questions.clear()
        return dropped

    def _load(self, doc_ids: list[str], extra: dict[str, tuple[list[int], np.ndarray]] | None = None) -> None:
        """The matrix of the documents' vectors: those stored, and ``extra`` (documents some of whose
        entries have no vector yet: the ones that have)."""
        runs: list[tuple[str, list[int]]] = []
        parts = []
        extra = extra or {}
        wanted = set(doc_ids) - set(extra)
        for doc_id, lines, vecs in self.db.execute("SELECT doc, lines, vecs FROM docs ORDER BY doc"):
            if doc_id in wanted:
                runs.append((doc_id, np.frombuffer(lines, np.int32).tolist()))
                parts.append(np.frombuffer(vecs, np.float16).reshape(len(runs[-1][1]), self.encoder.dimensions))
        for doc_id, (lines, matrix) in sorted(extra.items()):
            runs.append((doc_id, list(lines)))
            parts.append(matrix.reshape(len(lines), self.encoder.dimensions))
        self._set_rows(runs)
        self._matrix = (np.concatenate(parts).astype(np.float32) if parts
                        else np.zeros((0, self.encoder.dimensions), np.float32))

    def similarities(self, text: str, share: float = 0.0) -> Similarities:
        """Cosine similarity of ``text`` (as a question, :meth:`question`) with every live entry that has a
        vector, by (document, line)."""
        self.refresh(compute=self.inline)
        if not self._keys:
            return Similarities([], {}, np.zeros(0, np.float32))
        vector = self.question(text, share)
        return Similarities(self._keys, self._position, self._matrix @ vector, self._doc_rows, self._matrix, vector)

    def of(self, entries: dict[tuple[str, int], Entry]) -> dict[tuple[str, int], np.ndarray]:
        """The vectors of these entries, by (document, line): the stored ones (loaded by
        :meth:`similarities`), the others (superseded entries, entries written since) computed here; but
        while the job is computing vectors for a question that may not (``inline`` off, entries missing),
        none: the others are those the cache has, and the rest are left out."""
        out = {key: self._matrix[self._position[key]] for key in entries if key in self._position}
        missing = [key for key in entries if key not in out]
        if missing and not self.inline and self.missing:
            model = self.encoder.name
            keys = {key: _key(model, entry_text(entries[key])) for key in missing}
            stored = self._known(list(set(keys.values())))
            out.update((key, stored[k].astype(np.float32)) for key, k in keys.items() if k in stored)
        elif missing:
            out.update(zip(missing, self.encoder.encode([entry_text(entries[key]) for key in missing])))
        return out

    def question(self, text: str, share: float = 0.0) -> np.ndarray:
        """``text``'s vector as a question: the encoder's, moved ``share`` of the way toward the question map's
        (:mod:`memcli.semantic.query_map`; 0: the encoder's own). The last ``QUESTIONS_KEPT`` encodings are kept
        (a question's entries and sentences are scored with one encoding, and a question asked again is not
        encoded again)."""
        vector = self._questions.pop(text, None)
        if vector is None:
            vector = self.encoder.encode([text])[0]
        self._questions[text] = vector
        while len(self._questions) > QUESTIONS_KEPT:
            self._questions.popitem(last=False)
        if share:
            if self._query_map is None:
                from memcli.semantic.query_map import for_encoder

                self._query_map = for_encoder(self.encoder, self.on_warning) or False
            if self._query_map:
                vector = self._query_map.question(vector, share)
        return vector

    def sentence_similarity(self, text: str, share: float = 0.0) -> Callable[[list[str]], list[float]]:
        """A function giving the cosine similarity of ``text`` (as a question, :meth:`question`) with each of
        some sentences of entries (their vectors computed by :meth:`refresh`)."""
        vector = self.question(text, share)
        return lambda parts: (self.sentence_vectors(parts) @ vector).tolist()

    def sentence_vectors(self, parts: list[str]) -> np.ndarray:
        """Vectors of sentences of entries, read from the cache (and kept for the process); one the
        cache lacks (an entry written since the last refresh) is computed here and stored."""
        model = self.encoder.name
        keys = [_key(model, text) for text in parts]
        missing = list(dict.fromkeys(k for k in keys if k not in self._sentences))
        if missing:
            marks = ",".join("?" * len(missing))
            for key, blob in self.db.execute(f"SELECT key, vec FROM texts WHERE key IN ({marks})", missing):
                self._sentences[key] = np.frombuffer(blob, np.float16).astype(np.float32)
            new = [k for k in missing if k not in self._sentences]
            if new and not self.inline:  # not computed for a question: such a sentence scores 0
                return np.array([self._sentences.get(k, np.zeros(self.encoder.dimensions, np.float32))
                                 for k in keys], np.float32).reshape(len(keys), self.encoder.dimensions)
            if new:
                texts = dict(zip(keys, parts))
                fresh = self.encoder.encode([texts[k] for k in new]).astype(np.float16)
                self._sentences.update(zip(new, fresh.astype(np.float32)))
                try:
                    self.db.executemany("INSERT OR REPLACE INTO texts VALUES(?, ?)",
                                        ((k, vec.tobytes()) for k, vec in zip(new, fresh)))
                except sqlite3.Error:
                    pass  # a cache: kept in memory for this process
        return np.array([self._sentences[k] for k in keys], np.float32).reshape(len(keys), self.encoder.dimensions)
