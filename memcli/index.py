"""BM25 over heading-level partitions, with a persistent incremental index.

A partition is a heading section of a document (the heading line and the
lines under it up to the next heading), cut into pieces of at most
``search.partition_tokens`` tokens; CURRENT, which has no sections, is cut the
same way. Each partition is indexed with its heading path, its entries' text
and their speakers.

The index lives in the cache directory (``paths.store_cache_dir``) as SQLite:
per-document rows of partitions and postings keyed by the document's file
size and mtime. Every search stats the documents and re-indexes only those
that changed, so repeated searches over a large library do not re-tokenize it.
Scoring is rank-bm25's BM25Okapi (``get_batch_scores``) fed with corpus
statistics from the index, over the partitions that contain a query term.
"""

from __future__ import annotations

import array
import sqlite3
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from math import log
from pathlib import Path

from memcli.cache import file_signatures, open_cache
from memcli.paths import ensure_private_dir, store_cache_dir
from memcli.results import Result, omit_empty
from memcli.store import CURRENT_ID, Store
from memcli.store.format import Document, parse_entry, parse_heading
from memcli.terms import terms
from memcli.tokens import count_tokens

INDEX_VERSION = 2
K1, B, EPSILON = 1.5, 0.75, 0.25  # rank-bm25's BM25Okapi defaults

# ---------------------------------------------------------------- partitions

@dataclass
class Partition:
    start: int  # file line numbers, inclusive
    end: int
    heading: str
    text: str  # what is indexed


