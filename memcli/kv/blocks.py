"""The block store: one file per saved sequence state, checked before it is ever loaded.

A block file is ``MEMCLI-KV 1\\n``, one line of JSON header, then the state
bytes llama.cpp wrote for the block's cells. The header carries the format
version, llama.cpp's state version, the model fingerprint (and its id), the
block's start position and token count, its parent's key, the unit it holds
(``doc:<id>`` with the document's content hash, ``header``, ``CURRENT``,
``session:<name>``), a CRC-32 of the state bytes, and a digest of the header
itself (so an edited position or token count is caught). The checksum is there to
catch corruption (a torn or damaged file): on a 2,000-token state (47 MB for
the default model) CRC-32 takes 31 ms here and sha256 52 ms, and a
cryptographic hash would add nothing against someone who can write the store
anyway.

A block's key is ``sha256(parent key, token ids)``: a chain of keys names an
exact token prefix. The model context is deliberately not part of the key:
a block made under other settings is found, refused by its header with a
message saying what differs, and rebuilt in place, so it can never load. Files are written
atomically; a file's modification time is its last use, and eviction drops
the least recently used blocks until the budget holds (a parent is used
whenever its children are, so children go first).
"""

from __future__ import annotations

import hashlib
import json
import mmap
import os
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from memcli import parsing
from memcli.errors import MemcliError, StoreError
from memcli.paths import ensure_private_dir
from memcli.store.atomic import atomic_write, open_regular

MAGIC = b"MEMCLI-KV 1\n"
SUMMARY_SUFFIX = ".kvs"  # a block's key summary (latent selection, memcli.kv.latent), beside its file
FORMAT_VERSION = 2  # 2: the header carries a digest of itself
PROMPT_UNIT = "prompt"  # the unit of prompt prefix blocks (:mod:`memcli.kv.prompt_blocks`): they may hold evidence


class BlockRefused(MemcliError):
    """A block that must not be loaded: another model context, a bad checksum, an unreadable file."""


def block_key(parent: str | None, tokens: list[int]) -> str:
    digest = hashlib.sha256()
    digest.update((parent or "").encode() + b"\0")
    digest.update(b"".join(int(t).to_bytes(4, "little", signed=True) for t in tokens))
    return digest.hexdigest()


@dataclass
class BlockHeader:
    key: str
    parent: str | None
    unit: str
    start: int
    n_tokens: int
    fingerprint_id: str
    fingerprint: dict
    state_version: int
    checksum: str
    size: int  # bytes of state
    created: float = field(default_factory=time.time)
    format: int = FORMAT_VERSION
    probe: dict | None = None  # the next-token logits' top ids and values at save time (--kv-verify)
    digest: str = ""  # sha256 of the other fields

    def to_dict(self) -> dict:
        return {"format": self.format, "key": self.key, "parent": self.parent, "unit": self.unit,
                "start": self.start, "n_tokens": self.n_tokens, "fingerprint_id": self.fingerprint_id,
                "fingerprint": self.fingerprint, "state_version": self.state_version,
                "checksum": self.checksum, "size": self.size, "created": self.created, "probe": self.probe,
                "digest": self.digest}

    def own_digest(self) -> str:
        fields = {k: v for k, v in self.to_dict().items() if k != "digest"}
        return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()

    @classmethod
    def from_dict(cls, data: dict) -> BlockHeader:
        return cls(key=data["key"], parent=data.get("parent"), unit=data["unit"], start=int(data["start"]),
                   n_tokens=int(data["n_tokens"]), fingerprint_id=data["fingerprint_id"],
                   fingerprint=data.get("fingerprint") or {}, state_version=int(data["state_version"]),
                   checksum=data["checksum"], size=int(data["size"]), created=float(data.get("created", 0)),
                   format=int(data.get("format", 1)), probe=data.get("probe"), digest=str(data.get("digest", "")))


@dataclass
class BlockInfo:
    header: BlockHeader
    path: Path
    file_size: int
    last_used: float

    def to_dict(self) -> dict:
        h = self.header
        return {"key": h.key, "parent": h.parent, "unit": h.unit, "start": h.start, "n_tokens": h.n_tokens,
                "fingerprint_id": h.fingerprint_id, "bytes": self.file_size, "last_used": round(self.last_used, 3)}


