"""Latent-space selection: memory units scored by the attention a question's tokens would pay their blocks.

MemArt's idea, on what llama.cpp exposes:

- **Queries**, taken, not approximated: the question's tokens are decoded
  alone in a small side context and llama.cpp's evaluation callback hands
  over each layer's query projection before RoPE
  (:meth:`~memcli.llm.runtime.LlamaRuntime.queries`). Taking them costs one
  decode of a dozen tokens; approximating them (say, by the question's keys)
  would save nothing worth its error.
- **Keys**, from the blocks themselves: a unit's composed block is a saved
  sequence state, which holds every layer's keys
  (:meth:`~memcli.llm.runtime.LlamaRuntime.state_keys`). They are stored
  after RoPE; rotating each back by its own position gives the keys'
  content, comparable wherever a block is later placed.
- **Retrieval heads**: averaged over every layer and head, the question's
  attention does not tell the blocks holding its answer from the others
  (docs/benchmarks.md); a few heads do. They are found once per model
  (:func:`find_heads`) on a memory written here, not on anyone's data:
  :data:`CALIBRATION_DAYS` short exchanges, each with facts of its own, and
  questions each about one fact; a head's worth is how high, on average
  over the questions, its attention ranks the exchange holding the fact
  (mean reciprocal rank). The ranking of heads is kept per model
  fingerprint (``<kv>/heads/<fingerprint>.json``).
- **Compression by head**: a block's summary (``<key>.kvs`` beside it,
  removed with it) keeps the un-rotated keys of only the key/value heads
  the best :data:`HEADS` retrieval heads read: 2 of the default model's 90,
  about 2% of its keys.
- **Score**: for each retrieval head, each question token's greatest
  query-key product in the block (the attention its sharpest key would
  draw), averaged over the question's tokens, then averaged over the heads.

The constants (:data:`HEADS`, how scores combine, and the fusion with the
text ranking in :mod:`memcli.kv.composed_ask`) were chosen by
cross-validation over the two development conversations
(``benchmarks/tune_latent.py``).
"""

from __future__ import annotations

import io
import json
import math
import random
from dataclasses import dataclass

from memcli import parsing
from memcli.errors import ConfigError, StoreError
from memcli.kv.blocks import SUMMARY_SUFFIX, BlockRefused, BlockStore
from memcli.kv.engine import Unit
from memcli.paths import ensure_private_dir
from memcli.store.atomic import atomic_write, open_regular

HEADS = 4  # retrieval heads whose attention scores a block (benchmarks/tune_latent.py)
QUESTION = "Question: "  # what the question's queries are taken after (as the answer prompt shows it)
CALIBRATION_VERSION = 1
CALIBRATION_DAYS = 24


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


def block_keys(runtime, state, kv_heads: list[tuple[int, int]]):
    """The un-rotated keys of ``kv_heads`` ((layer, key/value head) pairs) in a block's state: float16
    array (cells, len(kv_heads), head size)."""
    import numpy as np

    positions, keys = runtime.state_keys(state)
    layers = sorted({layer for layer, _ in kv_heads})
    where = {layer: i for i, layer in enumerate(layers)}
    keys = unrotate(keys[layers], positions, runtime.attention_shape)
    return np.stack([keys[where[layer], :, head] for layer, head in kv_heads], axis=1).astype(np.float16)


def question_queries(engine, question: str):
    """The question's queries (layers, tokens, query heads, head size), its own tokens only: taken
    after :data:`QUESTION` (the tokens of that lead-in are the same for every question and dropped)."""
    lead = len(engine.tokenize(QUESTION.rstrip(), bos=True))
    tokens = engine.tokenize(QUESTION + question.strip(), bos=True)[:256]
    queries = engine.rt.queries(tokens)
    return queries[:, lead:] if len(tokens) > lead else queries


class BlockKeys:
    """The kept keys of several blocks side by side (``summaries``: each block's keys, (cells,
    key/value heads, head size)): ``keys`` (key/value heads, all cells, head size) float32, and the
    cell each block starts at."""

    def __init__(self, summaries: list):
        import numpy as np

        if any(len(s) == 0 for s in summaries):
            raise ValueError("a block without keys")
        self.count = len(summaries)
        self.keys = np.ascontiguousarray(np.concatenate(summaries).astype(np.float32).transpose(1, 0, 2)) \
            if summaries else None
        self.starts = np.cumsum([0] + [len(s) for s in summaries[:-1]])


