"""BM25 over heading-level partitions, with a persistent incremental index.

A partition is a heading section of a document (the heading line and the lines under it up to the
next heading), cut into pieces of at most ``search.partition_tokens`` tokens; CURRENT, which has no
sections, is cut the same way. Each partition is indexed with its heading path, its entries' text and
their speakers.

The index lives in the cache directory (``paths.store_cache_dir``) as SQLite: per-document rows of
partitions and postings keyed by the document's file size and mtime. Every search stats the documents
and re-indexes only those that changed, so repeated searches over a large library do not re-tokenize
it. Scoring is rank-bm25's BM25Okapi arithmetic (``get_batch_scores``) in numpy, fed with corpus
statistics from the index, over the partitions that contain a query term.
"""

from __future__ import annotations

import array
import hashlib
import sqlite3
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from math import log
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from memcli import session_table
from memcli.cache import file_signatures, note_owner, open_cache
from memcli.partitions import partitions, snippet
from memcli.paths import ensure_private_dir
from memcli.results import Result, omit_empty
from memcli.store import CURRENT_ID, Store
from memcli.terms import terms
from memcli.tokens import count_tokens

if TYPE_CHECKING:
    import numpy as np

INDEX_VERSION = 8  # 7, 8: the agent sessions table (session_table.py); 6: memcli's own titles are not indexed
K1, B, EPSILON = 1.5, 0.75, 0.25  # rank-bm25's BM25Okapi defaults
WHOLE_TERMS = 100_000  # a library's terms read at once for a consolidation (idf(whole=True)) up to this many
LENGTHS_READ_ALONE = 2000  # candidate partitions whose lengths a search reads alone rather than all of them
T = TypeVar("T")

# ---------------------------------------------------------------- the index

@dataclass
class Hit(Result):
    doc: str
    heading: str
    start_line: int
    end_line: int
    score: float
    snippet: str

    def extra(self) -> dict:
        return {"score": round(self.score, 4)}


@dataclass
class CatalogRow(Result):
    id: str
    summary: str
    token_count: int
    updated_time: str | None
    entries: int
    error: str | None = omit_empty()


_SCHEMA = """
CREATE TABLE IF NOT EXISTS info(key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS docs(doc TEXT PRIMARY KEY, mtime_ns INTEGER, size INTEGER,
    summary TEXT, token_count INTEGER, updated_time TEXT, entries INTEGER, error TEXT);
CREATE TABLE IF NOT EXISTS parts(pid INTEGER PRIMARY KEY, doc TEXT, start INTEGER, end INTEGER,
    heading TEXT, len INTEGER);
CREATE INDEX IF NOT EXISTS parts_doc ON parts(doc);
CREATE TABLE IF NOT EXISTS postings(term TEXT, doc TEXT, pids BLOB, tfs BLOB);
CREATE INDEX IF NOT EXISTS postings_term ON postings(term);
CREATE INDEX IF NOT EXISTS postings_doc_term ON postings(doc, term);
CREATE TABLE IF NOT EXISTS dfs(term TEXT PRIMARY KEY, df INTEGER);
CREATE TABLE IF NOT EXISTS totals(name TEXT PRIMARY KEY, value INTEGER);
CREATE TABLE IF NOT EXISTS doc_people(doc TEXT, kind TEXT, value TEXT);
CREATE INDEX IF NOT EXISTS doc_people_value ON doc_people(kind, value);
CREATE INDEX IF NOT EXISTS doc_people_doc ON doc_people(doc);
""" + session_table.SCHEMA
PEOPLE = ("speaker", "conv", "project")  # what the people table keeps of each document's entries


