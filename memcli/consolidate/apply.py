"""Apply: write planned blocks into their documents, mark superseded entries, refresh summaries.

Entries are copied exactly as they were in CURRENT (text and metadata); an
entry replaced by a newer one moves under the document's ``## Superseded``
heading with ``superseded_by=<seq>`` added to its signature. Summaries come
from the model (one validated line) or, as the fallback, the document's most central
sentences (extractive: each a sentence of one of its entries).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from memcli.consolidate.draft import Block, Draft, entry_line, exact_duplicates, resolve_chains
from memcli.consolidate.layout import Layout, superseded_line
from memcli.consolidate.lexical import cosine, grounded, normalized, term_counts, tfidf
from memcli.consolidate.titles import (
    block_title,
    clean_title,
    document_title,
    heading_lead,
    lead,
    memcli_heading,
    retitled_id,
)
from memcli.consolidate.workspace import Workspace, doc_texts
from memcli.ingest.corrections import corrections
from memcli.llm.base import CallStats, ChatModel
from memcli.llm.prompts import SUMMARY_SCHEMA, SUMMARY_SYSTEM
from memcli.llm.structured import Invalid, ask_json
from memcli.store.folder import now_iso, refresh_token_count
from memcli.store.format import Document, Entry, parse_entry
from memcli.store.lines import sentences
from memcli.tokens import count_tokens


def new_document(doc_id: str, title: str) -> Document:
    """A new document under ``title``, which ``aux.title`` records as memcli's (see :func:`refresh_title`)."""
    stamp = now_iso()
    return Document(meta={"id": doc_id, "summary": title, "token_count": 0, "created_time": stamp,
                          "updated_time": stamp, "update_log": [], "aux": {"title": title}},
                    body=[f"# {title}", ""])


def apply_blocks(ws: Workspace, draft: Draft) -> dict[str, list[int]]:
    """Write every block into its target document; returns seqs added per document."""
    added: dict[str, list[int]] = {}
    newly_retired: set[int] = set()
    by_doc: dict[str, list[Block]] = {}
    for block in draft.blocks:
        by_doc.setdefault(block.target, []).append(block)
    for doc_id, blocks in by_doc.items():
        if ws.exists(doc_id) or doc_id in ws.docs:
            doc = ws.load(doc_id)
        else:
            doc = new_document(doc_id, blocks[0].new_title or blocks[0].title)
            ws.create(doc_id, doc)
        layout = Layout.of(doc)
        superseded = dict(draft.superseded)
        # exact duplicates of facts already in the document
        incoming = [e for b in blocks for e in b.entries]
        known = {normalized(e.text) for e in incoming}
        live = layout.live_entries()
        existing = [e for e in live if normalized(e.text) in known and e.seq is not None]
        superseded.update(exact_duplicates(existing + incoming))
        # and entries of the document that an incoming correction denies
        superseded.update({old: new for old, new in corrections(incoming, live).items() if old not in superseded})
        superseded = resolve_chains(superseded)
        newly_retired |= _retire_existing(layout, superseded)
        for block in blocks:
            live, retired = [], []
            for entry in block.entries:
                if entry.seq in superseded:
                    retired.append(superseded_line(entry, superseded[entry.seq]))
                    newly_retired.add(entry.seq)
                else:
                    live.append(entry.render())
            if live:
                layout.add(block.title, live)
            layout.superseded.extend(retired)
            added.setdefault(doc_id, []).extend(block.seqs)
        doc.body = layout.body()
        ws.forget_profile(doc_id)
    _follow_chains(ws, list(by_doc), newly_retired)
    return added


