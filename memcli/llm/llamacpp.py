"""The chat-model backend for a local GGUF file, on :class:`~memcli.llm.runtime.LlamaRuntime`.

The prompt is the GGUF's own chat template; JSON answers are constrained by
a grammar compiled from the schema. With a prefix cache attached
(:mod:`memcli.kv.prompt_blocks`), the shared parts of a prompt are restored
from KV blocks before the call and saved after it.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from memcli.errors import ConfigError
from memcli.llm.base import Completion, ModelError
from memcli.llm.runtime import LlamaRuntime, common_prefix, extra_buffers_wanted, schema_grammar

JSON_REPEAT_PENALTY = 1.3  # small models loop inside JSON strings without it


class LlamaCppModel:
    """A local GGUF model: chat completions (free text or schema-constrained JSON) on one runtime."""

    def __init__(self, path: Path, *, n_ctx: int = 8192, threads: int = 0, gpu_layers: int = -1,
                 seed: int = 0, extra_buffers: str = "auto", flash_attn: bool = False, verbose: bool = False,
                 kv_sequences: int = 1, type_k: int | None = None, type_v: int | None = None,
                 batch_threads: int = 0):
        """``kv_sequences`` > 1 gives the context spare sequences (unified KV cells) for KV-block work."""
        extra = extra_buffers_wanted(extra_buffers)
        try:
            self.runtime = LlamaRuntime(Path(path), n_ctx=n_ctx, threads=threads, gpu_layers=gpu_layers,
                                        extra_buffers=extra, flash_attn=flash_attn, sequences=kv_sequences,
                                        type_k=type_k, type_v=type_v, verbose=verbose,
                                        batch_threads=batch_threads)
        except (ValueError, RuntimeError, OSError) as exc:
            raise ConfigError(f"cannot load model {path}: {exc}") from None
        self.path = Path(path)
        self.name = self.path.name
        self.seed = seed
        self.prefix_cache = None  # a memcli.kv.prompt_blocks.PromptBlocks: shared prompt prefixes as KV blocks
        self.settings = {"n_ctx": n_ctx, "threads": self.runtime.threads,
                         "batch_threads": self.runtime.batch_threads,
                         "scoring_threads": self.runtime.scoring_threads, "gpu_layers": gpu_layers,
                         "extra_buffers": extra, "flash_attn": flash_attn,
                         **({"type_k": type_k} if type_k is not None else {}),
                         **({"type_v": type_v} if type_v is not None else {})}

    def count_tokens(self, text: str) -> int:
        return len(self.runtime.tokenize(text)) if text else 0

    def chat(self, messages: list[dict], *, schema: dict | None = None, max_tokens: int = 512,
             temperature: float = 0.0, shared: list[list[dict]] | None = None, stop: list[str] | None = None,
             on_text=None) -> Completion:
        runtime = self.runtime
        start = time.perf_counter()
        links = self.prefix_cache.chain(messages, shared) if self.prefix_cache is not None and shared else []
        restored = self.prefix_cache.restore(links) if links else 0
        restore_s = time.perf_counter() - start
        try:
            text, ends = runtime.render_chat(messages)
            prompt = runtime.chat_tokens(text)
            if len(prompt) >= runtime.n_ctx:
                raise ModelError(f"the prompt is {len(prompt)} tokens; the context window holds {runtime.n_ctx}")
            done = runtime.generate(prompt, max_tokens=max_tokens, stop=[*ends, *(stop or ())], temperature=temperature,
                                    seed=self.seed, on_text=on_text,
                                    grammar=schema_grammar(schema) if schema is not None else None,
                                    repeat_penalty=JSON_REPEAT_PENALTY if schema is not None else 1.0)
        except (ValueError, ConfigError) as exc:  # e.g. the prompt does not fit the context window
            raise ModelError(getattr(exc, "message", None) or str(exc)) from None
        if links:
            self.prefix_cache.save(links)
        return Completion(
            text=done.text, prompt_tokens=done.prompt_tokens, completion_tokens=len(done.tokens),
            finish_reason=done.finish_reason, seconds=time.perf_counter() - start,
            prefilled_tokens=done.prefilled_tokens, restored_tokens=restored,
            ttft_s=restore_s + done.ttft_s, tokens_per_s=done.tokens_per_s)

    def score(self, messages: list[dict], candidates: list[str], *,
              shared: list[list[dict]] | None = None) -> tuple[list[list[float]], Completion]:
        """How likely the model finds each candidate as its reply to ``messages``: the log-probability
        of each of the candidate's tokens, one list per candidate, and the call's accounting (one
        prefill of the prompt, then each candidate read after it; nothing is generated)."""
        runtime = self.runtime
        start = time.perf_counter()
        links = self.prefix_cache.chain(messages, shared) if self.prefix_cache is not None and shared else []
        restored = self.prefix_cache.restore(links) if links else 0
        try:
            text, _ends = runtime.render_chat(messages)
            prompt = runtime.chat_tokens(text)
            kept = min(len(prompt) - 1, common_prefix(runtime.tokens, prompt))
            wanted = [runtime.tokenize(c)[:runtime.n_batch] for c in candidates]
            if len(prompt) + max((len(w) for w in wanted), default=0) >= runtime.n_ctx:
                raise ModelError(f"the prompt is {len(prompt)} tokens; the context window holds {runtime.n_ctx}")
            first = time.perf_counter()
            scores = runtime.continuation_logprobs(prompt, wanted)
        except (ValueError, ConfigError, RuntimeError) as exc:
            raise ModelError(getattr(exc, "message", None) or str(exc)) from None
        if links:
            self.prefix_cache.save(links)
        return scores, Completion(text="", prompt_tokens=len(prompt), completion_tokens=0, finish_reason="score",
                                  seconds=time.perf_counter() - start, prefilled_tokens=len(prompt) - kept,
                                  restored_tokens=restored, ttft_s=first - start)

    def describe(self) -> dict[str, Any]:
        return {"backend": "llama", "path": str(self.path), **self.settings,
                "n_ctx_train": self.runtime.n_ctx_train, "n_params": self.runtime.n_params}
