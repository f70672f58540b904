"""``memcli sync``: commit the store's changes, merge the remote's with the entry merge, push.

All under the store's lock, so no memcli write lands in the middle. The merge is git's, with
``memcli merge-driver`` for the store's files (:mod:`memcli.share.merge`); what a file-by-file merge
cannot settle is settled here: a document one side removed and the other changed keeps the
changed one, and :func:`memcli.share.reconcile.reconcile` then leaves each entry once in the whole
store. A conflict outside the store (the project's own files) is not memcli's to settle: the merge
is aborted and the store left as it was. A push the remote refuses because it moved on meanwhile
is retried after another merge.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from memcli.errors import StoreError, UsageError
from memcli.forget_caches import clean_caches, expect_purge, held, purge_done, tombstone_digest, tombstones
from memcli.results import Result, omit_empty
from memcli.share.git import (
    Repo,
    commit,
    configure_driver,
    enforce,
    entry_seqs,
    identity_env,
    problems,
    required,
    tombstones_at,
)
from memcli.share.locks import begin_merge, clear_stale, end_merge
from memcli.share.reconcile import reconcile
from memcli.store import Store, atomic
from memcli.store.atomic import StoreLock
from memcli.store.identity import drawn_origin, origin_of, redraw

ATTEMPTS = 3


@dataclass
class Synced(Result):
    store: str
    repository: str
    remote: str
    branch: str
    committed: str | None = None  # the commit of local changes made outside memcli's own commits
    merged: int = 0  # commits taken from the remote
    settled: list[str] = field(default_factory=list)  # files git left in conflict that the sync settled
    duplicates: int = 0  # entries both sides held, kept once
    forgotten: int = 0  # entries a clone forgot, taken out here
    pushed: bool = False
    head: str = ""
    cleared: list[str] = field(default_factory=list)  # stale git locks and merge temporaries a killed sync left
    repaired: list[str] = field(default_factory=list)  # what was put back: memcli's merge attributes
    origin: dict | None = None  # {"from", "to"}: another clone wrote with this clone's origin; a new one drawn
    ignored: list[str] = field(default_factory=list)  # files the history tracks that are this clone's own notes
    caches: dict = omit_empty(dict)  # what each cache dropped of the entries another clone forgot (as forget's)
    warnings: list[str] = omit_empty(list)  # a cache that could not be cleaned, and was dropped
    leaving: list = field(default_factory=list, metadata={"hidden": True})  # (document, entry) of this clone's
    # that another clone's forget took out in the merge, read before it (never shown: forgotten text)


def sync(store: Store, *, remote: str | None = None, push: bool = True,
         running: Callable[[], bool] = lambda: False) -> Synced:
    """``running``: whether a consolidation runs on the store (asked again once the lock is held: a
    consolidation lets the lock go between its flushes)."""
    repo = required(store)
    with StoreLock(store.root, exclusive=True, timeout=store.lock_timeout):
        cleared = clear_stale(repo, store.root)  # what a killed sync left (no git process running here)
        if _merging(repo):
            raise StoreError(f"{repo.top} is in the middle of a merge", hint="finish or abort it with git first")
        if problems(store):
            configure_driver(repo)  # a fresh clone: the driver lives in each clone's own config
        branch = repo.run("symbolic-ref", "--short", "HEAD").stdout.strip()
        remote = remote or repo.run("config", f"branch.{branch}.remote", check=False).stdout.strip() \
            or _only_remote(repo)
        result = Synced(store=str(store.root), repository=str(repo.top), remote=remote, branch=branch,
                        cleared=cleared)
        if running():
            raise StoreError("a consolidation is running on this store; sync would commit it half-done",
                             hint="wait for it (`memcli consolidate --wait`), then sync")
        atomic.recover(store.root)
        result.repaired = enforce(store, repo)
        result.committed = commit(store, "sync", "memcli sync: changes made outside memcli", repo=repo, locked=True)
        for _ in range(ATTEMPTS):
            repo.run("fetch", "-q", remote)
            theirs = f"refs/remotes/{remote}/{branch}"
            if repo.run("rev-parse", "-q", "--verify", theirs, check=False).returncode == 0:
                _merge(store, repo, theirs, result)
            if not push:
                break
            done = repo.run("push", "-q", "-u", remote, f"HEAD:refs/heads/{branch}", check=False)
            if done.returncode == 0:
                result.pushed = True
                break
            if "rejected" not in done.stderr and "fetch first" not in done.stderr:
                raise StoreError(f"git push failed: {done.stderr.strip()}")
        else:
            raise StoreError(f"the remote {remote} kept moving: {ATTEMPTS} merges were pushed too late",
                             hint="run `memcli sync` again")
        result.head = repo.run("rev-parse", "HEAD").stdout.strip()
        result.ignored = _tracked_notes(repo)
    return result


def _tracked_notes(repo: Repo) -> list[str]:
    """Forget's notes as the history tracks them (someone's ``git add -f``): a dry run's or an
    interrupted forget's word belongs to the clone that made it, so memcli reads its own, kept
    outside the work tree (:func:`memcli.forget_caches.note_path`), and never these."""
    from memcli.forget_caches import TREE_NOTES

    prefix = "" if str(repo.store) == "." else f"{repo.store.as_posix()}/"
    listed = repo.run("ls-files", "-z", "--", *(prefix + name for name in TREE_NOTES), check=False).stdout
    return [path for path in listed.split("\0") if path]


def _origin_clash(store: Store, repo: Repo, theirs: str) -> int | None:
    """This clone's origin, when the remote holds entries of that origin that this clone never wrote
    (nor forgot): another clone (a restored or copied folder, a cloned machine) draws the same seqs."""
    mine = drawn_origin(store.root)
    if mine is None:
        return None
    base = repo.run("merge-base", "HEAD", theirs, check=False).stdout.strip()
    known = entry_seqs(repo, "HEAD") | (entry_seqs(repo, base) if base else set()) | tombstones(store)
    return mine if any(origin_of(seq) == mine for seq in entry_seqs(repo, theirs) - known) else None


def _merging(repo: Repo) -> bool:
    """A merge is in progress (git's MERGE_HEAD, wherever this work tree keeps it)."""
    path = Path(repo.run("rev-parse", "--git-path", "MERGE_HEAD").stdout.strip())
    return (path if path.is_absolute() else repo.top / path).exists()


def _only_remote(repo: Repo) -> str:
    remotes = repo.run("remote").stdout.split()
    if len(remotes) != 1:
        raise UsageError("no remote to sync with" if not remotes else
                         f"this repository has {len(remotes)} remotes: name one with --remote",
                         hint=None if remotes else "add one: git remote add origin URL")
    return remotes[0]


def _merge(store: Store, repo: Repo, theirs: str, result: Synced) -> None:
    count = repo.run("rev-list", "--count", f"HEAD..{theirs}").stdout.strip()
    if count == "0":
        return
    env = identity_env(repo)
    clash = _origin_clash(store, repo, theirs)
    here = tombstones(store)
    leaving = held(store, tombstones_at(repo, theirs) - here)  # another clone's forget, here
    if leaving:
        expect_purge(store, [doc for doc, _ in leaving], here)  # the caches must lose them once the merge is in
    begin_merge(store.root, repo.run("rev-parse", theirs).stdout.strip())
    done = repo.run("merge", "-q", "--no-edit", theirs, check=False, env=env)
    if done.returncode != 0:
        try:
            _settle(store, repo, result, done.stderr.strip() or done.stdout.strip())
        except BaseException:
            end_merge(store.root)
            raise
    repaired = enforce(store, repo)  # their commit may have changed them: memcli's own again, before anything is read
    result.repaired += [p for p in repaired if p not in result.repaired]
    txn = atomic.Transaction(store.root)
    try:
        fixed = reconcile(store, txn)
        if clash is not None:  # another clone writes with this clone's origin: this one draws a new one
            state = store.read_state()
            result.origin = {"from": clash, "to": redraw(store.root, state)}
            state["origins"] = sorted({*state.get("origins", []), result.origin["to"]})
            txn.write("state.json", json.dumps(state) + "\n")
        txn.commit()
    except BaseException:
        txn.abort()
        raise
    result.duplicates += fixed.duplicates
    result.forgotten += fixed.forgotten
    repo.run("add", "-A", "--", repo.spec)
    if _merging(repo):
        repo.run("commit", "-q", "--no-verify", "--no-edit", env=env)
    elif fixed.changed or clash is not None or repaired:
        repo.run("commit", "-q", "--no-verify", "-m", f"memcli sync: {fixed.duplicates} entries held twice kept "
                 f"once, {fixed.forgotten} forgotten" + (", memcli's merge attributes put back" if repaired else "")
                 + (f", a new origin for this clone ({result.origin['to']})" if clash is not None else ""),
                 "--", repo.spec, env=env)
    end_merge(store.root)
    result.merged += int(count)
    result.leaving += leaving


def _settle(store: Store, repo: Repo, result: Synced, said: str) -> None:
    """Settle what git left unmerged in the store (a document removed on one side and changed on
    the other: the changed one is kept); abort the merge if anything outside the store conflicts."""
    status = repo.run("status", "--porcelain", "-z").stdout.split("\0")
    prefix = "" if str(repo.store) == "." else f"{repo.store.as_posix()}/"
    unmerged = [(item[:2], item[3:]) for item in status if len(item) > 3 and
                (item[:2] in ("DD", "AU", "UD", "UA", "DU", "AA", "UU"))]
    outside = [path for _, path in unmerged if not path.startswith(prefix)]
    inside = [(code, path) for code, path in unmerged if path.startswith(prefix)]
    if not unmerged:  # git refused to start (staged changes, local changes it would overwrite)
        repo.run("merge", "--abort", check=False)
        raise StoreError(f"git merge refused: {said}; the store is as it was",
                         hint="commit or stash the project's own changes, then run `memcli sync` again")
    if outside:
        repo.run("merge", "--abort", check=False)
        raise StoreError(f"git could not merge files outside the store ({', '.join(outside[:5])}); the store is as "
                         "it was", hint="merge with git and settle those files, then run `memcli sync` again")
    unreadable = [path for code, path in inside if code in ("UU", "AA")]
    if unreadable:  # both changed and the driver could not read a version: a person's to settle
        repo.run("merge", "--abort", check=False)
        raise StoreError(f"the entry merge could not read {', '.join(unreadable[:5])}; the store is as it was",
                         hint="`memcli doctor` checks the files; merge them with git, then run `memcli sync` again")
    for code, path in inside:
        if code == "DD":
            repo.run("rm", "-q", "--cached", "--", path, check=False)
        else:  # changed (or added) on one side, removed on the other: keep the changed one
            repo.run("checkout", "--theirs" if code in ("DU", "UA") else "--ours", "--", path)
            repo.run("add", "--", path)
        result.settled.append(path)


def sync_memory(memory, *, remote: str | None = None, push: bool = True):
    """:meth:`memcli.memory.Memory.sync`'s work: :func:`sync`, then the entries another clone forgot leave this
    clone's caches too (:func:`memcli.forget_caches.clean_caches`)."""
    memory.writable()
    index = memory.index  # opened before the merge: the caches are settled for what is here now
    before = tombstone_digest(memory.store)
    result = sync(memory.store, remote=remote, push=push, running=memory.consolidating)
    if result.leaving:
        clean_caches(memory.store, memory.settings, index, result, [e for _, e in result.leaving],
                     sorted({doc for doc, _ in result.leaving}), memory.drop_caches)
    elif result.merged:
        # the tombstones that came name nothing these caches held
        purge_done(memory.store, memory.settings, before)
    return result
