"""KV blocks: saved llama.cpp sequence states of memory units, so memory is restored instead of re-read.

``blocks`` stores and checks them (no llama.cpp needed: ``memcli kv ls``
and consolidation's invalidation work without a model); ``fingerprint``
describes the running model context a block must match; ``engine`` saves
and restores them in a live llama.cpp context; ``context`` turns the store
into the units of the memory context (header, documents, CURRENT).
"""

from __future__ import annotations

from pathlib import Path

from memcli.errors import StoreError
from memcli.llm import uses_server
from memcli.paths import resolve_cache_dir

FOLDERS = ("blocks", "sessions", "units", "latent")  # what memcli keeps in the KV directory


def read_only_root(store) -> Path:
    """Where a read-only MCP server keeps its KV state (it writes nothing in the store): its cache folder."""
    return store.cache_folder / "kv"


def kv_root(store, cfg) -> Path:
    """The KV directory: ``kv.dir`` when set, else ``kv/`` inside the store. A link where the
    directory or one of its folders would be is refused, never followed (forget deletes files in
    them); memcli's own folders there are kept private (0700: KV blocks are memory in another form)."""
    root = Path(cfg.kv_dir).expanduser() if cfg.kv_dir else store.root / "kv"
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


def engine_for(model, store, cfg, *, verify: bool = False):
    """The KV engine of ``model`` (local, opened with ``kv_sequences=2``) over the store's blocks."""
    return _engine(model, block_store(store, cfg), verify)


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
