"""Keep the library in shape: split documents that grew too large, merge small similar ones.

Split: a document over the limit is cut between its H2 sections into parts
that fit; a single section that is still too large is halved recursively.
The first part keeps the document's id (its prefix, and any KV blocks of it,
stay valid), the others get new ids. Superseded entries follow the entry
that replaced them.

Merge: documents this flush touched that are under the merge limit are
paired with small documents whose summaries and headings are similar
(candidates from the search index), in non-overlapping groups of 2-4 that
stay under the split limit. The largest document of a group keeps its id.
Documents of the same people whose best phrase is the same (one subject in
two documents, whatever their size) are merged the same way.
"""

from __future__ import annotations

from memcli.consolidate.apply import new_document
from memcli.consolidate.layout import Layout, Section
from memcli.consolidate.lexical import cosine, term_counts, tfidf
from memcli.consolidate.titles import heading_signature, subject, title_signature
from memcli.consolidate.workspace import Workspace
from memcli.store.folder import now_iso
from memcli.store.format import parse_entry
from memcli.tokens import count_tokens


def _tokens(lines: list[str]) -> int:
    return count_tokens("\n".join(lines))


def _seqs(lines: list[str]) -> list[int]:
    return [e.seq for e in map(parse_entry, lines) if e is not None and e.seq is not None]


def _halve(section: Section, limit: int) -> list[Section]:
    """A section cut into pieces under ``limit`` tokens (recursive halving), titled "(part n)"."""
    pieces = [section.lines]
    while any(_tokens(p) > limit and len(p) > 1 for p in pieces):
        nxt = []
        for piece in pieces:
            if _tokens(piece) > limit and len(piece) > 1:
                mid = len(piece) // 2
                nxt += [piece[:mid], piece[mid:]]
            else:
                nxt.append(piece)
        pieces = nxt
    if len(pieces) == 1:
        return [section]
    return [Section(f"{section.title} (part {i})", p) for i, p in enumerate(pieces, 1)]


