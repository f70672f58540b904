"""The only module that imports ``llama_cpp`` (lazily: --help and --version stay light)."""

from __future__ import annotations

from pathlib import Path
from typing import Callable


def tokenizer_counter(model_path: Path) -> Callable[[str], int]:
    """A token-counting function backed by the model's own tokenizer (vocabulary only)."""
    import llama_cpp

    vocab = llama_cpp.Llama(model_path=str(model_path), vocab_only=True, verbose=False)

    def count(text: str) -> int:
        return len(vocab.tokenize(text.encode("utf-8"), add_bos=False, special=False))

    return count
