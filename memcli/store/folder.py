"""The store: a folder of topic documents, the CURRENT buffer and store state.

Layout (directories 0700, files 0600)::

    STORE/
      docs/<id>.md      topic documents
      CURRENT.md        new memories, not yet consolidated
      state.json        {"format": 1, "next_seq": N}; shared: format 2, "ids", "next_tick", "origins"
      origin.json       a shared store's origin in this clone (never committed; memcli.store.identity)
      ingested.txt      fingerprints of ingested turns (one per line)
      aliases.txt       former document ids: ``old>new`` a line (memcli.store.aliases)
      config.toml       optional per-store settings
      .lock  .txn/      the inter-process lock and the transaction folder

Every read holds the shared lock and every write the exclusive one; writes go
through a :class:`~memcli.store.atomic.Transaction`. A read first finishes an
interrupted transaction; when it cannot (the disk refuses the renames), it reads
the committed state as it stands in ``.txn/`` and warns, and writes nothing.
"""

from __future__ import annotations

import json
import os
import re
import stat
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from memcli.errors import NotFound, StoreError, StoreWriteError, UsageError
from memcli.paths import Resolved, ensure_private_dir, store_cache_dir
from memcli.store import aliases, atomic
from memcli.store.format import Document, FormatError, parse_document
from memcli.store.git_command import last_commit
from memcli.store_state import decode, too_new
from memcli.tokens import count_tokens

CURRENT_ID = "CURRENT"
DOC_ID_RE = re.compile(rf"^{atomic.DOC_ID}$")


def now_iso(timespec: str = "seconds") -> str:
    return datetime.now().replace(microsecond=0).isoformat(timespec=timespec)


@dataclass
class LoadedDoc:
    """A parsed document plus what the reader needs to know about its file."""

    id: str
    path: Path
    doc: Document
    error: str | None = None  # front matter unreadable: body is the whole file


