"""The view of the library one consolidation works on: disk plus the changes not yet written.

Documents are read from the store, and replaced in memory as the flush
rewrites, creates, splits and merges them; nothing touches the disk until the
whole flush passes the conservation guard and is committed in one
transaction. Costs stay bounded by what a flush touches: candidates come from
the search index, never from a scan of the library.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

from memcli.consolidate.layout import SUPERSEDED
from memcli.consolidate.lexical import Vector, make_doc_id, term_counts, tfidf
from memcli.consolidate.titles import heading_signature, title_signature
from memcli.index import LibraryIndex
from memcli.ingest.turns import ROLES
from memcli.store import CURRENT_ID, Store, aliases
from memcli.store.format import Document, Entry, parse_entry, parse_heading

OWNER = "\x00owner"  # the party those roles stand for (no speaker can be named so)


@dataclass(frozen=True)
class Scope:
    """Whose and where entries are: consolidation puts two scopes in one document only when they share a
    person (a speaker) or a conversation, and never entries of two projects, whatever their words share.
    Entries with neither speaker nor conversation (notes) fit any scope of their project. The roles of an
    agent or chat session (``user``, ``assistant``) are one party: the store's owner and their assistant."""

    speakers: frozenset[str] = frozenset()
    convs: frozenset[str] = frozenset()
    projects: frozenset[str] = frozenset()

    @classmethod
    def of(cls, entries) -> Scope:
        entries = list(entries)
        return cls(cls.of_speakers(e.meta["speaker"] for e in entries if e.meta.get("speaker")),
                   frozenset(e.meta["conv"] for e in entries if e.meta.get("conv")),
                   frozenset(e.meta["project"] for e in entries if e.meta.get("project")))

    @staticmethod
    def of_speakers(speakers) -> frozenset[str]:
        """A scope's ``speakers`` from the speakers' names (a session's roles as the owner)."""
        return frozenset(OWNER if s in ROLES else s for s in speakers)

    def fits(self, other: Scope) -> bool:
        if self.projects != other.projects:
            return False
        if not (self.speakers or self.convs) or not (other.speakers or other.convs):
            return True
        return bool(self.speakers & other.speakers or self.convs & other.convs)

    def __or__(self, other: Scope) -> Scope:
        return Scope(self.speakers | other.speakers, self.convs | other.convs, self.projects | other.projects)


