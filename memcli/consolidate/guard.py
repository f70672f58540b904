"""The conservation guard: proof, in code, that a flush lost, invented and altered nothing.

Compared with its inputs (the flushed CURRENT entries and every document the
flush rewrites or deletes, as they were on disk), the flush's output must:

* contain every input seq exactly as often as the input did (nothing lost,
  nothing duplicated) and no other seq (nothing invented);
* keep every entry's text and metadata exactly, except that a newly
  superseded entry gains ``superseded_by``, which must name a live entry, and
  must then sit under the ``Superseded`` heading;
* keep every other non-blank line (hand-written notes) that was there;
* render to documents that parse back to the same entries.
"""

from __future__ import annotations

from collections import Counter

from memcli.consolidate.layout import Layout
from memcli.store.format import Document, Entry, parse_document, parse_entry, parse_heading


def _plain_lines(doc: Document) -> Counter:
    out: Counter = Counter()
    for _, line in doc.lines():
        if line.strip() and parse_entry(line) is None and parse_heading(line) is None:
            out[line.rstrip()] += 1
    return out


def check(inputs: list[Entry], before: list[Document], after: dict[str, Document]) -> list[str]:
    """Problems found (empty when the flush conserves everything)."""
    problems: list[str] = []
    source: dict[int, Entry] = {}
    wanted: Counter = Counter()
    for entry in [*inputs, *(e for doc in before for _, e in doc.entries())]:
        if entry.seq is None:
            continue
        wanted[entry.seq] += 1
        source.setdefault(entry.seq, entry)

    got: Counter = Counter()
    live: set[int] = set()
    placed: list[tuple[str, Entry, bool]] = []
    plain_after: Counter = Counter()
    for doc_id, doc in after.items():
        text = doc.render()
        reparsed = parse_document(text)
        if [e.render() for _, e in reparsed.entries()] != [e.render() for _, e in doc.entries()]:
            problems.append(f"{doc_id}: does not read back the same")
        layout = Layout.of(reparsed)
        marked = [(line, False) for line in layout.live_lines()] + [(line, True) for line in layout.superseded]
        for line, in_superseded in marked:
            entry = parse_entry(line)
            if entry is None or entry.seq is None:
                continue
            got[entry.seq] += 1
            placed.append((doc_id, entry, in_superseded))
            if not in_superseded:
                live.add(entry.seq)
        plain_after += _plain_lines(reparsed)

    for seq in sorted(set(wanted) | set(got)):
        if got[seq] < wanted[seq]:
            problems.append(f"seq {seq} lost")
        elif got[seq] > wanted[seq]:
            problems.append(f"seq {seq} {'invented' if seq not in wanted else 'duplicated'}")
    for doc_id, entry, in_superseded in placed:
        original = source.get(entry.seq)
        if original is None:
            continue
        if entry.text != original.text:
            problems.append(f"{doc_id}: seq {entry.seq} text changed")
        meta = dict(entry.meta)
        added = meta.pop("superseded_by", None) if "superseded_by" not in original.meta else None
        if meta != original.meta:
            problems.append(f"{doc_id}: seq {entry.seq} metadata changed")
        if added is not None:
            if not added.isdigit() or int(added) not in live:
                problems.append(f"{doc_id}: seq {entry.seq} superseded by {added}, which is not a live entry")
            if not in_superseded:
                problems.append(f"{doc_id}: seq {entry.seq} is superseded but not under Superseded")
    plain_before: Counter = Counter()
    for doc in before:
        plain_before += _plain_lines(doc)
    missing = plain_before - plain_after
    for line in missing:
        problems.append(f"line lost: {line[:80]!r}")
    return problems
