"""Model layer: where models come from, the backends, schema-constrained JSON.

``open_model(settings)`` builds the configured backend; nothing here imports
``llama_cpp`` until a local model is actually opened.
"""

from __future__ import annotations

from pathlib import Path

from memcli.config import Settings
from memcli.errors import ConfigError
from memcli.llm.base import CallStats, ChatModel, Completion, ModelError

__all__ = ["CallStats", "ChatModel", "Completion", "ModelError", "model_path", "open_model"]


def model_path(settings: Settings) -> Path:
    """The GGUF file the llama backend will load."""
    from memcli.llm.models import default_model_path

    if settings.model_path:
        return Path(settings.model_path).expanduser()
    return default_model_path()


def uses_server(settings: Settings) -> bool:
    """Whether the configured model is an OpenAI-compatible server rather than a local GGUF file."""
    return settings.model_backend == "openai" or (
        settings.model_backend == "llama" and bool(settings.model_base_url) and not settings.model_path)


def open_model(settings: Settings, *, verbose: bool = False, kv_sequences: int = 1) -> ChatModel:
    """The configured model (the one seam where tests put a scripted model in place of a real one).

    ``kv_sequences`` > 1 asks for a local context with spare sequences (KV blocks need them).
    """
    backend = settings.model_backend
    if uses_server(settings):
        if kv_sequences > 1:
            raise ConfigError("KV blocks need the local llama.cpp backend, not an OpenAI-compatible server",
                              hint="unset --base-url / MEMCLI_BASE_URL, or use --model PATH.gguf")
        if not settings.model_base_url:
            raise ConfigError("model.backend is openai but model.base_url is not set",
                              hint="pass --base-url URL or set MEMCLI_BASE_URL")
        from memcli.llm.openai_compat import OpenAICompatModel

        return OpenAICompatModel(settings.model_base_url, settings.model_name,
                                 api_key_env=settings.model_api_key_env, json_format=settings.model_json_format,
                                 timeout=settings.model_timeout, seed=settings.model_seed)
    if backend != "llama":
        raise ConfigError(f"unknown model.backend {backend!r} (llama or openai)")
    from memcli.llm.llamacpp import LlamaCppModel

    return LlamaCppModel(model_path(settings), n_ctx=settings.model_n_ctx, threads=settings.model_threads,
                         gpu_layers=settings.model_gpu_layers, seed=settings.model_seed,
                         extra_buffers=settings.model_extra_buffers, flash_attn=settings.model_flash_attn,
                         verbose=verbose, kv_sequences=kv_sequences, batch_threads=settings.model_batch_threads)
