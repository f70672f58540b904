"""The settings memcli knows and the configuration files that set them, on ``os`` and ``tomllib`` alone.

:mod:`memcli.config` layers these into the effective settings (and honours a store's guarded ones
only once approved); the MCP server's fast path (:mod:`memcli.mcp_start`) uses the same table and
readers to check, before it answers a host, that the server will start (:func:`resolve`), without
importing the rest of memcli.
"""

from __future__ import annotations

import os

from memcli import parsing, where
from memcli.errors import ConfigError
from memcli.regular import NotRegular, read_bounded


class Setting:
    """One setting: its dotted key, environment variable, default and help."""

    __slots__ = ("key", "env", "default", "help")

    def __init__(self, key: str, env: str, default: object, help: str):
        self.key, self.env, self.default, self.help = key, env, default, help

    @property
    def attr(self) -> str:
        return self.key.replace(".", "_")


SETTINGS: tuple[Setting, ...] = (
    Setting("consolidate.threshold_tokens", "MEMCLI_CONSOLIDATE_TOKENS", 5000,
            "CURRENT size (tokens) that triggers consolidation"),
    Setting("consolidate.threshold_age", "MEMCLI_CONSOLIDATE_AGE", 3600,
            "age (seconds) of CURRENT's oldest entry that triggers consolidation"),
    Setting("consolidate.split_tokens", "MEMCLI_SPLIT_TOKENS", 5000,
            "documents larger than this (tokens) are split"),
    Setting("consolidate.merge_tokens", "MEMCLI_MERGE_TOKENS", 1000,
            "documents smaller than this (tokens) are merge candidates"),
    Setting("search.partition_tokens", "MEMCLI_PARTITION_TOKENS", 160,
            "largest BM25 partition (tokens); heading sections are cut to fit"),
    Setting("search.k", "MEMCLI_SEARCH_K", 10, "hits returned by search"),
    Setting("search.semantic", "MEMCLI_SEMANTIC", True,
            "evidence ranking adds a sentence-embedding signal (all-MiniLM-L6-v2 on the CPU) to the words"),
    Setting("search.vectors", "MEMCLI_VECTORS", "background",
            "when entries' vectors are computed: background (a detached job after each write; until it is done a "
            "question ranks the entries it has not reached by their words) or inline (by the first question)"),
    Setting("grep.limit", "MEMCLI_GREP_LIMIT", 100, "matches returned by grep"),
    Setting("grep.timeout", "MEMCLI_GREP_TIMEOUT", 2.0,
            "seconds a regular expression may run over the whole store (grep, the agent's tools)"),
    Setting("ask.budget", "MEMCLI_ASK_BUDGET", 2000, "evidence budget of ask, in tokens"),
    Setting("hook.start_tokens", "MEMCLI_HOOK_START_TOKENS", 600,
            "what a session start adds to an agent's context, in tokens: the project's recent sessions (each "
            "one's request and how it ended), then lines of decisions and open items"),
    Setting("hook.prompt_tokens", "MEMCLI_HOOK_PROMPT_TOKENS", 300,
            "what the prompt hook adds to an agent's context, in tokens: the lines of earlier sessions that bear on "
            "the prompt (nothing when none does)"),
    Setting("hook.prompt_seconds", "MEMCLI_HOOK_PROMPT_SECONDS", 2.0,
            "the prompt hook's time limit in seconds: past it, it adds nothing and the prompt goes on (0: none)"),
    Setting("ask.answer_context", "MEMCLI_ASK_ANSWER_CONTEXT", 600,
            "evidence the answering model reads, best-ranked first, in tokens (0: all of it)"),
    Setting("store.lock_timeout", "MEMCLI_LOCK_TIMEOUT", 120.0,
            "seconds a command waits for the store's lock before it gives up and says who holds it"),
    Setting("kv.dir", "MEMCLI_KV_DIR", "", "KV block directory (empty: kv/ inside the store)"),
    Setting("kv.budget_mb", "MEMCLI_KV_BUDGET_MB", 2048, "disk budget of the KV block store, in MB (LRU eviction)"),
    Setting("kv.compose_recompute", "MEMCLI_KV_COMPOSE_RECOMPUTE", 0,
            "composed memory (ask --kv-compose, chat --kv-compose): tokens at the start of each block after the "
            "first that are prefilled in place rather than restored (more: closer to a full prefill, slower)"),
    Setting("kv.compose_check", "MEMCLI_KV_COMPOSE_CHECK", 0.01,
            "ask --kv-compose with a generated answer: when the composed context's first answer token leads the "
            "second by less than this probability, the units are prefilled in full instead (0: never)"),
    Setting("kv.select", "MEMCLI_KV_SELECT", "text",
            "how ask --kv-compose picks memory units: text (the evidence ranking), latent (the attention the "
            "model's retrieval heads pay each unit's block; makes every unit's block first), or fused (both, "
            "by reciprocal rank)"),
    Setting("chat.memory_tokens", "MEMCLI_CHAT_MEMORY_TOKENS", 3000,
            "memory placed in chat's context: documents in stable order, then CURRENT's newest entries"),
    Setting("ask.compact", "MEMCLI_ASK_COMPACT", True,
            "the evidence readers show an entry (for an outer model, but the best ones that fit in a quarter "
            "of the budget) as its sentences holding a word of the question, the rest elided with …, so more "
            "entries fit the budget (citations still cover the whole entry)"),
    Setting("ask.reader", "MEMCLI_ASK_READER", "auto",
            "ask's reader: agent, no-agent, evidence, evidence-only, or auto (capable model: agent; "
            "small: evidence)"),
    Setting("ask.answer", "MEMCLI_ASK_ANSWER", "auto",
            "how ask answers: extract (a span of the evidence, picked by memcli's reader), generate (the model "
            "writes it; an answer not grounded in the evidence becomes I don't know), or auto (generate "
            "with a capable model or one of 1B parameters or more, else extract)"),
    Setting("mcp.ask_seconds", "MEMCLI_MCP_ASK_SECONDS", 20.0,
            "time limit (seconds) of the MCP ask tool's model work; past it, the tool returns the evidence "
            "with a note (hosts time tool calls out after 60 s by default)"),
    Setting("ask.max_rounds", "MEMCLI_ASK_MAX_ROUNDS", 7, "tool-calling rounds of ask's agentic reader"),
    Setting("ask.kv", "MEMCLI_ASK_KV", True,
            "ask keeps its shared prompt prefixes (instructions, catalog, evidence) as KV blocks (local model)"),
    Setting("ingest.progress_min", "MEMCLI_PROGRESS_MIN", 200,
            "inputs with at least this many turns show a progress bar on a terminal"),
    Setting("ingest.max_bytes", "MEMCLI_MAX_INPUT_BYTES", 64 * 1024 * 1024,
            "largest input ingest reads (bytes); a larger file is refused"),
    Setting("ingest.max_entry_chars", "MEMCLI_MAX_ENTRY_CHARS", 20_000,
            "longest turn or note that becomes one memory entry (characters)"),
    Setting("ingest.extract", "MEMCLI_EXTRACT", False,
            "ingest extracts durable facts with the model instead of one entry per turn"),
    Setting("consolidate.auto", "MEMCLI_AUTO_CONSOLIDATE", True,
            "consolidate after an ingest that crosses a threshold"),
    Setting("consolidate.llm", "MEMCLI_CONSOLIDATE_LLM", "auto",
            "use the model in consolidation: true, false (the deterministic path only), or auto "
            "(true for a capable model)"),
    Setting("consolidate.background", "MEMCLI_CONSOLIDATE_BACKGROUND", "auto",
            "run an ingest's automatic consolidation in a detached background process: always, never, "
            "or auto (when the model consolidates)"),
    Setting("consolidate.window_tokens", "MEMCLI_WINDOW_TOKENS", 1200,
            "CURRENT is shown to the model in windows of about this many tokens"),
    Setting("consolidate.candidates", "MEMCLI_CANDIDATES", 8,
            "existing documents offered to the planner for one window"),
    Setting("consolidate.route_similarity", "MEMCLI_ROUTE_SIMILARITY", 0.2,
            "least similarity (cosine of TF-IDF) for routing a block into an existing document"),
    Setting("consolidate.merge_similarity", "MEMCLI_MERGE_SIMILARITY", 0.2,
            "least similarity of two small documents' summaries and headings for a merge"),
    Setting("model.backend", "MEMCLI_BACKEND", "llama",
            "llama (a local GGUF file through llama.cpp) or openai (an OpenAI-compatible server)"),
    Setting("model.profile", "MEMCLI_MODEL_PROFILE", "auto",
            "small, capable, or auto (a GGUF with at least 3B parameters, or a server, is capable); "
            "decides the defaults of ask.reader and consolidate.llm"),
    Setting("model.path", "MEMCLI_MODEL", "",
            "GGUF file for the llama backend (empty: the default SmolLM2-135M-Instruct)"),
    Setting("model.base_url", "MEMCLI_BASE_URL", "",
            "base URL of an OpenAI-compatible server, e.g. http://127.0.0.1:8080/v1"),
    Setting("model.name", "MEMCLI_MODEL_NAME", "default", "model name sent to the server"),
    Setting("model.api_key_env", "MEMCLI_API_KEY_ENV", "MEMCLI_API_KEY",
            "environment variable holding the server's API key (OPENAI_API_KEY is tried too)"),
    Setting("model.json_format", "MEMCLI_JSON_FORMAT", "json_schema",
            "response_format type for servers: json_schema, or json_object (llama-cpp-python's server)"),
    Setting("model.timeout", "MEMCLI_MODEL_TIMEOUT", 300.0, "seconds to wait for a server's answer"),
    Setting("model.n_ctx", "MEMCLI_N_CTX", 8192, "context window for the llama backend"),
    Setting("model.threads", "MEMCLI_THREADS", 0,
            "CPU threads for the llama backend (0: half the cores, at least one, which keeps its speed when "
            "another program is busy)"),
    Setting("model.batch_threads", "MEMCLI_BATCH_THREADS", 0,
            "CPU threads for reading a prompt (0: every core when scoring continuations, which generates "
            "nothing; as model.threads otherwise)"),
    Setting("model.gpu_layers", "MEMCLI_GPU_LAYERS", -1,
            "layers offloaded to the GPU (-1: all; ignored by a CPU-only llama.cpp build)"),
    Setting("model.seed", "MEMCLI_SEED", 0, "sampling seed (generation is greedy at temperature 0)"),
    Setting("model.flash_attn", "MEMCLI_FLASH_ATTN", False, "use flash attention in llama.cpp"),
    Setting("model.extra_buffers", "MEMCLI_EXTRA_BUFFERS", "auto",
            "llama.cpp's extra CPU buffer types (weight repacking, AMX): on, off, or auto "
            "(off when the llama.cpp build has AMX kernels, which crash on some models)"),
)


