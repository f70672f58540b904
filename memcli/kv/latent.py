"""Latent-space selection: memory units scored by the attention a question's tokens would pay their blocks.

MemArt's idea, on what llama.cpp exposes:

- **Keys**, from the blocks themselves: a unit's composed block is a saved
  sequence state, which holds every layer's keys
  (:meth:`~memcli.llm.runtime.LlamaRuntime.state_keys`). They are stored
  after RoPE; rotating each back by its own position gives the keys'
  content, comparable wherever a block is later placed. A block is
  compressed to a **summary**: per layer and key/value head, the bounding
  box (least and greatest value of each dimension) and the mean of its
  keys, kept beside the block (``<key>.kvs``, removed with it).
- **Queries**, taken, not approximated: the question's tokens are decoded
  alone in a small side context and llama.cpp's evaluation callback hands
  over each layer's query projection before RoPE
  (:meth:`~memcli.llm.runtime.LlamaRuntime.queries`). Taking them costs one
  decode of a dozen tokens; approximating them (say, by the question's keys)
  would save nothing worth its error.
- **Score**: for each layer and query head, the upper bound of the
  question tokens' query-key products over a block's bounding box (as Quest
  and MemArt do), averaged over the question's tokens; each (layer, head)
  score is standardized across the candidate blocks so no head dominates,
  then averaged. ``mean`` scores against the mean key instead of the box.
"""

from __future__ import annotations

import io
import math

from memcli.errors import ConfigError
from memcli.kv.blocks import SUMMARY_SUFFIX, BlockRefused, BlockStore
from memcli.store.atomic import atomic_write, open_regular

METHODS = ("bounds", "mean")


def unrotate(keys, positions, shape: dict):
    """Keys (layers, cells, heads, head size) with each cell's RoPE rotation undone."""
    import numpy as np

    d = shape["head_dim"]
    half = d // 2
    inv = shape["rope_base"] ** (-np.arange(half, dtype=np.float64) * 2 / d)
    angle = positions[:, None].astype(np.float64) * shape["rope_scale"] * inv[None, :]  # (cells, half)
    cos = np.cos(angle)[None, :, None, :].astype(np.float32)
    sin = np.sin(angle)[None, :, None, :].astype(np.float32)
    if shape["rope"] == "norm":
        x0, x1 = keys[..., 0::2], keys[..., 1::2]
    elif shape["rope"] == "neox":
        x0, x1 = keys[..., :half], keys[..., half:]
    else:
        raise ConfigError("latent selection needs a model with ordinary RoPE (norm or neox)")
    y0 = x0 * cos + x1 * sin
    y1 = x1 * cos - x0 * sin
    out = np.empty_like(keys)
    if shape["rope"] == "norm":
        out[..., 0::2], out[..., 1::2] = y0, y1
    else:
        out[..., :half], out[..., half:] = y0, y1
    return out


def summarize(runtime, state) -> object:
    """A block's summary: float16 array (3, layers, key/value heads, head size) of the least, greatest
    and mean value of its keys (RoPE undone)."""
    import numpy as np

    positions, keys = runtime.state_keys(state)
    keys = unrotate(keys, positions, runtime.attention_shape)
    return np.stack([keys.min(axis=1), keys.max(axis=1), keys.mean(axis=1)]).astype(np.float16)


class Summaries:
    """Block summaries beside the blocks of ``blocks``; made from a block's state on first use."""

    def __init__(self, blocks: BlockStore, engine):
        self.blocks = blocks
        self.engine = engine

    def path(self, key: str):
        return self.blocks.path(key).with_suffix(SUMMARY_SUFFIX)

    def get(self, key: str):
        """The summary of stored block ``key``; None when the block is absent or refused. A kept
        summary is used only beside a block of the running model's fingerprint, with the shape
        that model's keys have; otherwise it is made again from the block."""
        import numpy as np

        path = self.path(key)
        shape = self.engine.rt.attention_shape
        wanted = (3, shape["n_layer"], shape["n_head_kv"], shape["head_dim"])
        try:
            header = self.blocks.header(key)
            if header is not None and header.fingerprint_id == self.engine.fp_id:
                with open_regular(path) as handle:
                    summary = np.load(io.BytesIO(handle.read()), allow_pickle=False)
                if summary.shape == wanted:
                    return summary
        except FileNotFoundError:
            pass
        except (OSError, ValueError, EOFError, BlockRefused):
            pass  # damaged or not ours: made again below
        try:
            found = self.blocks.get(key, self.engine.fp_id, self.engine.fp)
        except BlockRefused:
            return None
        if found is None:
            return None
        summary = summarize(self.engine.rt, found[1])
        buffer = io.BytesIO()
        np.save(buffer, summary, allow_pickle=False)
        try:
            atomic_write(path, buffer.getvalue())
        except OSError:
            pass  # kept for this question only
        return summary


def scores(queries, summaries: list, shape: dict, method: str = "bounds") -> list[float]:
    """One score per summary (higher: the question attends more), for ``queries`` (layers, tokens,
    query heads, head size) from :meth:`~memcli.llm.runtime.LlamaRuntime.queries`."""
    import numpy as np

    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}")
    if not summaries:
        return []
    group = shape["n_head"] // shape["n_head_kv"]
    q = queries.astype(np.float32)  # (L, T, H, D)
    stacked = np.repeat(np.stack(summaries).astype(np.float32), group, axis=3)  # (B, 3, L, H, D)
    if method == "bounds":  # the most q.k can be inside the box: q+ . max + q- . min
        raw = (np.einsum("lthd,blhd->blh", np.maximum(q, 0), stacked[:, 1])
               + np.einsum("lthd,blhd->blh", np.minimum(q, 0), stacked[:, 0]))
    else:
        raw = np.einsum("lthd,blhd->blh", q, stacked[:, 2])
    raw = raw / (q.shape[1] * math.sqrt(shape["head_dim"]))  # the mean over the question's tokens
    spread = raw.std(axis=0)
    normal = (raw - raw.mean(axis=0)) / np.where(spread > 0, spread, 1.0)
    return [float(x) for x in normal.mean(axis=(1, 2))]
