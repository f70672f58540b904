"""KV blocks: saved llama.cpp sequence states of memory units, so memory is restored instead of re-read.

``blocks`` stores and checks them (no llama.cpp needed: ``memcli kv ls``
and consolidation's invalidation work without a model); ``fingerprint``
describes the running model context a block must match; ``engine`` saves
and restores them in a live llama.cpp context; ``context`` turns the store
into the units of the memory context (header, documents, CURRENT).
"""

from __future__ import annotations

import json
from pathlib import Path

from memcli import parsing
from memcli.errors import StoreError
from memcli.llm import uses_server
from memcli.paths import ensure_private_dir, resolve_cache_dir
from memcli.store.atomic import atomic_write
from memcli.store.folder import read_regular

FOLDERS = ("blocks", "sessions", "units", "latent")  # what memcli keeps in the KV directory


def read_only_root(store) -> Path:
    """Where a read-only MCP server keeps its KV state (it writes nothing in the store): its cache folder."""
    return store.cache_folder / "kv"


def kv_dir(store, cfg) -> Path:
    """Where the KV directory is: ``kv.dir`` when set, else ``kv/`` inside the store (nothing checked nor made)."""
    return Path(cfg.kv_dir).expanduser() if cfg.kv_dir else store.root / "kv"


def kv_root(store, cfg) -> Path:
    """The KV directory (:func:`kv_dir`). A link where the
    directory or one of its folders would be is refused, never followed (forget deletes files in
    them); memcli's own folders there are kept private (0700: KV blocks are memory in another form)."""
    root = kv_dir(store, cfg)
    for path in (root, *(root / name for name in FOLDERS)):
        if path.is_symlink():
            raise StoreError(f"{path} is a symbolic link; memcli does not follow links where it keeps KV blocks",
                             hint=f"remove the link {path}; memcli makes the folder again")
    if root.is_dir():
        for path in (root, *(root / name for name in FOLDERS)):
            try:
                if path.is_dir() and path.stat().st_mode & 0o077:
                    path.chmod(0o700)
            except OSError:
                pass
    return root


def block_store(store, cfg):
    from memcli.kv.blocks import BlockStore

    return BlockStore(kv_root(store, cfg) / "blocks")


def blocks_to_write(store, cfg):
    """:func:`block_store` for a user that saves blocks (chat, ``kv build``, prompt prefixes): a folder
    outside the store is noted first (:func:`note_folder`)."""
    note_folder(store, cfg)
    return block_store(store, cfg)


USED = "folders.json"  # in the store's own kv/: the KV folders outside it (kv.dir) used with this store
CLAIMS = "stores.json"  # in such a folder: the stores that use it


def note_folder(store, cfg) -> None:
    """A KV folder outside the store (``kv.dir``, as one shell's ``MEMCLI_KV_DIR`` sets it) is noted in the
    store's own ``kv/folders.json``, and the store in the folder's ``stores.json``, so that a forget run
    without the same setting finds the folder and cleans it too (:func:`used_folders`). Nothing is noted by
    a read-only reader, or for the store's own folder."""
    if not cfg.kv_dir or getattr(store, "read_only", False):
        return
    root = kv_root(store, cfg)
    own = store.root / "kv"
    if root.resolve() == own.resolve():
        return
    mine = str(store.root.resolve())
    try:
        claims = _listed(root / CLAIMS)
        if mine not in claims:
            atomic_write(ensure_private_dir(root) / CLAIMS, json.dumps(sorted({*claims, mine})))
        used = _listed(own / USED)
        if str(root.resolve()) not in used:
            atomic_write(ensure_private_dir(own) / USED, json.dumps(sorted({*used, str(root.resolve())})))
    except OSError:
        pass  # a folder that cannot be written is left unnoted: a forget with the same setting still cleans it


def used_folders(store) -> list[Path]:
    """The KV folders outside the store that it was used with (:func:`note_folder`) and that still claim it:
    a folder named in the store's note but not claiming the store (a note that came with a copied store or a
    commit) is never cleaned, nor is a link."""
    mine = str(store.root.resolve())
    out = []
    for name in sorted(_listed(store.root / "kv" / USED)):
        folder = Path(name)
        if folder.is_absolute() and folder.is_dir() and not folder.is_symlink() and mine in _listed(folder / CLAIMS):
            out.append(folder)
    return out


def _listed(path: Path) -> set[str]:
    try:
        data = parsing.loads(read_regular(path))
    except (OSError, ValueError, StoreError):
        return set()
    return {item for item in data if isinstance(item, str)} if isinstance(data, list) else set()


def engine_for(model, store, cfg, *, verify: bool = False):
    """The KV engine of ``model`` (local, opened with ``kv_sequences=2``) over the store's blocks."""
    return _engine(model, blocks_to_write(store, cfg), verify)


def keeps_blocks(cfg) -> bool:
    """Whether the configured model is local (llama.cpp), so its prompts can be kept as KV blocks."""
    return cfg.model_backend == "llama" and not uses_server(cfg)


def keep_prompt_prefixes(model, blocks) -> None:
    """Let ``model`` (local, opened with ``kv_sequences=2``) keep its calls' shared prompt prefixes as
    KV blocks in ``blocks`` (:mod:`memcli.kv.prompt_blocks`)."""
    from memcli.kv.prompt_blocks import PromptBlocks

    model.prefix_cache = PromptBlocks(_engine(model, blocks, False))


def _engine(model, blocks, verify: bool):
    from memcli.kv.engine import KVEngine
    return KVEngine(model, blocks, sha_cache=resolve_cache_dir().path / "model-hashes.json", verify=verify)
