"""Saving and restoring KV blocks in a live llama.cpp context, through :class:`~memcli.llm.runtime.LlamaRuntime`.

The context (a :class:`~memcli.llm.llamacpp.LlamaCppModel` opened with two
sequences and unified KV cells) holds the conversation in sequence 0.

- Saving a block: the block's cells are copied to sequence 1
  (``seq_cp``), sequence 1's state is serialized (``state_get``), and
  sequence 1 is cleared: the file holds
  only this block's cells, at their positions.
- Restoring: the state goes into sequence 1 (``state_set``), its cells are
  copied to sequence 0 and sequence 1 is cleared; the runtime's token record
  is updated so its prefix matching treats the restored tokens as evaluated. A chain restored in order is the exact
  prefix it names: llama.cpp computes the next logits from the same cells.

Nothing here assumes a CPU build: with layers offloaded to a GPU the state
calls copy between device and host, and ``gpu_layers`` is part of the
fingerprint, so blocks made on one never load on the other.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from memcli.errors import ConfigError
from memcli.kv.blocks import (
    BlockHeader,
    BlockRefused,
    BlockStore,
    block_key,
    verify_state,
)
from memcli.llm.models import file_sha256
from memcli.llm.runtime import common_prefix

VERIFY_TOLERANCE = 0.02  # relative difference of next-token logits accepted by --kv-verify


@dataclass
class Unit:
    """One piece of the memory context: its label (``header``, ``doc:<id>@<hash>``, ``CURRENT@<hash>``...)
    and its token ids."""

    label: str
    tokens: list[int]


@dataclass
class KVStats:
    restored: int = 0  # tokens restored from blocks
    composed: int = 0  # of which placed from composed blocks (moved to their place)
    prefilled: int = 0  # tokens computed
    saved_blocks: int = 0
    restore_s: float = 0.0
    prefill_s: float = 0.0
    refused: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"restored_tokens": self.restored, "composed_tokens": self.composed,
                "prefilled_tokens": self.prefilled,
                "saved_blocks": self.saved_blocks, "restore_s": round(self.restore_s, 4),
                "prefill_s": round(self.prefill_s, 4), "refused": self.refused}


def fingerprint(model, sha_cache: Path | None = None) -> dict:
    """What a block's state depends on: weights, architecture, KV layout and types, RoPE, tokenizer."""
    return model.runtime.fingerprint(file_sha256(model.path, sha_cache))


def fingerprint_id(fp: dict) -> str:
    return hashlib.sha256(json.dumps(fp, sort_keys=True).encode()).hexdigest()


