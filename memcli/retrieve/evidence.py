"""Evidence: cited line ranges of documents, with the entries' times, seqs and refs, in a budget.

Every piece of evidence is a range of file lines of one document (so it can be
cited as ``doc:start-end`` and read back with ``memcli read``), rendered for a
model as ``[time] speaker: text`` lines. A document's evidence is shown in
line order, and an entry with the same time as the entry shown above it from
that document leaves the time out (``speaker: text``), also across a gap
between two ranges: one session's entries pay for their date once, not on
every line, so more distinct entries fit the budget (each range still carries
its first entry's time in ``Evidence.time``). The budget counts those
rendered tokens.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable
from dataclasses import dataclass, field

from memcli.results import Result, omit_empty
from memcli.store import CURRENT_ID
from memcli.store.format import Entry
from memcli.store.lines import DocLines, Library, sentences, shown_text
from memcli.terms import term_set
from memcli.tokens import count_tokens


@dataclass
class Evidence(Result):
    doc: str
    start_line: int
    end_line: int
    seqs: list[int] = field(default_factory=list)
    refs: list[str] = field(default_factory=list)
    time: str | None = None
    text: str = ""
    tokens: int = 0
    rank: int | None = omit_empty()  # 1 for the range holding the best-ranked entry (see :func:`rank`)
    # the entries the range's entries superseded, not read on their own: {seq, by, time, text} (their history)
    replaced: list[dict] = omit_empty(list)

    @property
    def citation(self) -> str:
        """``doc:start-end``, the form a range is cited in."""
        return f"{self.doc}:{self.start_line}-{self.end_line}"


ELISION = "…"
@dataclass(frozen=True)
class Focus:
    """What of an entry matters to a question, for compact evidence (:func:`compact`): its sentences
    that hold one of ``terms``; in an entry none of whose sentences holds one (an entry found by its
    meaning, not its words), the sentence ``similarity`` scores highest (``similarity(sentences)``:
    a score per sentence, the question's cosine similarity with each, from
    :meth:`memcli.index.LibraryIndex.sentence_similarity`). ``whole_until``: the best-ranked entries
    are shown whole while they fit in the first this many tokens of the budget, the others compact
    (:func:`assemble`). An empty focus shows entries whole."""

    terms: frozenset[str] = frozenset()
    similarity: Callable[[list[str]], list[float]] | None = None
    whole_until: int = 0

    def __bool__(self) -> bool:
        return bool(self.terms) or self.similarity is not None


WHOLE = Focus()


def render_entry(entry: Entry, with_time: bool = True, focus: Focus = WHOLE) -> str:
    """``[2023-05-25 13:14] Caroline: text`` (the time is what lets "last Sunday" be resolved).

    ``focus``: when given, the entry is shown as its sentences that matter, the others elided
    (:func:`compact`)."""
    text = shown_text(entry)
    line = f"{speaker_of(entry)}: {compact(text, focus) if focus else text}"
    return time_prefix(entry) + line if with_time else line


def speaker_of(entry: Entry) -> str:
    """Who an entry's line says said it: its speaker, else ``assistant`` or ``note``."""
    return entry.meta.get("speaker") or ("assistant" if entry.meta.get("source") == "AI" else "note")


def time_prefix(entry: Entry) -> str:
    """``[2023-05-25 13:14] ``: what an entry's line starts with when it shows its time."""
    return f"[{(entry.time or '').replace('T', ' ')}] "


def compact(text: str, focus: Focus) -> str:
    """``text`` as its sentences that matter (:class:`Focus`), each run of the others replaced by
    ``…``; the whole text when it is one sentence, when every sentence matters, or when none does
    and the focus has no ``similarity``."""
    parts = sentences(text)
    if len(parts) < 2:
        return text
    keep = [not focus.terms.isdisjoint(term_set(s)) for s in parts]
    if not any(keep) and focus.similarity is not None:
        scores = focus.similarity(parts)
        keep[max(range(len(parts)), key=scores.__getitem__)] = True
    if not any(keep) or all(keep):
        return text
    shown: list[str] = []
    for sentence, kept in zip(parts, keep):
        if kept:
            shown.append(sentence)
        elif not shown or shown[-1] != ELISION:
            shown.append(ELISION)
    return " ".join(shown)


