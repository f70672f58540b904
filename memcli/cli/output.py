"""The one renderer: every command hands its result here.

stdout carries data only: a Rich table on a terminal, plain text when piped,
or exactly one JSON document with ``--json`` (written with ``json.dumps``,
never through Rich). Diagnostics, warnings and progress go to stderr.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import singledispatch
from typing import Any

from memcli.errors import MemcliError


@dataclass
class Output:
    json: bool = False
    quiet: bool = False
    verbose: bool = False

    # ------------------------------------------------------------ consoles

    @property
    def stdout_tty(self) -> bool:
        return sys.stdout.isatty()

    def _console(self, stderr: bool):
        from rich.console import Console

        return Console(stderr=stderr, highlight=False, soft_wrap=not stderr)

    # ------------------------------------------------------------ data

    def emit(self, result: Any) -> None:
        """Write a command's result to stdout in the chosen format."""
        if self.json:
            sys.stdout.write(json.dumps(result.to_dict(), ensure_ascii=False) + "\n")
            sys.stdout.flush()
            return
        render(result, self)

    def write(self, text: str) -> None:
        """One line (or more) of text output; control characters from memory are shown escaped."""
        text = printable(text.removesuffix("\n"))
        sys.stdout.write(text + "\n")

    def table(self, title: str | None, columns: list[str], rows: list[list[str]]) -> None:
        """A Rich table on a terminal; tab-separated lines under a header line of the column names when piped."""
        if not self.stdout_tty:
            for row in [columns, *rows]:
                self.write("\t".join(printable(cell, keep="") for cell in row))
            return
        from rich.table import Table

        table = Table(title=title, show_edge=False, header_style="bold")
        for col in columns:
            table.add_column(col, overflow="fold")
        for row in rows:
            table.add_row(*(printable(cell) for cell in row))
        self._console(stderr=False).print(table)

    # ------------------------------------------------------------ diagnostics

    def info(self, message: str) -> None:
        if not self.quiet and not self.json:
            print(message, file=sys.stderr)

    def debug(self, message: str) -> None:
        if self.verbose:
            print(f"memcli: {message}", file=sys.stderr)

    def warn(self, message: str) -> None:
        if not self.quiet:
            print(f"memcli: warning: {message}", file=sys.stderr)

    def error(self, err: MemcliError) -> None:
        """Report a failure: JSON on stdout in JSON mode, always one line on stderr."""
        if self.json:
            sys.stdout.write(json.dumps({"error": err.to_dict()}, ensure_ascii=False) + "\n")
            sys.stdout.flush()
        print(f"memcli: error: {err.message}", file=sys.stderr)
        if err.hint:
            print(f"memcli: hint: {err.hint}", file=sys.stderr)

    @contextmanager
    def progress(self, description: str, total: int, *, enabled: bool = True) -> Iterator:
        """A progress bar on stderr (terminal only, not with -q or --json); yields ``advance(n)``."""
        if not enabled or self.quiet or self.json or not sys.stderr.isatty():
            yield lambda done: None
            return
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                      TimeElapsedColumn(), console=self._console(stderr=True), transient=True) as bar:
            task = bar.add_task(description, total=total)
            yield lambda done: bar.update(task, completed=done)

    @contextmanager
    def stages(self) -> Iterator[_Stages]:
        """Per-stage progress bars on stderr (terminal only); yields ``progress(stage, done, total)``."""
        if self.quiet or self.json or not sys.stderr.isatty():
            yield _Stages(None)
            return
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                      TimeElapsedColumn(), console=self._console(stderr=True), transient=True) as bar:
            yield _Stages(bar)


class _Stages:
    """Progress of a multi-stage operation: one bar per stage, created when it starts."""

    def __init__(self, bar):
        self.bar = bar
        self.tasks: dict[str, int] = {}

    def __call__(self, stage: str, done: int, total: int) -> None:
        if self.bar is None:
            return
        if stage not in self.tasks:
            self.tasks[stage] = self.bar.add_task(stage, total=total)
        self.bar.update(self.tasks[stage], completed=done, total=total)


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def printable(text: str, keep: str = "\n\t") -> str:
    """``text`` safe for a terminal: control characters (ESC, NUL, C1, bidi overrides...) are written as
    ``\\xNN`` / ``\\uNNNN`` escapes so memory text can never drive the terminal (``--json`` keeps it exact)."""
    def escape(match: re.Match) -> str:
        char = match.group()
        return f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}"

    text = _CONTROL.sub(escape, text)
    for char in "\n\t":
        if char not in keep:
            text = text.replace(char, "\\n" if char == "\n" else "\\t")
    return text


@singledispatch
def render(result: Any, out: Output) -> None:
    """Fallback text rendering: the JSON form, indented."""
    out.write(json.dumps(result.to_dict(), indent=2, ensure_ascii=False))


def register(result_type):
    """Register a text renderer for a result type (used by the command modules)."""
    return render.register(result_type)
