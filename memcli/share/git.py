"""A store shared through git: set-up, one commit per change, sync, log and undo.

``memcli init --git`` makes a store *shared*: its ``state.json`` says ``"ids": "unique"`` (so every
clone numbers entries that never collide, :mod:`memcli.store.identity`), and the store folder gets

* ``.gitattributes``: CURRENT.md, the documents, ingested.txt, forgotten.txt, aliases.txt and state.json merge
  with ``memcli merge-driver`` (:mod:`memcli.share.merge`);
* ``.gitignore``: everything but those files and config.toml (the lock, transactions, jobs, KV
  blocks, this clone's origin); the search index and vectors live outside the store anyway;

and the repository's ``.git/config`` the driver's command (per clone: ``memcli sync`` writes it in a
clone that lacks it; ``memcli doctor`` checks it). With a shared store, each ingest, note,
consolidation and forget is one commit of the store's files whose message says what it did and
carries a ``Memcli-Op:`` trailer; ``memcli log`` lists them and ``memcli undo`` reverts the last.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from memcli.errors import MemcliError, StoreError, UsageError
from memcli.results import Result, omit_empty
from memcli.share.attributes import ATTRIBUTES, DRIVER, MERGED, enforce_attributes
from memcli.store import Store, atomic
from memcli.store.atomic import StoreLock
from memcli.store.format import parse_entry
from memcli.store.git_command import git
from memcli.store.identity import FORGOTTEN, ORIGIN_FILE, drawn_origin, is_shared, local_origin, tombstone_seqs
from memcli.store_state import UNIQUE

TRAILER = "Memcli-Op"
ORIGIN_TRAILER = "Memcli-Origin"  # the clone that made the change (its origin): undo takes back its own
UNDOABLE = ("ingest", "remember", "consolidate", "forget")  # forget is refused, with the reason
UNDO_DEPTH = 200  # commits looked back through for the change to undo
KEPT = (*MERGED, "config.toml", ".gitattributes", ".gitignore")
IGNORE = ("# memcli: only the store's own files are shared; locks, jobs, KV blocks and this clone's origin "
          f"({ORIGIN_FILE}) stay local\n*\n!docs/\n" + "".join(f"!{name}\n" for name in KEPT))


@dataclass
class Repo:
    top: Path  # the work tree's top folder
    store: Path  # the store's folder, relative to ``top`` ("." when the store is the repository)

    def run(self, *args: str, check: bool = True, env: dict | None = None) -> subprocess.CompletedProcess:
        return git(self.top, *args, check=check, env=env)

    @property
    def spec(self) -> str:
        return str(self.store)


def repo_of(root: Path) -> Repo | None:
    """The git work tree holding the store, or None."""
    if shutil.which("git") is None or not root.exists():
        return None
    done = git(root, "rev-parse", "--show-toplevel", check=False)
    if done.returncode != 0:
        return None
    top = Path(done.stdout.strip()).resolve()
    return Repo(top, root.resolve().relative_to(top))


def shared_repo(store: Store) -> Repo | None:
    """The repository of a shared store (None when the store is not shared or not in git)."""
    return repo_of(store.root) if is_shared(store.read_state()) else None


def identity_env(repo: Repo) -> dict:
    """An author for memcli's commits where git has none configured (a fresh machine, CI)."""
    env = {}
    if not repo.run("config", "user.name", check=False).stdout.strip():
        env.update(GIT_AUTHOR_NAME="memcli", GIT_COMMITTER_NAME="memcli")
    if not repo.run("config", "user.email", check=False).stdout.strip():
        env.update(GIT_AUTHOR_EMAIL="memcli@localhost", GIT_COMMITTER_EMAIL="memcli@localhost")
    return env


def driver_command() -> str:
    return f"{shlex.quote(sys.executable)} -m memcli merge-driver %O %A %B %P"


def enforce(store: Store, repo: Repo) -> list[str]:
    """memcli's merge attributes in the store's ``.gitattributes`` and the clone's ``info/attributes``
    (:mod:`memcli.share.attributes`); the store's file when a commit had changed it."""
    info = Path(repo.run("rev-parse", "--git-path", "info/attributes").stdout.strip())
    return enforce_attributes(store.root, repo.store, info if info.is_absolute() else repo.top / info)