class KVEngine:
    def __init__(self, model, blocks: BlockStore, sha_cache: Path | None = None, verify: bool = False):
        """``verify``: after restoring a block, recompute its last token over the restored cells and
        compare the next-token logits with those recorded when it was saved; on a mismatch the block
        is refused and prefilled instead."""
        runtime = getattr(model, "runtime", None)
        if runtime is None:
            raise ConfigError("KV blocks need the local llama.cpp backend")
        if runtime.sequences < 2:
            raise ConfigError("KV blocks need a context opened with kv_sequences=2")
        self.model = model
        self.rt = runtime
        self.blocks = blocks
        self.fp = fingerprint(model, sha_cache)
        self.fp_id = fingerprint_id(self.fp)
        self.n_ctx = runtime.n_ctx
        self.verify = verify
        self.stats = KVStats()
        self.on_prefill = None  # told the tokens of the current prefill decoded so far (progress)

    # ------------------------------------------------------------ tokens

    def tokenize(self, text: str, *, special: bool = False, bos: bool = False) -> list[int]:
        """Token ids; memory and user text use ``special=False`` so it can never spell control tokens."""
        return self.rt.tokenize(text, special=special, bos=bos)

    @property
    def n_tokens(self) -> int:
        return len(self.rt.tokens)

    def context_tokens(self) -> list[int]:
        return list(self.rt.tokens)

    # ------------------------------------------------------------ the memory chain

    def load_chain(self, units: list[Unit], *, save: bool = True) -> list[str]:
        """Make the context hold exactly the units' tokens (in order); keys of the chain's blocks.

        Units already in the context stay; the rest restore from their blocks
        when stored and valid, else are prefilled (and saved when ``save``).
        A refused block is reported, deleted and rebuilt.
        """
        total = sum(len(u.tokens) for u in units)
        if total >= self.n_ctx:
            raise ConfigError(f"the memory context is {total} tokens; the model context holds {self.n_ctx}",
                              hint="raise model.n_ctx (--n-ctx) or lower chat.memory_tokens")
        keys: list[str] = []
        parent = None
        pos = 0
        held = self.context_tokens()
        for unit in units:
            key = block_key(parent, unit.tokens)
            end = pos + len(unit.tokens)
            if held[pos:end] == unit.tokens and len(held) >= end:
                pass  # already in the context (same process)
            elif not self.restore(key, unit, pos):
                self.truncate(pos)
                self.prefill(unit.tokens)
                if save and unit.tokens:
                    self.save(key, parent, unit.label, pos)
                held = self.context_tokens()
            else:
                held = self.context_tokens()
            keys.append(key)
            parent = key
            pos = end
        self.truncate(pos)
        return keys

    def compose(self, header: Unit, docs: list[Unit], *, recompute: int = 0, save: bool = True) -> list[str]:
        """The header as an exact chain, then each unit from a block prefilled right after the header
        alone, moved to its place (``seq_shift``); any subset in any order, approximate.

        A unit's composed block holds only its own cells (the header's are removed from the spare
        sequence before saving), at positions ``len(header)`` on; llama.cpp re-rotates the shifted keys
        at the next decode. Composed results differ from a full prefill because a unit's cells never
        attended to the units placed before it; ``recompute``: the first that many tokens of every unit
        after the first are prefilled in place (they attend to everything before them) and only the
        rest of the unit comes from its block, which buys agreement with a full prefill for prefill
        time (docs/benchmarks.md, "Composed KV memory").
        """
        header_keys = self.load_chain([header])
        h = len(header.tokens)
        total = h + sum(len(d.tokens) for d in docs)
        if total >= self.n_ctx:
            raise ConfigError(f"the composed context is {total} tokens; the model context holds {self.n_ctx}")
        rt = self.rt
        keys, pos = [], h
        for doc in docs:
            n = len(doc.tokens)
            if not n:
                continue
            key = _composed_key(header_keys[-1], doc.tokens)
            self.truncate(pos)
            again = min(recompute, n) if pos != h else 0
            if again:
                self.prefill(doc.tokens[:again])  # in place: these cells see the units before them
            if again < n:
                stored = self._read_into_spare(key, h, n) is not None
                if not stored:
                    self._build_spare(header_keys[-1], h, doc, key, save)
                if again:
                    rt.seq_rm(1, h, h + again)  # prefilled in place above
                if pos != h:
                    rt.seq_shift(1, h + again, h + n, pos - h)
                rt.seq_cp(1, 0)
                rt.seq_rm(1)
                rt.placed(pos + again, doc.tokens[again:])
                if stored:
                    self.stats.restored += n - again
                    self.stats.composed += n - again
            keys.append(key)
            pos += n
        return header_keys + keys

    def composed_blocks(self, header: Unit, units: list[Unit], on_unit=None) -> list[str]:
        """Make sure every unit has its composed block (made after ``header`` alone, as
        :meth:`compose` places them); their keys. ``on_unit(done, total)`` follows the units."""
        return [key for key, _ in self._composed_cells(header, units, on_unit, store=True)]

    def composed_states(self, header: Unit, units: list[Unit], on_unit=None):
        """Each unit's cells made as :meth:`composed_blocks` makes them (after ``header`` alone), as
        state bytes, one at a time and not stored (for looking at their keys)."""
        for _, state in self._composed_cells(header, units, on_unit, store=False):
            yield state

    def _composed_cells(self, header: Unit, units: list[Unit], on_unit, *, store: bool):
        """(key, state) per unit: its cells made in the spare sequence after ``header`` alone, then
        saved as its composed block (``store``: state None, nothing made when the block is stored
        already) or returned as state bytes."""
        header_keys = self.load_chain([header])
        h = len(header.tokens)
        for done, unit in enumerate(units, 1):
            key = _composed_key(header_keys[-1], unit.tokens)
            state = None
            if unit.tokens and not (store and self._usable(key)):
                if h + len(unit.tokens) >= self.n_ctx:
                    raise ConfigError(f"a unit of {len(unit.tokens)} tokens does not fit the context ({self.n_ctx})")
                self._build_spare(header_keys[-1], h, unit, key, store)
                if not store:
                    state = self.rt.state_get(1)
                self.rt.seq_rm(1)
            if on_unit is not None:
                on_unit(done, len(units))
            yield key, state

    def _usable(self, key: str) -> bool:
        """Whether block ``key`` is stored for this model (its header read and checked; the state is
        checked when it loads). A block of another model or an unreadable one is removed."""
        try:
            header = self.blocks.header(key)
        except BlockRefused:
            header = None
            self.blocks.remove(key)
        if header is not None and header.fingerprint_id != self.fp_id:
            self.blocks.remove(key)
            return False
        return header is not None

    def composed_key(self, header: Unit, unit: Unit) -> str:
        """The key of ``unit``'s composed block after ``header`` (the header's chain of one block)."""
        return _composed_key(block_key(None, header.tokens), unit.tokens)

    def _build_spare(self, header_key: str, h: int, unit: Unit, key: str, save: bool) -> None:
        """Prefill ``unit`` into the spare sequence right after the header (held by sequence 0 at
        0..h-1) and keep only its own cells there, saved as block ``key`` when ``save``."""
        rt = self.rt
        rt.seq_rm(1)
        rt.seq_cp(0, 1, 0, h)  # the header, shared with the spare sequence
        self._decode_spare(unit.tokens, h)
        rt.seq_rm(1, 0, h)  # keep only the unit's cells
        if save:
            self._write_spare(key, "compose:" + header_key, f"compose:{unit.label}", h, len(unit.tokens))

    def _decode_spare(self, tokens: list[int], start: int) -> None:
        """Decode ``tokens`` into sequence 1 at positions ``start``.. (sequence 0 is untouched)."""
        begin = time.perf_counter()
        self.rt.decode(tokens, seq=1, start=start)
        self.stats.prefill_s += time.perf_counter() - begin
        self.stats.prefilled += len(tokens)

    def _read_into_spare(self, key: str, start: int, n: int) -> BlockHeader | None:
        """Load stored block ``key`` (checked) into sequence 1, where it must hold positions
        ``start..start+n-1``; None when it is absent or refused (the reason is in stats).

        The checksum is computed on another thread while llama.cpp loads the state into the spare
        sequence (both only read the buffer); the cells are used only after it matched.
        """
        try:
            found = self.blocks.get(key, self.fp_id, self.fp, verify_checksum=False)
        except BlockRefused as exc:
            return self._refuse(key, exc.message)
        if found is None:
            return None
        header, state = found
        if header.start != start or header.n_tokens != n:
            return self._refuse(key, f"{key[:12]}: block holds positions {header.start}+{header.n_tokens}, "
                                     f"wanted {start}+{n}")
        rt = self.rt
        begin = time.perf_counter()
        rt.seq_rm(1)
        corrupt: list[str] = []
        checker = threading.Thread(target=_check_state, args=(header, state, self.blocks.path(key), corrupt))
        checker.start()
        loaded = rt.state_set(state, 1)
        checker.join()
        if corrupt or not loaded or rt.seq_pos_max(1) != start + n - 1:
            rt.seq_rm(1)
            return self._refuse(key, corrupt[0] if corrupt else f"{key[:12]}: llama.cpp did not load the state")
        self.stats.restore_s += time.perf_counter() - begin
        return header

    def _refuse(self, key: str, reason: str) -> None:
        self.stats.refused.append(reason)
        self.blocks.remove(key)
        return None

    def _write_spare(self, key: str, parent: str | None, label: str, start: int, n: int,
                     probe: dict | None = None) -> None:
        """Save sequence 1's cells (positions ``start``.. ``start+n-1``) as block ``key``."""
        state = self.rt.state_get(1)
        if not state:
            raise BlockRefused("llama.cpp wrote no state for the block")
        header = BlockHeader(key=key, parent=parent, unit=label, start=start, n_tokens=n,
                             fingerprint_id=self.fp_id, fingerprint=self.fp,
                             state_version=self.rt.state_version, checksum="", size=0, probe=probe)
        self.blocks.put(header, state)
        self.stats.saved_blocks += 1

    def prefill(self, tokens: list[int]) -> None:
        if not tokens:
            return
        if self.n_tokens + len(tokens) > self.n_ctx:
            raise ConfigError(f"{self.n_tokens + len(tokens)} tokens do not fit the context ({self.n_ctx})")
        start = time.perf_counter()
        self.rt.decode(tokens, on_batch=self.on_prefill)
        self.stats.prefill_s += time.perf_counter() - start
        self.stats.prefilled += len(tokens)

    def truncate(self, pos: int) -> None:
        """Forget every cell from position ``pos`` on."""
        self.rt.truncate(pos)

    def reset(self) -> None:
        self.rt.clear()

    # ------------------------------------------------------------ blocks

    def save(self, key: str, parent: str | None, label: str, start: int, end: int | None = None) -> None:
        """Save cells ``start..end`` (default: to the end of the context) of sequence 0 as block ``key``."""
        end = self.n_tokens if end is None else end
        probe = self._probe() if end == self.n_tokens else None
        self.rt.seq_rm(1)
        self.rt.seq_cp(0, 1, start, end)
        try:
            self._write_spare(key, parent, label, start, end - start, probe)
        finally:
            self.rt.seq_rm(1)

    def restore(self, key: str, unit: Unit, pos: int) -> bool:
        """Load block ``key`` (holding ``unit``) at ``pos``; False when absent or refused (the reason is in stats)."""
        n = len(unit.tokens)
        if pos + n > self.n_ctx:
            self.stats.refused.append(f"{key[:12]}: needs {pos + n} positions, context has {self.n_ctx}")
            return False
        self.truncate(pos)
        header = self._read_into_spare(key, pos, n)
        if header is None:
            return False
        self.rt.seq_cp(1, 0)
        self.rt.seq_rm(1)
        self.rt.placed(pos, unit.tokens)
        if self.verify and header.probe and not self._matches(header.probe, unit.tokens[-1]):
            self.truncate(pos)
            self.stats.refused.append(f"{key[:12]}: --kv-verify: restored state predicts other next tokens "
                                      "than when it was saved")
            self.blocks.remove(key)
            return False
        self.stats.restored += n
        return True

    def _probe(self) -> dict:
        """The next-token logits of the context's last token, summarized (top 8 ids and values)."""
        logits = self.last_logits()
        top = logits.argsort()[-8:][::-1]
        return {"ids": [int(i) for i in top], "values": [round(float(logits[i]), 4) for i in top]}

    def _matches(self, probe: dict, last_token: int) -> bool:
        """Recompute the last restored token over the cells before it and compare with the saved probe."""
        self.truncate(self.n_tokens - 1)
        self.rt.decode([last_token])
        now = self._probe()
        # one token recomputed alone runs other kernels than the batched prefill that made the probe:
        # small differences are expected, a wrong state (RoPE, weights, cells) changes the prediction
        saved = dict(zip(probe["ids"], probe["values"]))
        close = all(abs(v - saved[i]) <= VERIFY_TOLERANCE * max(1.0, abs(saved[i]))
                    for i, v in zip(now["ids"], now["values"]) if i in saved)
        return now["ids"][:1] == probe["ids"][:1] and close

    # ------------------------------------------------------------ generation

    def last_logits(self):
        """The logits llama.cpp computed for the last evaluated token (a numpy copy)."""
        return self.rt.logits()

    def next_logits(self, token: int):
        """Evaluate one token after the context and return the logits it gives (for checks and tests)."""
        self.prefill([token])
        return self.last_logits()

    def extend(self, tokens: list[int]) -> None:
        """Make the context hold exactly ``tokens``: keep what it shares with them, prefill the rest."""
        self.truncate(common_prefix(self.context_tokens(), tokens))
        self.prefill(tokens[self.n_tokens:])

    def generate(self, prompt: list[int], *, max_tokens: int, on_text=None, stop: list[str] = (), halt=None):
        """Greedy continuation of ``prompt`` (whose prefix may already be in the context) until the
        model's own end-of-generation token, a ``stop`` string or where ``halt`` says it loops; only
        the part of ``prompt`` not already in the context is prefilled. Returns the runtime's
        :class:`~memcli.llm.runtime.Generation`."""
        done = self.rt.generate(prompt, max_tokens=max_tokens, on_text=on_text, stop=stop, halt=halt)
        self.stats.prefilled += done.prefilled_tokens
        self.stats.prefill_s += done.ttft_s
        return done


def _composed_key(header_key: str, tokens: list[int]) -> str:
    """A composed block's key: its tokens under the header chain's key (it never depends on what is
    placed before it)."""
    return block_key("compose:" + header_key, tokens)


def _check_state(header: BlockHeader, state: memoryview, path: Path, corrupt: list[str]) -> None:
    """The checksum check, on its own thread (zlib releases the GIL on large buffers)."""
    try:
        verify_state(header, state, path)
    except BlockRefused as exc:
        corrupt.append(str(exc))