BY_KEY = {s.key: s for s in SETTINGS}
PATH_SETTINGS = ("kv.dir", "model.path")  # settings that name a file or folder
MAX_CONFIG_BYTES = 1 << 20  # a configuration file is a few lines: a larger one is not one


def coerce(setting: Setting, value: object, origin: str) -> object:
    kind = type(setting.default)
    if isinstance(value, kind) and not (kind is int and isinstance(value, bool)):
        return value
    try:
        if kind is int:
            return int(str(value).strip())
        if kind is float:
            return float(str(value).strip())
        if kind is bool:
            text = str(value).strip().lower()
            if text in ("1", "true", "yes", "on"):
                return True
            if text in ("0", "false", "no", "off"):
                return False
            raise ValueError(text)
        return str(value)
    except ValueError:
        raise ConfigError(
            f"{origin}: {setting.key} must be {kind.__name__}, got {value!r}"
        ) from None


def flatten(table: dict, prefix: str = "") -> dict[str, object]:
    out: dict[str, object] = {}
    for name, value in table.items():
        key = f"{prefix}{name}"
        if isinstance(value, dict):
            out.update(flatten(value, key + "."))
        else:
            out[key] = value
    return out


def read_toml(path: str | os.PathLike) -> dict[str, object]:
    """A configuration file, flattened ({} when there is none). It is opened without blocking and
    must be a regular file: a FIFO or a device where a configuration file would be (a copied store,
    an archive) is refused, never waited on."""
    try:
        raw = read_bounded(path, MAX_CONFIG_BYTES)
    except FileNotFoundError:
        return {}
    except NotRegular:
        raise ConfigError(f"{path}: not a regular file (a FIFO, device, socket or folder); memcli reads its "
                          "configuration only from a regular file", hint=f"remove {path}, or make it a file") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read configuration: {exc.strerror}") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{path}: larger than {MAX_CONFIG_BYTES:,} bytes: not a configuration file")

    try:
        return flatten(parsing.toml_loads(raw.decode("utf-8")))
    except (UnicodeDecodeError, ValueError) as exc:  # tomllib.TOMLDecodeError is a ValueError
        raise ConfigError(f"{path}: cannot read configuration: {exc}") from None