def split_document(ws: Workspace, doc_id: str, limit: int) -> list[str]:
    """Split ``doc_id`` if it is over ``limit`` tokens; returns the ids of the new parts."""
    doc = ws.docs[doc_id]
    if count_tokens("\n".join(line for _, line in doc.lines())) <= limit:
        return []
    layout = Layout.of(doc)
    budget = max(limit // 2, 1)
    sections: list[Section] = []
    for section in layout.sections:
        sections.extend(_halve(section, budget) if _tokens(section.lines) > budget else [section])
    if not sections and layout.preamble:
        sections = _halve(Section(layout.title or "Notes", layout.preamble), budget)
        layout.preamble = []
    parts: list[list[Section]] = [[]]
    size = _tokens(layout.preamble)
    for section in sections:
        cost = _tokens([section.render_heading(), *section.lines])
        if parts[-1] and size + cost > budget:
            parts.append([])
            size = 0
        parts[-1].append(section)
        size += cost
    if len(parts) < 2:
        return []
    title = layout.title or str(doc.meta.get("summary") or doc_id)
    layouts = [Layout(title, layout.title_line, layout.preamble, parts[0], [])]
    layouts += [Layout(f"{title} (continued)", None, [], p, []) for p in parts[1:]]
    # superseded entries go with the part holding the entry that replaced them
    owner = {seq: i for i, lay in enumerate(layouts) for seq in _seqs(lay.all_lines())}
    for line in layout.superseded:
        entry = parse_entry(line)
        by = int(entry.meta.get("superseded_by", 0) or 0) if entry else 0
        layouts[owner.get(by, 0)].superseded.append(line)
    new_ids = []
    stamp = now_iso()
    doc.body = layouts[0].body()
    for lay in layouts[1:]:
        new_id = ws.new_id(lay.title, f"{doc_id}:{_seqs(lay.all_lines())[:1]}")
        part = new_document(new_id, lay.title)
        part.body = lay.body()
        ws.create(new_id, part)
        moved = _seqs(lay.all_lines())
        ws.note(new_id, {"time": stamp, "op": "split", "seqs": moved, "note": f"split from {doc_id}"})
        new_ids.append(new_id)
    moved_out = [s for lay in layouts[1:] for s in _seqs(lay.all_lines())]
    ws.note(doc_id, {"time": stamp, "op": "split", "seqs": moved_out, "note": "moved to " + ", ".join(new_ids)})
    ws.forget_profile(doc_id)
    return new_ids


def _shape_vector(ws: Workspace, doc_id: str):
    return tfidf(term_counts(_shape(ws, ws.view(doc_id))), ws.idf)


def _shape(ws: Workspace, doc, title: bool = True) -> list[str]:
    """What merging compares of a document: its summary and the signatures of its title (``title``) and
    section headings, never how they are phrased (:func:`~memcli.consolidate.workspace.doc_parts`); a
    summary that is still the title (a new document's, until summaries are made) counts as its signature."""
    layout = Layout.of(doc)
    named = title_signature(layout.live_entries(), ws.idf)
    summary = str(doc.meta.get("summary") or "")
    out = [named if summary == layout.title else summary]
    if title and layout.title is not None:
        out.append(named)
    return out + [heading_signature(s.entries(), ws.idf) for s in layout.sections]


def _lines(ws: Workspace, doc_id: str) -> list[str]:
    doc = ws.view(doc_id)
    return [line for _, line in doc.lines()]


def _held(ws: Workspace, doc_id: str) -> int:
    """The tokens of a document's entries (its title and headings aside)."""
    return _tokens([line for line in _lines(ws, doc_id) if parse_entry(line) is not None])


def _size(ws: Workspace, doc_id: str) -> int:
    return _tokens(_lines(ws, doc_id))


def merge_small(ws: Workspace, touched: list[str], *, merge_limit: int, split_limit: int,
                similarity: float, candidates: int) -> list[list[str]]:
    """Merge small similar documents; returns the groups merged (keeper first)."""
    small = [d for d in touched if ws.exists(d) and _size(ws, d) < merge_limit]
    if not small:
        return []
    pool = list(small)
    for doc_id in small:
        for other in ws.candidates(_shape(ws, ws.docs[doc_id], title=False),
                                   candidates, ws.scope(doc_id)):
            if other not in pool and other != doc_id and _size(ws, other) < merge_limit:
                pool.append(other)
    vectors = {d: _shape_vector(ws, d) for d in pool}
    sizes = {d: _size(ws, d) for d in pool}
    pairs = sorted(((cosine(vectors[a], vectors[b]), a, b) for i, a in enumerate(pool) for b in pool[i + 1:]
                    if (a in small or b in small) and ws.scope(a).fits(ws.scope(b))), reverse=True)
    group_of: dict[str, list[str]] = {}
    for score, a, b in pairs:
        if score < similarity:
            break
        ga, gb = group_of.get(a), group_of.get(b)
        if ga is not None and gb is not None:
            continue  # groups never overlap or join
        if ga is None and gb is None:
            if sizes[a] + sizes[b] < split_limit:
                group_of[a] = group_of[b] = [a, b]
            continue
        group, newcomer = (ga, b) if ga is not None else (gb, a)
        if len(group) < 4 and sum(sizes[d] for d in group) + sizes[newcomer] < split_limit \
                and all(ws.scope(d).fits(ws.scope(newcomer)) for d in group):
            group.append(newcomer)
            group_of[newcomer] = group
    groups = []
    seen: set[int] = set()
    for group in group_of.values():
        if id(group) in seen or len(group) < 2:
            continue
        seen.add(id(group))
        groups.append(_merge(ws, sorted(group, key=lambda d: (-sizes[d], d))))
    return groups


def merge_subjects(ws: Workspace, touched: list[str], *, split_limit: int, candidates: int) -> list[list[str]]:
    """Merge documents of the same people whose best phrase is the same (:func:`titles.subject`): one
    subject a document. The documents this flush touched and the similar ones the index finds for each are
    grouped by their people, projects and subject; a group is merged, largest first, in groups of 2-4 that
    stay under the split limit. A document whose title a person wrote is left as it is. Returns the groups
    merged (keeper first)."""
    pool = [d for d in touched if ws.exists(d)]
    for doc_id in list(pool):
        for other in ws.candidates(_shape(ws, ws.docs[doc_id], title=False), candidates, ws.scope(doc_id)):
            if other not in pool and ws.exists(other):
                pool.append(other)
    by_subject: dict[tuple, list[str]] = {}
    for doc_id in pool:
        doc = ws.view(doc_id)
        layout, aux = Layout.of(doc), doc.meta.get("aux")
        if not isinstance(aux, dict) or aux.get("title") != layout.title:
            continue  # a title a person wrote says what the document holds: it is not merged by its subject
        about = subject(layout.live_entries(), ws.idf)
        if about is not None:
            scope = ws.scope(doc_id)
            by_subject.setdefault((scope.speakers, scope.convs, scope.projects, about), []).append(doc_id)
    groups = []
    for members in by_subject.values():
        sizes = {d: _size(ws, d) for d in members}
        held = {d: _held(ws, d) for d in members}  # the order does not hang on how titles are phrased
        left = sorted(members, key=lambda d: (-held[d], min(_seqs(_lines(ws, d)), default=0)))
        while len(left) >= 2:
            group = [left.pop(0)]
            for other in list(left):
                if len(group) < 4 and sum(sizes[d] for d in group) + sizes[other] < split_limit:
                    group.append(other)
                    left.remove(other)
            if len(group) >= 2:
                groups.append(_merge(ws, group))
    return groups


def _merge(ws: Workspace, group: list[str]) -> list[str]:
    keeper, others = group[0], group[1:]
    doc = ws.load(keeper)
    layout = Layout.of(doc)
    stamp = now_iso()
    moved: list[int] = []
    for other_id in others:
        other = Layout.of(ws.load(other_id))
        if other.preamble and any(line.strip() for line in other.preamble):
            layout.sections.append(Section(other.title or other_id, list(other.preamble)))
        for section in other.sections:
            target = layout.section(section.title)
            if target is None:
                layout.sections.append(Section(section.title, list(section.lines), section.heading))
            else:
                target.lines.extend(section.lines)
        layout.superseded.extend(other.superseded)
        moved += _seqs(other.all_lines())
        ws.delete(other_id)
        ws.went(other_id, keeper)
    doc.body = layout.body()
    ws.note(keeper, {"time": stamp, "op": "merge", "seqs": moved, "note": "merged from " + ", ".join(others)})
    ws.forget_profile(keeper)
    return group
