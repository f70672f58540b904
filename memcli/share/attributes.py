"""memcli's merge attributes, enforced: a teammate's commit cannot change how a store's files merge.

git reads attributes from every ``.gitattributes`` on a file's path (a deeper one wins) and, above
all of them, from the clone's own ``info/attributes``, which is never committed. So memcli writes
its lines for the store's files in both places: the store's ``.gitattributes`` (put back as memcli
wrote it whenever it differs: a ``* merge=union`` there made ``state.json`` two JSON objects) and a
block of the clone's ``info/attributes`` that also unsets what could rewrite the files on their way
in or out of git (filters, line-ending conversion, encodings, ``ident``)."""

from __future__ import annotations

from pathlib import Path

from memcli.store.aliases import ALIASES
from memcli.store.atomic import atomic_write
from memcli.store.identity import FORGOTTEN

DRIVER = "memcli"
MERGED = ("CURRENT.md", "docs/*.md", "ingested.txt", FORGOTTEN, ALIASES, "state.json")
ATTRIBUTES = "".join(f"{pattern} merge={DRIVER}\n" for pattern in MERGED)
BEGIN, END = "# memcli: begin", "# memcli: end"
GUARDS = "-text diff -filter -ident -working-tree-encoding -eol"


def enforce_attributes(store_root: Path, store_in_repo: Path, info: Path) -> list[str]:
    """Put memcli's attribute lines back where they differ: the store's ``.gitattributes`` and the block
    of the clone's ``info`` file (``store_in_repo``: the store's folder relative to the work tree's
    top). Returns the store's file when it was repaired (the clone's own block is written silently: a
    fresh clone has none yet)."""
    repaired = []
    path = store_root / ".gitattributes"
    try:
        current = path.read_text(encoding="utf-8") if not path.is_symlink() else None
    except OSError:
        current = None
    if current != ATTRIBUTES:
        if path.is_symlink():
            path.unlink()
        atomic_write(path, ATTRIBUTES)
        repaired.append(str(path))
    prefix = "" if str(store_in_repo) == "." else f"{store_in_repo.as_posix()}/"
    label = f"{BEGIN} (the store {prefix or './'})"
    block = "\n".join([label, *(f"/{prefix}{pattern} merge={DRIVER} {GUARDS}" for pattern in MERGED), END]) + "\n"
    try:
        text = info.read_text(encoding="utf-8")
    except OSError:
        text = ""
    kept = _without_block(text, label)
    if kept + block != text:
        info.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(info, kept + block)
    return repaired


def _without_block(text: str, label: str) -> str:
    out, inside = [], False
    for line in text.splitlines(keepends=True):
        if line.rstrip("\n") == label:
            inside = True
        elif inside and line.strip() == END:
            inside = False
        elif not inside:
            out.append(line)
    return "".join(out)
