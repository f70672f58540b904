"""Counting a store's entries: what the fault-injection tests and benchmark check after every interrupt."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from memcli.store.folder import Store, read_regular
from memcli.store.format import parse_document


def seq_counts(root: Path) -> Counter:
    """How many times each seq appears in the store's documents and CURRENT (every one must be 1).

    Reads the files as they are (no recovery is run) and raises if a document does not parse.
    """
    store = Store(root, lock_timeout=None)
    seqs: Counter = Counter()
    for doc_id in store.all_ids():
        doc = parse_document(read_regular(store.doc_path(doc_id)).decode("utf-8"))
        seqs.update(e.seq for _, e in doc.entries())
    return seqs


def outside_snapshot(folder: Path) -> dict[str, bytes]:
    """Every file below ``folder`` with its bytes (to show nothing outside a store changed)."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and not p.is_symlink()}