def configure_driver(repo: Repo) -> None:
    repo.run("config", f"merge.{DRIVER}.name", "memcli: merge a store's files entry by entry")
    repo.run("config", f"merge.{DRIVER}.driver", driver_command())


def problems(store: Store) -> list[str]:
    """What keeps a shared store's merges from working (``memcli doctor``); empty when all is set."""
    repo = shared_repo(store)
    if repo is None:
        return [] if not is_shared(store.read_state()) else [
            f"{store.root} is a shared store but not in a git work tree (or git is missing)"]
    out = []
    try:
        attributes = (store.root / ".gitattributes").read_text(encoding="utf-8")
    except OSError:
        attributes = ""
    missing = [p for p in MERGED if f"{p} merge={DRIVER}" not in attributes]
    if missing:
        out.append(f"{store.root / '.gitattributes'}: no merge={DRIVER} for {', '.join(missing)}")
    files = {(repo.store / name).as_posix(): name for name in MERGED if "*" not in name}
    said = repo.run("check-ignore", "--no-index", "--", *files, check=False).stdout.splitlines()
    ignored = [files[path] for path in said if path in files]
    if ignored:  # an ignore file an older memcli wrote, before the file existed
        out.append(f"git ignores {', '.join(ignored)} in {store.root}: clones do not share them "
                   "(run `memcli init --git` again to rewrite the store's .gitignore)")
    driver = repo.run("config", f"merge.{DRIVER}.driver", check=False).stdout.strip()
    if not driver:
        out.append(f"this clone's git config has no merge.{DRIVER}.driver (run `memcli sync` or `memcli init --git`)")
    elif "merge-driver" not in driver:
        out.append(f"merge.{DRIVER}.driver is {driver!r}, not memcli's")
    elif not shutil.which(shlex.split(driver)[0]):
        out.append(f"merge.{DRIVER}.driver runs {shlex.split(driver)[0]}, which is not there any more "
                   "(run `memcli init --git` again)")
    return out


# ---------------------------------------------------------------- init


@dataclass
class ShareResult(Result):
    repository: str
    store: str
    created_repository: bool
    commit: str | None


def share(store: Store) -> ShareResult:
    """Make ``store`` shared through the git work tree it is in (one is made in the store when there
    is none): unique seqs from now on, the attributes, the ignore file, the driver, one commit."""
    repo = repo_of(store.root)
    created = repo is None
    if created:
        git(store.root, "init", "-q")
        repo = repo_of(store.root)
        assert repo is not None
    probe = (repo.store / "state.json").as_posix()
    if repo.run("check-ignore", "-q", "--no-index", "--", probe, check=False).returncode == 0:
        raise UsageError(f"git ignores the store's files ({probe})",
                         hint=f"take {repo.store.as_posix()} out of the repository's .gitignore, then run this again")
    with store.writing() as txn:
        state = store.read_state()
        if not is_shared(state):
            state.update(ids=UNIQUE, format=max(int(state.get("format", 1)), 2))
            # this clone's origin drawn now and listed, so every clone made from here avoids it
            state["origins"] = sorted({*map(int, state.get("origins", [])), local_origin(store.root, state)})
            txn.write("state.json", json.dumps(state) + "\n")
        txn.write(".gitattributes", ATTRIBUTES)
        txn.write(".gitignore", IGNORE)
    configure_driver(repo)
    enforce(store, repo)
    sha = commit(store, "share", "memcli: share this store through git", allow_empty=False)
    return ShareResult(str(repo.top), str(store.root), created, sha)


# ---------------------------------------------------------------- commits


def dirty(repo: Repo) -> bool:
    return bool(repo.run("status", "--porcelain", "--", repo.spec).stdout.strip())