def render_run(entries: list[Entry], focus: Focus = WHOLE, shown: Entry | None = None,
               whole: list[bool] | None = None) -> str:
    """Entries, one per line, each time shown only where it changes; ``shown``: the entry shown
    above the first one (its time is not repeated); ``whole``: which entries are shown whole whatever
    the focus."""
    lines = []
    for at, entry in enumerate(entries):
        lines.append(render_entry(entry, with_time=shown is None or entry.time != shown.time,
                                  focus=WHOLE if whole and whole[at] else focus))
        shown = entry
    return "\n".join(lines)


def assemble(library: Library, picks: list[tuple[str, int]], budget: int,
             count: Callable[[str], int] = count_tokens, focus: Focus = WHOLE,
             carry: bool = True) -> list[Evidence]:
    """Evidence for picked entry lines, best first until ``budget`` tokens, then in document order.

    Consecutive picked lines of one document merge into one range. An entry
    costs its line (with the line break) and its time unless the picked entry
    shown above it (the nearest picked line before it in its document) has the
    same time; the picked entry below it shows its time or not by the same
    rule, and the difference that makes to its cost is counted too.
    The picks are read in order until less of the budget is left than any entry read so far could
    cost without its time (a ranking of the whole library is not rendered to the end).
    ``count`` counts the tokens (memcli's estimate; a model's tokenizer for what a model reads).
    ``focus``: entries are shown compact (:func:`compact`), their citations still cover the whole
    entry line; the best-ranked ones whole while they fit in its first ``whole_until`` tokens.
    ``carry=False``: every range shows its first entry's time (a time is left out only under the
    line just above it in the file).
    """
    def untimed(doc: DocLines, upper: int | None, lower: int) -> bool:
        """Whether ``lower`` leaves its time out when ``upper`` is the picked line shown above it."""
        return upper is not None and (carry or doc.next(upper) == lower) \
            and doc.entries[upper].time == doc.entries[lower].time

    chosen: dict[str, list[int]] = {}  # picked lines of each document, in line order
    plain: set[tuple[str, int]] = set()  # picked entries shown whole (focus.whole_until)
    used = 0
    smallest = budget  # the least an entry read so far could cost (without its time)
    for doc_id, line in picks:
        if used and budget - used < smallest:
            break  # less is left than any entry read so far could cost: the rest of a long ranking is not read
        doc = library.doc(doc_id)
        picked = chosen.get(doc_id, [])
        at = bisect_left(picked, line)
        if line not in doc.entries or (at < len(picked) and picked[at] == line):
            continue
        above = picked[at - 1] if at else None
        entry = doc.entries[line]
        shown = render_entry(entry, with_time=False, focus=focus) + "\n"
        whole = False
        if focus and used < focus.whole_until:  # the best entries whole while they fit in the first part
            full = render_entry(entry, with_time=False) + "\n"
            whole = full == shown or used + count(time_prefix(entry) + full) <= focus.whole_until
            shown = full if whole else shown
        bare = count(shown)  # the least the line can cost
        smallest = min(smallest, bare)
        cost = bare if untimed(doc, above, line) else count(time_prefix(entry) + shown)
        if at < len(picked):  # the line below may show its time again, or no longer
            below = picked[at]
            before, after = untimed(doc, above, below), untimed(doc, line, below)
            if before != after:
                cost += (1 if before else -1) * time_cost(doc.entries[below], count)
        if used + cost > budget:
            continue
        picked.insert(at, line)
        chosen[doc_id] = picked
        used += cost
        if whole:
            plain.add((doc_id, line))
    return _ranges(library, chosen, count, focus, carry, plain)


def rank(evidence: list[Evidence], order: list[tuple[str, int]]) -> None:
    """Number the ranges 1, 2, ... by their best-ranked entry in ``order`` (the reader's ranking, best
    first); ranges holding no ranked entry come last, in document order. Evidence stays in document
    order; ``rank`` says how good each range is."""
    position: dict[tuple[str, int], int] = {}
    for at, pick in enumerate(order):
        position.setdefault(pick, at)
    best = [min((position.get((e.doc, line), len(order)) for line in range(e.start_line, e.end_line + 1)),
                default=len(order)) for e in evidence]
    for number, index in enumerate(sorted(range(len(evidence)), key=lambda i: (best[i], i)), 1):
        evidence[index].rank = number


def entry_picks(library: Library, evidence: list[Evidence]) -> list[tuple[str, int]]:
    """(document, line) of every entry the ranges of ``evidence`` hold, in their order."""
    return [(e.doc, n) for e in evidence for n in library.doc(e.doc).lines if e.start_line <= n <= e.end_line]


