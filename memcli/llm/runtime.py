"""The one owner of llama.cpp: a model, its context (with its KV memory) and a batch.

Everything memcli does with llama.cpp goes through :class:`LlamaRuntime`:
tokenizing, the chat template (rendered from the GGUF's own template), the
end-of-generation tokens (the model's own EOS/EOT metadata), decoding into a
sequence, logits, sampling, sequence copy/remove/shift, sequence state
save/load, and the fingerprint a saved state depends on. It talks to the
public C API of llama-cpp-python (``llama_cpp.llama_cpp``, a mirror of
``llama.h``) and sets every model and context parameter on the objects it
creates: nothing process-wide is patched. ``llama_cpp`` is imported only when
a runtime is created, so ``--help`` and ``--version`` stay light.

Sequence 0 holds the conversation; :attr:`LlamaRuntime.tokens` records what
it holds, position by position. A context opened with ``sequences=2`` has a
spare sequence (unified KV cells) for KV-block work.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import logging
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from memcli import deadline
from memcli.cpu import half_the_cores
from memcli.errors import ConfigError
from memcli.llm import priority
from memcli.llm.probes import AttentionProbes, as_float

PENALTY_LAST_N = 64  # tokens the repeat penalty looks back over (llama-cpp-python's default)
_PROBE = "Caf\u00e9 na\u00efve \u2014 12,345 tokens? <b>yes</b>\n\u65e5\u672c"
_backend_ready = False


def _llama():
    """The low-level binding, with llama.cpp's backend initialised once per process."""
    global _backend_ready
    import llama_cpp.llama_cpp as ll

    if not _backend_ready:
        ll.llama_backend_init()
        _backend_ready = True
    return ll


def _quiet_logs(verbose: bool) -> None:
    logging.getLogger("llama-cpp-python").setLevel(logging.DEBUG if verbose else logging.CRITICAL)


def library_info() -> dict:
    """What this llama.cpp build can do: GPU offload and the CPU features it was built with."""
    ll = _llama()
    info = ll.llama_print_system_info()
    import llama_cpp

    return {"gpu_offload": bool(ll.llama_supports_gpu_offload()),
            "system_info": (info.decode("utf-8", "replace") if isinstance(info, bytes) else str(info)).strip(),
            "version": getattr(llama_cpp, "__version__", "")}


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
    return "AMX_INT8 = 1" not in library_info()["system_info"]


def default_threads() -> int:
    """llama.cpp's threads when none are set: half the cores, at least one. With every core, a decode
    step waits for its slowest thread, so another busy program on the machine cuts generation to a
    quarter of its speed (2 cores: 81 -> 21 tokens/s); with half, to 0.93 of it (52 -> 48 tokens/s),
    at the price of a slower prefill when the machine is idle (benchmarks/bench_threads.py,
    docs/benchmarks.md "Threads")."""
    return half_the_cores()


def common_prefix(a: list[int], b: list[int]) -> int:
    """How many leading tokens ``a`` and ``b`` share."""
    same = 0
    for x, y in zip(a, b):
        if x != y:
            break
        same += 1
    return same


@dataclass
class Generation:
    """One greedy (or sampled) continuation and what it cost."""

    tokens: list[int]
    text: str
    finish_reason: str  # stop (an end-of-generation token or stop string) | length | repeat (halted)
    prompt_tokens: int
    prefilled_tokens: int  # prompt tokens decoded (the rest were already in the context)
    ttft_s: float  # prefill + the first token
    tokens_per_s: float | None


class _Freed:
    """Frees its llama.cpp objects when collected (``close`` may also be called earlier)."""

    def close(self) -> None:
        raise NotImplementedError

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown: the library may be gone already
            pass


class Vocabulary(_Freed):
    """A GGUF file's tokenizer alone (no weights in memory): exact token counts without a context."""

    def __init__(self, path: Path):
        ll = _llama()
        _quiet_logs(False)
        params = ll.llama_model_default_params()
        params.vocab_only = True
        self._ll = ll
        self._model = ll.llama_model_load_from_file(str(path).encode("utf-8"), params)
        if not self._model:
            raise ConfigError(f"cannot read the tokenizer of {path}")
        self._vocab = ll.llama_model_get_vocab(self._model)

    def tokenize(self, text: str, *, special: bool = False, bos: bool = False) -> list[int]:
        return _tokenize(self._ll, self._vocab, text, special=special, bos=bos)

    def count(self, text: str) -> int:
        return len(self.tokenize(text)) if text else 0

    def close(self) -> None:
        if self._model:
            self._ll.llama_model_free(self._model)
            self._model = None



