"""The only module that imports ``llama_cpp`` (lazily: --help and --version stay light).

:class:`LlamaCppModel` runs a local GGUF file; the chat template comes from
the GGUF's metadata. JSON answers are constrained by a grammar compiled from
the schema (llama-cpp-python's ``response_format``).
"""

from __future__ import annotations

import os
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable

from memcli.errors import ConfigError
from memcli.llm.base import Completion, ModelError


def _quiet_llama_logs(verbose: bool) -> None:
    import logging

    logging.getLogger("llama-cpp-python").setLevel(logging.DEBUG if verbose else logging.CRITICAL)


def tokenizer_counter(model_path: Path) -> Callable[[str], int]:
    """A token-counting function backed by the model's own tokenizer (vocabulary only)."""
    import llama_cpp

    _quiet_llama_logs(False)
    vocab = llama_cpp.Llama(model_path=str(model_path), vocab_only=True, verbose=False)

    def count(text: str) -> int:
        return len(vocab.tokenize(text.encode("utf-8"), add_bos=False, special=False))

    return count


def gpu_offload_supported() -> bool:
    """Whether this llama.cpp build can offload layers to a GPU (CUDA, Metal, Vulkan...)."""
    import llama_cpp

    return bool(llama_cpp.llama_supports_gpu_offload())


def system_info() -> str:
    """llama.cpp's own description of the CPU features it was built with."""
    import llama_cpp

    info = llama_cpp.llama_print_system_info()
    return info.decode("utf-8", "replace") if isinstance(info, bytes) else str(info)


def extra_buffers_wanted(setting: str) -> bool:
    """Whether to let llama.cpp use extra CPU buffer types (repacked weights, AMX).

    "auto" turns them off when the build has AMX kernels: on this project's
    machines the AMX matrix multiply crashes (SIGSEGV) on SmolLM2's Q4_1
    weights, while plain repacking is a large prefill speed-up elsewhere.
    """
    if setting in ("on", "off"):
        return setting == "on"
    if setting != "auto":
        raise ConfigError(f"model.extra_buffers must be on, off or auto, not {setting!r}")
    return "AMX_INT8 = 1" not in system_info()


@contextmanager
def extra_buffer_params(extra_buffers: bool):
    """Default model parameters with ``use_extra_bufts`` set (the ``Llama`` class has no argument for it)."""
    import llama_cpp.llama_cpp as low

    original = low.llama_model_default_params

    def patched():
        params = original()
        params.use_extra_bufts = extra_buffers
        return params

    low.llama_model_default_params = patched
    try:
        yield
    finally:
        low.llama_model_default_params = original


@contextmanager
def context_params(**fields):
    """Default context parameters with ``fields`` set (n_seq_max and kv_unified have no ``Llama`` argument)."""
    import llama_cpp.llama_cpp as low

    original = low.llama_context_default_params

    def patched():
        params = original()
        for name, value in fields.items():
            setattr(params, name, value)
        return params

    low.llama_context_default_params = patched
    try:
        yield
    finally:
        low.llama_context_default_params = original


def library_version() -> str:
    import llama_cpp

    return getattr(llama_cpp, "__version__", "unknown")


def common_prefix(a: list[int], b: list[int]) -> int:
    """How many leading tokens ``a`` and ``b`` share."""
    same = 0
    for x, y in zip(a, b):
        if x != y:
            break
        same += 1
    return same


def _reused_prefix(before: list[int], prompt: list[int]) -> int:
    """Prompt tokens llama-cpp-python kept from the previous call (it re-evaluates at least one)."""
    return max(0, min(common_prefix(before, prompt), len(prompt) - 1))


