"""What an agent is told as a prompt reaches it: the lines of earlier sessions that bear on the prompt, cited, within
``hook.prompt_tokens``, and nothing at all when no line bears on it enough.

The lines weighed are those of the heading sections the prompt's words find best and those nearest it in meaning.
Each is weighed by the inverse frequencies of the prompt's terms it holds, in units of the rarest a term can be in
this store (its ``bearing``), and by its sentence vector's cosine with the prompt's (its ``similarity``); only lines
at or above both bars (:data:`BARS`) are said, so a line without its vector yet (or a store without the semantic
signal) brings nothing. The bars were chosen on the labelled half of a real project's sessions
(``benchmarks/bench_prompt_recall.py``), not from a list of words. The prompt's terms that the session's last turns
hold (its transcript's tail: the agent has them) are not looked for. The session's own lines and other projects'
(in the user store) are never said. Deterministic; no chat model.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass

from memcli.retrieve.evidence_reader import top_similar
from memcli.session_start import shortened
from memcli.session_table import COMMAND
from memcli.store.lines import Library, shown_text
from memcli.terms import term_set, words
from memcli.tokens import count_tokens

BARS = (2.0, 0.4)  # the least bearing and similarity a line needs to be said
CONTEXT_TURNS = 8  # the session's last turns, whose terms are not looked for (the agent has them)
CONTEXT_CHARS = 8000  # of those, the last characters
TAIL_BYTES = 256 << 10  # the transcript's end read for them
PROMPT_CHARS = 4000  # the prompt's first characters are what is matched (a pasted log does not cost its length)
PARTITIONS = 20  # the heading sections the prompt's words find whose lines are weighed
CANDIDATES = 30  # of those, the first four times this many; and this many nearest in meaning
LINES = 5  # at most this many lines said
TEXT_CHARS = 240  # each line shortened at a sentence within this
HEAD = "From memory (memcli), earlier work that may bear on this prompt (cite doc:line; read more with the memory tools):"


@dataclass(frozen=True)
class Recalled:
    citation: str  # doc:line
    bearing: float  # the summed inverse frequency of the prompt's terms the line holds, in units of the rarest possible
    similarity: float  # the cosine of the line's sentence vector and the prompt's (0: no vector)
    conv: str  # the session it was said in
    text: str  # as shown: "2025-04-02 user: …"


def candidates(memory, prompt: str, project: str | None, session: str | None, context: str = "") -> list[Recalled]:
    """The lines that bear on ``prompt``, best first, each with its bearing (none filtered by the bar): the
    project's (``project``: entries tagged with it; None: a project store, every entry), not the session's own.
    ``context``: what the session said last (the agent has it already): the prompt's terms it holds are not
    looked for (a prompt that goes on with the session's own work brings nothing back)."""
    prompt = prompt[:PROMPT_CHARS]
    if not prompt.strip() or COMMAND.fullmatch(" ".join(prompt.split())):
        return []
    wanted = term_set(prompt) - term_set(context[-CONTEXT_CHARS:])
    if not wanted or not memory.store.state_path.exists():
        return []
    meaning, prompt = prompt, " ".join(w for t, w in words(prompt) if t in wanted)
    index = memory.index
    with memory.store.reading():
        index.refresh()
        library = Library(memory.store, index.parsed)
        similar = index.similarities(meaning) if memory.settings.search_semantic else {}
        idf = index.idf(refresh=False)
        unit = idf("\x00")  # a term no line holds: the rarest a term can be, the unit of bearing (any store's size)
        out = []
        for doc_id, line in _lines_for(library, index, prompt, similar):
            entry = library.doc(doc_id).entries.get(line)
            if entry is None or entry.meta.get("superseded_by") or (session and entry.meta.get("conv") == session):
                continue
            if project and entry.meta.get("project") != project:
                continue
            who = entry.meta.get("speaker") or ("assistant" if entry.meta.get("source") == "AI" else "user")
            said = f"{(entry.time or '')[:10]} {who}".strip()
            held = sum(idf(t) for t in sorted(wanted & term_set(entry.text)))  # one order: the same sum each run
            out.append(Recalled(f"{doc_id}:{line}", held / unit, similar.get((doc_id, line), 0.0),
                                entry.meta.get("conv", ""), f"{said}: {shortened(shown_text(entry), TEXT_CHARS)}"))
    return sorted(out, key=lambda r: (-r.bearing, -r.similarity, r.citation))


def _lines_for(library: Library, index, prompt: str, similar) -> list[tuple[str, int]]:
    """The lines weighed for a prompt: those of the heading sections its words find best (BM25, one search: no
    feedback round, the prompt waits), then the lines nearest it in meaning."""
    keys: list[tuple[str, int]] = []
    for hit in index.search(prompt, PARTITIONS, snippets=False, refresh=False):
        keys += [(hit.doc, line) for line in library.doc(hit.doc).lines if hit.start_line <= line <= hit.end_line]
    seen = set(keys)
    return keys[:CANDIDATES * 4] + [k for k in top_similar(similar, CANDIDATES) if k not in seen] if similar else \
        keys[:CANDIDATES * 4]


def session_tail(path: str | None, cwd: str | None, fmt: str) -> str:
    """What the session said last: the text of the last :data:`CONTEXT_TURNS` turns of its transcript (the event's
    ``transcript_path``, in the host's ``fmt``), read from the file's last :data:`TAIL_BYTES` ('' when there is no
    such regular file, or nothing in it reads as turns)."""
    from memcli.errors import MemcliError
    from memcli.hook_start import transcript_file, usable
    from memcli.ingest.formats import parse_input

    if not isinstance(path, str) or not path or usable(path) or (cwd is not None and usable(cwd)):
        return ""
    path, why = transcript_file(path, cwd)
    if why:
        return ""
    try:
        handle = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO swapped in since the check never blocks
        with os.fdopen(handle, "rb") as opened:
            if not stat.S_ISREG(os.fstat(opened.fileno()).st_mode):
                return ""
            size = opened.seek(0, 2)
            opened.seek(max(0, size - TAIL_BYTES))
            raw = opened.read(TAIL_BYTES)
        if size > TAIL_BYTES:
            raw = raw.partition(b"\n")[2]  # the first line read is cut
        turns = parse_input(raw, path, fmt=fmt, default_time="1970-01-01T00:00:00Z").turns
    except (MemcliError, OSError, ValueError):
        return ""
    return "\n".join(t.text for t in turns[-CONTEXT_TURNS:])


def said(found: list[Recalled], bars: tuple[float, float] = BARS) -> list[Recalled]:
    """The candidates at or above both bars, at most :data:`LINES` of them."""
    return [f for f in found if f.bearing >= bars[0] and f.similarity >= bars[1]][:LINES]


def recall(memory, prompt: str, project: str | None, session: str | None, budget: int,
           bars: tuple[float, float] = BARS, context: str = "") -> str:
    """The text a prompt's hook adds to the agent's context ('' when nothing bears on the prompt enough)."""
    lines, used = [HEAD], count_tokens(HEAD)
    for found in said(candidates(memory, prompt, project, session, context), bars):
        item = f"- {found.text} ({found.citation})"
        if used + count_tokens(item) > budget:
            continue
        lines.append(item)
        used += count_tokens(item)
    return "\n".join(lines) if len(lines) > 1 else ""