def head_scores(queries, blocks: BlockKeys, heads: list[tuple[int, int]], kv_heads: list[tuple[int, int]],
                group: int):
    """Array (blocks, heads): for each retrieval head (layer, query head), the mean over the question's
    tokens of each token's greatest query-key product in the block. ``queries``: (layers, tokens,
    query heads, head size); ``blocks`` hold the keys of ``kv_heads``."""
    import numpy as np

    out = np.zeros((blocks.count, len(heads)), dtype=np.float32)
    if not blocks.count:
        return out
    tokens, size = queries.shape[1], queries.shape[3]
    reading: dict[int, list[int]] = {}  # key/value head -> the retrieval heads that read it
    for j, (layer, head) in enumerate(heads):
        reading.setdefault(kv_heads.index((layer, head // group)), []).append(j)
    for column, js in reading.items():
        q = np.concatenate([queries[heads[j][0], :, heads[j][1]] for j in js]).astype(np.float32)  # (js*tokens, d)
        # numpy's own loops, not BLAS: BLAS threads left spinning would slow llama.cpp's next decode
        products = np.einsum("nd,md->nm", blocks.keys[column], q)  # (cells, js*tokens)
        best = np.maximum.reduceat(products, blocks.starts, axis=0) / math.sqrt(size)
        out[:, js] = best.reshape(blocks.count, len(js), tokens).mean(axis=2)
    return out


# ---------------------------------------------------------------- retrieval heads

_THINGS = [  # (what was started, what was given, where they went): made-up facts, one set a day
    ("restoring grandfather clocks", "a brass magnifier", "an auction house"),
    ("keeping bees", "a smoker and veil", "an orchard in the hills"),
    ("learning the accordion", "a songbook from Naples", "a folk club"),
    ("carving spoons", "a hook knife", "a woodland workshop"),
    ("sailing dinghies", "a waterproof watch", "the yacht club"),
    ("baking sourdough", "a starter in a jar", "a flour mill"),
    ("studying the planets", "a secondhand telescope", "an observatory"),
    ("fixing motorbikes", "a torque wrench", "a scrapyard"),
    ("binding books", "a bone folder", "a paper fair"),
    ("training for triathlons", "a heart rate monitor", "a velodrome"),
    ("growing bonsai", "a juniper seedling", "a nursery outside town"),
    ("brewing cider", "a fruit press", "a farm shop"),
    ("repairing radios", "a soldering iron", "a flea market"),
    ("learning to fence", "a foil and mask", "a sports hall"),
    ("writing crosswords", "a thick dictionary", "a newspaper office"),
    ("raising chickens", "an incubator", "an agricultural show"),
    ("playing the bagpipes", "a tartan bag", "a highland gathering"),
    ("collecting fossils", "a geology hammer", "the cliffs near the lighthouse"),
    ("making candles", "a box of beeswax", "a craft market"),
    ("teaching origami", "a pack of washi paper", "a primary school"),
    ("rowing on the river", "a pair of gloves", "the boathouse"),
    ("tracing family history", "a parish register", "the county archive"),
    ("building model railways", "a steam locomotive kit", "a toy museum"),
    ("foraging mushrooms", "a field guide", "an old beech forest"),
]


def calibration_memory() -> tuple[list[str], list[tuple[str, int]]]:
    """The memory heads are found on: :data:`CALIBRATION_DAYS` days, each a short exchange with facts
    of its own, as memory units show entries; and questions, each about one fact, with its day."""
    rng = random.Random(CALIBRATION_VERSION)
    things = _THINGS[:CALIBRATION_DAYS]
    rng.shuffle(things)
    days, questions = [], []
    for day, (hobby, gift, place) in enumerate(things):
        date = f"[2031-{1 + day // 28:02d}-{1 + day % 28:02d} 18:00]"
        days.append(f"{date} Noor: Guess what, I have started {hobby} this month.\n"
                    "Elias: That sounds fun! How did it begin?\n"
                    f"Noor: A friend gave me {gift} and we went to {place} together.\n"
                    "Elias: I would love to see it some day.\n")
        questions += [(f"When did Noor start {hobby}?", day), (f"Who gave Noor {gift}?", day),
                      (f"Why did Noor go to {place}?", day)]
    return days, questions


@dataclass
class RetrievalHeads:
    """A model's (layer, query head) pairs, best retrieval head first, with their calibration score."""

    fingerprint_id: str
    heads: list[tuple[int, int]]
    quality: list[float]

    def best(self, n: int = HEADS) -> list[tuple[int, int]]:
        return self.heads[:n]


def find_heads(engine, prefix, progress=None) -> RetrievalHeads:
    """Rank every attention head of the engine's model by how well its attention finds, for each
    calibration question, the day that holds the fact (mean reciprocal rank). The calibration days'
    cells are made as composed blocks are (after ``prefix`` alone), and not stored."""
    import numpy as np

    shape = engine.rt.attention_shape
    group = shape["n_head"] // shape["n_head_kv"]
    days, questions = calibration_memory()
    told = (lambda done, total: progress("finding the model's retrieval heads", done, total)) if progress else None
    every = [(layer, kv) for layer in range(shape["n_layer"]) for kv in range(shape["n_head_kv"])]
    heads = [(layer, h) for layer in range(shape["n_layer"]) for h in range(shape["n_head"])]
    states = engine.composed_states(prefix, [Unit(f"calibration:{i}", engine.tokenize(d)) for i, d in enumerate(days)],
                                    on_unit=told)
    blocks = BlockKeys([block_keys(engine.rt, state, every) for state in states])
    reciprocal = np.zeros(len(heads))
    for question, day in questions:
        table = head_scores(question_queries(engine, question), blocks, heads, every, group)  # (days, heads)
        reciprocal += 1.0 / (1 + (table > table[day]).sum(axis=0))
    quality = reciprocal / len(questions)
    order = sorted(range(len(heads)), key=lambda i: (-quality[i], i))
    return RetrievalHeads(engine.fp_id, [heads[i] for i in order], [round(float(quality[i]), 4) for i in order])


def retrieval_heads(engine, prefix, progress=None) -> RetrievalHeads:
    """The engine's model's retrieval heads: kept beside the block store by model fingerprint, found
    (:func:`find_heads`, a few seconds) when not kept yet or kept for another calibration."""
    path = engine.blocks.root.parent / "heads" / f"{engine.fp_id}.json"
    try:
        with open_regular(path) as handle:
            data = parsing.loads(handle.read().decode("utf-8"))
        if data.get("version") == CALIBRATION_VERSION and data.get("fingerprint_id") == engine.fp_id:
            return RetrievalHeads(engine.fp_id, [tuple(h) for h in data["heads"]], list(data["quality"]))
    except FileNotFoundError:
        pass
    except (OSError, ValueError, KeyError, TypeError, AttributeError, StoreError):
        pass  # damaged or a link: found again
    found = find_heads(engine, prefix, progress)
    try:
        ensure_private_dir(path.parent)
        atomic_write(path, json.dumps({"version": CALIBRATION_VERSION, "fingerprint_id": found.fingerprint_id,
                                       "heads": found.heads, "quality": found.quality}))
    except OSError:
        pass  # found again next time
    return found


def kv_heads_of(heads: list[tuple[int, int]], group: int) -> list[tuple[int, int]]:
    """The (layer, key/value head) pairs ``heads`` read, in a fixed order."""
    return sorted({(layer, head // group) for layer, head in heads})


class Summaries:
    """Block summaries beside the blocks of ``blocks``: the un-rotated keys of ``kv_heads``; made from
    a block's state on first use."""

    def __init__(self, blocks: BlockStore, engine, kv_heads: list[tuple[int, int]]):
        self.blocks = blocks
        self.engine = engine
        self.kv_heads = list(kv_heads)

    def path(self, key: str):
        return self.blocks.path(key).with_suffix(SUMMARY_SUFFIX)

    def get(self, key: str):
        """The summary of stored block ``key``; None when the block is absent or refused. A kept
        summary is used only beside a block of the running model's fingerprint, for the same heads
        and with the shape that block's keys have; otherwise it is made again from the block."""
        import numpy as np

        path = self.path(key)
        d = self.engine.rt.attention_shape["head_dim"]
        try:
            header = self.blocks.header(key)
            if header is not None and header.fingerprint_id == self.engine.fp_id:
                with open_regular(path) as handle:
                    kept = np.load(io.BytesIO(handle.read()), allow_pickle=False)
                    heads, keys = kept["heads"], kept["keys"]
                if ([tuple(int(x) for x in h) for h in heads] == self.kv_heads
                        and keys.shape == (header.n_tokens, len(self.kv_heads), d)):
                    return keys
        except FileNotFoundError:
            pass
        except (OSError, ValueError, EOFError, KeyError, IndexError, TypeError, BlockRefused):
            pass  # damaged, of an earlier format, of other heads or not ours: made again below
        try:
            found = self.blocks.get(key, self.engine.fp_id, self.engine.fp)
        except BlockRefused:
            return None
        if found is None:
            return None
        keys = block_keys(self.engine.rt, found[1], self.kv_heads)
        buffer = io.BytesIO()
        np.savez(buffer, heads=np.array(self.kv_heads, dtype=np.int32).reshape(-1, 2), keys=keys)
        try:
            atomic_write(path, buffer.getvalue())
        except OSError:
            pass  # kept for this question only
        return keys
