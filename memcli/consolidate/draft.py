"""Rewrite: CURRENT's entries -> a draft of topic blocks, with superseded entries marked.

The model groups entries by seq and names superseded ones; it never rewrites
an entry. Its answer is validated per window; a rejected window (after one
retry) is grouped deterministically: entries of one session, cut where the
vocabulary of neighbouring entries changes most, titled by salient terms.
Exact duplicates are always found in code (the user's words win over the
assistant's, then the newer seq).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from memcli.consolidate.lexical import Vector, cosine, grounded, normalized, term_counts, tfidf
from memcli.consolidate.titles import block_title, clean_title
from memcli.ingest.corrections import corrections, may_supersede, party
from memcli.llm.base import CallStats, ChatModel
from memcli.llm.prompts import REWRITE_SYSTEM, rewrite_schema
from memcli.llm.structured import Invalid, ask_json
from memcli.store.format import Entry
from memcli.tokens import count_tokens

Idf = Callable[[str], float]
BLOCK_TOKENS = 500  # the deterministic path cuts sessions into blocks of about this size


@dataclass
class Block:
    """Entries that belong together, the heading they go under, and where they go."""

    title: str
    entries: list[Entry]
    target: str | None = None  # an existing document id, or None for a new document
    new_title: str | None = None  # the new document's title

    @property
    def seqs(self) -> list[int]:
        return [e.seq for e in self.entries]


@dataclass
class Draft:
    windows: list[list[Block]] = field(default_factory=list)  # blocks, window by window
    superseded: dict[int, int] = field(default_factory=dict)  # older seq -> newer seq

    @property
    def blocks(self) -> list[Block]:
        return [b for window in self.windows for b in window]


def entry_line(entry: Entry) -> str:
    who = entry.meta.get("speaker") or ("assistant" if entry.meta.get("source") == "AI" else "note")
    text = " ".join(entry.text.split())
    return f"[{entry.seq}] {who} ({entry.time or '?'}): {text}"


def windows(entries: list[Entry], window_tokens: int) -> list[list[Entry]]:
    """Consecutive runs of entries of about ``window_tokens`` tokens each."""
    out: list[list[Entry]] = []
    current: list[Entry] = []
    size = 0
    for entry in entries:
        cost = count_tokens(entry_line(entry))
        if current and size + cost > window_tokens:
            out.append(current)
            current, size = [], 0
        current.append(entry)
        size += cost
    if current:
        out.append(current)
    return out


def exact_duplicates(entries: list[Entry]) -> dict[int, int]:
    """seq -> the seq that supersedes it, for entries with the same normalized text said by the same
    party in the same project: the same speaker, or the owner (notes, and the ``user`` and
    ``assistant`` of a session); the same words said by two people are two facts."""
    def rank(e: Entry) -> tuple[int, int]:
        return (0 if e.meta.get("source") == "AI" else 1, e.seq)

    best: dict[tuple, Entry] = {}
    out: dict[int, int] = {}
    for entry in entries:
        text = normalized(entry.text)
        if not text:
            continue
        key = (*party(entry), text)
        other = best.get(key)
        if other is None:
            best[key] = entry
            continue
        winner, loser = (entry, other) if rank(entry) > rank(other) else (other, entry)
        best[key] = winner
        out[loser.seq] = winner.seq
    return out


# ---------------------------------------------------------------- deterministic grouping

def _session_key(entry: Entry) -> tuple:
    return (entry.meta.get("conv"), entry.time)


def _segment(entries: list[Entry], vectors: dict[int, Vector], max_tokens: int) -> list[list[Entry]]:
    """A session cut where the words on either side differ most (nearest the middle on ties), again
    until each part fits ``max_tokens``; never between a question and the reply to it, unless every
    possible cut is one."""
    total = sum(count_tokens(e.text) for e in entries)
    if total <= max_tokens or len(entries) < 4:
        return [entries]
    best_cut, best_score = None, None
    middle = len(entries) / 2
    for cut in range(2, len(entries) - 1):
        left = _sum(vectors[e.seq] for e in entries[max(0, cut - 3):cut])
        right = _sum(vectors[e.seq] for e in entries[cut:cut + 3])
        score = (_answered(entries[cut - 1], entries[cut]), cosine(left, right), abs(cut - middle))
        if best_score is None or score < best_score:
            best_cut, best_score = cut, score
    return (_segment(entries[:best_cut], vectors, max_tokens)
            + _segment(entries[best_cut:], vectors, max_tokens))


def _answered(before: Entry, after: Entry) -> bool:
    """Whether ``after`` replies to ``before``: a question, then another speaker."""
    return before.text.rstrip().endswith("?") and before.meta.get("speaker") != after.meta.get("speaker")


def _sum(vectors) -> Vector:
    out: Vector = {}
    for vec in vectors:
        for t, w in vec.items():
            out[t] = out.get(t, 0.0) + w
    return out


def deterministic_blocks(entries: list[Entry], idf: Idf, max_tokens: int = BLOCK_TOKENS) -> list[Block]:
    vectors = {e.seq: tfidf(term_counts([e.text]), idf) for e in entries}
    sessions: list[list[Entry]] = []
    for entry in entries:
        if sessions and _session_key(sessions[-1][-1]) == _session_key(entry):
            sessions[-1].append(entry)
        else:
            sessions.append([entry])
    blocks = []
    for session in sessions:
        for part in _segment(session, vectors, max_tokens):
            blocks.append(Block(block_title(part, idf), part))
    return blocks


# ---------------------------------------------------------------- model grouping

def _validator(window: list[Entry], idf: Idf, stats: CallStats):
    by_seq = {e.seq: e for e in window}
    order = [e.seq for e in window]

    def validate(data) -> Draft:
        owner: dict[int, int] = {}
        titles: list[str] = []
        for index, group in enumerate(data["groups"]):  # the shape and the seqs given: the schema has checked
            for seq in group["seqs"]:
                if seq in owner and owner[seq] != index:
                    raise Invalid(f"seq {seq} is in two groups")
                owner[seq] = index
            titles.append(clean_title(group.get("topic") or ""))
        if not owner:
            raise Invalid("no entry was put in a group")
        # entries the model left out stay with their conversational neighbour
        missing = [s for s in order if s not in owner]
        for seq in missing:
            position = order.index(seq)
            neighbours = [order[i] for i in range(position - 1, -1, -1)] + order[position + 1:]
            owner[seq] = next(owner[n] for n in neighbours if n in owner)
        if missing:
            stats.note_problem("rewrite", f"{len(missing)} entries left out; kept with their neighbours")
        blocks = []
        for index, title in enumerate(titles):
            members = [by_seq[s] for s in order if owner.get(s) == index]
            if not members:
                continue
            if title and not grounded(title, [e.text for e in members] + [e.meta.get("speaker", "") for e in members]):
                raise Invalid(f"topic {title!r} has no word in common with its entries")
            blocks.append(Block(title or block_title(members, idf), members))
        superseded: dict[int, int] = {}
        for pair in data.get("superseded") or []:
            if not isinstance(pair, dict):
                continue
            old, new = pair.get("seq"), pair.get("by")
            if isinstance(old, int) and isinstance(new, int) and old in by_seq and new in by_seq \
                    and may_supersede(by_seq[old], by_seq[new]):  # one speaker's, said later
                superseded[old] = new
            else:
                stats.note_problem("rewrite", f"ignored superseded pair {pair!r}")
        return Draft([blocks], superseded)

    return validate


def rewrite(entries: list[Entry], *, model: ChatModel | None, stats: CallStats, idf: Idf,
            window_tokens: int, progress: Callable[[int, int], None] | None = None) -> Draft:
    """The draft of one flush: blocks (in entry order) and superseded seqs."""
    draft = Draft()
    parts = windows(entries, window_tokens)
    for done, window in enumerate(parts, 1):
        result = None
        if model is not None:
            messages = [{"role": "system", "content": REWRITE_SYSTEM},
                        {"role": "user", "content": "\n".join(entry_line(e) for e in window)}]
            seqs = [e.seq for e in window]
            # room for every seq once plus titles; a longer answer is a looping one
            result = ask_json(model, messages, rewrite_schema(seqs), _validator(window, idf, stats),
                              step="rewrite", stats=stats, max_tokens=min(768, 96 + 6 * len(window)))
            if result is None:
                stats.fell_back("rewrite")
        if result is None:
            result = Draft([deterministic_blocks(window, idf)])
        draft.windows.extend(result.windows)
        draft.superseded.update(result.superseded)
        if progress:
            progress(done, len(parts))
    for old, new in [*exact_duplicates(entries).items(), *corrections(entries).items(), *marked(entries).items()]:
        draft.superseded.setdefault(old, new)
    draft.superseded = resolve_chains(draft.superseded)
    return draft


def marked(entries: list[Entry]) -> dict[int, int]:
    """seq -> the seq that supersedes it, as the entries' signatures already say (ingest marks a correction
    in CURRENT: :mod:`memcli.ingest.corrections`)."""
    return {e.seq: int(e.meta["superseded_by"]) for e in entries
            if e.seq is not None and e.meta.get("superseded_by", "").isdigit()}


def resolve_chains(superseded: dict[int, int]) -> dict[int, int]:
    """Point every superseded seq at the entry that finally replaces it; break cycles.

    In a cycle (a by b, b by a) nothing is superseded: both stay live, since
    dropping both would hide the fact.
    """
    out: dict[int, int] = {}
    for seq in superseded:
        seen = [seq]
        target = superseded[seq]
        while target in superseded and target not in seen:
            seen.append(target)
            target = superseded[target]
        if target not in seen:
            out[seq] = target
    return out