def best_part(library: Library | None, evidence: list[Evidence], order: list[tuple[str, int]],
              tokens: int, count: Callable[[str], int] = count_tokens) -> list[Evidence]:
    """The part of ``evidence`` an answering model reads: its entries in ``order`` (best first) until
    ``tokens``, in document order; its first entries when ``order`` names none of them. All of it,
    as it is, when ``tokens`` is 0, without an order or without ``library`` (the one the evidence
    was read from).

    A small model answers better from its few best entries than from a full budget of them
    (README, "ask"); what it reads is always part of the evidence returned, so citations cover it.
    ``count``: the answering model's tokenizer (this is a limit on what that model reads); the
    ranges returned carry token counts by it. Entries are read whole, also from compact evidence
    (answers of the default model were no worse, and the answer sees every sentence of what it
    cites), and every range shows its first entry's time (``carry=False`` of :func:`assemble`: the
    default model's answers were worse when a range took its time from the range above;
    docs/benchmarks.md).
    """
    if tokens <= 0 or not order or library is None:
        return evidence
    inside = entry_picks(library, evidence)
    wanted = set(inside)
    return assemble(library, [pick for pick in order if pick in wanted] or inside, tokens, count, carry=False)


def time_cost(entry: Entry, count: Callable[[str], int] = count_tokens) -> int:
    """Tokens an entry's line spends on its time."""
    return count(render_entry(entry) + "\n") - count(render_entry(entry, with_time=False) + "\n")


def _ranges(library: Library, chosen: dict[str, list[int]], count: Callable[[str], int],
            focus: Focus = WHOLE, carry: bool = True, plain: set[tuple[str, int]] = frozenset()) -> list[Evidence]:
    out: list[Evidence] = []
    for doc_id in sorted(chosen, key=lambda d: (d == "CURRENT", d)):
        doc = library.doc(doc_id)
        run: list[int] = []
        shown = None  # the last entry of the document's range before (its time carries over)
        for line in chosen[doc_id]:
            if run and doc.previous(line) != run[-1]:
                out.append(_evidence(doc, run, count, focus, shown, plain))
                shown, run = doc.entries[run[-1]] if carry else None, []
            run.append(line)
        if run:
            out.append(_evidence(doc, run, count, focus, shown, plain))
    return out


def _evidence(doc: DocLines, lines: list[int], count: Callable[[str], int],
              focus: Focus = WHOLE, shown: Entry | None = None, plain: set[tuple[str, int]] = frozenset()) -> Evidence:
    entries = [doc.entries[n] for n in lines]
    text = render_run(entries, focus, shown, [(doc.id, n) in plain for n in lines])
    refs = [r for e in entries for r in (e.ref or "").split(";") if r]
    replaced = [{"seq": old.seq, "by": e.seq, "time": old.time, "text": old.text}
                for e in entries if e.seq is not None for old in doc.replaced.get(e.seq, [])]
    return Evidence(doc=doc.id, start_line=lines[0], end_line=lines[-1], seqs=[e.seq for e in entries],
                    refs=refs, time=entries[0].time, text=text, tokens=count(text), replaced=replaced)


def snippet_lines(library: Library, doc_id: str, start: int, end: int, budget: int) -> list[tuple[str, int]]:
    """Entry lines for a cited range, expanded to its enclosing heading block.

    The cited entries come first (they survive a tight budget); the rest of
    the block follows when the whole block costs at most a quarter of
    ``budget``, otherwise only the two entries either side of the range.
    """
    doc = library.doc(doc_id)
    inside = [n for n in doc.lines if start <= n <= end]
    if not inside:
        return []
    block = doc.section_of(inside[0])
    around = [n for n in doc.lines if block and block[0] <= n <= block[1]]
    if not around or sum(count_tokens(render_entry(doc.entries[n])) for n in around) > budget // 4:
        first, last = doc.lines.index(inside[0]), doc.lines.index(inside[-1])
        around = doc.lines[max(0, first - 2): last + 3]
    return [(doc_id, n) for n in inside] + [(doc_id, n) for n in around if n not in inside]


def recent_current(library: Library, budget: int) -> list[tuple[str, int]]:
    """The newest CURRENT entries that fit ``budget`` tokens, newest first."""
    if CURRENT_ID not in library.store.all_ids():
        return []
    doc = library.doc(CURRENT_ID)
    picks, used = [], 0
    for line in reversed(doc.lines):
        used += count_tokens(render_entry(doc.entries[line]))
        if used > budget:
            break
        picks.append((CURRENT_ID, line))
    return picks