class LibraryIndex:
    """The search index and catalog cache of one store."""

    def __init__(self, store: Store, partition_tokens: int, cache_dir: Path | None = None,
                 on_warning: Callable[[str], None] | None = None, semantic: bool = False, inline: bool = True):
        """The index is a cache: when its folder or file cannot be used (read-only, disk full, damaged)
        it is kept in memory for this process instead; :attr:`warning` and ``on_warning`` say why.
        ``semantic``: the entries' sentence vectors are kept beside it (:meth:`similarities`); ``inline``:
        a question computes the vectors that are missing (else they are the background job's,
        :mod:`memcli.semantic.job`, and the entries without one rank by their words)."""
        self.store = store
        self.on_warning = on_warning
        self.partition_tokens = partition_tokens
        self.warning: str | None = None
        self.semantic, self.inline = semantic, inline
        self.semantic_missing: str | None = None  # why the semantic signal is off, when it was wanted
        self._vectors = None
        self._changes = 0  # commits of this connection that changed the index (see _lengths)
        self._length_cache: tuple | None = None  # (version, partition lengths by id)
        self._idf_cache: tuple | None = None  # (version, scope, idf by term, [whether it holds every term])
        self._among: frozenset | None = None  # the documents temp.among holds (see _scope)
        self._people_cache: tuple | None = None  # (version, {key: people, documents or a scope's totals}) (_kept)
        self.parsed: OrderedDict = OrderedDict()  # documents the evidence reader parsed (retrieve.evidence.Library)
        folder = cache_dir or store.cache_folder
        self.folder = folder
        self.path: Path | str = folder / "index.sqlite"
        try:
            ensure_private_dir(folder)
            note_owner(folder, store.root)
            self.db = self._connect()
        except (OSError, sqlite3.Error) as exc:
            self.db = self._in_memory(exc)

    def _in_memory(self, exc: Exception) -> sqlite3.Connection:
        self._length_cache = self._idf_cache = self._people_cache = self._among = None
        self.warning = (f"the search index cache {self.path} cannot be used ({exc}); "
                        "searching without it (slower, nothing is lost)")
        if self.on_warning:
            self.on_warning(self.warning)
        self.path = ":memory:"
        return self._connect()

    def _connect(self) -> sqlite3.Connection:
        return open_cache(self.path, _SCHEMA, f"{INDEX_VERSION}:{self.partition_tokens}",
                          ("docs", "parts", "postings", "dfs", "doc_people", "totals", session_table.TABLE))

    def close(self) -> None:
        self.db.close()
        if self._vectors is not None:
            self._vectors.close()

    # ------------------------------------------------------------ semantic signal

    def vectors(self):
        """The entries' sentence vectors (:class:`memcli.semantic.vectors.EntryVectors`), or None when
        the semantic signal is off or its model is not installed (:attr:`semantic_missing` says why)."""
        if not self.semantic or self.semantic_missing:
            return None
        if self._vectors is None:
            from memcli.semantic.encoder import Encoder, EncoderMissing
            from memcli.semantic.vectors import EntryVectors

            try:
                encoder = Encoder()
            except EncoderMissing as exc:
                self.semantic_missing = exc.message
                if self.on_warning:
                    self.on_warning(f"evidence is ranked by words alone: {exc.message}")
                return None
            folder = self.folder if self.path != ":memory:" else None  # the index's cache failed: memory too
            self._vectors = EntryVectors(self.store, folder, encoder, self.on_warning)
            self._vectors.inline = self.inline
        return self._vectors

    def similarities(self, text: str, share: float = 0.0) -> dict[tuple[str, int], float]:
        """Cosine similarity of ``text`` with every live entry by (document, line); empty without
        the semantic signal. ``share``: how far the question map moves ``text``'s vector
        (:meth:`memcli.semantic.vectors.EntryVectors.question`)."""
        vectors = self.vectors()
        return vectors.similarities(text, share) if vectors is not None else {}

    def sentence_similarity(self, text: str, share: float = 0.0) -> Callable[[list[str]], list[float]] | None:
        """Cosine similarity of ``text`` with sentences of entries (compact evidence's
        :class:`memcli.retrieve.evidence.Focus`); None without the semantic signal."""
        vectors = self.vectors()
        return vectors.sentence_similarity(text, share) if vectors is not None else None

    # ------------------------------------------------------------ refresh

    def refresh(self, only: Iterable[str] | None = None) -> int:
        """Re-index documents whose file changed; returns how many were re-indexed. ``only``: look at
        just these documents (those the caller itself wrote since the index was last refreshed: a
        consolidation's next flush, which need not read the whole folder again). A cache that fails
        while being written (a full disk) is replaced by one in memory."""
        try:
            return self._refresh(only)
        except sqlite3.Error as exc:
            if self.path == ":memory:":
                raise
            self.db.close()
            self.db = self._in_memory(exc)
            return self._refresh(None)  # the new index holds nothing yet: every document

    def _refresh(self, only: Iterable[str] | None) -> int:
        if only is None:
            on_disk = file_signatures(self.store)
            cached = {d: (m, s) for d, m, s in self.db.execute("SELECT doc, mtime_ns, size FROM docs")}
        else:
            looked = sorted(set(only))
            on_disk = {d: sig for d in looked if (sig := self.store.signature(d)) is not None}
            cached = {d: (m, s) for d, m, s in self._in("SELECT doc, mtime_ns, size FROM docs WHERE doc IN ({})",
                                                         looked)}
        stale = [d for d, sig in on_disk.items() if cached.get(d) != sig]
        gone = [d for d in cached if d not in on_disk]
        if not stale and not gone:
            return 0
        self.db.execute("BEGIN IMMEDIATE")
        try:
            for doc_id in gone:
                self._drop(doc_id)
            for doc_id in stale:
                self._drop(doc_id)
                self._add(doc_id, on_disk[doc_id])
            self.db.execute("DELETE FROM info WHERE key LIKE 'avg_idf%'")
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        finally:
            self._changes += 1
        return len(stale) + len(gone)

    def _drop(self, doc_id: str) -> None:
        counts = self.db.execute("SELECT length(pids) / 8, term FROM postings WHERE doc=?", (doc_id,)).fetchall()
        self.db.executemany("UPDATE dfs SET df = df - ? WHERE term=?", counts)
        self.db.execute("DELETE FROM dfs WHERE df <= 0")
        parts, length = self.db.execute("SELECT COUNT(*), COALESCE(SUM(len), 0) FROM parts WHERE doc=?",
                                        (doc_id,)).fetchone()
        self._count(-parts, -length)
        for table in ("docs", "parts", "postings", "doc_people", session_table.TABLE):
            self.db.execute(f"DELETE FROM {table} WHERE doc=?", (doc_id,))

    def _add(self, doc_id: str, sig: tuple[int, int]) -> None:
        loaded = self.store.load(doc_id)
        doc = loaded.doc
        pairs = list(doc.entries())
        live = [entry for _, entry in pairs]
        entries = len(live)
        session_table.add(self.db, doc_id, pairs)
        self.db.executemany("INSERT INTO doc_people VALUES(?,?,?)", sorted(
            {(doc_id, kind, e.meta[kind]) for e in live for kind in PEOPLE if e.meta.get(kind)}))
        summary = str(doc.meta.get("summary") or "")
        tokens = doc.meta.get("token_count")
        if not isinstance(tokens, int):
            tokens = count_tokens("\n".join(t for _, t in doc.lines()))
        updated = doc.meta.get("updated_time")
        self.db.execute("INSERT INTO docs VALUES(?,?,?,?,?,?,?,?)", (
            doc_id, sig[0], sig[1], summary, tokens,
            str(updated) if updated is not None else None, entries, loaded.error))
        postings: dict[str, tuple[array.array, array.array]] = {}
        added = added_len = 0
        for part in partitions(doc, self.partition_tokens):
            words = terms(part.text)
            added, added_len = added + 1, added_len + len(words)
            cur = self.db.execute("INSERT INTO parts(doc, start, end, heading, len) VALUES(?,?,?,?,?)",
                                  (doc_id, part.start, part.end, part.heading, len(words)))
            pid = cur.lastrowid
            for term, tf in Counter(words).items():
                ids, tfs = postings.setdefault(term, (array.array("q"), array.array("i")))
                ids.append(pid)
                tfs.append(tf)
        self.db.executemany("INSERT INTO postings VALUES(?,?,?,?)", (
            (term, doc_id, ids.tobytes(), tfs.tobytes()) for term, (ids, tfs) in postings.items()))
        self.db.executemany("INSERT INTO dfs VALUES(?,?) ON CONFLICT(term) DO UPDATE SET df = df + excluded.df",
                            ((term, len(ids)) for term, (ids, _) in postings.items()))
        self._count(added, added_len)

    def _count(self, parts: int, length: int) -> None:
        """Add to the library's number of partitions and their total length in terms."""
        self.db.executemany("INSERT INTO totals VALUES(?,?) ON CONFLICT(name) DO UPDATE SET value = value + excluded.value",
                            (("parts", parts), ("length", length)))

    def _totals(self, scope: frozenset | None = None) -> tuple[int, int]:
        """(partitions, their total length in terms) of the library, or of the documents ``scope``."""
        if scope is not None:
            def count() -> tuple[int, int]:
                self._scope(scope)
                return self.db.execute("SELECT COUNT(*), COALESCE(SUM(p.len), 0) FROM temp.among a CROSS JOIN "
                                       "parts p ON p.doc = a.doc").fetchone()
            return self._kept(("totals", scope), count)
        found = dict(self.db.execute("SELECT name, value FROM totals"))
        return found.get("parts", 0), found.get("length", 0)

    # ------------------------------------------------------------ people

    def people(self, docs: set[str] | None = None) -> dict[str, tuple[frozenset[str], frozenset[str], frozenset[str]]]:
        """(speakers, conversations, projects) of the entries of ``docs`` (default: every document), as
        last refreshed."""
        found: dict[str, dict[str, set[str]]] = {}
        if docs is None:
            rows = self.db.execute("SELECT doc, kind, value FROM doc_people")
            found = {doc: {} for (doc,) in self.db.execute("SELECT doc FROM docs")}
        else:
            rows = self._in("SELECT doc, kind, value FROM doc_people WHERE doc IN ({})", docs)
            found = {doc: {} for doc in docs}
        for doc, kind, value in rows:
            found.setdefault(doc, {}).setdefault(kind, set()).add(value)
        return {doc: tuple(frozenset(kinds.get(kind, ())) for kind in PEOPLE) for doc, kinds in found.items()}

    def docs_with(self, kind: str, values) -> set[str]:
        """Documents with an entry whose ``kind`` (speaker, conv, project) is one of ``values``."""
        return {doc for (doc,) in self._in("SELECT DISTINCT doc FROM doc_people WHERE kind=? AND value IN ({})",
                                           values, (kind,))}

    def values_in(self, kind: str, docs) -> set[str]:
        """The ``kind`` values (speakers, conversations, projects) of the entries of ``docs``."""
        return {v for (v,) in self._in("SELECT DISTINCT value FROM doc_people WHERE kind=? AND doc IN ({})",
                                       docs, (kind,))}

    def speakers(self) -> set[str]:
        """Every speaker in the library (kept while the index is unchanged)."""
        return self._kept(("speakers",), lambda: {v for (v,) in self.db.execute(
            "SELECT DISTINCT value FROM doc_people WHERE kind='speaker'")})

    def docs_without(self, kind: str, allowed=frozenset()) -> set[str]:
        """Documents none of whose entries has a ``kind`` value outside ``allowed`` (no speaker but
        ``user``/``assistant``, say), kept while the index is unchanged."""
        allowed = tuple(sorted(allowed))
        outside = f" AND value NOT IN ({','.join('?' * len(allowed))})" if allowed else ""
        return self._kept(("without", kind, allowed), lambda: {doc for (doc,) in self.db.execute(
            f"SELECT doc FROM docs EXCEPT SELECT doc FROM doc_people WHERE kind=?{outside}", (kind, *allowed))})

    def _kept(self, key: tuple, compute: Callable[[], T]) -> T:
        """``compute()``, kept under ``key`` while the index is unchanged."""
        version = self._version()
        if self._people_cache is None or self._people_cache[0] != version:
            self._people_cache = (version, {})
        known = self._people_cache[1]
        if key not in known:
            known[key] = compute()
        return known[key]

    def titles(self, docs) -> dict[str, str]:
        """The title (the first heading) of each of ``docs`` that has one, as last refreshed."""
        out: dict[str, str] = {}
        for doc, heading in self._in("SELECT doc, heading FROM parts WHERE doc IN ({}) AND heading != '' "
                                     "ORDER BY pid", docs):
            out.setdefault(doc, heading.split(" > ", 1)[0])
        return out

    def doc_ids(self) -> set[str]:
        """Every document the index holds (CURRENT included), as last refreshed."""
        return {doc for (doc,) in self.db.execute("SELECT doc FROM docs")}

    def load_error(self, doc_id: str) -> tuple[bool, str | None]:
        """(whether the index holds ``doc_id``, the error its front matter gave when it was indexed)."""
        row = self.db.execute("SELECT error FROM docs WHERE doc=?", (doc_id,)).fetchone()
        return (row is not None, row[0] if row is not None else None)

    def document_count(self) -> int:
        (count,) = self.db.execute("SELECT COUNT(*) FROM docs").fetchone()
        return count

    def _in(self, sql: str, values, before: tuple = ()) -> list[tuple]:
        """Rows of ``sql`` whose ``IN ({})`` takes ``values`` (after the parameters ``before``), in chunks
        SQLite's parameter limit allows."""
        values = list(values)
        out: list[tuple] = []
        for start in range(0, len(values), 900):
            chunk = values[start:start + 900]
            out += self.db.execute(sql.format(",".join("?" * len(chunk))), (*before, *chunk)).fetchall()
        return out

    # ------------------------------------------------------------ catalog

    def catalog(self) -> list[CatalogRow]:
        self.refresh()
        rows = [CatalogRow(*r) for r in self.db.execute(
            "SELECT doc, summary, token_count, updated_time, entries, error FROM docs ORDER BY doc")]
        rows.sort(key=lambda r: (r.id == CURRENT_ID, r.id))
        return rows

    # ------------------------------------------------------------ statistics

    def idf(self, refresh: bool = True, among: set[str] | None = None, whole: bool = False) -> Callable[[str], float]:
        """A smoothed inverse partition frequency over the whole library, or over the documents
        ``among`` as if they were the library (cached per term while the index is unchanged).
        ``refresh=False``: the index as last refreshed. ``whole``: the library's every term read at
        once, when it has at most ``WHOLE_TERMS`` (a consolidation weighs thousands of them; a question
        a few).

        ``log(1 + N / (1 + df))``: positive for every term, so similarity
        weights never flip sign on very common words.
        """
        if refresh:
            self.refresh()
        version, scope = self._version(), None if among is None else frozenset(among)
        if self._idf_cache is None or self._idf_cache[:2] != (version, scope):
            self._idf_cache = (version, scope, {}, [False])
        cache, complete = self._idf_cache[2], self._idf_cache[3]
        n_parts, _ = self._totals(scope)
        if whole and scope is None and not complete[0]:
            (terms,) = self.db.execute("SELECT COUNT(*) FROM dfs").fetchone()
            if terms <= WHOLE_TERMS:
                for term, df in self.db.execute("SELECT term, df FROM dfs"):
                    cache.setdefault(term, log(1 + (n_parts + 1) / (1 + df)))
                complete[0] = True

        def lookup(term: str) -> float:
            if term not in cache:
                df = 0 if complete[0] else self._frequency(term, scope)
                cache[term] = log(1 + (n_parts + 1) / (1 + df))
            return cache[term]

        return lookup

    def _frequency(self, term: str, scope: frozenset | None) -> int:
        """The number of partitions (of the documents ``scope``; None: all) that hold ``term``."""
        if scope is None:
            row = self.db.execute("SELECT df FROM dfs WHERE term=?", (term,)).fetchone()
            return row[0] if row else 0
        self._scope(scope)
        (df,) = self.db.execute("SELECT COALESCE(SUM(length(p.pids) / 8), 0) FROM temp.among a CROSS JOIN "
                                "postings p ON p.doc = a.doc AND p.term = ?", (term,)).fetchone()
        return df

    def _scope(self, among: frozenset) -> None:
        """Fill the temporary table ``among`` with these document ids (kept while the same are asked
        for again): the documents a scoped search and its statistics read, document by document."""
        if among == self._among:
            return
        self.db.execute("CREATE TEMP TABLE IF NOT EXISTS among(doc TEXT PRIMARY KEY)")
        self.db.execute("DELETE FROM temp.among")
        self.db.executemany("INSERT OR IGNORE INTO temp.among VALUES(?)", ((d,) for d in among))
        self._among = None if self.db.in_transaction else among  # a transaction could still roll it back

    def candidate_docs(self, query_terms: list[str], k: int, exclude: set[str] = frozenset(),
                       among: set[str] | None = None) -> list[str]:
        """Ids of the ``k`` documents whose best partition ranks highest for ``query_terms``; ``among``:
        only these documents are searched (their postings alone are read).

        Uses the index as last refreshed: callers that change no file in between
        (a consolidation flush) refresh once instead of stat-ing the library per call.
        """
        if not query_terms or k < 1:
            return []
        best: dict[str, float] = {}
        if among is not None and not among:
            return []
        for hit in self.search(" ".join(query_terms), k * 4, refresh=False, snippets=False, among=among):
            if hit.doc != CURRENT_ID and hit.doc not in exclude:
                best[hit.doc] = max(best.get(hit.doc, 0.0), hit.score)
        return [d for d, _ in sorted(best.items(), key=lambda kv: (-kv[1], kv[0]))[:k]]

    # ------------------------------------------------------------ search

    def _average_idf(self, n_parts: int, scope: frozenset | None = None) -> tuple[float, str | None]:
        """(the average IDF of the library's terms, or of those of the documents ``scope``; the key to
        keep it under in the index's info table when it was computed now, else None). Kept until the
        next change: a scope of 2,000 of 4,000 documents takes a quarter of a second to average."""
        key = "avg_idf" if scope is None else "avg_idf:" + hashlib.sha1("\n".join(sorted(scope)).encode()).hexdigest()
        row = self.db.execute("SELECT value FROM info WHERE key=?", (key,)).fetchone()
        if row is not None:
            return float(row[0]), None
        if scope is None:
            return _mean_idf(n_parts, self.db.execute("SELECT df FROM dfs")), key
        self._scope(scope)
        return _mean_idf(n_parts, self.db.execute("SELECT SUM(length(p.pids) / 8) FROM temp.among a CROSS JOIN "
                                                  "postings p ON p.doc = a.doc GROUP BY p.term")), key

    def search(self, query: str, k: int, doc: str | None = None, refresh: bool = True,
               snippets: bool = True, among: set[str] | None = None) -> list[Hit]:
        """The ``k`` best partitions for ``query`` (optionally within one document); ``snippets=False``:
        hits without their best line (a ranking that reads the entries itself does not read it twice).

        The index is read in one read transaction, so it is one snapshot even while another process
        re-indexes a document between two of the reads."""
        if refresh:
            self.refresh()
        query_terms = terms(query)
        if not query_terms:
            return []
        if among is not None:
            among = frozenset(among)
            self._scope(among)  # before the read transaction, so the table is kept for the next search
        fresh: list[tuple[str, float]] = []
        own = not self.db.in_transaction
        if own:
            self.db.execute("BEGIN")
        try:
            found = self._search(query_terms, k, doc, fresh, among)
        finally:
            if own:
                self.db.execute("COMMIT")
        if fresh:  # remembered after the snapshot ends (a write inside it could wait on another writer)
            try:
                self.db.execute("INSERT OR REPLACE INTO info VALUES(?, ?)", (fresh[0][0], repr(fresh[0][1])))
            except sqlite3.Error:
                pass
        wanted = set(query_terms)
        texts: dict[str, str] = {}
        hits = []
        for score, (doc_id, start, end, heading, _) in found:
            if not snippets:
                hits.append(Hit(doc_id, heading, start, end, float(score), ""))
                continue
            if doc_id not in texts:
                texts[doc_id] = self.store.read_text(doc_id)
            hits.append(Hit(doc=doc_id, heading=heading, start_line=start, end_line=end,
                            score=float(score), snippet=snippet(texts[doc_id], start, end, wanted)))
        return hits

    def _search(self, query_terms: list[str], k: int, doc: str | None, fresh: list[tuple[str, float]],
                among: frozenset | None = None) -> list[tuple]:
        """(score, (doc, start, end, heading, len)) of the ``k`` best partitions, read from the index;
        ``among``: of these documents, scored as if they were the whole library (their partitions'
        number, lengths and term frequencies).

        rank-bm25's BM25Okapi arithmetic (``get_batch_scores``, term by term in the query's order),
        done in numpy over the partitions that hold a query term: a Python loop over their postings
        cost more than the rest of a question at 10^4 entries."""
        import numpy as np  # not at import: `memcli --help` stays light
        n_parts, total_len = self._totals(among)
        if not n_parts:
            return []
        unique = sorted(set(query_terms))
        marks = ",".join("?" * len(unique))
        found: dict[str, tuple[list, list]] = {}
        rows = f"SELECT term, doc, pids, tfs FROM postings WHERE term IN ({marks})"
        if among is not None:  # the documents' own postings, through a temporary table of their ids
            self._scope(among)
            rows = (f"SELECT p.term, p.doc, p.pids, p.tfs FROM temp.among a CROSS JOIN postings p "
                    f"ON p.doc = a.doc WHERE p.term IN ({marks})")  # document by document: (doc, term)
        for term, _doc, ids_blob, tfs_blob in self.db.execute(rows, unique):
            ids, tfs = found.setdefault(term, ([], []))
            ids.append(np.frombuffer(ids_blob, np.int64))
            tfs.append(np.frombuffer(tfs_blob, np.int32))
        if not found:
            return []
        postings = {t: (np.concatenate(ids), np.concatenate(tfs).astype(np.float64)) for t, (ids, tfs) in found.items()}
        if among is None:
            df = dict(self.db.execute(f"SELECT term, df FROM dfs WHERE term IN ({marks})", unique))
        else:  # the postings read are all the scope's
            df = {t: len(ids) for t, (ids, _) in postings.items()}
        idf = {t: log(n_parts - n + 0.5) - log(n + 0.5) for t, n in df.items()}
        if any(v < 0 for v in idf.values()):  # rank-bm25's floor for very common terms
            average, keep_as = self._average_idf(n_parts, among)
            if keep_as:
                fresh.append((keep_as, average))
            floor = EPSILON * average
            idf = {t: (floor if v < 0 else v) for t, v in idf.items()}
        pids = np.unique(np.concatenate([ids for ids, _ in postings.values()]))
        if doc is not None:
            own = np.array([p for (p,) in self.db.execute("SELECT pid FROM parts WHERE doc=?", (doc,))], np.int64)
            pids = pids[np.isin(pids, own)]
            if not len(pids):
                return []
        doc_len = self._lengths_of(pids)
        avgdl = total_len / n_parts
        scores = np.zeros(len(pids))
        for term in query_terms:
            if term not in postings:
                continue  # rank-bm25 adds 0 for it
            ids, tfs = postings[term]
            at = np.searchsorted(pids, ids)
            keep = (at < len(pids)) & (pids[np.minimum(at, len(pids) - 1)] == ids)
            q_freq = np.zeros(len(pids))
            q_freq[at[keep]] = tfs[keep]
            scores += idf[term] * (q_freq * (K1 + 1) / (q_freq + K1 * (1 - B + B * doc_len / avgdl)))
        ranked = np.argsort(-scores, kind="stable")
        if len(ranked) > k > 0:  # the k best and every partition tied with the k-th
            ranked = ranked[scores[ranked] >= scores[ranked[k - 1]]]
        chosen = pids[ranked].tolist()
        meta = {row[0]: row[1:] for row in self._in("SELECT pid, doc, start, end, heading, len FROM parts "
                                                    "WHERE pid IN ({})", chosen)}
        found = [(float(scores[at]), meta[pid]) for at, pid in zip(ranked.tolist(), chosen)]
        found.sort(key=lambda hit: (-hit[0], hit[1][0], hit[1][1]))  # ties by document and line, not by
        return found[:k]  # the order documents were indexed in: a library ranks the same however it grew

    def _version(self) -> tuple[int, int]:
        """Changes by this connection and commits by others: equal while the index is unchanged."""
        return self._changes, self.db.execute("PRAGMA data_version").fetchone()[0]

    def _lengths_of(self, pids: np.ndarray) -> np.ndarray:
        """The lengths in terms of partitions ``pids`` (sorted): from every partition's length, kept while
        the index is unchanged (by this connection or another: SQLite's data_version), or read for just
        these when that is out of date and they are few (a search among a few documents)."""
        import numpy as np

        version = self._version()
        if self._length_cache is not None and self._length_cache[0] == version:
            return self._length_cache[1][pids].astype(np.float64)
        if len(pids) <= LENGTHS_READ_ALONE:
            ids = pids.tolist()
            found = dict(self._in("SELECT pid, len FROM parts WHERE pid IN ({})", ids))
            return np.array([found[p] for p in ids], np.float64)
        rows = self.db.execute("SELECT pid, len FROM parts").fetchall()
        lengths = np.zeros(max((p for p, _ in rows), default=0) + 1, np.int64)
        table = np.array(rows, np.int64).reshape(-1, 2)
        lengths[table[:, 0]] = table[:, 1]
        self._length_cache = (version, lengths)
        return lengths[pids].astype(np.float64)


def _mean_idf(n_parts: int, dfs) -> float:
    """rank-bm25's average IDF over terms of these partition frequencies (rows of one value)."""
    idfs = [log(n_parts - df + 0.5) - log(df + 0.5) for (df,) in dfs]
    return sum(idfs) / len(idfs) if idfs else 0.0