def _follow_chains(ws: Workspace, doc_ids: list[str], newly_retired: set[int]) -> None:
    """Point every retired entry at a live one: when its replacement was itself retired in
    another document (a duplicate of an older fact there), follow on to that one's replacement."""
    layouts = {d: Layout.of(ws.docs[d]) for d in doc_ids}
    retired: dict[int, int] = {}
    for layout in layouts.values():
        for entry in map(parse_entry, layout.superseded):
            if entry is not None and entry.seq is not None and entry.meta.get("superseded_by", "").isdigit():
                retired[entry.seq] = int(entry.meta["superseded_by"])
    final = resolve_chains(retired)
    for doc_id, layout in layouts.items():
        changed = False
        for index, line in enumerate(layout.superseded):
            entry = parse_entry(line)
            if entry is None or entry.seq not in newly_retired or final.get(entry.seq) == retired[entry.seq]:
                continue
            if entry.seq in final:
                meta = {k: v for k, v in entry.meta.items() if k != "superseded_by"}
                layout.superseded[index] = superseded_line(Entry(meta, entry.text), final[entry.seq])
                changed = True
        if changed:
            ws.docs[doc_id].body = layout.body()


def _retire_existing(layout: Layout, superseded: dict[int, int]) -> set[int]:
    """Move entries of the document that a newer entry supersedes under Superseded; returns their seqs."""
    moved: set[int] = set()

    def keep(lines: list[str]) -> list[str]:
        out = []
        for line in lines:
            entry = parse_entry(line)
            if entry is not None and entry.seq in superseded and "superseded_by" not in entry.meta:
                layout.superseded.append(superseded_line(entry, superseded[entry.seq]))
                moved.add(entry.seq)
            else:
                out.append(line)
        return out

    layout.preamble[:] = keep(layout.preamble)
    emptied = []
    for section in layout.sections:
        before = section.entries()
        section.lines[:] = keep(section.lines)
        if before and not any(line.strip() for line in section.lines) and memcli_heading(section.title, before):
            emptied.append(section)  # a heading memcli gave, over nothing now: its entries are all under Superseded
    layout.sections[:] = [s for s in layout.sections if not any(s is gone for gone in emptied)]
    return moved


# ---------------------------------------------------------------- summaries

SUMMARY_TOKENS = 60  # an extractive summary's sentences fit this many tokens


def deterministic_summary(doc: Document, idf: Callable[[str], float]) -> str:
    """The document's most central sentences, in their order, within ``SUMMARY_TOKENS``: each a sentence
    of one of its entries, chosen by the cosine of its tf-idf vector with the whole document's (a
    sentence of three words or fewer says too little to stand for it)."""
    layout = Layout.of(doc)
    entries = layout.live_entries() or [e for e in map(parse_entry, layout.superseded) if e]
    found = [(at, part) for at, e in enumerate(entries) for part in sentences(" ".join(e.text.split()))
             if len(part.split()) > 3]
    if not found:
        return clean_title(" ".join(" ".join(e.text.split()) for e in entries)[:120]) or "notes"
    whole = tfidf(term_counts(e.text for e in entries), idf)
    ranked = sorted(found, key=lambda item: (-cosine(tfidf(term_counts([item[1]]), idf), whole), item[0]))
    chosen, size = [], 0
    for at, part in ranked:
        cost = count_tokens(part)
        if size + cost <= SUMMARY_TOKENS:
            chosen.append((at, part))
            size += cost
    if not chosen:  # every sentence is longer than the limit: the shortest stands alone
        chosen = [min(ranked, key=lambda item: (count_tokens(item[1]), item[0]))]
    return " ".join(part for _, part in sorted(chosen, key=lambda item: item[0]))


def _summary_validator(doc: Document):
    sources = doc_texts(doc)

    def validate(data) -> str:
        text = re.sub(r"\s+", " ", data["summary"]).strip()
        if len(text) < 8 or not re.search(r"[^\W\d_]{3}", text):
            raise Invalid("the summary is empty or too short")
        if re.search(r"[\x00-\x1f\x7f]", data["summary"].replace("\n", " ")):
            raise Invalid("the summary has control characters")
        if not grounded(text, sources, min_shared=2, min_ratio=0.3):
            raise Invalid("the summary is not about the document's entries")
        return text[:200]

    return validate