def partitions(doc: Document, max_tokens: int) -> list[Partition]:
    """Heading sections of ``doc``, each cut into pieces of at most ``max_tokens``."""
    out: list[Partition] = []
    path: list[tuple[int, str]] = []
    lines: list[tuple[int, str]] = []
    size = 0

    def flush() -> None:
        nonlocal lines, size
        body = [t for _, t in lines]
        if any(t.strip() for t in body):
            heading = " > ".join(title for _, title in path)
            out.append(Partition(lines[0][0], lines[-1][0], heading, "\n".join([heading, *body])))
        lines, size = [], 0

    for lineno, raw in doc.lines():
        head = parse_heading(raw)
        if head is not None:
            flush()
            level, title = head
            path = [p for p in path if p[0] < level] + [(level, title)]
            continue
        entry = parse_entry(raw)
        text = raw
        if entry is not None:
            speaker = entry.meta.get("speaker", "")
            text = f"{speaker} {entry.text}" if speaker else entry.text
        cost = count_tokens(text)
        if lines and size + cost > max_tokens:
            flush()
        lines.append((lineno, text))
        size += cost
    flush()
    return out


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
CREATE INDEX IF NOT EXISTS postings_doc ON postings(doc);
"""


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
        folder = cache_dir or store.index_dir or store_cache_dir(store.root)
        self.folder = folder
        self.path: Path | str = folder / "index.sqlite"
        try:
            ensure_private_dir(folder)
            self.db = self._connect()
        except (OSError, sqlite3.Error) as exc:
            self.db = self._in_memory(exc)

    def _in_memory(self, exc: Exception) -> sqlite3.Connection:
        self.warning = (f"the search index cache {self.path} cannot be used ({exc}); "
                        "searching without it (slower, nothing is lost)")
        if self.on_warning:
            self.on_warning(self.warning)
        self.path = ":memory:"
        return self._connect()

    def _connect(self) -> sqlite3.Connection:
        return open_cache(self.path, _SCHEMA, f"{INDEX_VERSION}:{self.partition_tokens}", ("docs", "parts", "postings"))

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

    def similarities(self, text: str) -> dict[tuple[str, int], float]:
        """Cosine similarity of ``text`` with every live entry by (document, line); empty without
        the semantic signal."""
        vectors = self.vectors()
        return vectors.similarities(text) if vectors is not None else {}

    def sentence_similarity(self, text: str) -> Callable[[list[str]], list[float]] | None:
        """Cosine similarity of ``text`` with sentences of entries (compact evidence's
        :class:`memcli.retrieve.evidence.Focus`); None without the semantic signal."""
        vectors = self.vectors()
        return vectors.sentence_similarity(text) if vectors is not None else None

    # ------------------------------------------------------------ refresh

    def refresh(self) -> int:
        """Re-index documents whose file changed; returns how many were re-indexed. A cache that fails
        while being written (a full disk) is replaced by one in memory."""
        try:
            return self._refresh()
        except sqlite3.Error as exc:
            if self.path == ":memory:":
                raise
            self.db.close()
            self.db = self._in_memory(exc)
            return self._refresh()

    def _refresh(self) -> int:
        on_disk = file_signatures(self.store)
        cached = {d: (m, s) for d, m, s in self.db.execute("SELECT doc, mtime_ns, size FROM docs")}
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
            self.db.execute("DELETE FROM info WHERE key='avg_idf'")
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        return len(stale) + len(gone)

    def _drop(self, doc_id: str) -> None:
        for table in ("docs", "parts", "postings"):
            self.db.execute(f"DELETE FROM {table} WHERE doc=?", (doc_id,))

    def _add(self, doc_id: str, sig: tuple[int, int]) -> None:
        loaded = self.store.load(doc_id)
        doc = loaded.doc
        entries = sum(1 for _ in doc.entries())
        summary = str(doc.meta.get("summary") or "")
        tokens = doc.meta.get("token_count")
        if not isinstance(tokens, int):
            tokens = count_tokens("\n".join(t for _, t in doc.lines()))
        updated = doc.meta.get("updated_time")
        self.db.execute("INSERT INTO docs VALUES(?,?,?,?,?,?,?,?)", (
            doc_id, sig[0], sig[1], summary, tokens,
            str(updated) if updated is not None else None, entries, loaded.error))
        postings: dict[str, tuple[array.array, array.array]] = {}
        for part in partitions(doc, self.partition_tokens):
            words = terms(part.text)
            cur = self.db.execute("INSERT INTO parts(doc, start, end, heading, len) VALUES(?,?,?,?,?)",
                                  (doc_id, part.start, part.end, part.heading, len(words)))
            pid = cur.lastrowid
            for term, tf in Counter(words).items():
                ids, tfs = postings.setdefault(term, (array.array("q"), array.array("i")))
                ids.append(pid)
                tfs.append(tf)
        self.db.executemany("INSERT INTO postings VALUES(?,?,?,?)", (
            (term, doc_id, ids.tobytes(), tfs.tobytes()) for term, (ids, tfs) in postings.items()))

    # ------------------------------------------------------------ catalog

    def catalog(self) -> list[CatalogRow]:
        self.refresh()
        rows = [CatalogRow(*r) for r in self.db.execute(
            "SELECT doc, summary, token_count, updated_time, entries, error FROM docs ORDER BY doc")]
        rows.sort(key=lambda r: (r.id == CURRENT_ID, r.id))
        return rows

    # ------------------------------------------------------------ statistics

    def idf(self) -> Callable[[str], float]:
        """A smoothed inverse partition frequency over the whole library (cached per term).

        ``log(1 + N / (1 + df))``: positive for every term, so similarity
        weights never flip sign on very common words.
        """
        self.refresh()
        (n_parts,) = self.db.execute("SELECT COUNT(*) FROM parts").fetchone()
        cache: dict[str, float] = {}

        def lookup(term: str) -> float:
            if term not in cache:
                df = sum(len(ids) // 8 for (ids,) in self.db.execute(
                    "SELECT pids FROM postings WHERE term=?", (term,)))
                cache[term] = log(1 + (n_parts + 1) / (1 + df))
            return cache[term]

        return lookup

    def candidate_docs(self, query_terms: list[str], k: int, exclude: set[str] = frozenset()) -> list[str]:
        """Ids of the ``k`` documents whose best partition ranks highest for ``query_terms``.

        Uses the index as last refreshed: callers that change no file in between
        (a consolidation flush) refresh once instead of stat-ing the library per call.
        """
        if not query_terms or k < 1:
            return []
        best: dict[str, float] = {}
        for hit in self.search(" ".join(query_terms), k * 4, refresh=False):
            if hit.doc != CURRENT_ID and hit.doc not in exclude:
                best[hit.doc] = max(best.get(hit.doc, 0.0), hit.score)
        return [d for d, _ in sorted(best.items(), key=lambda kv: (-kv[1], kv[0]))[:k]]

    # ------------------------------------------------------------ search

    def _average_idf(self, n_parts: int) -> tuple[float, bool]:
        """(the average IDF, whether it was computed now rather than read from the cache)."""
        row = self.db.execute("SELECT value FROM info WHERE key='avg_idf'").fetchone()
        if row is not None:
            return float(row[0]), False
        by_term: Counter = Counter()
        for term, ids in self.db.execute("SELECT term, pids FROM postings"):
            by_term[term] += len(ids) // 8  # 8-byte partition ids
        idfs = [log(n_parts - df + 0.5) - log(df + 0.5) for df in by_term.values()]
        return (sum(idfs) / len(idfs) if idfs else 0.0), True

    def search(self, query: str, k: int, doc: str | None = None, refresh: bool = True) -> list[Hit]:
        """The ``k`` best partitions for ``query`` (optionally within one document).

        The index is read in one read transaction, so it is one snapshot even while another process
        re-indexes a document between two of the reads."""
        if refresh:
            self.refresh()
        query_terms = terms(query)
        if not query_terms:
            return []
        fresh: list[float] = []
        own = not self.db.in_transaction
        if own:
            self.db.execute("BEGIN")
        try:
            found = self._search(query_terms, k, doc, fresh)
        finally:
            if own:
                self.db.execute("COMMIT")
        if fresh:  # remembered after the snapshot ends (a write inside it could wait on another writer)
            try:
                self.db.execute("INSERT OR REPLACE INTO info VALUES('avg_idf', ?)", (repr(fresh[0]),))
            except sqlite3.Error:
                pass
        wanted = set(query_terms)
        texts: dict[str, str] = {}
        hits = []
        for score, (doc_id, start, end, heading, _) in found:
            if doc_id not in texts:
                texts[doc_id] = self.store.read_text(doc_id)
            hits.append(Hit(doc=doc_id, heading=heading, start_line=start, end_line=end,
                            score=float(score), snippet=_snippet(texts[doc_id], start, end, wanted)))
        return hits

    def _search(self, query_terms: list[str], k: int, doc: str | None, fresh: list[float]) -> list[tuple]:
        """(score, (doc, start, end, heading, len)) of the ``k`` best partitions, read from the index."""
        from rank_bm25 import BM25Okapi

        n_parts, total_len = self.db.execute("SELECT COUNT(*), COALESCE(SUM(len), 0) FROM parts").fetchone()
        if not n_parts:
            return []
        unique = sorted(set(query_terms))
        marks = ",".join("?" * len(unique))
        freqs: dict[int, dict[str, int]] = {}
        df: Counter = Counter()
        for term, _doc, ids_blob, tfs_blob in self.db.execute(
                f"SELECT term, doc, pids, tfs FROM postings WHERE term IN ({marks})", unique):
            ids, tfs = array.array("q"), array.array("i")
            ids.frombytes(ids_blob)
            tfs.frombytes(tfs_blob)
            df[term] += len(ids)
            for pid, tf in zip(ids, tfs):
                freqs.setdefault(pid, {})[term] = tf
        if not freqs:
            return []
        idf = {t: log(n_parts - n + 0.5) - log(n + 0.5) for t, n in df.items()}
        if any(v < 0 for v in idf.values()):  # rank-bm25's floor for very common terms
            average, computed = self._average_idf(n_parts)
            if computed:
                fresh.append(average)
            floor = EPSILON * average
            idf = {t: (floor if v < 0 else v) for t, v in idf.items()}

        pids = list(freqs)
        meta = {}
        for start in range(0, len(pids), 900):
            chunk = pids[start:start + 900]
            for row in self.db.execute(
                    f"SELECT pid, doc, start, end, heading, len FROM parts WHERE pid IN ({','.join('?' * len(chunk))})",
                    chunk):
                meta[row[0]] = row[1:]
        if doc is not None:
            pids = [p for p in pids if meta[p][0] == doc]
            if not pids:
                return []
        scorer = BM25Okapi.__new__(BM25Okapi)  # statistics come from the index, not a corpus
        scorer.k1, scorer.b, scorer.epsilon = K1, B, EPSILON
        scorer.avgdl = total_len / n_parts
        scorer.idf = idf
        scorer.doc_freqs = [freqs[p] for p in pids]
        scorer.doc_len = [meta[p][4] for p in pids]
        scores = scorer.get_batch_scores(query_terms, list(range(len(pids))))
        ranked = sorted(zip(scores, pids), key=lambda sp: (-sp[0], sp[1]))[:k]
        return [(score, meta[p]) for score, p in ranked]


def _snippet(text: str, start: int, end: int, wanted: set[str], width: int = 240) -> str:
    """The line of a partition (file lines start..end) with the most query terms, shortened."""
    lines = text.split("\n")[start - 1:end]
    best, best_score = "", -1
    for raw in lines:
        entry = parse_entry(raw)
        line = entry.text if entry else raw.strip()
        score = len(wanted.intersection(terms(line)))
        if score > best_score:
            best, best_score = line, score
    best = " ".join(best.split())
    return best if len(best) <= width else best[: width - 1] + "…"
