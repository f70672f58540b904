"""What an agent is told when a session starts: the project's recent sessions, newest first, each with its date and
length, what the user asked for (the session's first request) and how it ended (its last assistant message,
shortened at a sentence), then the lines of decisions and open items the evidence ranking finds, all within
``hook.start_tokens``. Every item cites its lines (``doc:line``) so the agent can read more. Deterministic: no
model. The sessions come from the search index's table of them (:mod:`memcli.session_table`), so the library is
not read to list them."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from memcli import session_table
from memcli.store.lines import Library, sentences, shown_text
from memcli.tokens import count_tokens

SESSIONS_LISTED = 12  # the newest sessions looked at (as many as the budget holds are shown)
TEXT_CHARS = (240, 80)  # a request and an outcome shortened at a sentence within these (the second: a tight budget)
QUESTION = "{label} project: what was decided, done and left to do"  # the ranking's question for the rest


def shortened(text: str, limit: int) -> str:
    """``text`` cut after the last whole sentence within ``limit`` characters (the first sentence cut at a word
    with "…" when even that is longer)."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    kept = ""
    for sentence in sentences(text):
        if len(kept) + len(sentence) + 1 > limit:
            break
        kept = f"{kept} {sentence}".strip()
    if kept:
        return kept
    return text[:limit].rsplit(" ", 1)[0].rstrip(",;:") + "…"


def _length(first: str, last: str) -> str:
    try:
        minutes = (dt.datetime.fromisoformat(last) - dt.datetime.fromisoformat(first)).total_seconds() / 60
    except ValueError:
        return ""
    if minutes < 1:
        return "under a minute"
    return f"{minutes:.0f} min" if minutes < 120 else f"{minutes / 60:.1f} h"


def _line(library: Library, pick: tuple[str, int] | None, limit: int) -> tuple[str, str] | None:
    """(citation, shortened text) of the entry at ``pick``."""
    if pick is None:
        return None
    entry = library.doc(pick[0]).entries.get(pick[1])
    return (f"{pick[0]}:{pick[1]}", shortened(shown_text(entry), limit)) if entry is not None else None


def session_lines(memory, project: str | None) -> tuple[list[list[tuple[str, set[str]]]], int]:
    """For each session, newest first, its line in each length of :data:`TEXT_CHARS` (``- 2026-01-08 20:53, 4 min,
    3 turns: asked "…" (CURRENT:6); ended "…" (CURRENT:7)``) with the citations it shows; how many sessions memory
    holds of the project."""
    index = memory.index
    with memory.store.reading():
        index.refresh()
        found = session_table.newest(index.db, project, SESSIONS_LISTED)
        total = session_table.count(index.db, project)
        library = Library(memory.store, index.parsed)
        out = []
        for s in found:
            parts = [(s.first or s.last)[:16].replace("T", " ")]
            if length := _length(s.first, s.last):
                parts.append(length)
            parts.append(f"{s.turns} turn{'s' if s.turns != 1 else ''}")
            forms = []
            for limit in TEXT_CHARS:
                said, cited = [], set()
                for verb, pick in (("asked", s.request), ("ended", s.outcome)):
                    if shown := _line(library, pick, limit):
                        said.append(f'{verb} "{shown[1]}" ({shown[0]})')
                        cited.add(shown[0])
                forms.append((f"- {', '.join(parts)}: " + ("; ".join(said) or "no request or reply kept"), cited))
            out.append(forms)
    return out, total


def digest(memory, project: str | None, label: str, budget: int) -> str:
    """The text a session start adds to the agent's context ('' when memory holds nothing of the project)."""
    if not memory.store.state_path.exists():
        return ""
    sessions, total = session_lines(memory, project)
    head = (f"Memory of {label or 'this project'} (memcli): {total} session{'s' if total != 1 else ''} saved, "
            "the newest first; cite doc:line, read more with the memory_search or read tools.")
    lines, used, cited = [head], count_tokens(head), set()
    # the longest form in which every session fits, else the shortest, for as many as fit (newest first)
    form = next((k for k in range(len(TEXT_CHARS)) if used + sum(count_tokens(f[k][0]) for f in sessions) <= budget),
                len(TEXT_CHARS) - 1)
    for forms in sessions:
        line, shown = forms[form]
        if used + count_tokens(line) > budget:
            break
        lines.append(line)
        used += count_tokens(line)
        cited |= shown
    left = budget - used
    if left > 60:
        found = memory.ask(QUESTION.format(label=label), reader="evidence-only", budget=left,
                           where={"project": project} if project else {}, recent=True)
        rest = [e for e in sorted(found.evidence, key=lambda e: e.rank or 0)
                if not all(f"{e.doc}:{n}" in cited for n in range(e.start_line, e.end_line + 1))]
        if rest:
            lines.append("Also in memory (decided, done, left to do):")
            for e in rest:
                item = f"{e.citation}\n{e.text}"
                if used + count_tokens(item) > budget:
                    continue
                lines.append(item)
                used += count_tokens(item)
    if len(lines) == 1:
        return ""
    return "\n".join(lines)


def label_of(project: str | None, cwd: Path | None) -> str:
    return Path(project).name if project else (cwd.name if cwd else "")