class LlamaCppModel:
    """A local GGUF model through llama-cpp-python."""

    def __init__(self, path: Path, *, n_ctx: int = 8192, threads: int = 0, gpu_layers: int = -1,
                 seed: int = 0, extra_buffers: str = "auto", flash_attn: bool = False, verbose: bool = False,
                 kv_sequences: int = 1, **llama_options: Any):
        """``kv_sequences`` > 1 gives the context spare sequences (unified KV cells) for KV-block work;
        ``llama_options`` go to ``llama_cpp.Llama`` as they are (``type_k``, ``rope_freq_base``, ...)."""
        import llama_cpp

        if not path.is_file():
            raise ConfigError(f"model file {path} does not exist",
                              hint="pass --model PATH to a GGUF file, or unset MEMCLI_MODEL for the default model")
        _quiet_llama_logs(verbose)
        threads = threads or os.cpu_count() or 1
        extra = extra_buffers_wanted(extra_buffers)
        try:
            sequences = {"n_seq_max": kv_sequences, "kv_unified": True} if kv_sequences > 1 else {}
            with extra_buffer_params(extra), context_params(**sequences):
                self.llm = llama_cpp.Llama(
                    model_path=str(path), n_ctx=n_ctx, n_threads=threads, n_threads_batch=threads,
                    n_gpu_layers=gpu_layers, seed=seed, flash_attn=flash_attn, verbose=verbose, **llama_options,
                )
        except (ValueError, RuntimeError, OSError) as exc:
            raise ConfigError(f"cannot load model {path}: {exc}") from None
        self.path = path
        self.name = path.name
        self.seed = seed
        self.prefix_cache = None  # a memcli.kv.prompt_blocks.PromptBlocks: shared prompt prefixes as KV blocks
        self.settings = {"n_ctx": n_ctx, "threads": threads, "gpu_layers": gpu_layers,
                         "extra_buffers": extra, "flash_attn": flash_attn, **llama_options}

    def count_tokens(self, text: str) -> int:
        return len(self.llm.tokenize(text.encode("utf-8"), add_bos=False, special=False))

    def chat(self, messages: list[dict], *, schema: dict | None = None, max_tokens: int = 512,
             temperature: float = 0.0, shared: list[list[dict]] | None = None) -> Completion:
        import llama_cpp

        kwargs: dict[str, Any] = {"temperature": temperature, "max_tokens": max_tokens, "seed": self.seed}
        if schema is not None:
            kwargs["response_format"] = {"type": "json_object", "schema": schema}
            kwargs["repeat_penalty"] = 1.3  # small models loop inside JSON strings without it
        start = time.perf_counter()
        links = self.prefix_cache.chain(messages, shared) if self.prefix_cache is not None and shared else []
        restored = self.prefix_cache.restore(links) if links else 0
        restore_s = time.perf_counter() - start
        cached = list(self.llm._input_ids[: self.llm.n_tokens])  # what the context holds before the call
        llama_cpp.llama_perf_context_reset(self.llm._ctx.ctx)
        try:
            result = self.llm.create_chat_completion(messages=messages, **kwargs)
        except ValueError as exc:  # e.g. the prompt does not fit the context window
            raise ModelError(str(exc)) from None
        perf = llama_cpp.llama_perf_context(self.llm._ctx.ctx)
        if links:
            self.prefix_cache.save(links)
        choice = result["choices"][0]
        usage = result.get("usage") or {}
        prompt_tokens = int(usage.get("prompt_tokens", 0))
        return Completion(
            text=choice["message"].get("content") or "",
            prompt_tokens=prompt_tokens,
            completion_tokens=int(usage.get("completion_tokens", 0)),
            finish_reason=choice.get("finish_reason"),
            seconds=time.perf_counter() - start,
            prefilled_tokens=prompt_tokens - _reused_prefix(cached, list(self.llm._input_ids[:prompt_tokens])),
            restored_tokens=restored,
            # llama.cpp times batched decodes as prompt evaluation and single-token ones as generation
            ttft_s=restore_s + perf.t_p_eval_ms / 1000,
            tokens_per_s=perf.n_eval / (perf.t_eval_ms / 1000) if perf.t_eval_ms > 0 else None,
        )

    def describe(self) -> dict[str, Any]:
        return {"backend": "llama", "path": str(self.path), **self.settings,
                "n_ctx_train": self.llm.n_ctx_train() if hasattr(self.llm, "n_ctx_train") else None}