class Store:
    def __init__(self, root: Path, lock_timeout: float | None = 120.0):
        """``lock_timeout``: seconds to wait for the store's lock (None: no limit)."""
        self.root = root
        self.lock_timeout = lock_timeout
        self.docs_dir = root / "docs"
        self.current_path = root / "CURRENT.md"
        self.state_path = root / "state.json"
        self.ingested_path = root / "ingested.txt"
        self.index_dir: Path | None = None  # None: the per-store folder in the cache directory
        self.on_warning: Callable[[str], None] | None = None  # told when a read works around a problem
        self.read_only = False  # True: a reading never finishes an interrupted write (read as committed)
        # while a committed transaction cannot be applied: its files, read from .txn/ (None: deleted);
        # per thread (the MCP server reads on several), restored when a nested read ends
        self._local = threading.local()

    @property
    def cache_folder(self) -> Path:
        """Where this store's caches live (search index, vectors, forget's notes): ``index_dir`` when its
        opener gave one (``Memory(cache_dir=...)``), else the per-store folder in the cache directory."""
        return self.index_dir or store_cache_dir(self.root)

    # ------------------------------------------------------------ opening

    @classmethod
    def open(cls, where: Resolved, create: bool = False) -> Store:
        """Open the store at ``where``; with ``create`` make it if missing."""
        store = cls(where.path)
        if store.state_path.exists():
            state = store.read_state()
            if too_new(state):
                raise StoreError(f"{store.root}: store format {state['format']} is newer than this memcli")
            return store
        if not create:
            raise StoreError(
                f"no memcli store at {where.path} (chosen by {where.source})",
                hint="run `memcli ingest FILE` or `memcli init` to create one, or pass --store DIR",
            )
        store.initialize()
        return store

    def initialize(self) -> None:
        """Create an empty store (idempotent)."""
        try:
            ensure_private_dir(self.root)
            ensure_private_dir(self.docs_dir)
        except OSError as exc:
            raise StoreWriteError.of(self.root, exc, "create the store") from None
        with atomic.StoreLock(self.root, exclusive=True, timeout=self.lock_timeout):
            if self.state_path.exists():
                return
            txn = atomic.Transaction(self.root)
            if not self.current_path.exists():
                txn.write("CURRENT.md", new_current().render())
            txn.write("state.json", json.dumps({"format": 1, "next_seq": 1}) + "\n")
            txn.commit()

    # ------------------------------------------------------------ locking

    @contextmanager
    def reading(self) -> Iterator[Store]:
        """Hold the shared lock; finish an interrupted transaction first if there is one. When it cannot
        be finished (the store is not writable), read the committed state without writing, and warn.
        Nested in a reading of the same thread, it only reads on under the lock that one holds."""
        if getattr(self._local, "depth", 0):
            self._local.depth += 1
            try:
                yield self
            finally:
                self._local.depth -= 1
            return
        failure: StoreWriteError | None = None
        if atomic.pending(self.root) and self.read_only:
            failure = StoreWriteError(f"{self.root} is opened read-only")
        elif atomic.pending(self.root):
            try:
                with atomic.StoreLock(self.root, exclusive=True, timeout=self.lock_timeout):
                    atomic.recover(self.root)
            except StoreWriteError as exc:
                failure = exc
        with atomic.StoreLock(self.root, exclusive=False, timeout=self.lock_timeout):
            outer = self._view
            self._local.view = atomic.committed_view(self.root) if failure is not None else {}
            if failure is not None and self.on_warning is not None:
                state = ("a committed change could not be applied; reading it from "
                         f"{self.root / atomic.TXN_DIR}" if self._view else "an unfinished write could not be "
                         "cleaned up; reading the committed state")
                self.on_warning(f"{state} ({failure}); the next command that can write to the store finishes it")
            self._local.depth = 1
            self._local.signatures = None
            try:
                yield self
            finally:
                self._local.view = outer
                self._local.depth = 0
                self._local.signatures = None

    @property
    def _view(self) -> dict[Path, Path | None]:
        return getattr(self._local, "view", {})

    def source(self, path: Path) -> Path | None:
        """The file that holds ``path``'s committed content: ``path`` itself, its staged copy while a
        committed transaction cannot be applied, or None when that transaction deletes it."""
        return self._view.get(path, path)

    def read_file(self, path: Path) -> bytes:
        """The committed bytes of one of the store's files (``FileNotFoundError`` when it has none)."""
        src = self.source(path)
        if src is None:
            raise FileNotFoundError(path)
        return read_regular(src)

    def has_file(self, path: Path) -> bool:
        """Whether one of the store's files exists (as a regular file) in the committed state."""
        src = self.source(path)
        return src is not None and _regular(src)

    def refuse_if_read_only(self) -> None:
        """A change to a store opened read-only is refused before anything is written."""
        if self.read_only:
            raise UsageError(f"{self.root} is opened read-only: nothing is written to it",
                             hint="open it without read_only to change it")

    @contextmanager
    def writing(self) -> Iterator[atomic.Transaction]:
        """Hold the exclusive lock and yield a transaction, committed on success. A store opened read-only
        (``Memory(read_only=True)``, ``memcli mcp --read-only``) refuses, before anything is written."""
        self.refuse_if_read_only()
        with atomic.StoreLock(self.root, exclusive=True, timeout=self.lock_timeout):
            atomic.recover(self.root)
            txn = atomic.Transaction(self.root)
            try:
                yield txn
                txn.commit()
            except BaseException:
                txn.abort()  # staged files of an uncommitted transaction only
                if (self.root / atomic.TXN_DIR / atomic.MANIFEST).exists():
                    try:  # committed but not applied (a rename failed): finish it now if the disk lets us
                        atomic.recover(self.root)
                    except Exception:
                        pass  # the manifest stays; the next command finishes it
                raise

    # ------------------------------------------------------------ state

    def read_state(self) -> dict:
        """``state.json``, checked: a state that came damaged (a teammate's commit, a hand edit) is
        an error naming the file and the commit that last changed it, never a crash later on."""
        try:
            state, problem = decode(self.read_file(self.state_path))
        except FileNotFoundError:
            return {"format": 1, "next_seq": 1}
        except OSError as exc:
            problem = f"unreadable: {exc}"
        if problem is not None:
            raise StoreError(f"{self.state_path}: damaged store state: {problem}{last_commit(self.state_path)}",
                             hint="`memcli doctor --repair` puts back the newest good state from git's history")
        return state

    def read_fingerprints(self) -> set[str]:
        try:
            return set(self.read_file(self.ingested_path).decode("utf-8", "replace").split())
        except FileNotFoundError:
            return set()

    # ------------------------------------------------------------ documents

    def doc_ids(self) -> list[str]:
        """Ids of the topic documents (file stems), sorted; CURRENT not included. Only regular files
        count: a symbolic link or a special file in ``docs/`` (or ``docs/`` itself a link) is never read
        (:meth:`refused_files`)."""
        if self.docs_dir.is_symlink():
            return []
        try:
            names = {p.name for p in self.docs_dir.iterdir()}
        except FileNotFoundError:
            names = set()
        names |= {p.name for p in self._view if p.parent == self.docs_dir}
        return sorted(n[:-3] for n in names if n.endswith(".md") and DOC_ID_RE.match(n[:-3])
                      and self.has_file(self.docs_dir / n))

    def refused_files(self) -> list[str]:
        """Documents memcli will not read: symbolic links and special files where a document would be."""
        candidates = [self.current_path]
        out = []
        if self.docs_dir.is_symlink():
            out.append(f"{self.docs_dir}: a symbolic link (not followed)")
        else:
            try:
                candidates += [p for p in self.docs_dir.iterdir() if p.name.endswith(".md")]
            except FileNotFoundError:
                pass
        for path in candidates:
            if path.is_symlink():
                out.append(f"{path}: a symbolic link (not followed)")
            elif path.exists() and not _regular(path):
                out.append(f"{path}: not a regular file")
        return sorted(out)

    def doc_path(self, doc_id: str) -> Path:
        if doc_id == CURRENT_ID:
            return self.current_path
        if not DOC_ID_RE.match(doc_id or ""):
            raise UsageError(f"invalid document id {doc_id!r}")
        if self.docs_dir.is_symlink():
            raise StoreError(f"{self.docs_dir} is a symbolic link; memcli does not follow links inside a store",
                             hint="replace the link with a real folder")
        return self.docs_dir / f"{doc_id}.md"

    def resolve(self, doc_id: str) -> str:
        """The id a citation of ``doc_id`` reads now: itself while it exists, else the document it was
        renamed or merged into (:mod:`memcli.store.aliases`); ``doc_id`` when there is none."""
        if doc_id == CURRENT_ID or not DOC_ID_RE.match(doc_id or ""):
            return doc_id
        return aliases.resolve(self, doc_id, lambda d: self.has_file(self.docs_dir / f"{d}.md")) or doc_id

    def relpath(self, doc_id: str) -> str:
        return str(self.doc_path(doc_id).relative_to(self.root))

    def read_text(self, doc_id: str) -> str:
        """A document's raw text."""
        path = self.doc_path(doc_id)
        try:
            data = self.read_file(path)
        except FileNotFoundError:
            raise NotFound(f"no document {doc_id!r} in {self.root}",
                           hint="`memcli docs` lists the documents") from None
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise StoreError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None

    def load(self, doc_id: str, strict: bool = False) -> LoadedDoc:
        """Read and parse a document. A hand-broken front matter is tolerated unless ``strict``."""
        path = self.doc_path(doc_id)
        text = self.read_text(doc_id)
        try:
            return LoadedDoc(doc_id, path, parse_document(text))
        except FormatError as exc:
            where = f"{path}:{exc.line}" if exc.line else str(path)
            if strict:
                raise StoreError(f"{where}: {exc}{last_commit(path)}") from None
            doc = Document(meta={}, body=text.split("\n"))
            doc.mark_loaded()
            return LoadedDoc(doc_id, path, doc, error=f"{where}: {exc}")

    def all_ids(self) -> list[str]:
        """Every document id, CURRENT last (when it exists: a person may have removed it)."""
        ids = self.doc_ids()
        return [*ids, CURRENT_ID] if self.has_file(self.current_path) else ids

    def signatures(self) -> dict[str, tuple[int, int]]:
        """:meth:`signature` of every document, CURRENT last, in one pass over the folder (what the
        caches compare each time they are read: at 10^4 documents a stat per id costs milliseconds).
        Under :meth:`reading` no writer can change a document, so the folder is read once a reading."""
        held = getattr(self._local, "depth", 0) > 0
        if held and getattr(self._local, "signatures", None) is not None:
            return dict(self._local.signatures)
        out = self._signatures()
        if held:
            self._local.signatures = dict(out)
        return out

    def _signatures(self) -> dict[str, tuple[int, int]]:
        if self._view:  # a committed transaction not yet applied: each file's committed source
            return {doc_id: sig for doc_id in self.all_ids() if (sig := self.signature(doc_id)) is not None}
        found: dict[str, tuple[int, int]] = {}
        if not self.docs_dir.is_symlink():
            try:
                with os.scandir(self.docs_dir) as listing:
                    for item in listing:
                        name = item.name
                        if not (name.endswith(".md") and DOC_ID_RE.match(name[:-3])):
                            continue
                        try:
                            st = item.stat(follow_symlinks=False)
                        except FileNotFoundError:
                            continue
                        if stat.S_ISREG(st.st_mode):
                            found[name[:-3]] = (st.st_mtime_ns, st.st_size)
            except FileNotFoundError:
                pass
        out = {doc_id: found[doc_id] for doc_id in sorted(found)}
        try:
            st = os.lstat(self.current_path)
        except FileNotFoundError:
            return out
        if stat.S_ISREG(st.st_mode):
            out[CURRENT_ID] = (st.st_mtime_ns, st.st_size)
        return out

    def folder_stamp(self) -> int | None:
        """The documents folder's modification time (ns): it changes when a document is added, replaced
        by a new file (every write memcli makes) or removed, not when one is edited in place."""
        try:
            return os.stat(self.docs_dir).st_mtime_ns
        except OSError:
            return None

    def signature(self, doc_id: str) -> tuple[int, int] | None:
        """(mtime_ns, size) of a document's committed file, None when it has none: what caches key on."""
        src = self.source(self.doc_path(doc_id))
        try:
            st = src.stat() if src is not None else None
        except FileNotFoundError:
            return None
        return (st.st_mtime_ns, st.st_size) if st is not None else None


def _regular(path: Path) -> bool:
    """A regular file, not a symbolic link (to one or not)."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def read_regular(path: Path) -> bytes:
    """The bytes of ``path``, which must be a regular file reached without following a symbolic link."""
    try:
        with atomic.open_regular(path) as handle:
            return handle.read()
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise StoreError(f"cannot read {path}: {exc.strerror}") from None


def new_current() -> Document:
    stamp = now_iso()
    doc = Document(meta={
        "id": CURRENT_ID,
        "summary": "Recent memories not yet consolidated into topic documents",
        "token_count": 0,
        "created_time": stamp,
        "updated_time": stamp,
        "update_log": [],
        "aux": {},
    }, body=["# CURRENT", ""])
    return doc


def refresh_token_count(doc: Document) -> int:
    """Recount a document's tokens (body text) into its front matter; returns the count."""
    tokens = count_tokens("\n".join(line for _, line in doc.lines()))
    doc.meta["token_count"] = tokens
    return tokens
