"""Saving and restoring KV blocks in a live llama.cpp context (this and ``llm/llamacpp.py`` touch llama.cpp).

The context (a :class:`~memcli.llm.llamacpp.LlamaCppModel` opened with two
sequences and unified KV cells) holds the conversation in sequence 0.

- Saving a block: the block's cells are copied to sequence 1
  (``llama_memory_seq_cp``), sequence 1's state is serialized
  (``llama_state_seq_get_data``), and sequence 1 is cleared: the file holds
  only this block's cells, at their positions.
- Restoring: the state goes into sequence 1 (``llama_state_seq_set_data``),
  its cells are copied to sequence 0 and sequence 1 is cleared; the
  ``Llama`` object's token list is updated so its own prefix matching treats
  the restored tokens as evaluated. A chain restored in order is the exact
  prefix it names: llama.cpp computes the next logits from the same cells.

Nothing here assumes a CPU build: with layers offloaded to a GPU the state
calls copy between device and host, and ``gpu_layers`` is part of the
fingerprint, so blocks made on one never load on the other.
"""

from __future__ import annotations

import ctypes
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
from memcli.llm.llamacpp import common_prefix

VERIFY_TOLERANCE = 0.02  # relative difference of next-token logits accepted by --kv-verify
PROBE = "Caf\u00e9 na\u00efve \u2014 12,345 tokens? <b>yes</b>\n\u65e5\u672c"


@dataclass
class Unit:
    """One piece of the memory context: its label (``header``, ``doc:<id>@<hash>``, ``CURRENT@<hash>``...)
    and its token ids."""

    label: str
    tokens: list[int]


@dataclass
class KVStats:
    restored: int = 0  # tokens restored from blocks
    prefilled: int = 0  # tokens computed
    saved_blocks: int = 0
    restore_s: float = 0.0
    prefill_s: float = 0.0
    refused: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"restored_tokens": self.restored, "prefilled_tokens": self.prefilled,
                "saved_blocks": self.saved_blocks, "restore_s": round(self.restore_s, 4),
                "prefill_s": round(self.prefill_s, 4), "refused": self.refused}


def fingerprint(model, sha_cache: Path | None = None) -> dict:
    """What a block's state depends on: weights, architecture, KV layout and types, RoPE, tokenizer."""
    import llama_cpp

    from memcli.llm.models import file_sha256

    llm = model.llm
    handle = llm._model.model
    params = llm.context_params
    meta = llm.metadata or {}
    arch = meta.get("general.architecture", "")
    probe = llm.tokenize(PROBE.encode(), add_bos=False, special=False)
    tokenizer = hashlib.sha256(json.dumps([meta.get("tokenizer.chat_template", ""), llm.n_vocab(), probe])
                               .encode()).hexdigest()
    return {
        "model_sha256": file_sha256(model.path, sha_cache),
        "architecture": arch,
        "n_layer": llama_cpp.llama_model_n_layer(handle),
        "n_embd": llama_cpp.llama_model_n_embd(handle),
        "n_head_kv": llama_cpp.llama_model_n_head_kv(handle),
        "n_vocab": llm.n_vocab(),
        "type_k": int(params.type_k),
        "type_v": int(params.type_v),
        "flash_attn": int(getattr(params, "flash_attn_type", getattr(params, "flash_attn", 0))),
        "rope_freq_base": float(params.rope_freq_base) or meta.get(f"{arch}.rope.freq_base"),
        "rope_freq_scale": float(params.rope_freq_scale) or llama_cpp.llama_model_rope_freq_scale_train(handle),
        "rope_scaling_type": int(params.rope_scaling_type),
        "yarn_ext_factor": float(params.yarn_ext_factor),
        "tokenizer": tokenizer,
        "gpu_layers": model.settings.get("gpu_layers"),
        "llama_cpp": getattr(llama_cpp, "__version__", ""),
        "state_version": llama_cpp.LLAMA_STATE_SEQ_VERSION,
    }


def fingerprint_id(fp: dict) -> str:
    return hashlib.sha256(json.dumps(fp, sort_keys=True).encode()).hexdigest()


