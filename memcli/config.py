"""Settings: every limit, threshold and default in one place.

Precedence: built-in default < user config file (``config.toml``) < the
store's own ``config.toml`` < ``MEMCLI_*`` environment variable < command-line
flag. Each setting has a dotted config key (``[consolidate] threshold_tokens =
5000`` in TOML) and an environment variable; ``memcli status --json`` and
``memcli doctor`` show the effective values.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memcli.errors import ConfigError
from memcli.paths import resolve_config_file


@dataclass(frozen=True)
class Setting:
    key: str
    env: str
    default: Any
    help: str

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
    Setting("grep.limit", "MEMCLI_GREP_LIMIT", 100, "matches returned by grep"),
    Setting("ingest.progress_min", "MEMCLI_PROGRESS_MIN", 200,
            "inputs with at least this many turns show a progress bar on a terminal"),
)

_BY_KEY = {s.key: s for s in SETTINGS}


def _coerce(setting: Setting, value: Any, origin: str) -> Any:
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


def _flatten(table: dict, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, value in table.items():
        key = f"{prefix}{name}"
        if isinstance(value, dict):
            out.update(_flatten(value, key + "."))
        else:
            out[key] = value
    return out


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            return _flatten(tomllib.load(fh))
    except FileNotFoundError:
        return {}
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read configuration: {exc}") from None


class Settings:
    """Effective settings; ``settings.search_k`` etc., plus where each came from."""

    def __init__(self, values: dict[str, Any], sources: dict[str, str]):
        self._values = values
        self._sources = sources

    def __getattr__(self, attr: str) -> Any:
        try:
            return self._values[attr]
        except KeyError:
            raise AttributeError(attr) from None

    def source(self, key: str) -> str:
        return self._sources[_BY_KEY[key].attr]

    def to_dict(self) -> dict:
        return {
            s.key: {"value": self._values[s.attr], "source": self._sources[s.attr], "env": s.env}
            for s in SETTINGS
        }

    @classmethod
    def load(cls, store_root: Path | None = None, overrides: dict[str, Any] | None = None) -> "Settings":
        layers: list[tuple[str, dict[str, Any]]] = []
        user_file = resolve_config_file().path
        layers.append((str(user_file), _read_toml(user_file)))
        if store_root is not None:
            store_file = store_root / "config.toml"
            layers.append((str(store_file), _read_toml(store_file)))
        values: dict[str, Any] = {}
        sources: dict[str, str] = {}
        for s in SETTINGS:
            values[s.attr], sources[s.attr] = s.default, "default"
            for origin, table in layers:
                if s.key in table:
                    values[s.attr], sources[s.attr] = _coerce(s, table[s.key], origin), origin
            if os.environ.get(s.env) not in (None, ""):
                values[s.attr] = _coerce(s, os.environ[s.env], f"${s.env}")
                sources[s.attr] = f"${s.env}"
            if overrides and overrides.get(s.key) is not None:
                values[s.attr], sources[s.attr] = _coerce(s, overrides[s.key], "flag"), "flag"
        for origin, table in layers:
            unknown = sorted(set(table) - set(_BY_KEY))
            if unknown:
                raise ConfigError(f"{origin}: unknown setting(s): {', '.join(unknown)}")
        return cls(values, sources)
