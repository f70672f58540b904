"""An OpenAI-compatible chat-completions backend (llama-server, vLLM, Ollama, hosted APIs).

Uses only the standard library. JSON answers ask for ``response_format``
``{"type": "json_schema", ...}``; a server that rejects that form (such as
llama-cpp-python's own server) is asked again with ``{"type": "json_object",
"schema": ...}``, and the form that worked is kept for the session.
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from typing import Any

from memcli import parsing
from memcli.errors import ConfigError
from memcli.llm.base import Completion, ModelError
from memcli.tokens import count_tokens


class OpenAICompatModel:
    def __init__(self, base_url: str, model: str, *, api_key_env: str = "MEMCLI_API_KEY",
                 json_format: str = "json_schema", timeout: float = 300.0, seed: int = 0):
        if not base_url.startswith(("http://", "https://")):
            raise ConfigError(f"model.base_url {base_url!r} is not an http(s) URL")
        if json_format not in ("json_schema", "json_object"):
            raise ConfigError(f"model.json_format must be json_schema or json_object, not {json_format!r}")
        self.base_url = base_url.rstrip("/")
        self.name = model
        self.api_key = os.environ.get(api_key_env) or os.environ.get("OPENAI_API_KEY")
        self.json_format = json_format
        self.timeout = timeout
        self.seed = seed

    def _post(self, path: str, payload: dict) -> dict:
        request = urllib.request.Request(
            self.base_url + path, data=json.dumps(payload).encode(), method="POST",
            headers={"Content-Type": "application/json",
                     **({"Authorization": f"Bearer {self.api_key}"} if self.api_key else {})})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return parsing.loads(response.read())
        except urllib.error.HTTPError as exc:
            body = exc.read()[:500].decode("utf-8", "replace")
            if exc.code in (401, 403):
                raise ConfigError(f"{self.base_url}: not authorized ({exc.code})",
                                  hint="set the API key in $MEMCLI_API_KEY (or model.api_key_env)") from None
            raise _HTTPStatus(exc.code, body) from None
        except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
            raise ModelError(f"cannot reach {self.base_url}: {getattr(exc, 'reason', exc)}") from None
        except ValueError as exc:
            raise ModelError(f"{self.base_url}: answer is not JSON: {exc}") from None

    def _format(self, schema: dict) -> dict:
        if self.json_format == "json_schema":
            return {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema, "strict": False}}
        return {"type": "json_object", "schema": schema}

    def chat(self, messages: list[dict], *, schema: dict | None = None, max_tokens: int = 512,
             temperature: float = 0.0, shared: list[list[dict]] | None = None,
             stop: list[str] | None = None) -> Completion:
        """``shared`` is ignored: servers keep their own prompt caches (``cached_tokens`` reports them)."""
        payload: dict[str, Any] = {"model": self.name, "messages": messages, "max_tokens": max_tokens,
                                   "temperature": temperature, "seed": self.seed}
        start = time.perf_counter()
        if stop:
            payload["stop"] = list(stop)[:4]
        if schema is not None:
            payload["response_format"] = self._format(schema)
        try:
            data = self._post("/chat/completions", payload)
        except _HTTPStatus as exc:
            rejected_format = exc.code in (400, 422) or "response_format" in exc.body
            if schema is None or self.json_format != "json_schema" or not rejected_format:
                raise ModelError(f"{self.base_url}: HTTP {exc.code}: {exc.body}") from None
            self.json_format = "json_object"  # e.g. llama-cpp-python's server (which answers 500)
            payload["response_format"] = self._format(schema)
            try:
                data = self._post("/chat/completions", payload)
            except _HTTPStatus as again:
                raise ModelError(f"{self.base_url}: HTTP {again.code}: {again.body}") from None
        try:
            choice = data["choices"][0]
            text = choice["message"].get("content") or ""
        except (KeyError, IndexError, TypeError, AttributeError):
            raise ModelError(f"{self.base_url}: unexpected answer shape") from None
        usage = data.get("usage") or {}
        prompt = int(usage.get("prompt_tokens") or 0)
        details = usage.get("prompt_tokens_details") or {}
        cached = details.get("cached_tokens") if isinstance(details, dict) else None
        return Completion(text=text, prompt_tokens=prompt, completion_tokens=int(usage.get("completion_tokens") or 0),
                          finish_reason=choice.get("finish_reason"), seconds=time.perf_counter() - start,
                          prefilled_tokens=prompt - int(cached) if isinstance(cached, int) else None)

    def count_tokens(self, text: str) -> int:
        return count_tokens(text)  # the server's tokenizer is not available here

    def describe(self) -> dict[str, Any]:
        return {"backend": "openai", "base_url": self.base_url, "model": self.name,
                "json_format": self.json_format, "api_key": "set" if self.api_key else "not set"}


class _HTTPStatus(Exception):
    def __init__(self, code: int, body: str):
        super().__init__(f"HTTP {code}")
        self.code = code
        self.body = body