def store_table(store_root: str | os.PathLike) -> dict[str, object]:
    """The store's own ``config.toml``, flattened (never read through a link). A path it names is the
    store's: a relative one is resolved against the store's folder, once, here, and the real folder
    or file it names is the value (so an approval is of that place, whatever the working folder)."""
    root = os.path.abspath(os.fspath(store_root))
    store_file = os.path.join(root, "config.toml")
    if os.path.islink(store_file):
        raise ConfigError(f"{store_file} is a symbolic link; memcli does not follow links inside a store",
                          hint=f"remove {store_file}, or make it a regular file")
    table = read_toml(store_file)
    for key in PATH_SETTINGS:
        if isinstance(table.get(key), str) and table[key].strip():
            table[key] = os.path.realpath(os.path.join(root, os.path.expanduser(table[key])))
    return table


def resolve(store_root: str | os.PathLike | None, overrides: dict[str, object] | None = None,
            withheld: dict[str, object] | None = None) -> tuple[dict[str, object], dict[str, str]]:
    """(values by attribute, where each came from): defaults < the user's file < the store's file (less
    ``withheld``: its guarded settings not approved) < ``MEMCLI_*`` < ``overrides``. A file that cannot
    be read, an unknown setting or a value of the wrong kind is a :class:`ConfigError`."""
    layers = []
    user_file = where.config_file()[0]
    layers.append((user_file, read_toml(user_file)))
    if store_root is not None:
        table = store_table(store_root)
        layers.append((os.path.join(os.fspath(store_root), "config.toml"),
                       {k: v for k, v in table.items() if k not in (withheld or {})}))
    values: dict[str, object] = {}
    sources: dict[str, str] = {}
    for s in SETTINGS:
        values[s.attr], sources[s.attr] = s.default, "default"
        for origin, table in layers:
            if s.key in table:
                values[s.attr], sources[s.attr] = coerce(s, table[s.key], origin), origin
        if os.environ.get(s.env) not in (None, ""):
            values[s.attr] = coerce(s, os.environ[s.env], f"${s.env}")
            sources[s.attr] = f"${s.env}"
        if overrides and overrides.get(s.key) is not None:
            values[s.attr], sources[s.attr] = coerce(s, overrides[s.key], "flag"), "flag"
    for origin, table in layers:
        unknown = sorted(set(table) - set(BY_KEY))
        if unknown:
            raise ConfigError(f"{origin}: unknown setting(s): {', '.join(unknown)}")
    return values, sources
