"""memcli skill: the agents' skill file, printed."""

from __future__ import annotations

import json as jsonlib

import typer

from memcli.cli.app import app
from memcli.cli.common import JsonOpt, QuietOpt, VerboseOpt, output


@app.command()
def skill(ctx: typer.Context, json: JsonOpt = False, quiet: QuietOpt = False, verbose: VerboseOpt = False) -> None:
    """Print the skill (SKILL.md) that tells an agent when and how to use memcli from the shell.

    For agents that read skills from a folder: memcli skill >
    ~/.codex/skills/memcli/SKILL.md (Codex), .claude/skills/memcli/SKILL.md
    (Claude Code, where the plugin does not ship it). --json gives its name,
    description, text and where the shipped file is.
    """
    from memcli import skill as shipped

    out = output(ctx, json, quiet, verbose)
    source = shipped.text()
    if out.json:
        typer.echo(jsonlib.dumps({**shipped.front_matter(source), "text": source, "path": str(shipped.PATH)},
                                 ensure_ascii=False))
    else:
        typer.echo(source, nl=False)