class KVEngine:
    def __init__(self, model, blocks: BlockStore, sha_cache: Path | None = None, verify: bool = False):
        """``verify``: after restoring a block, recompute its last token over the restored cells and
        compare the next-token logits with those recorded when it was saved; on a mismatch the block
        is refused and prefilled instead."""
        import llama_cpp

        if getattr(model, "llm", None) is None:
            raise ConfigError("KV blocks need the local llama.cpp backend")
        if int(model.llm.context_params.n_seq_max) < 2:
            raise ConfigError("KV blocks need a context opened with kv_sequences=2")
        self._ll = llama_cpp
        self.model = model
        self.llm = model.llm
        self.blocks = blocks
        self.fp = fingerprint(model, sha_cache)
        self.fp_id = fingerprint_id(self.fp)
        self.n_ctx = self.llm.n_ctx()
        self.verify = verify
        self.stats = KVStats()

    # ------------------------------------------------------------ tokens

    def tokenize(self, text: str, *, special: bool = False, bos: bool = False) -> list[int]:
        """Token ids; memory and user text use ``special=False`` so it can never spell control tokens."""
        return self.llm.tokenize(text.encode("utf-8"), add_bos=bos, special=special)

    @property
    def n_tokens(self) -> int:
        return self.llm.n_tokens

    def context_tokens(self) -> list[int]:
        return [int(t) for t in self.llm._input_ids[: self.llm.n_tokens]]

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

    def compose(self, header: Unit, docs: list[Unit], *, save: bool = True) -> list[str]:
        """The header as an exact chain, then each document from a block prefilled right after the header
        alone, moved to its place (``llama_memory_seq_add``); any subset in any order, approximate.

        A document's composed block holds only its own cells (the header's are removed from the spare
        sequence before saving), at positions ``len(header)`` on; llama.cpp re-rotates the shifted keys
        at the next decode. Composed results differ slightly from a full prefill: the document's cells
        never attended to the documents placed before it.
        """
        header_keys = self.load_chain([header])
        h = len(header.tokens)
        total = h + sum(len(d.tokens) for d in docs)
        if total >= self.n_ctx:
            raise ConfigError(f"the composed context is {total} tokens; the model context holds {self.n_ctx}")
        ll, mem = self._ll, self._memory()
        keys, pos = [], h
        for doc in docs:
            n = len(doc.tokens)
            if not n:
                continue
            key = block_key("compose:" + header_keys[-1], doc.tokens)
            self.truncate(pos)
            if self._read_into_spare(key, h, n) is not None:
                self.stats.restored += n
            else:
                ll.llama_memory_seq_rm(mem, 1, -1, -1)
                ll.llama_memory_seq_cp(mem, 0, 1, 0, h)  # the header, shared with the spare sequence
                self._decode_spare(doc.tokens, h)
                ll.llama_memory_seq_rm(mem, 1, 0, h)  # keep only the document's cells
                if save:
                    self._write_spare(key, "compose:" + header_keys[-1], f"compose:{doc.label}", h, n)
            if pos != h:
                ll.llama_memory_seq_add(mem, 1, h, h + n, pos - h)
            ll.llama_memory_seq_cp(mem, 1, 0, -1, -1)
            ll.llama_memory_seq_rm(mem, 1, -1, -1)
            self.llm.input_ids[pos: pos + n] = doc.tokens
            self.llm.n_tokens = pos + n
            keys.append(key)
            pos += n
        return header_keys + keys

    def _decode_spare(self, tokens: list[int], start: int) -> None:
        """Decode ``tokens`` into sequence 1 at positions ``start``.. (sequence 0 is untouched)."""
        begin = time.perf_counter()
        batch = self.llm._batch
        step = self.llm.n_batch
        for offset in range(0, len(tokens), step):
            chunk = tokens[offset: offset + step]
            batch.batch.n_tokens = len(chunk)
            for i, token in enumerate(chunk):
                batch.batch.token[i] = token
                batch.batch.pos[i] = start + offset + i
                batch.batch.seq_id[i][0] = 1
                batch.batch.n_seq_id[i] = 1
                batch.batch.logits[i] = False
            batch.batch.logits[len(chunk) - 1] = True
            self.llm._ctx.decode(batch)
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
        ll, mem, ctx = self._ll, self._memory(), self.llm._ctx.ctx
        begin = time.perf_counter()
        ll.llama_memory_seq_rm(mem, 1, -1, -1)
        corrupt: list[str] = []
        checker = threading.Thread(target=_check_state, args=(header, state, self.blocks.path(key), corrupt))
        checker.start()
        buffer = (ctypes.c_uint8 * len(state)).from_buffer(state)
        loaded = ll.llama_state_seq_set_data(ctx, buffer, len(state), 1)
        del buffer  # the state's buffer export must end before the state can be released
        checker.join()
        if corrupt or not loaded or ll.llama_memory_seq_pos_max(mem, 1) != start + n - 1:
            ll.llama_memory_seq_rm(mem, 1, -1, -1)
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
        ll, ctx = self._ll, self.llm._ctx.ctx
        size = ll.llama_state_seq_get_size(ctx, 1)
        buffer = (ctypes.c_uint8 * size)()
        written = ll.llama_state_seq_get_data(ctx, buffer, size, 1)
        if not written:
            raise BlockRefused("llama.cpp wrote no state for the block")
        header = BlockHeader(key=key, parent=parent, unit=label, start=start, n_tokens=n,
                             fingerprint_id=self.fp_id, fingerprint=self.fp,
                             state_version=ll.LLAMA_STATE_SEQ_VERSION, checksum="", size=0, probe=probe)
        self.blocks.put(header, bytes(buffer[:written]))
        self.stats.saved_blocks += 1

    def prefill(self, tokens: list[int]) -> None:
        if not tokens:
            return
        if self.llm.n_tokens + len(tokens) > self.n_ctx:
            raise ConfigError(f"{self.llm.n_tokens + len(tokens)} tokens do not fit the context ({self.n_ctx})")
        start = time.perf_counter()
        self.llm.eval(tokens)
        self.stats.prefill_s += time.perf_counter() - start
        self.stats.prefilled += len(tokens)

    def truncate(self, pos: int) -> None:
        """Forget every cell from position ``pos`` on."""
        if pos < self.llm.n_tokens:
            self._ll.llama_memory_seq_rm(self._memory(), 0, pos, -1)
            self.llm.n_tokens = pos

    def reset(self) -> None:
        self._ll.llama_memory_clear(self._memory(), True)
        self.llm.n_tokens = 0

    # ------------------------------------------------------------ blocks

    def save(self, key: str, parent: str | None, label: str, start: int, end: int | None = None) -> None:
        """Save cells ``start..end`` (default: to the end of the context) of sequence 0 as block ``key``."""
        end = self.llm.n_tokens if end is None else end
        probe = self._probe() if end == self.llm.n_tokens else None
        ll, mem = self._ll, self._memory()
        ll.llama_memory_seq_rm(mem, 1, -1, -1)
        ll.llama_memory_seq_cp(mem, 0, 1, start, end)
        try:
            self._write_spare(key, parent, label, start, end - start, probe)
        finally:
            ll.llama_memory_seq_rm(mem, 1, -1, -1)

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
        ll, mem = self._ll, self._memory()
        ll.llama_memory_seq_cp(mem, 1, 0, -1, -1)
        ll.llama_memory_seq_rm(mem, 1, -1, -1)
        self.llm.input_ids[pos: pos + n] = unit.tokens
        self.llm.n_tokens = pos + n
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
        self.truncate(self.llm.n_tokens - 1)
        self.llm.eval([last_token])
        now = self._probe()
        # one token recomputed alone runs other kernels than the batched prefill that made the probe:
        # small differences are expected, a wrong state (RoPE, weights, cells) changes the prediction
        saved = dict(zip(probe["ids"], probe["values"]))
        close = all(abs(v - saved[i]) <= VERIFY_TOLERANCE * max(1.0, abs(saved[i]))
                    for i, v in zip(now["ids"], now["values"]) if i in saved)
        return now["ids"][:1] == probe["ids"][:1] and close

    def _memory(self):
        return self._ll.llama_get_memory(self.llm._ctx.ctx)

    # ------------------------------------------------------------ generation

    def last_logits(self):
        """The logits llama.cpp computed for the last evaluated token (a numpy copy)."""
        import numpy as np

        pointer = self._ll.llama_get_logits_ith(self.llm._ctx.ctx, -1)
        return np.ctypeslib.as_array(pointer, shape=(self.llm.n_vocab(),)).copy()

    def next_logits(self, token: int):
        """Evaluate one token after the context and return the logits it gives (for checks and tests)."""
        self.prefill([token])
        return self.last_logits()

    def extend(self, tokens: list[int]) -> None:
        """Make the context hold exactly ``tokens``: keep what it shares with them, prefill the rest."""
        self.truncate(common_prefix(self.context_tokens(), tokens))
        self.prefill(tokens[self.llm.n_tokens:])

    def generate(self, prompt: list[int], *, max_tokens: int, stop_ids: set[int]) -> tuple[list[int], float, float]:
        """Greedy continuation of ``prompt`` (whose prefix may already be in the context).

        Returns (generated ids, seconds to first token, seconds of the rest);
        only the part of ``prompt`` not already in the context is prefilled.
        """
        # the last prompt token is always evaluated: its logits give the first generated token
        self.truncate(common_prefix(self.context_tokens(), prompt[:-1]))
        start = time.perf_counter()
        self.extend(prompt)
        out: list[int] = []
        first = None
        for _ in range(max_tokens):
            token = int(self.last_logits().argmax())
            if first is None:
                first = time.perf_counter() - start
            if token in stop_ids or self.llm.n_tokens + 1 >= self.n_ctx:
                break
            out.append(token)
            self.llm.eval([token])
        total = time.perf_counter() - start
        return out, first or total, total - (first or total)


def _check_state(header: BlockHeader, state: bytearray, path: Path, corrupt: list[str]) -> None:
    """The checksum check, on its own thread (zlib releases the GIL on large buffers)."""
    try:
        verify_state(header, state, path)
    except BlockRefused as exc:
        corrupt.append(str(exc))