@dataclass
class Workspace:
    store: Store
    index: LibraryIndex
    docs: dict[str, Document] = field(default_factory=dict)  # new versions, by id
    originals: dict[str, Document | None] = field(default_factory=dict)  # as on disk (None: new)
    deleted: set[str] = field(default_factory=set)
    created: set[str] = field(default_factory=set)
    log: dict[str, list[dict]] = field(default_factory=dict)  # update_log items to add, by id

    def __post_init__(self) -> None:
        self.idf = self.index.idf(refresh=False, whole=True)  # the flush refreshed it (run_flush)
        self._profiles: dict[str, list[Vector]] = {}
        self._scopes: dict[str, Scope] = {}
        self._sibling_titles: dict[frozenset[str], dict[str, str]] = {}
        self._disk: dict[str, Document] = {}  # documents read and not changed, as on disk
        self.former = aliases.read(self.store)  # the store's former ids: never given to a new document
        self.moved: dict[str, str] = {}  # documents on disk renamed or merged in this flush: the id each went to
        self.renamed: dict[str, str] = {}  # those of them renamed: the id each has now

    # ------------------------------------------------------------ documents

    def exists(self, doc_id: str) -> bool:
        if doc_id in self.deleted:
            return False
        return doc_id in self.docs or self.store.doc_path(doc_id).exists()

    def load(self, doc_id: str) -> Document:
        """The current version of a document (a private copy the flush may change)."""
        if doc_id in self.docs:
            return self.docs[doc_id]
        doc = self.store.load(doc_id, strict=True).doc
        self.originals[doc_id] = copy.deepcopy(doc)
        self.docs[doc_id] = doc
        return doc

    def view(self, doc_id: str) -> Document:
        """A document to read, not to change: the flush's version, else the one on disk (read once a flush;
        the store's lock keeps the disk as it is)."""
        if doc_id in self.docs:
            return self.docs[doc_id]
        if doc_id not in self._disk:
            self._disk[doc_id] = self.store.load(doc_id).doc
        return self._disk[doc_id]

    def create(self, doc_id: str, doc: Document) -> None:
        self.docs[doc_id] = doc
        self.originals.setdefault(doc_id, None)
        self.created.add(doc_id)
        self._profiles.pop(doc_id, None)
        self._scopes.pop(doc_id, None)

    def delete(self, doc_id: str) -> None:
        self.load(doc_id)
        self.deleted.add(doc_id)
        self.docs.pop(doc_id, None)

    def touched(self) -> list[str]:
        return sorted(d for d in self.docs if d not in self.deleted)

    def new_id(self, title: str, salt: str) -> str:
        return make_doc_id(title, salt, self.taken)

    def taken(self, doc_id: str) -> bool:
        """Whether ``doc_id`` names a document, or did (a former id keeps resolving to where it went)."""
        return (self.exists(doc_id) or doc_id in self.deleted or doc_id == CURRENT_ID or doc_id in self.former
                or doc_id in self.moved)

    def went(self, old: str, new: str) -> None:
        """Record that document ``old``'s entries went to ``new`` (renamed, or merged into it), and
        those of any document that went to ``old`` earlier in the flush. Only a document on disk leaves
        an alias: nothing can cite one this flush made."""
        for kept in (self.moved, self.renamed):
            for former, to in kept.items():
                if to == old:
                    kept[former] = new
        if self.originals.get(old) is not None:
            self.moved[old] = new

    def rename(self, old: str, new: str) -> None:
        """Give document ``old`` the id ``new`` (a free one): a document on disk leaves its former id
        behind as an alias (:mod:`memcli.store.aliases`); one this flush made is just named anew."""
        doc = self.docs.pop(old)
        if self.originals.get(old) is not None:
            self.deleted.add(old)
            self.renamed[old] = new
        else:
            self.originals.pop(old, None)
            self.created.discard(old)
        self.went(old, new)
        self.create(new, doc)
        self.log[new] = self.log.pop(old, [])
        self.forget_profile(old)

    def note(self, doc_id: str, item: dict) -> None:
        self.log.setdefault(doc_id, []).append(item)

    # ------------------------------------------------------------ similarity

    def summary(self, doc_id: str) -> str:
        return str(self.view(doc_id).meta.get("summary") or "")

    def profile(self, doc_id: str) -> list[Vector]:
        """tf-idf vectors of a document's parts: its summary and each section, its title and headings
        compared by their signatures (:func:`doc_parts`).

        Routing compares a block with the most similar part, so a large
        document does not attract every block just because it has many words.
        """
        if doc_id not in self._profiles:
            doc = self.view(doc_id)
            self._profiles[doc_id] = [tfidf(term_counts(part), self.idf) for part in doc_parts(doc, self.idf)]
        return self._profiles[doc_id]

    def forget_profile(self, doc_id: str) -> None:
        self._profiles.pop(doc_id, None)
        self._scopes.pop(doc_id, None)

    def scope(self, doc_id: str) -> Scope:
        """The :class:`Scope` of a document's entries."""
        if doc_id not in self._scopes:
            doc = self.view(doc_id)
            self._scopes[doc_id] = Scope.of(entry for _, entry in doc.entries())
        return self._scopes[doc_id]

    def candidates(self, texts: list[str], k: int, scope: Scope | None = None) -> list[str]:
        """Existing documents most like ``texts`` (by the index), at most ``k``; with ``scope``, only
        documents whose scope it fits are searched, so the search reads the postings of one person's or
        conversation's documents, not the library's."""
        counts = term_counts(texts)
        ranked = sorted(counts, key=lambda t: (-counts[t] * self.idf(t), t))[:20]
        among = self.fitting(scope) if scope is not None else None
        found = self.index.candidate_docs(ranked, k, exclude=self.deleted, among=among)
        return [d for d in found if self.exists(d) and self._readable(d)]

    def fitting(self, scope: Scope) -> set[str]:
        """Documents on disk (as the index last saw them) whose scope ``scope`` fits: those sharing a
        speaker or a conversation with it, and those with neither (notes), of the same projects."""
        index = self.index
        if scope.speakers or scope.convs:
            speakers = (scope.speakers - {OWNER}) | (ROLES if OWNER in scope.speakers else frozenset())
            near = (index.docs_with("speaker", speakers) | index.docs_with("conv", scope.convs)
                    | (index.docs_without("speaker") & index.docs_without("conv")))
        else:
            near = index.doc_ids()
        return {doc for doc, (_, _, projects) in index.people(near).items() if projects == scope.projects}

    def sibling_titles(self, doc_id: str) -> list[str]:
        """The titles of the other documents of the same people as ``doc_id`` (the same speakers, a session's
        roles as one party): those this flush holds as they are now, the rest as the index last saw them."""
        people = self.scope(doc_id).speakers
        if people not in self._sibling_titles:  # those on disk, read once a flush for each party
            names = (people - {OWNER}) | (ROLES if OWNER in people else frozenset())
            on_disk = self.index.docs_with("speaker", names) if names else set()
            found = self.index.people(on_disk)
            same = {d for d, (speakers, _, _) in found.items() if Scope.of_speakers(speakers) == people}
            self._sibling_titles[people] = self.index.titles(same)
        out = [title for d, title in self._sibling_titles[people].items() if d not in self.docs and d not in self.deleted]
        for other, doc in self.docs.items():
            if other != doc_id and other not in self.deleted and self.scope(other).speakers == people:
                title = next((head[1] for _, line in doc.lines() if (head := parse_heading(line)) and head[0] == 1),
                             None)  # the first level-1 heading, as Layout reads it
                if title:
                    out.append(title)
        return out

    def _readable(self, doc_id: str) -> bool:
        """A document whose front matter a person broke is left alone (never rewritten); the index, read
        under the same lock, knows which (its catalog's ``error``)."""
        if doc_id in self.docs:
            return True
        known, error = self.index.load_error(doc_id)
        return error is None if known else self.store.load(doc_id).error is None