def refresh_summary(ws: Workspace, doc_id: str, *, model: ChatModel | None, stats: CallStats) -> None:
    doc = ws.docs[doc_id]
    summary = None
    if model is not None:
        layout = Layout.of(doc)
        lines = [f"Title: {layout.title or doc_id}", "Sections: " + "; ".join(s.title for s in layout.sections[:12])]
        lines += [entry_line(e)[:160] for e in layout.live_entries()[:8]]
        messages = [{"role": "system", "content": SUMMARY_SYSTEM}, {"role": "user", "content": "\n".join(lines)}]
        summary = ask_json(model, messages, SUMMARY_SCHEMA, _summary_validator(doc), step="summary",
                           stats=stats, max_tokens=96)
        if summary is None:
            stats.fell_back("summary")
    doc.meta["summary"] = summary or deterministic_summary(doc, ws.idf)


def refresh_title(doc: Document, idf: Callable[[str], float], siblings: Iterable[str] = ()) -> None:
    """A title memcli gave (``aux.title`` is the title line's) names the document's entries as they are
    now, so a document that gathers a subject's blocks is titled by all of them, not its first; the
    id stays. A title a person wrote (or one from before ``aux.title``) is left as it is. ``siblings``:
    the titles of the other documents of the same people, whose first phrases this one's does not begin
    with where it has another (:func:`memcli.consolidate.titles.document_title`)."""
    aux = doc.meta.get("aux")
    layout = Layout.of(doc)
    if not isinstance(aux, dict) or layout.title is None or aux.get("title") != layout.title:
        return
    entries = layout.live_entries()
    title = document_title(entries, idf, {lead(t) for t in siblings}) if entries else layout.title
    if title and title != layout.title:
        layout.title, layout.title_line = title, f"# {title}"
        doc.body = layout.body()
        aux["title"] = title


def rename_to_title(ws: Workspace, doc_id: str) -> str:
    """A document whose title memcli gave is renamed when its name no longer begins with its title's
    first phrase (:func:`~memcli.consolidate.titles.retitled_id`): the file follows the title, the id's
    suffix stays, and the former id resolves to the new one (:meth:`Workspace.rename`). A title a person
    wrote, or an id a person gave, keeps its name. Returns the document's id now."""
    doc = ws.docs[doc_id]
    aux, layout = doc.meta.get("aux"), Layout.of(doc)
    if not isinstance(aux, dict) or layout.title is None or aux.get("title") != layout.title:
        return doc_id
    new = retitled_id(doc_id, layout.title)
    if new is None or ws.taken(new):
        return doc_id
    ws.rename(doc_id, new)
    if doc_id in ws.renamed:  # one on disk (a document this flush made is just named anew)
        ws.note(new, {"time": now_iso(), "op": "rename", "note": f"renamed from {doc_id}"})
    return new


def refresh_headings(doc: Document, idf: Callable[[str], float]) -> None:
    """Keep a document's section headings apart as its title is kept apart from its siblings': a heading
    memcli gave (:func:`~memcli.consolidate.titles.memcli_heading`) whose first phrase begins an earlier
    section's heading is given the section's next phrase, where its entries have one. The first section
    under a phrase keeps it, and a heading is renamed only while it repeats one, so headings do not
    change from flush to flush; a heading a person or a model wrote is never renamed."""
    layout = Layout.of(doc)
    leads = [heading_lead(s.title) for s in layout.sections]
    seen: set[str] = set()
    changed = False
    for at, section in enumerate(layout.sections):
        entries = section.entries()
        if leads[at] in seen and memcli_heading(section.title, entries):
            others = {lead for i, lead in enumerate(leads) if i != at}
            title = block_title(entries, idf, others)
            if title != section.title and layout.section(title) is None:
                section.title, section.heading = title, None
                leads[at] = heading_lead(title)
                changed = True
        seen.add(leads[at])
    if changed:
        doc.body = layout.body()


def finish(ws: Workspace, doc_id: str) -> None:
    """Recount tokens, stamp the update and append this flush's update_log items."""
    doc = ws.docs[doc_id]
    refresh_token_count(doc)
    doc.meta["id"] = doc_id
    doc.meta["updated_time"] = now_iso()
    log = doc.meta.get("update_log")
    if not isinstance(log, list):
        log = []
    doc.meta["update_log"] = [*log, *ws.log.get(doc_id, [])]
    doc.meta.setdefault("aux", {})
    ws.forget_profile(doc_id)