class BlockStore:
    def __init__(self, root: Path):
        self.root = root

    def path(self, key: str) -> Path:
        if len(key) != 64 or any(c not in "0123456789abcdef" for c in key):
            raise BlockRefused(f"not a block key: {key[:80]!r}")
        return self.root / key[:2] / f"{key}.kvb"

    # ------------------------------------------------------------ write / read

    def put(self, header: BlockHeader, state: bytes) -> Path:
        header.checksum = checksum(state)
        header.size = len(state)
        header.digest = header.own_digest()
        path = self.path(header.key)
        ensure_private_dir(path.parent)
        atomic_write(path, MAGIC + json.dumps(header.to_dict(), sort_keys=True).encode() + b"\n" + state)
        return path

    def header(self, key: str) -> BlockHeader | None:
        """The header of a stored block (None when there is none); raises BlockRefused when unreadable."""
        path = self.path(key)
        try:
            with _open(path) as fh:
                return _read_header(fh, path)
        except FileNotFoundError:
            return None

    def get(self, key: str, fingerprint_id: str, running: dict | None = None, *,
            verify_checksum: bool = True) -> tuple[BlockHeader, memoryview] | None:
        """A block's header and state, checked: None when absent, BlockRefused when it must not load.

        ``verify_checksum=False`` leaves the checksum to the caller (:func:`verify_state`), which
        may compute it while the state loads into a place it is not used from until the check passes.
        """
        path = self.path(key)
        try:
            with _open(path) as fh:
                header = _read_header(fh, path)
                state = _read_state(fh, header.size)
        except FileNotFoundError:
            return None
        check(header, state if verify_checksum else None, fingerprint_id, path, running)
        touch(path)
        return header, state

    def remove(self, key: str) -> int:
        """Delete block ``key`` (and the summary kept beside it, :mod:`memcli.kv.latent`); bytes freed."""
        path = self.path(key)
        path.with_suffix(SUMMARY_SUFFIX).unlink(missing_ok=True)
        try:
            size = path.lstat().st_size
            path.unlink()
            return size
        except FileNotFoundError:
            return 0

    # ------------------------------------------------------------ listing and upkeep

    def blocks(self) -> list[BlockInfo]:
        """Every block file with its header; unreadable files are listed with unit '(unreadable)'."""
        out = []
        if not self.root.exists():
            return out
        for path in sorted(self.root.glob("*/*.kvb")):
            try:
                st = path.lstat()
                with _open(path) as fh:
                    header = _read_header(fh, path)
            except FileNotFoundError:
                continue
            except BlockRefused:
                header = BlockHeader(key=path.stem, parent=None, unit="(unreadable)", start=0, n_tokens=0,
                                     fingerprint_id="", fingerprint={}, state_version=0, checksum="", size=0)
                st = path.lstat()
            out.append(BlockInfo(header, path, st.st_size, st.st_mtime))
        return out

    def orphans(self) -> int:
        """Remove summaries whose block is gone (deleted by hand, or a crash between the two unlinks)."""
        removed = 0
        for path in self.root.glob(f"*/*{SUMMARY_SUFFIX}") if self.root.exists() else ():
            if not path.with_suffix(".kvb").exists():
                path.unlink(missing_ok=True)
                removed += 1
        return removed

    def evict(self, budget_bytes: int, keep: set[str] = frozenset()) -> tuple[int, int]:
        """Drop least recently used blocks (not in ``keep``) until the store fits; (blocks, bytes) removed."""
        blocks = sorted(self.blocks(), key=lambda b: (b.last_used, -b.header.start))
        total = sum(b.file_size for b in blocks)
        removed = freed = 0
        for block in blocks:
            if total <= budget_bytes:
                break
            if block.header.key in keep:
                continue
            freed += self.remove(block.header.key)
            total -= block.file_size
            removed += 1
        return removed, freed

    def invalidate(self, stale_units: set[str]) -> tuple[int, int]:
        """Remove blocks whose unit is stale, and every block chained after one; (blocks, tokens) removed."""
        blocks = {b.header.key: b for b in self.blocks()}
        dead: set[str] = set()
        changed = True
        while changed:
            changed = False
            for key, block in blocks.items():
                parent = (block.header.parent or "").removeprefix("compose:")
                if key not in dead and (block.header.unit in stale_units or parent in dead):
                    dead.add(key)
                    changed = True
        tokens = sum(blocks[k].header.n_tokens for k in dead)
        for key in dead:
            self.remove(key)
        return len(dead), tokens

    def verify(self, key: str) -> str | None:
        """None when the block is sound, else the reason: its file (name, header digest, size, checksum)
        and its place in its chain (it starts where its parent ends)."""
        path = self.path(key)
        try:
            with _open(path) as fh:
                header = _read_header(fh, path)
                state = _read_state(fh, header.size)
            check(header, state, header.fingerprint_id, path)
        except (BlockRefused, OSError) as exc:
            return getattr(exc, "message", str(exc))
        parent = (header.parent or "").removeprefix("compose:")  # composed blocks hang off their header block
        if not parent:
            return None if header.start == 0 else f"{path.name}: a first block must start at 0, not {header.start}"
        try:
            above = self.header(parent)
        except BlockRefused as exc:
            return f"parent block {parent[:12]}: {exc.message}"
        if above is None:
            return f"parent block {parent[:12]} is missing"
        if above.start + above.n_tokens != header.start:
            return (f"{path.name}: starts at {header.start}, but its parent {parent[:12]} ends at "
                    f"{above.start + above.n_tokens}")
        return None