def doc_texts(doc: Document) -> list[str]:
    """Summary, headings and entry texts of a document."""
    return [text for part in doc_parts(doc) for text in part]


def doc_parts(doc: Document, idf=None) -> list[list[str]]:
    """The texts of a document in parts: [summary], then one part per heading section. With ``idf``, each
    title and heading is the signature of the entries it heads (:mod:`memcli.consolidate.titles`), and a
    summary that is still the title (a new document's, until summaries are made) the title's: routing and
    merging compare what a document holds, never how its title phrases it. The Superseded section keeps
    its name."""
    parts: list[list[str]] = [[str(doc.meta.get("summary") or "")]]
    heads: list[tuple[int, int]] = []  # (part, heading level; 0 for the Superseded section) of each heading
    held: list[list[Entry]] = []  # the entries under each heading
    for _, line in doc.lines():
        head = parse_heading(line)
        if head:
            parts.append([head[1]])
            heads.append((len(parts) - 1, 0 if head[1].strip().lower() == SUPERSEDED.lower() else head[0]))
            held.append([])
            continue
        entry = parse_entry(line)
        if len(parts) == 1:
            parts.append([])
        parts[-1].append(entry.text if entry else line)
        if entry is not None and held:
            held[-1].append(entry)
    if idf is None:
        return parts
    everything = [e for (_, level), under in zip(heads, held) if level for e in under]
    for (at, level), under in zip(heads, held):
        if level == 1:
            named = title_signature(everything, idf)
            if parts[0][0] == parts[at][0]:
                parts[0][0] = named
            parts[at][0] = named
        elif level:
            parts[at][0] = heading_signature(under, idf)
    return parts
