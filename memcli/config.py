"""Settings: every limit, threshold and default (their table: :mod:`memcli.config_files`), layered.

Precedence: built-in default < user config file (``config.toml``) < the
store's own ``config.toml`` < ``MEMCLI_*`` environment variable < command-line
flag. The store's file travels with the store (git, a copy), so the settings that
send memory off the machine, name a credential, load a model file or choose a folder
memcli deletes in are taken from it only once the user approved them
(:mod:`memcli.trust`, ``memcli trust``). Each setting has a dotted config key (``[consolidate] threshold_tokens =
5000`` in TOML) and an environment variable; ``memcli status --json`` and
``memcli doctor`` show the effective values.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memcli.config_files import BY_KEY, SETTINGS, Setting, coerce, resolve, store_table  # noqa: F401  (named here too)
from memcli.errors import ConfigError
from memcli.trust import approve, approved, damage, guarded

READERS = ("agent", "no-agent", "evidence", "evidence-only")  # ask's readers (ask.reader's values)


def switch(value: Any, origin: str) -> bool | None:
    """A true / false / auto setting: True, False, or None for auto."""
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on", "always"):
        return True
    if text in ("0", "false", "no", "off", "never"):
        return False
    if text == "auto":
        return None
    raise ConfigError(f"{origin} must be true, false or auto, got {value!r}")


def approve_store_settings(store_root: Path, *, revoke: bool = False) -> dict[str, Any]:
    """Approve for this store, on this machine, the guarded settings its config.toml sets now (``revoke``:
    take the approval back); the settings it sets."""
    values = guarded(store_table(store_root))
    approve(store_root, None if revoke or not values else values)
    return values


class Settings:
    """Effective settings; ``settings.search_k`` etc., plus where each came from."""

    def __init__(self, values: dict[str, Any], sources: dict[str, str], ignored: dict[str, Any] | None = None):
        self._values = values
        self._sources = sources
        self.ignored = ignored or {}  # guarded settings of the store's config.toml not approved (memcli trust)

    def __getattr__(self, attr: str) -> Any:
        try:
            return self._values[attr]
        except KeyError:
            raise AttributeError(attr) from None

    def with_overrides(self, overrides: dict[str, Any], origin: str = "flag") -> Settings:
        """A copy with ``overrides`` (by dotted key) in force."""
        values, sources = dict(self._values), dict(self._sources)
        for key, value in overrides.items():
            setting = BY_KEY[key]
            values[setting.attr], sources[setting.attr] = coerce(setting, value, origin), origin
        return Settings(values, sources, self.ignored)

    def flag_environment(self) -> dict[str, str]:
        """The settings given as flags (or a Memory's overrides) as environment variables, for a child
        process, which reads the same config files itself."""
        env = {}
        for s in SETTINGS:
            if self._sources[s.attr] == "flag":
                value = self._values[s.attr]
                env[s.env] = ("true" if value else "false") if isinstance(value, bool) else str(value)
        return env

    def source(self, key: str) -> str:
        return self._sources[BY_KEY[key].attr]

    def to_dict(self) -> dict:
        return {
            s.key: {"value": self._values[s.attr], "source": self._sources[s.attr], "env": s.env, "help": s.help}
            for s in SETTINGS
        }

    @classmethod
    def load(cls, store_root: Path | None = None, overrides: dict[str, Any] | None = None) -> Settings:
        ignored: dict[str, Any] = {}
        if store_root is not None:
            ignored = guarded(store_table(store_root))
            if ignored and approved(store_root, ignored):
                ignored = {}
        values, sources = resolve(store_root, overrides, ignored)
        return cls(values, sources, ignored)

    def ignored_note(self, store_root: Path) -> str | None:
        """What the store's config.toml sets that is not honoured, and how to approve it."""
        if not self.ignored:
            return None
        damaged = damage()
        return ((f"{damaged}. " if damaged else "")
                + f"{store_root / 'config.toml'} sets {', '.join(sorted(self.ignored))}, which memcli takes from a "
                "store's own file only once you approve it (it can send memory off this machine, name a "
                "credential, load a model or choose a folder memcli deletes in): not used; `memcli trust` "
                "shows and approves it")
