"""A topic document as sections: title (H1), preamble, H2 sections, and the Superseded section.

Consolidation rewrites documents through this model. Lines it does not
understand (plain text, deeper headings, bullets without a signature) travel
with the section they are in, untouched.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from memcli.store.format import Document, Entry, parse_entry, parse_heading

SUPERSEDED = "Superseded"


@dataclass
class Section:
    title: str
    lines: list[str] = field(default_factory=list)
    heading: str | None = None  # the raw heading line, kept when the section is unchanged

    def render_heading(self) -> str:
        return self.heading or f"## {self.title}"

    def entries(self) -> list[Entry]:
        return [e for e in map(parse_entry, self.lines) if e is not None]


@dataclass
class Layout:
    title: str | None = None
    title_line: str | None = None
    preamble: list[str] = field(default_factory=list)
    sections: list[Section] = field(default_factory=list)
    superseded: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, doc: Document) -> Layout:
        out = cls()
        current: list[str] = out.preamble
        for _, line in doc.lines():
            head = parse_heading(line)
            if head and head[0] == 1 and out.title is None and not out.sections:
                out.title, out.title_line = head[1], line
                continue
            if head and head[0] <= 2:
                if head[1].strip().lower() == SUPERSEDED.lower():
                    current = out.superseded
                    continue
                section = Section(head[1], [], line)
                out.sections.append(section)
                current = section.lines
                continue
            current.append(line)
        return out

    def section(self, title: str) -> Section | None:
        wanted = title.strip().lower()
        return next((s for s in self.sections if s.title.strip().lower() == wanted), None)

    def add(self, title: str, lines: list[str]) -> None:
        """Append lines under the section with this title (made at the end if missing)."""
        section = self.section(title)
        if section is None:
            section = Section(title)
            self.sections.append(section)
        _trim(section.lines)
        section.lines.extend(lines)

    def body(self) -> list[str]:
        out: list[str] = []
        if self.title is not None:
            out.append(self.title_line or f"# {self.title}")
        out.extend(_trimmed(self.preamble))
        for section in self.sections:
            out.append(section.render_heading())
            out.extend(_trimmed(section.lines))
        if self.superseded:
            out.append(f"## {SUPERSEDED}")
            out.extend(_trimmed(self.superseded))
        return [*out, ""]

    def live_lines(self) -> list[str]:
        """Every line outside the Superseded section."""
        return [*self.preamble, *(line for s in self.sections for line in s.lines)]

    def all_lines(self) -> list[str]:
        return [*self.live_lines(), *self.superseded]

    def live_entries(self) -> list[Entry]:
        return [e for e in map(parse_entry, self.live_lines()) if e is not None]


def _trim(lines: list[str]) -> None:
    while lines and not lines[-1].strip():
        lines.pop()


def _trimmed(lines: list[str]) -> list[str]:
    out = list(lines)
    _trim(out)
    while out and not out[0].strip():
        out.pop(0)
    return out


def superseded_line(entry: Entry, by: int) -> str:
    return Entry({**entry.meta, "superseded_by": str(by)}, entry.text).render()