def commit(store: Store, op: str, message: str, *, allow_empty: bool = False, repo: Repo | None = None,
           locked: bool = False) -> str | None:
    """Commit the store's files (and only them) with ``message`` and a ``Memcli-Op: op`` trailer;
    the new commit's id, or None when nothing changed. Under the store's lock, so no memcli write
    lands half-way through ``git add``."""
    repo = repo or shared_repo(store)
    if repo is None:
        return None
    if not locked:
        with StoreLock(store.root, exclusive=True, timeout=store.lock_timeout):
            return commit(store, op, message, allow_empty=allow_empty, repo=repo, locked=True)
    if not repo.run("config", f"merge.{DRIVER}.driver", check=False).stdout.strip():
        configure_driver(repo)  # a fresh clone: the driver lives in each clone's own config
        enforce(store, repo)
    atomic.recover(store.root)  # a transaction a crash left half-applied is finished before git reads the files
    repo.run("add", "-A", "--", repo.spec)
    staged = repo.run("diff", "--cached", "--quiet", "--", repo.spec, check=False).returncode != 0
    if not staged and not allow_empty:
        return None
    origin = drawn_origin(store.root)
    trailers = f"{TRAILER}: {op}" + (f"\n{ORIGIN_TRAILER}: {origin}" if origin is not None else "")
    repo.run("commit", "-q", "--no-verify", "-m", f"{message}\n\n{trailers}", "--", repo.spec,
             env=identity_env(repo))
    return repo.run("rev-parse", "HEAD").stdout.strip()


def record_if_shared(store: Store, op: str, message: str, warn) -> str | None:
    """:func:`record`, when the store is shared through git (a state that cannot be read is a warning:
    the change is made, only its commit is in question)."""
    try:
        shared = is_shared(store.read_state())
    except MemcliError as exc:
        warn(f"the change is saved; whether to commit it to git could not be told: {exc.message}")
        return None
    return record(store, op, message, warn) if shared else None


def record(store: Store, op: str, message: str, warn=None) -> str | None:
    """:func:`commit` after a change that is already safe on disk: a git failure is a warning."""
    try:
        return commit(store, op, message)
    except (StoreError, OSError) as exc:
        if warn is not None:
            warn(f"the change is saved but was not committed to git: {exc}")
        return None


# ---------------------------------------------------------------- log and undo


@dataclass
class Change(Result):
    commit: str
    time: str
    author: str
    op: str | None  # None: a commit memcli did not make (a person's, a merge)
    message: str
    reverts: str | None = omit_empty()  # an undo: the commit it took back
    origin: int | None = omit_empty()  # the clone that made it (memcli's changes)


@dataclass
class History(Result):
    store: str
    changes: list[Change]


def history(store: Store, limit: int = 20) -> History:
    return History(str(store.root), log(store, limit))


def log(store: Store, limit: int = 20) -> list[Change]:
    repo = required(store)
    out = repo.run("log", f"-n{limit}", "--format=%H%x1f%aI%x1f%an%x1f%B%x1e", "--", repo.spec).stdout
    changes = []
    for record_text in out.split("\x1e"):
        if not record_text.strip():
            continue
        sha, when, author, body = record_text.strip("\n").split("\x1f", 3)
        op = _trailer(body, TRAILER)
        origin = _trailer(body, ORIGIN_TRAILER)
        reverts = re.search(r"This reverts commit ([0-9a-f]{40})", body) if op == "undo" else None
        changes.append(Change(sha, when, author, op, body.strip().splitlines()[0] if body.strip() else "",
                              reverts[1] if reverts else None, int(origin) if origin and origin.isdigit() else None))
    return changes


def _trailer(body: str, name: str) -> str | None:
    return next((line.split(":", 1)[1].strip() for line in body.splitlines() if line.startswith(f"{name}:")), None)


@dataclass
class Undone(Result):
    reverted: str  # the commit taken back
    op: str
    message: str
    commit: str  # the revert commit
    entries_removed: list[int] = field(default_factory=list)  # seqs the undone change had added


