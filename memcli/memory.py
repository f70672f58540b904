"""``memcli.Memory``: the application layer and public Python API.

Every face of memcli (the CLI, ``eval locomo``, scripts, a future MCP
server) opens a :class:`Memory` and calls its methods; they return result
dataclasses whose ``to_dict()`` is what ``--json`` prints::

    from memcli import Memory

    memory = Memory("~/notes/.memcli", create=True)
    memory.ingest("transcript.json")
    memory.remember("Caroline's adoption interview is on 3 June", speaker="user")
    print(memory.ask("Which agency did Caroline apply to?", reader="evidence-only").evidence[0].text)

A model is opened only when an operation needs one (``ask`` with a model
reader, ``chat``, consolidation or extraction with the model), through
:func:`memcli.llm.open_model`, or the ``model`` you pass in.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from memcli import forget as forgetting
from memcli import forget_caches, llm
from memcli import ingest as pipeline
from memcli.config import Settings, approve_store_settings, switch
from memcli.consolidate import job
from memcli.dates import Period
from memcli.errors import ConfigError, UsageError
from memcli.index import LibraryIndex
from memcli.ingest.entries import IngestResult, ingest_turns
from memcli.kv import blocks_to_write, engine_for, keep_prompt_prefixes, keeps_blocks, read_only_root
from memcli.llm import profile as profiles
from memcli.paths import PROJECT_STORE_DIRNAME, Resolved, resolve_store
from memcli.read_tools import grep, list_docs, read_lines, search
from memcli.reports import InitResult, StatusResult, TrustResult, status_report
from memcli.semantic import upkeep
from memcli.share import git as shared_git
from memcli.share.sync import sync_memory
from memcli.store import CURRENT_ID, Store
from memcli.store.identity import FORGOTTEN
from memcli.where import refuse_link

Progress = Callable[[str, int, int], None]  # (stage, done, total)


def _python_warning(message: str) -> None:
    warnings.warn(message, RuntimeWarning, stacklevel=3)


class Memory:
    """One memory store, its settings, and (opened when needed) its model."""

    def __init__(self, store: str | Path | Resolved | None = None, *, create: bool = False,
                 settings: dict[str, Any] | None = None, model=None, cache_dir: Path | None = None,
                 verbose: bool = False, on_warning: Callable[[str], None] | None = None, read_only: bool = False):
        """``store``: a directory (else $MEMCLI_STORE, the nearest ``.memcli/``, or the XDG data
        directory); ``create``: make it if missing; ``settings``: overrides by dotted key
        (``{"ask.budget": 1000}``); ``model``: a chat model to use instead of the configured one;
        ``cache_dir``: where the store's caches live (default: the per-store cache folder);
        ``on_warning``: told of problems memcli works around (an unusable cache); default: Python's
        ``warnings``; ``read_only``: never write to the store, not even to finish a write a crash
        left half-done (that is read as committed).

        With ``create`` a missing store is made by the first write (bad input creates nothing)."""
        self.where = store if isinstance(store, Resolved) else resolve_store(store)
        self._missing = create and not (self.where.path / "state.json").exists()
        self.store = Store(self.where.path) if self._missing else Store.open(self.where)
        self.read_only = False
        # every index of the store opens in cache_dir (consolidation's own too), else in its cache folder
        self.store.index_dir = Path(cache_dir) if cache_dir is not None else None
        self._overrides = settings
        self.settings = Settings.load(self.store.root, settings)
        self.store.lock_timeout = self.settings.store_lock_timeout
        self.verbose = verbose
        self._warn = on_warning or _python_warning
        if read_only:
            self.make_read_only("read_only")
        self.store.on_warning = self._warn
        if (note := self.settings.ignored_note(self.store.root)) is not None:
            self._warn(note)
        self._chat_model = model
        self._own_model = model is None
        self._sequences = 0
        self._index = None
        self._tombstones_seen = None  # forgotten.txt's stat when the caches were last settled
        self._prefixes = False
        self._profile = None

    @classmethod
    def init(cls, directory: str | Path | None = None, *, store: str | Path | None = None) -> InitResult:
        """Create a store: ``store`` (or $MEMCLI_STORE) when given and no ``directory``, else
        ``directory/.memcli`` (default: the current directory)."""
        chosen = resolve_store(store)
        if directory is None and chosen.source in ("--store", "$MEMCLI_STORE"):
            root = chosen.path
        else:
            root = Path(directory or Path.cwd()).expanduser().absolute() / PROJECT_STORE_DIRNAME
            refuse_link(str(root))
        existed = (root / "state.json").exists()
        Store.open(Resolved(root, "memcli init"), create=True)
        return InitResult(str(root), not existed)

    def make_read_only(self, origin: str = "read_only") -> None:
        """From now on nothing is written to the store (every change is refused, :meth:`writable`), and KV
        state (chat sessions, blocks) is kept in the store's cache folder (:func:`memcli.kv.read_only_root`)
        unless ``kv.dir`` names a folder; ``origin`` says why, in the settings' sources."""
        self.read_only = self.store.read_only = True
        if not self.settings.kv_dir:
            self.settings = self.settings.with_overrides({"kv.dir": str(read_only_root(self.store))}, origin)

    def trust(self, *, revoke: bool = False) -> TrustResult:
        """Approve (``revoke``: take back) the store's own settings that :mod:`memcli.trust` guards,
        exactly as its config.toml sets them now; a later change to any of them needs a new approval."""
        values = approve_store_settings(self.root, revoke=revoke)
        self.settings = Settings.load(self.root, self._overrides)
        if self.read_only:
            self.make_read_only()
        return TrustResult(str(self.root), {k: str(v) for k, v in values.items()}, bool(values) and not revoke)

    # ------------------------------------------------------------ resources

    def writable(self) -> Store:
        """The store, created now if it was missing and ``create`` was given; refused (before anything is
        written) when it was opened ``read_only``."""
        self.store.refuse_if_read_only()  # sync and undo take git's lock, not a store transaction
        if self._missing:
            index_dir = self.store.index_dir
            self.store = Store.open(self.where, create=True)
            self.store.lock_timeout = self.settings.store_lock_timeout
            self.store.on_warning = self._warn
            self.store.index_dir = index_dir
            self._missing = False
        return self.store

    @property
    def root(self) -> Path:
        return self.store.root

    @property
    def index(self):
        """The search index (BM25 partitions and the catalog), opened on first use. The caches are settled
        (:meth:`settle_caches`) when it opens and whenever the store's tombstones changed since (a forget
        merged by a plain ``git pull`` while a long-running process, an MCP server, holds them)."""
        moved = self._tombstones_moved()
        if self._index is None or moved:
            self.settle_caches()
        if self._index is None:
            when = self.settings.search_vectors
            if when not in ("background", "inline"):
                raise ConfigError(f"search.vectors is {when!r}; it is background or inline")
            self._index = LibraryIndex(self.store, self.settings.search_partition_tokens,
                                       on_warning=self._warn, semantic=self.settings.search_semantic,
                                       inline=when == "inline")
        return self._index

    def _tombstones_moved(self) -> bool:
        """Whether ``forgotten.txt`` changed (written, replaced, made, removed) since the last look."""
        try:
            found = (self.store.root / FORGOTTEN).stat()
            stamp = (found.st_mtime_ns, found.st_size, found.st_ino)
        except OSError:
            stamp = None
        moved, self._tombstones_seen = stamp != self._tombstones_seen, stamp
        return moved

    def settle_caches(self) -> None:
        """Before a cache is read (the index, the vectors, chat's KV sessions): a forget whose cleaning was cut
        short is finished, and what was forgotten while these caches were not looking (a plain git pull,
        another cache folder) is dropped from them (:func:`memcli.forget.catch_up`); a warning says so."""
        said = forget_caches.finish_interrupted(self.store, self.settings, self.drop_caches, read_only=self.read_only)
        if said is None:  # entries forgotten while these caches were not looking (a plain git pull)
            said = forget_caches.catch_up(self.store, self.settings, self.drop_caches)
        if said is not None:
            self._warn(said)

    @property
    def profile(self):
        """The model profile (:class:`memcli.llm.profile.Profile`: ``small`` or ``capable`` and why),
        decided without loading the model; it chooses the defaults of ``ask.reader`` and
        ``consolidate.llm``."""
        if self._profile is None:
            self._profile = profiles.decide(self.settings, None if self._own_model else self._chat_model)
        return self._profile

    def default_reader(self) -> str:
        """ask's reader: the ``ask.reader`` setting, or for ``auto`` the profile's (capable: agent;
        small: evidence, the deterministic evidence and one answer call)."""
        return profiles.reader_for(self.settings, self.profile)

    def answer_style(self) -> str:
        """How ask answers: the ``ask.answer`` setting, or for ``auto`` by the model (capable, or 1B
        parameters or more: generate; smaller: extract)."""
        return profiles.answer_for(self.settings, self.profile)

    def consolidates_with_model(self) -> bool:
        """Whether consolidation uses the model: ``consolidate.llm``, or for ``auto`` a capable profile."""
        return profiles.consolidates_with_model(self.settings, self.profile)

    def model(self, *, kv_sequences: int = 1):
        """The chat model: the one given to the constructor, or the configured one (opened once;
        reopened with spare sequences when KV-block work needs them)."""
        if self._chat_model is not None and (not self._own_model or self._sequences >= kv_sequences):
            return self._chat_model
        self._chat_model = llm.open_model(self.settings, verbose=self.verbose, kv_sequences=kv_sequences)
        self._sequences = kv_sequences
        self._prefixes = False
        return self._chat_model

    def warn(self, message: str) -> None:
        """Say ``message`` to this memory's user the way its own warnings are said (``on_warning``)."""
        self._warn(message)

    def close(self) -> None:
        if self._index is not None:
            self._index.close()
            self._index = None

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------ writing

    def ingest(self, source: str | Path | IO | list, *, format: str | None = None, sample: str | None = None,
               conv: str | None = None, time: str | None = None, extract: bool | None = None,
               consolidate: bool = True, progress: Progress | None = None, on_consolidate=None,
               name: str | None = None, keep_harness: bool = False, project: str | None = None) -> IngestResult:
        """Append a transcript's turns to CURRENT (turns ingested before are skipped).

        ``source``: a path, an open file, or a list of :class:`memcli.ingest.turns.Turn`;
        ``format``: force one of :data:`memcli.ingest.formats.FORMATS`; ``extract``: let the model
        extract facts (default: the ``ingest.extract`` setting). When CURRENT then crosses a
        consolidation threshold it is consolidated (unless ``consolidate=False`` or
        ``consolidate.auto`` is off): here when that is quick (the deterministic path), else in a
        detached background process (``consolidate.background``; see :meth:`consolidation_status`);
        ``on_consolidate(reason)`` is told before it starts. ``name`` names an open file in messages
        and entries (default: its own name). ``keep_harness``: keep what an agent's harness wrote into
        its session's messages (instruction files, context blocks, command wrappers), which is
        otherwise taken out (:mod:`memcli.ingest.harness`). Private spans and secrets are never kept
        (:mod:`memcli.ingest.privacy`). ``project``: tag every turn ``project=`` (agent sessions in a store
        several projects share; :mod:`memcli.hooks`).
        """
        cfg = self.settings
        parsed, name = pipeline.parse(source, cfg, format=format, sample=sample, conv=conv, time=time, name=name,
                                      keep_harness=keep_harness, project=project, warn=self._warn)
        self.writable()
        facts = None
        if extract if extract is not None else cfg.ingest_extract:
            from memcli.ingest.facts import extractor

            facts = extractor(self.model, self.profile, self._warn)
        result = pipeline.write(self.store, parsed, name, cfg, facts=facts, progress=progress, warn=self._warn)
        if result.added:
            self.record("ingest", f"memcli ingest: {result.added} entries from {Path(result.source).name}")
        from memcli.consolidate.run import due

        reason = due(self.store, cfg) if consolidate and cfg.consolidate_auto else None
        if reason and job.running(self.root) is None:
            if on_consolidate:
                on_consolidate(reason)
            result.consolidation = self.start_consolidation(reason, progress=progress)
        if result.added:
            self._start_vectors()
        return result

    def start_consolidation(self, reason: str, *, progress: Progress | None = None) -> dict:
        """Consolidate without making the caller wait minutes: here and now when it is quick (the
        deterministic path), else in a detached background process (``consolidate.background``).
        Returns the consolidation's result, or ``{background: True, reason, pid, log}`` (or
        ``already_running``) for a background one."""
        self.writable()
        chosen = switch(self.settings.consolidate_background, "consolidate.background")
        if not (self.consolidates_with_model() if chosen is None else chosen):  # auto: with a model, minutes
            return self.consolidate(progress=progress, reason=reason).to_dict()
        try:
            started = job.start_background(self.root, self.settings.flag_environment())
        except job.AlreadyRunning:  # another consolidation got there first: it takes these entries too
            started = {"already_running": True}
        return {"background": True, "reason": reason, **started}

    def consolidation_status(self) -> dict | None:
        """The consolidation running on this store (process, start, flush n of m, stage) with
        ``running: True``, else how the last one ended (``running: False``), or None if none ran."""
        return job.status(self.root)

    def wait_for_consolidation(self, on_status=None) -> dict | None:
        """Wait until no consolidation runs on this store; returns its final status (None: none ran)."""
        if job.running(self.root) is None:
            return None
        job.wait(self.root, on_status)
        return job.status(self.root)

    def stop_consolidation(self) -> dict | None:
        """Stop the running consolidation: what it committed stays, the rest stays in CURRENT."""
        return None if job.stop(self.root) is None else job.status(self.root)

    def remember_turns(self, turns: list, *, source: str, fmt: str, origin: str) -> IngestResult:
        """Turns said live (chat's messages, fingerprinted by their caller) as new CURRENT entries; in a
        shared store one commit, "memcli FMT: N entries from ORIGIN" (one commit a change)."""
        result = ingest_turns(self.writable(), turns, source=source, fmt=fmt)
        if result.added:
            self.record("remember", f"memcli {fmt}: {result.added} entries from {origin}")
        return result

    def remember(self, text: str, *, speaker: str | None = None, time: str | None = None,
                 source: str | None = None, conv: str | None = None) -> IngestResult:
        """One note or fact as a new CURRENT entry (the same note given twice is kept once)."""
        turn = pipeline.note(text, self.settings, speaker=speaker, time=time, source=source, conv=conv)
        # no vectors job for one note: the next question embeds it (Memory._question_vectors)
        result = ingest_turns(self.writable(), [turn], source=source or "note", fmt="note")
        if result.added:
            self.record("remember", f"memcli remember: a note from {result.source if source else 'a person'}")
        return result

    def forget(self, targets: list[str] | tuple[str, ...] = (), *, conv: str | None = None, since: str | None = None,
               until: str | None = None, clock: str | None = None, grep: str | None = None,
               ignore_case: bool = False, dry_run: bool = False, everything: bool = False):
        """Take entries out of memory for good (see :mod:`memcli.forget`): ``targets`` are citations
        (``doc:12-14``) and seqs (``17``, ``17-20``); ``conv``, ``since``/``until`` (on ``clock``,
        ``said`` or ``event``; :class:`memcli.dates.Period`) and ``grep`` narrow;
        ``everything`` (``--all``) lets a selection take the whole memory, which is refused otherwise.
        Returns a :class:`~memcli.forget.Forgotten`; with ``dry_run`` it lists what would go."""
        selection = forgetting.Selection.parse(list(targets), conv=conv, since=since, until=until, clock=clock,
                                               grep=grep, ignore_case=ignore_case, everything=everything)
        return forgetting.forget_from(self, selection, dry_run=dry_run)

    def drop_caches(self) -> list[str]:
        """Close the search index and remove its files and the vectors' (rebuilt when needed)."""
        if self._index is not None:
            self._index.close()
            self._index = None
        return forget_caches.drop_cache_files(self.store.cache_folder)

    def consolidate(self, *, split: int | None = None, merge: int | None = None, dry_run: bool = False,
                    llm: bool | None = None, progress: Progress | None = None, reason: str | None = None,
                    job=None):
        """Move CURRENT into the topic library (see ``memcli consolidate --help``); returns a
        :class:`~memcli.consolidate.report.ConsolidationResult`. ``llm=False``: deterministic only."""
        from memcli.consolidate.run import consolidate as run

        if split is not None and split < 100:
            raise UsageError("--split must be at least 100 tokens")
        if merge is not None and merge < 0:
            raise UsageError("--merge must not be negative")
        if not dry_run:
            self.writable()
        cfg = self.settings
        pending = self.store.current_path.exists() and any(
            True for _ in self.store.load(CURRENT_ID).doc.entries())
        use_model = (self.consolidates_with_model() if llm is None else llm) and pending
        result = run(self.store, cfg, model=self.model() if use_model else None, dry_run=dry_run,
                     progress=progress, split_limit=split or cfg.consolidate_split_tokens,
                     merge_limit=merge if merge is not None else cfg.consolidate_merge_tokens, reason=reason,
                     job=job)
        if not dry_run:
            docs = len(result.documents)
            self.record("consolidate", f"memcli consolidate: {result.entries_consolidated} entries into "
                         f"{docs} document{'s' if docs != 1 else ''}" + (" with the model" if result.llm else ""))
        return result

    # ------------------------------------------------------------ sharing through git

    def record(self, op: str, message: str) -> None:
        """One commit of the change just made, when the store is shared through git."""
        shared_git.record_if_shared(self.store, op, message, warn=self._warn)

    def share(self):
        """Share this store through git (``memcli init --git``; see :mod:`memcli.share.git`)."""
        return shared_git.share(self.writable())

    def sync(self, *, remote: str | None = None, push: bool = True):
        """Commit, merge the remote's changes entry by entry, push (:mod:`memcli.share.sync`); the entries
        another clone forgot leave this clone's caches too (:func:`memcli.forget.clean_caches`)."""
        return sync_memory(self, remote=remote, push=push)

    def log(self, limit: int = 20):
        """The store's history in git: each change memcli made (op) and any other commit."""
        return shared_git.history(self.store, limit)

    def undo(self, *, any_clone: bool = False):
        """Revert this clone's last change to a shared store (``any_clone``: anyone's), as a new commit."""
        return shared_git.undo(self.writable(), running=self.consolidating, any_clone=any_clone)

    def consolidating(self) -> bool:
        return job.running(self.root) is not None

    # ------------------------------------------------------------ reading

    def docs(self, offset: int = 0, limit: int | None = None):
        """The catalog: every document's id, summary, size and last update (CURRENT last)."""
        with self.store.reading():
            result = list_docs(self.index, offset, limit)
            result.refused = self.store.refused_files()
        return result

    def read(self, doc: str, start: int = 1, end: int | None = None):
        """Lines ``start..end`` of a document, numbered as in the file (cite them as ``doc:start-end``)."""
        with self.store.reading():
            return read_lines(self.store, doc, start, end)

    def grep(self, pattern: str, *, doc: str | None = None, ignore_case: bool = False, context: int = 0,
             limit: int | None = None, since: str | None = None, until: str | None = None,
             clock: str | None = None):
        """Lines of document bodies and CURRENT matching a regular expression; ``since``/``until``
        (ISO days or times, inclusive): only entries of that stretch on ``clock`` (``said``, the
        default, or ``event``; :class:`memcli.dates.Period`)."""
        period = Period.parse(since, until, clock)
        with self.store.reading():
            return grep(self.store, pattern, doc=doc, ignore_case=ignore_case, context=context,
                        limit=limit if limit is not None else self.settings.grep_limit,
                        seconds=self.settings.grep_timeout, period=period)

    def search(self, query: str, *, k: int | None = None, doc: str | None = None):
        """Heading sections ranked by BM25 for ``query``."""
        with self.store.reading():
            return search(self.index, query, k if k is not None else self.settings.search_k, doc=doc)

    def ask(self, question: str, *, reader: str | None = None, budget: int | None = None,
            answer_context: int | None = None, max_rounds: int | None = None, kv: bool | None = None,
            on_step: Callable[[dict], None] | None = None, keep_evidence: bool = True,
            progress: Progress | None = None, kv_compose: bool = False,
            select: str | None = None, answer: str | None = None, where: dict[str, str] | None = None,
            recent: bool = False, as_of: str | None = None, since: str | None = None,
            until: str | None = None, clock: str | None = None):
        """Answer ``question`` from memory, citing the lines used; see :mod:`memcli.retrieve.ask`.

        ``reader``: ``agent`` | ``no-agent`` | ``evidence`` | ``evidence-only`` (no model, no answer);
        default: :meth:`default_reader`; ``kv``: keep
        shared prompt prefixes as KV blocks (a local model; default: the ``ask.kv`` setting);
        ``keep_evidence=False``: the answer's evidence is not kept as a block (``eval``: no question repeats it);
        ``progress``: sees the entries' vectors being computed (the first question after new memories);
        ``kv_compose``: answer from memory units placed as composed KV blocks, prefilling only the
        question (a local model; the evidence reader; :mod:`memcli.kv.composed_ask`); ``select``: how
        it picks the units, ``text``, ``latent`` or ``fused`` (default: the ``kv.select`` setting);
        ``answer``: ``extract`` or ``generate`` (default: :meth:`answer_style`); ``where``: only entries
        whose signature has these values (``{"project": "/home/me/app"}``; the evidence readers);
        ``recent``: then the entries it keeps that the question does not rank, newest first;
        ``as_of`` (``YYYY-MM-DD``): answered from what had been said by the end of that day, facts
        replaced since then current again (the evidence readers); ``since``/``until`` (ISO days or
        times, inclusive): only entries of that stretch, on ``clock`` ``said`` (the default) or
        ``event`` (the day a line speaks of; :class:`memcli.dates.Period`; the evidence readers).
        """
        from memcli.asking import ask_memory

        return ask_memory(self, question, reader=reader, budget=budget, answer_context=answer_context,
                          max_rounds=max_rounds, kv=kv, on_step=on_step, keep_evidence=keep_evidence,
                          progress=progress, kv_compose=kv_compose, select=select, answer=answer, where=where,
                          recent=recent, period=Period.parse(since, until, clock), as_of=as_of)

    def embed(self, progress: Progress | None = None) -> float:
        """Bring the entries' sentence vectors up to date now (the semantic signal of the evidence
        ranking), waiting first for a background job; the seconds spent (:mod:`memcli.semantic.upkeep`)."""
        return upkeep.embed(self.index, progress)

    def compute_vectors(self, progress: Progress | None = None) -> dict:
        """The vectors job (``memcli embed --worker``): every missing vector, under its lock."""
        return upkeep.compute(self.index, progress)

    def vectors_status(self) -> dict | None:
        """How far the entries' vectors are: ``{missing, entries, job}`` (None: no semantic signal)."""
        return upkeep.status(self.store, self.index)

    def _start_vectors(self) -> None:
        upkeep.start_job(self.settings, self.root, self.index)

    def answer_model(self, kv: bool):
        """The model for ask; a local one keeps the shared prompt prefixes as KV blocks when ``kv``."""
        keep = kv and keeps_blocks(self.settings) and self._own_model
        model = self.model(kv_sequences=2 if keep else 1)
        if keep and not self._prefixes and getattr(model, "runtime", None) is not None:
            keep_prompt_prefixes(model, blocks_to_write(self.store, self.settings))
            self._prefixes = True
        return model

    def status(self) -> StatusResult:
        """The store, how it was chosen, its size, CURRENT and the thresholds in force."""
        return status_report(self)

    # ------------------------------------------------------------ chat and KV blocks

    def chat(self, session: str = "default", *, remember: bool = True, max_tokens: int = 256,
             verify: bool = False, compose: bool = False, progress: Callable[[int, int], None] | None = None,
             remember_replies: bool | None = None):
        """A chat session with memory in context, restored from KV blocks (:class:`memcli.chat.Chat`);
        ``progress(done, total)`` follows the memory's tokens as the session starts; the model's
        replies are remembered when ``remember_replies`` (default: a capable model's)."""
        from memcli.chat import Chat

        return Chat(self, session, remember=remember, max_tokens=max_tokens, verify=verify, compose=compose,
                    progress=progress, remember_replies=remember_replies)

    def kv_engine(self, *, verify: bool = False):
        """The KV engine on this store's block directory and the local model (opened with a spare sequence)."""
        return engine_for(self.model(kv_sequences=2), self.store, self.settings, verify=verify)
