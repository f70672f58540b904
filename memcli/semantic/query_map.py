"""The question map: a question's sentence vector moved toward the vectors of lines that answer such questions.

all-MiniLM-L6-v2 puts paraphrases near each other, and a question is not a paraphrase of the line that
answers it. ``query_map.safetensors`` (package data, 0.6 MB) holds a linear map trained on public
question/answer-line pairs (``training/train_query_map.py``; docs/benchmarks.md, "Evidence ranking", gives
its recipe and what it measured): the question's vector is moved a share of the way toward
``normalize(W q + b)`` (the ranking's ``Tuning.question_map``). Entries keep the encoder's own vectors, so
nothing stored is computed again; the map is for the encoder it was trained with and is left out for any other.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import resources
from pathlib import Path

import numpy as np

from memcli.semantic.encoder import MODEL_NAME, EncoderMissing, read_safetensors

WEIGHTS = "query_map.safetensors"


def weights_path() -> Path:
    return Path(str(resources.files("memcli.semantic").joinpath(WEIGHTS)))


class QueryMap:
    """The trained map (``map``) and a question's vector moved part of the way toward it (``question``)."""

    def __init__(self, path: Path | None = None):
        path = path or weights_path()
        try:
            tensors = read_safetensors(path)
            self.W, self.b = np.asarray(tensors["W"], np.float32), np.asarray(tensors["b"], np.float32)
        except (OSError, ValueError, KeyError) as exc:
            raise EncoderMissing(f"the question map {path} cannot be read ({exc})", hint="reinstall memcli") from exc

    def map(self, vector: np.ndarray) -> np.ndarray:
        """The trained map alone: ``normalize(W q + b)``."""
        return unit(self.W @ vector + self.b)

    def question(self, vector: np.ndarray, share: float) -> np.ndarray:
        """A question's vector (the encoder's, unit length) as the ranking compares it with entries':
        ``share`` of the way to its mapped one (0: the encoder's own)."""
        return unit(share * self.map(vector) + (1.0 - share) * vector) if share else vector


def unit(vector: np.ndarray) -> np.ndarray:
    return (vector / max(float(np.linalg.norm(vector)), 1e-12)).astype(np.float32)


def for_encoder(encoder, on_warning: Callable[[str], None] | None = None) -> QueryMap | None:
    """The map for ``encoder``'s questions: None for an encoder it was not trained for, or (with a warning)
    when it cannot be read, and questions are then compared with entries by the encoder's own vectors."""
    if getattr(encoder, "name", None) != MODEL_NAME:
        return None
    try:
        qmap = QueryMap()
    except EncoderMissing as exc:
        if on_warning:
            on_warning(f"{exc.message}: questions are compared with entries by the encoder's own vectors ({exc.hint})")
        return None
    return qmap if qmap.W.shape == (encoder.dimensions, encoder.dimensions) else None
