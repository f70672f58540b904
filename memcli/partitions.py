"""What the search index indexes: a document's heading sections, each cut into pieces of at most a
number of tokens (BM25 partitions: their entries with their speakers, the document's title in front when
a person wrote it), and the line of a partition a hit shows.

The titles and headings memcli writes are phrases of the entries under them
(:mod:`memcli.consolidate.titles`), so they are not indexed: they would count those words again for
every line of their section, and how a title is phrased would move which lines a question reads. A
title a person wrote (one that is not ``aux.title``, memcli's record of its own) says something the
entries may not, and is read."""

from __future__ import annotations

from dataclasses import dataclass

from memcli.store.format import Document, parse_entry, parse_heading
from memcli.terms import terms
from memcli.tokens import count_tokens


@dataclass
class Partition:
    start: int  # file line numbers, inclusive
    end: int
    heading: str
    text: str  # what is indexed


def partitions(doc: Document, max_tokens: int) -> list[Partition]:
    """Heading sections of ``doc``, each cut into pieces of at most ``max_tokens``."""
    out: list[Partition] = []
    path: list[tuple[int, str]] = []
    aux = doc.meta.get("aux")
    made = aux.get("title") if isinstance(aux, dict) else None  # the title memcli gave the document
    lines: list[tuple[int, str]] = []
    size = 0

    def flush() -> None:
        nonlocal lines, size
        body = [t for _, t in lines]
        if any(t.strip() for t in body):
            heading = " > ".join(title for _, title in path)
            read = [title for level, title in path if level == 1 and title != made]
            out.append(Partition(lines[0][0], lines[-1][0], heading, "\n".join([*read, *body])))
        lines, size = [], 0

    for lineno, raw in doc.lines():
        head = parse_heading(raw)
        if head is not None:
            flush()
            level, title = head
            path = [p for p in path if p[0] < level] + [(level, title)]
            continue
        entry = parse_entry(raw)
        text = raw
        if entry is not None:
            speaker = entry.meta.get("speaker", "")
            text = f"{speaker} {entry.text}" if speaker else entry.text
        cost = count_tokens(text)
        if lines and size + cost > max_tokens:
            flush()
        lines.append((lineno, text))
        size += cost
    flush()
    return out


def snippet(text: str, start: int, end: int, wanted: set[str], width: int = 240) -> str:
    """The line of a partition (file lines start..end) with the most query terms, shortened."""
    lines = text.split("\n")[start - 1:end]
    best, best_score = "", -1
    for raw in lines:
        entry = parse_entry(raw)
        line = entry.text if entry else raw.strip()
        score = len(wanted.intersection(terms(line)))
        if score > best_score:
            best, best_score = line, score
    best = " ".join(best.split())
    return best if len(best) <= width else best[: width - 1] + "…"