def undo(store: Store, running: Callable[[], bool] = lambda: False, *, any_clone: bool = False) -> Undone:
    """Revert this clone's last memcli change of the store (``any_clone``: the last of any clone's),
    as a new commit (history is never rewritten), after checking that the revert gives back exactly
    the entries the store had before that change. ``running``: whether a consolidation runs on the
    store (asked once the lock is held)."""
    repo = required(store)
    with StoreLock(store.root, exclusive=True, timeout=store.lock_timeout):
        if running():
            raise StoreError("a consolidation is running on this store",
                             hint="wait for it (`memcli consolidate --wait`)")
        if dirty(repo):
            raise StoreError(f"{store.root} has changes not committed to git",
                             hint="commit them (`memcli sync` does) before undoing")
        if repo.run("diff", "--cached", "--quiet", check=False).returncode != 0:
            raise StoreError("the repository has staged changes, which the undo's commit would take in",
                             hint="commit or unstage them first")
        changes = log(store, UNDO_DEPTH)
        newest = _last_change(changes)
        last = newest if any_clone else _last_change(changes, origin=drawn_origin(store.root))
        if last is None and newest is not None:
            raise UsageError(f"this clone made no change to undo; the newest is {newest.author}'s {newest.op} "
                             f"({newest.commit[:12]}: {newest.message})",
                             hint="`memcli undo --any` takes back the newest change whoever made it")
        if last is None:
            raise UsageError("nothing to undo: no change memcli made is in this store's history")
        if last.op == "forget":
            raise UsageError("a forget cannot be undone: it is for good (git's history still holds the text; "
                             "see docs/reference.md on sharing)")
        before, made = entry_seqs(repo, f"{last.commit}^"), entry_seqs(repo, last.commit)
        now = entry_seqs(repo, "HEAD")
        done = repo.run("revert", "--no-commit", last.commit, check=False)
        if done.returncode != 0:
            repo.run("revert", "--abort", check=False)
            raise StoreError(f"the change {last.commit[:12]} cannot be reverted cleanly: later changes build on it",
                             hint="undo those first, or revert it by hand with git")
        # the guard: exactly the entries the change added go, and those it took out come back
        wanted = (now - (made - before)) | (before - made)
        after = entry_seqs(repo, None)
        if after != wanted:
            repo.run("revert", "--abort", check=False)
            raise StoreError("undo would not give back the entries the store had without that change "
                             f"({len(wanted - after)} lost, {len(after - wanted)} more); nothing was changed")
        added = sorted(made - before)
        title = f"memcli undo: the {last.op} of {last.commit[:12]}"
        repo.run("commit", "-q", "--no-verify", "-m", f"{title}\n\nThis reverts commit {last.commit}: "
                 f"{last.message}\n\n{TRAILER}: undo", env=identity_env(repo))
        sha = repo.run("rev-parse", "HEAD").stdout.strip()
    return Undone(last.commit, last.op, last.message, sha, added)


def _last_change(changes: list[Change], origin: int | None | bool = False) -> Change | None:
    """The newest change memcli made that is not an undo and was not undone (successive undos walk
    back through the history); with ``origin``, made by that clone."""
    undone = {c.reverts for c in changes if c.reverts}
    for change in changes:
        if change.op in UNDOABLE and change.commit not in undone and (origin is False or change.origin == origin):
            return change
        if change.op == "share":
            break
    return None


def entry_seqs(repo: Repo, rev: str | None) -> set[int]:
    """Every entry seq in the store at ``rev`` (None: the index, i.e. the staged revert)."""
    prefix = "" if str(repo.store) == "." else f"{repo.store.as_posix()}/"
    tree = rev if rev is not None else repo.run("write-tree").stdout.strip()
    names = repo.run("ls-tree", "-r", "--name-only", tree, "--", repo.spec).stdout.split("\n")
    wanted = [n for n in names if n == f"{prefix}CURRENT.md" or (n.startswith(f"{prefix}docs/") and n.endswith(".md"))]
    seqs: set[int] = set()
    for name in wanted:
        text = repo.run("show", f"{tree}:{name}").stdout
        for line in text.split("\n"):
            entry = parse_entry(line)
            if entry is not None and entry.seq is not None:
                seqs.add(entry.seq)
    return seqs


def tombstones_at(repo: Repo, rev: str) -> set[int]:
    """The seqs ``forgotten.txt`` holds at ``rev`` (the clones' forget tombstones)."""
    prefix = "" if str(repo.store) == "." else f"{repo.store.as_posix()}/"
    return tombstone_seqs(repo.run("show", f"{rev}:{prefix}{FORGOTTEN}", check=False).stdout)


def required(store: Store) -> Repo:
    repo = shared_repo(store)
    if repo is None:
        raise UsageError(f"{store.root} is not a store shared through git",
                         hint="`memcli init --git` shares it (inside a git work tree, or in a new one)")
    return repo
