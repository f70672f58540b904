"""A damaged ``state.json`` put back (``memcli doctor --repair``): the newest version in git's
history that is a valid state, else a state made from the store itself, with its counters raised
past every seq the store holds (so no seq is handed out twice) and the origins its entries show."""

from __future__ import annotations

import json

from memcli import parsing
from memcli.share.git import repo_of
from memcli.store import Store
from memcli.store.folder import read_regular
from memcli.store.identity import origin_of
from memcli.store_state import ORIGINS, UNIQUE, state_problem


def repair_state(store: Store) -> str | None:
    """Repair the store's state when it is damaged; what was done (None: nothing was needed)."""
    with store.writing() as txn:
        try:
            state = parsing.loads(read_regular(store.state_path).decode("utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            state = None
        if state is not None and state_problem(state) is None:
            return None
        good, source = _from_history(store)
        if good is None:
            shared = (store.root / ".gitattributes").exists()
            good = {"format": 2, "ids": UNIQUE} if shared else {"format": 1, "next_seq": 1}
            source = "made anew from the store"
        seqs = [e.seq for doc_id in store.all_ids() for _, e in store.load(doc_id).doc.entries() if e.seq is not None]
        small = [s for s in seqs if origin_of(s) is None]
        unique = [s for s in seqs if origin_of(s) is not None]
        if small:
            good["next_seq"] = max(int(good.get("next_seq", 1)), max(small) + 1)
        if good.get("ids") == UNIQUE:
            good["next_tick"] = max(int(good.get("next_tick", 0)), max((s // ORIGINS for s in unique), default=0) + 1)
            good["origins"] = sorted({*good.get("origins", []), *(origin_of(s) for s in unique)})
        txn.write("state.json", json.dumps(good) + "\n")
    return f"state.json put back ({source}), counters past the store's {len(seqs)} entries"


def _from_history(store: Store) -> tuple[dict | None, str]:
    repo = repo_of(store.root)
    if repo is None:
        return None, ""
    name = (repo.store / "state.json").as_posix()
    shas = repo.run("log", "-n200", "--format=%H", "--", name, check=False).stdout.split()
    for sha in shas:
        shown = repo.run("show", f"{sha}:{name}", check=False)
        if shown.returncode != 0:
            continue
        try:
            state = parsing.loads(shown.stdout)
        except ValueError:
            continue
        if state_problem(state) is None:
            return state, f"from commit {sha[:12]}"
    return None, ""
