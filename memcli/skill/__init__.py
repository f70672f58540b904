"""The agents' skill (``SKILL.md``): when and how an agent uses memcli from the shell. Shipped in the
Claude Code and Codex plugins (plugins/memcli*/skills/memcli/SKILL.md, the same file) and printed by
``memcli skill`` for agents that read skills from a folder."""

from __future__ import annotations

from pathlib import Path

PATH = Path(__file__).with_name("SKILL.md")


def text() -> str:
    return PATH.read_text(encoding="utf-8")


def front_matter(source: str) -> dict[str, str]:
    """The skill's ``name`` and ``description`` (the YAML front matter's ``key: value`` lines)."""
    head = source.split("---", 2)[1] if source.startswith("---") else ""
    return {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in head.splitlines()) if k.strip()}