def _open(path: Path):
    """A block file opened for reading; a symbolic link or special file where a block would be is refused."""
    try:
        return open_regular(path)
    except StoreError as exc:
        raise BlockRefused(f"{path.name}: {exc.message}") from None


def _read_header(fh, path: Path) -> BlockHeader:
    if fh.read(len(MAGIC)) != MAGIC:
        raise BlockRefused(f"{path.name}: not a memcli KV block")
    line = fh.readline(1 << 20)
    try:
        return BlockHeader.from_dict(parsing.loads(line))
    except (ValueError, KeyError, TypeError):
        raise BlockRefused(f"{path.name}: unreadable block header") from None


def _read_state(fh, size: int) -> memoryview:
    """The state bytes after the header, at most ``size`` + 1 of them (a file longer or shorter than
    the header says fails the size check).

    The file is mapped copy-on-write, never written back, so llama.cpp and the checksum read the
    page cache in place instead of a copy into fresh memory first (a 2,048-token block of the
    default model, 47 MB: read and restored in 8 ms instead of 31 ms; docs/benchmarks.md). Block
    files are only ever replaced by a rename or unlinked, so a mapping keeps the file it was made
    of. Where a file cannot be mapped, it is read into one buffer that ctypes can use without a copy.
    """
    start = fh.tell()
    end = min(os.fstat(fh.fileno()).st_size, start + max(size, 0) + 1)  # a damaged header cannot ask for more
    if end <= start:
        return memoryview(bytearray())
    try:
        mapped = mmap.mmap(fh.fileno(), 0, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    except (OSError, ValueError, AttributeError):  # no mmap here (another platform or file system)
        return _copy_state(fh, end - start)
    return memoryview(mapped)[start:end]


def _copy_state(fh, n: int) -> memoryview:
    state = bytearray(n)
    view = memoryview(state)
    got = 0
    while got < n:
        read = fh.readinto(view[got:])
        if not read:
            break
        got += read
    return view[:got]


def check(header: BlockHeader, state: bytes | memoryview | None, fingerprint_id: str, path: Path,
          running: dict | None = None) -> None:
    """Refuse a block of another format or model context; with ``state``, also a wrong size or checksum."""
    if header.format != FORMAT_VERSION:
        raise BlockRefused(f"{path.name}: block format {header.format}, this memcli reads {FORMAT_VERSION}")
    if header.key != path.stem:
        raise BlockRefused(f"{path.name}: the file holds block {header.key[:12]} (a file swapped or renamed)")
    if header.digest != header.own_digest():
        raise BlockRefused(f"{path.name}: its header was changed after it was saved")
    if header.fingerprint_id != fingerprint_id:
        differ = sorted(k for k in set(header.fingerprint) | set(running or {})
                        if header.fingerprint.get(k) != (running or {}).get(k))
        detail = ", ".join(f"{k}: saved {header.fingerprint.get(k)!r}, running {(running or {}).get(k)!r}"
                           for k in differ[:4]) if running else f"fingerprint {header.fingerprint_id[:12]}"
        raise BlockRefused(f"{path.name}: saved under another model context ({detail})")
    if state is not None:
        verify_state(header, state, path)


def verify_state(header: BlockHeader, state: bytes | memoryview, path: Path) -> None:
    if len(state) != header.size or checksum(state) != header.checksum:
        raise BlockRefused(f"{path.name}: checksum mismatch (the block is corrupted)")


def checksum(state: bytes | memoryview) -> str:
    return f"crc32:{zlib.crc32(state):08x}"


def touch(path: Path) -> None:
    try:
        os.utime(path)
    except OSError:
        pass