def _tokenize(ll, vocab, text: str, *, special: bool, bos: bool) -> list[int]:
    data = text.encode("utf-8")
    size = len(data) + 8
    buffer = (ll.llama_token * size)()
    n = ll.llama_tokenize(vocab, data, len(data), buffer, size, bos, special)
    if n < 0:
        size = -n
        buffer = (ll.llama_token * size)()
        n = ll.llama_tokenize(vocab, data, len(data), buffer, size, bos, special)
    return list(buffer[:n])


class LlamaRuntime(AttentionProbes, _Freed):
    """A local GGUF model, one context with ``sequences`` sequences, and a decode batch."""

    def __init__(self, path: Path, *, n_ctx: int = 8192, threads: int = 0, gpu_layers: int = -1,
                 extra_buffers: bool = True, flash_attn: bool = False, sequences: int = 1, n_batch: int = 512,
                 type_k: int | None = None, type_v: int | None = None, verbose: bool = False,
                 batch_threads: int = 0):
        ll = _llama()
        _quiet_logs(verbose)
        if not Path(path).is_file():
            raise ConfigError(f"model file {path} does not exist",
                              hint="pass --model PATH to a GGUF file, or unset MEMCLI_MODEL for the default model")
        self._ll = ll
        self.path = Path(path)
        self.threads = threads or default_threads()
        # a prompt is read by as many threads as generate unless told: every core reads it 1.7x as fast
        # alone, but the warm chat turn's lead over a cold one then fell from 115x to 95x (docs/benchmarks.md,
        # "Threads"), so more is a choice (model.batch_threads), not the default; a call that generates
        # nothing (continuation_logprobs) reads on every core unless told (scoring_threads)
        self.batch_threads = batch_threads or self.threads
        self.scoring_threads = batch_threads or max(self.threads, os.cpu_count() or 1)
        self.gpu_layers = gpu_layers
        model_params = ll.llama_model_default_params()
        model_params.n_gpu_layers = 0x7FFFFFFF if gpu_layers == -1 else gpu_layers
        model_params.use_extra_bufts = extra_buffers
        self._model = ll.llama_model_load_from_file(str(self.path).encode("utf-8"), model_params)
        if not self._model:
            raise ConfigError(f"cannot load model {self.path}: llama.cpp could not read it as a GGUF model")
        self._vocab = ll.llama_model_get_vocab(self._model)
        self._ctx = None
        self._batch = None
        params = ll.llama_context_default_params()
        params.n_ctx = n_ctx
        params.n_batch = min(n_ctx, n_batch)
        params.n_ubatch = params.n_batch
        params.n_threads = self.threads
        params.n_threads_batch = self.batch_threads
        params.flash_attn_type = (ll.LLAMA_FLASH_ATTN_TYPE_ENABLED if flash_attn
                                  else ll.LLAMA_FLASH_ATTN_TYPE_DISABLED)
        params.n_seq_max = sequences
        params.kv_unified = sequences > 1
        if type_k is not None:
            params.type_k = type_k
        if type_v is not None:
            params.type_v = type_v
        self.params = params
        self._ctx = ll.llama_init_from_model(self._model, params)
        if not self._ctx:
            self.close()
            raise ConfigError(f"cannot create a llama.cpp context of {n_ctx} tokens for {self.path}",
                              hint="lower model.n_ctx (--n-ctx)")
        self.n_ctx = int(ll.llama_n_ctx(self._ctx))
        self.n_batch = int(ll.llama_n_batch(self._ctx))
        self.sequences = sequences
        self._batch = ll.llama_batch_init(self.n_batch, 0, sequences)
        self.n_vocab = int(ll.llama_vocab_n_tokens(self._vocab))
        self.tokens: list[int] = []  # what sequence 0 holds, position by position
        self.metadata = self._read_metadata()
        self._formatter = None
        priority.hold()  # background model work waits while this model is open
        self._held = True

    # ------------------------------------------------------------ life

    def close(self) -> None:
        if getattr(self, "_probe_ctx", None):
            self._ll.llama_free(self._probe_ctx)
            self._probe_ctx = None
        if getattr(self, "_held", False):
            self._held = False
            priority.release()
        ll = self._ll
        if getattr(self, "_batch", None) is not None:
            ll.llama_batch_free(self._batch)
            self._batch = None
        if getattr(self, "_ctx", None):
            ll.llama_free(self._ctx)
            self._ctx = None
        if getattr(self, "_model", None):
            ll.llama_model_free(self._model)
            self._model = None


    # ------------------------------------------------------------ model facts

    def _read_metadata(self) -> dict[str, str]:
        ll, out = self._ll, {}
        buffer = ctypes.create_string_buffer(1 << 16)
        for i in range(ll.llama_model_meta_count(self._model)):
            if ll.llama_model_meta_key_by_index(self._model, i, buffer, len(buffer)) < 0:
                continue
            key = buffer.value.decode("utf-8", "replace")
            length = ll.llama_model_meta_val_str_by_index(self._model, i, buffer, len(buffer))
            if length >= len(buffer):  # a long value (a chat template): read it whole
                big = ctypes.create_string_buffer(length + 1)
                ll.llama_model_meta_val_str_by_index(self._model, i, big, len(big))
                out[key] = big.value.decode("utf-8", "replace")
            elif length >= 0:
                out[key] = buffer.value.decode("utf-8", "replace")
        return out

    @property
    def n_params(self) -> int:
        return int(self._ll.llama_model_n_params(self._model))

    @property
    def n_ctx_train(self) -> int:
        return int(self._ll.llama_model_n_ctx_train(self._model))

    def token_text(self, token: int) -> str:
        if token < 0:
            return ""
        return self._ll.llama_vocab_get_text(self._vocab, token).decode("utf-8", "replace")

    def is_end(self, token: int) -> bool:
        """Whether ``token`` ends generation by the model's own metadata (EOS, EOT, end of turn...)."""
        return bool(self._ll.llama_vocab_is_eog(self._vocab, token))

    def fingerprint(self, model_sha256: str) -> dict:
        """What a saved sequence state depends on: weights, architecture, KV layout and types, RoPE,
        tokenizer, offload, llama.cpp and its state format."""
        ll, params, meta = self._ll, self.params, self.metadata
        arch = meta.get("general.architecture", "")
        probe = self.tokenize(_PROBE)
        tokenizer = hashlib.sha256(json.dumps([meta.get("tokenizer.chat_template", ""), self.n_vocab, probe])
                                   .encode()).hexdigest()
        import llama_cpp

        return {
            "model_sha256": model_sha256,
            "architecture": arch,
            "n_layer": ll.llama_model_n_layer(self._model),
            "n_embd": ll.llama_model_n_embd(self._model),
            "n_head_kv": ll.llama_model_n_head_kv(self._model),
            "n_vocab": self.n_vocab,
            "type_k": int(params.type_k),
            "type_v": int(params.type_v),
            "flash_attn": int(params.flash_attn_type),
            "rope_freq_base": float(params.rope_freq_base) or as_float(meta.get(f"{arch}.rope.freq_base")),
            "rope_freq_scale": float(params.rope_freq_scale) or ll.llama_model_rope_freq_scale_train(self._model),
            "rope_scaling_type": int(params.rope_scaling_type),
            "yarn_ext_factor": float(params.yarn_ext_factor),
            "tokenizer": tokenizer,
            "gpu_layers": self.gpu_layers,
            "llama_cpp": getattr(llama_cpp, "__version__", ""),
            "state_version": ll.LLAMA_STATE_SEQ_VERSION,
        }

    # ------------------------------------------------------------ text

    def tokenize(self, text: str, *, special: bool = False, bos: bool = False) -> list[int]:
        """Token ids; memory and user text use ``special=False`` so it can never spell control tokens."""
        return _tokenize(self._ll, self._vocab, text, special=special, bos=bos)

    def detokenize(self, tokens: list[int]) -> str:
        buffer = ctypes.create_string_buffer(64)
        out = bytearray()
        for token in tokens:
            n = self._ll.llama_token_to_piece(self._vocab, token, buffer, len(buffer), 0, False)
            if n > len(buffer):
                buffer = ctypes.create_string_buffer(n)
                n = self._ll.llama_token_to_piece(self._vocab, token, buffer, len(buffer), 0, False)
            out += buffer.raw[:max(n, 0)]
        return out.decode("utf-8", "ignore")

    def render_chat(self, messages: list[dict]) -> tuple[str, list[str]]:
        """(prompt text with the generation prompt, stop strings) by the GGUF's own chat template."""
        if self._formatter is None:
            from llama_cpp.llama_chat_format import Jinja2ChatFormatter

            template = self.metadata.get("tokenizer.chat_template")
            if not template:
                raise ConfigError(f"{self.path.name} has no chat template in its GGUF metadata",
                                  hint="use a chat (instruct) model")
            eos = self._ll.llama_vocab_eos(self._vocab)
            bos = self._ll.llama_vocab_bos(self._vocab)
            self._formatter = Jinja2ChatFormatter(template=template, eos_token=self.token_text(eos),
                                                  bos_token=self.token_text(bos))
        rendered = self._formatter(messages=messages)
        stop = rendered.stop if isinstance(rendered.stop, list) else [rendered.stop] if rendered.stop else []
        return rendered.prompt, [s for s in stop if s]

    def chat_tokens(self, text: str) -> list[int]:
        """A rendered chat prompt as tokens (the template's own control tokens are parsed)."""
        return self.tokenize(text, special=True)

    # ------------------------------------------------------------ the context

    def _memory(self):
        return self._ll.llama_get_memory(self._ctx)

    def seq_rm(self, seq: int, p0: int = -1, p1: int = -1) -> None:
        self._ll.llama_memory_seq_rm(self._memory(), seq, p0, p1)

    def seq_cp(self, src: int, dst: int, p0: int = -1, p1: int = -1) -> None:
        self._ll.llama_memory_seq_cp(self._memory(), src, dst, p0, p1)

    def seq_shift(self, seq: int, p0: int, p1: int, delta: int) -> None:
        """Move the cells of ``seq`` in ``[p0, p1)`` by ``delta`` positions (keys are re-rotated)."""
        self._ll.llama_memory_seq_add(self._memory(), seq, p0, p1, delta)

    def seq_pos_max(self, seq: int) -> int:
        return int(self._ll.llama_memory_seq_pos_max(self._memory(), seq))

    def clear(self) -> None:
        self._ll.llama_memory_clear(self._memory(), True)
        self.tokens = []

    def truncate(self, n: int) -> None:
        """Forget every cell of sequence 0 from position ``n`` on."""
        if n < len(self.tokens):
            self.seq_rm(0, n, -1)
            del self.tokens[n:]

    def placed(self, pos: int, tokens: list[int]) -> None:
        """Record that sequence 0 now holds ``tokens`` at ``pos``.. (cells put there by a state load)."""
        self.tokens[pos:] = list(tokens)

    def state_size(self, seq: int) -> int:
        return int(self._ll.llama_state_seq_get_size(self._ctx, seq))

    def state_get(self, seq: int) -> bytes:
        """Sequence ``seq``'s cells, serialised by llama.cpp."""
        size = self.state_size(seq)
        buffer = (ctypes.c_uint8 * size)()
        written = self._ll.llama_state_seq_get_data(self._ctx, buffer, size, seq)
        return ctypes.string_at(buffer, min(written, size))  # one copy (slicing the array makes a list of ints)

    def state_set(self, state: bytearray | memoryview, seq: int) -> bool:
        """Load serialised cells into sequence ``seq`` (read from ``state`` without a copy)."""
        buffer = (ctypes.c_uint8 * len(state)).from_buffer(state)
        try:
            return bool(self._ll.llama_state_seq_set_data(self._ctx, buffer, len(state), seq))
        finally:
            del buffer  # the buffer export must end before ``state`` can be released

    @property
    def state_version(self) -> int:
        return int(self._ll.LLAMA_STATE_SEQ_VERSION)

    def decode(self, tokens: list[int], *, seq: int = 0, start: int | None = None,
               on_batch: Callable[[int], None] | None = None) -> None:
        """Decode ``tokens`` into sequence ``seq`` at positions ``start``.. (default: after sequence 0's
        tokens), in batches; the last token's logits are kept. Sequence 0's record is extended.
        ``on_batch(done)`` is told the tokens decoded so far after each batch."""
        if not tokens:
            return
        begin = len(self.tokens) if start is None else start
        if begin + len(tokens) > self.n_ctx:
            raise ConfigError(f"{begin + len(tokens)} tokens do not fit the context ({self.n_ctx})",
                              hint="raise model.n_ctx (--n-ctx)")
        batch = self._batch
        size = min(self.n_batch, priority.BACKGROUND_BATCH) if priority.in_background() else self.n_batch
        for offset in range(0, len(tokens), size):
            chunk = tokens[offset: offset + size]
            priority.wait_turn()
            deadline.check()
            batch.n_tokens = len(chunk)
            for i, token in enumerate(chunk):
                batch.token[i] = token
                batch.pos[i] = begin + offset + i
                batch.seq_id[i][0] = seq
                batch.n_seq_id[i] = 1
                batch.logits[i] = i == len(chunk) - 1
            code = self._ll.llama_decode(self._ctx, batch)
            if code != 0:
                raise RuntimeError(f"llama_decode failed ({code})")
            if on_batch is not None:
                on_batch(offset + len(chunk))
        if seq == 0:
            self.tokens[begin:] = list(tokens)

    def logits(self):
        """The logits of the last decoded token (a numpy copy)."""
        import numpy as np

        pointer = self._ll.llama_get_logits_ith(self._ctx, -1)
        return np.ctypeslib.as_array(pointer, shape=(self.n_vocab,)).copy()

    def continuation_logprobs(self, prompt: list[int], continuations: list[list[int]]) -> list[list[float]]:
        """The log-probability of each token of each continuation after ``prompt`` (the model reads the
        continuation's own tokens before each next one), one list per continuation.

        The prompt is decoded once into sequence 0 (reusing what the context already holds); each
        continuation but its last token (which nothing reads past) is decoded after it with every
        position's logits and removed again, so the context holds the prompt afterwards; a
        one-token continuation needs no decode, and one that begins another is read off it. A
        continuation is at most one batch long. Nothing is generated, so every token is read in a
        batch, by ``scoring_threads`` threads (every core unless model.batch_threads says otherwise:
        docs/benchmarks.md "Threads").
        """
        with self._reading(self.scoring_threads):
            return self._score(prompt, continuations)

    @contextmanager
    def _reading(self, threads: int) -> Iterator[None]:
        """Prompts (batches of more than one token) read by ``threads`` threads in this block; generation
        keeps its own. Nothing changes in a background process (it leaves the machine to the user's work)."""
        if threads == self.batch_threads or priority.in_background():
            yield
            return
        self._ll.llama_set_n_threads(self._ctx, self.threads, threads)
        try:
            yield
        finally:
            self._ll.llama_set_n_threads(self._ctx, self.threads, self.batch_threads)

    def _score(self, prompt: list[int], continuations: list[list[int]]) -> list[list[float]]:
        import numpy as np

        def log_softmax(row):
            top = row.max()
            return row - (top + np.log(np.exp(row - top).sum()))

        keep = min(common_prefix(self.tokens, prompt), len(prompt) - 1)
        self.truncate(keep)
        self.decode(prompt[keep:])
        first = log_softmax(self.logits())
        ll, batch, at = self._ll, self._batch, len(prompt)
        done: dict[tuple[int, ...], list[float]] = {}  # decoded continuations: a prefix of one is read off it
        out: list[list[float]] = [[] for _ in continuations]
        for number in sorted(range(len(continuations)), key=lambda i: -len(continuations[i])):
            tokens = continuations[number]
            if not tokens:
                continue
            known = next((scores for seen, scores in done.items() if seen[:len(tokens)] == tuple(tokens)), None)
            if known is not None:
                out[number] = known[:len(tokens)]
                continue
            if len(tokens) > self.n_batch or at + len(tokens) > self.n_ctx:
                raise ValueError(f"a continuation of {len(tokens)} tokens does not fit one batch after the prompt")
            scores = [float(first[tokens[0]])]
            read = tokens[:-1]  # the last token is scored by the one before it; nothing reads past it
            if read:
                priority.wait_turn()
                deadline.check()
                batch.n_tokens = len(read)
                for i, token in enumerate(read):
                    batch.token[i] = token
                    batch.pos[i] = at + i
                    batch.seq_id[i][0] = 0
                    batch.n_seq_id[i] = 1
                    batch.logits[i] = True
                code = ll.llama_decode(self._ctx, batch)
                if code != 0:
                    raise RuntimeError(f"llama_decode failed ({code})")
                for i in range(len(read)):
                    row = np.ctypeslib.as_array(ll.llama_get_logits_ith(self._ctx, i), shape=(self.n_vocab,))
                    scores.append(float(log_softmax(row)[tokens[i + 1]]))
                self.seq_rm(0, at, -1)
            out[number] = done[tuple(tokens)] = scores
        return out

    # ------------------------------------------------------------ generation

    def generate(self, prompt: list[int], *, max_tokens: int, grammar: str | None = None,
                 repeat_penalty: float = 1.0, temperature: float = 0.0, seed: int = 0,
                 stop: list[str] = (), on_text: Callable[[str], None] | None = None,
                 halt: Callable[[str], int | None] | None = None) -> Generation:
        """Continue ``prompt`` in sequence 0, reusing the part of it the context already holds.

        Greedy at temperature 0; ``grammar`` (GBNF) constrains the output; generation ends at an
        end-of-generation token, a ``stop`` string, ``max_tokens`` or the end of the context.
        ``on_text`` receives the text as it grows (for streaming). ``halt(text)``: where the text
        should end (a loop begins there, :func:`memcli.llm.repetition.loop_start`) or None; generation
        stops there with ``finish_reason`` "repeat" and the text is cut.
        """
        ll = self._ll
        start = time.perf_counter()
        keep = min(common_prefix(self.tokens, prompt), len(prompt) - 1)  # the last one gives the logits
        self.truncate(keep)
        self.decode(prompt[keep:])
        chain = ll.llama_sampler_chain_init(ll.llama_sampler_chain_default_params())
        try:
            ll.llama_sampler_chain_add(chain, ll.llama_sampler_init_penalties(
                self.n_vocab, PENALTY_LAST_N, repeat_penalty, 0.0, 0.0))
            if grammar is not None:
                sampler = ll.llama_sampler_init_grammar(self._vocab, grammar.encode("utf-8"), b"root")
                if not sampler:
                    raise ValueError("llama.cpp refused the grammar")
                ll.llama_sampler_chain_add(chain, sampler)
            if temperature > 0:
                ll.llama_sampler_chain_add(chain, ll.llama_sampler_init_temp(temperature))
                ll.llama_sampler_chain_add(chain, ll.llama_sampler_init_dist(seed))
            else:
                ll.llama_sampler_chain_add(chain, ll.llama_sampler_init_greedy())
            out: list[int] = []
            text, finish, first = "", "length", None
            while len(out) < max_tokens:
                token = int(ll.llama_sampler_sample(chain, self._ctx, -1))
                if first is None:
                    first = time.perf_counter() - start
                if self.is_end(token):
                    finish = "stop"
                    break
                out.append(token)
                text = self.detokenize(out)
                lead = len(text) - len(text.lstrip())  # a stop string counts after the first text
                cut = min((text.index(s, lead) for s in stop if s in text[lead:]), default=None)
                if cut is not None:
                    text, finish = text[:cut], "stop"
                    break
                looped = halt(text) if halt is not None else None
                if looped is not None:
                    text, finish = text[:looped].rstrip(), "repeat"
                    break
                if on_text is not None:
                    on_text(text)
                if len(out) >= max_tokens or len(self.tokens) + 1 >= self.n_ctx:
                    break
                self.decode([token])
        finally:
            ll.llama_sampler_free(chain)
        total = time.perf_counter() - start
        first = first if first is not None else total
        rest = total - first
        return Generation(out, text, finish, len(prompt), len(prompt) - keep, first,
                          (len(out) - 1) / rest if len(out) > 1 and rest > 0 else None)


def schema_grammar(schema: dict) -> str:
    """A GBNF grammar that admits exactly the JSON documents ``schema`` describes."""
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    return json_schema_to_gbnf(json.dumps(schema))
