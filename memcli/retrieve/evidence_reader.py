"""The deterministic evidence policy (``memcli ask --evidence-only``): no model at all.

0. A question that names a person who speaks in memory is answered from that
   person's conversations, the owner's own sessions and notes
   (:func:`named_documents`): at 10^4 entries and more, other people's
   conversations about the same things would otherwise fill the regions.
1. BM25 over heading partitions of the library and CURRENT picks candidate
   regions (``partitions`` of them); documents a caller prefers (the hybrid
   reader's selection) add their own best partitions.
2. Every live entry in those regions is scored on its own: the summed idf of
   the question's terms it contains (a person the question names counts when
   they are the speaker), plus its region's BM25 score relative to the best
   region times ``region_weight``, so regions keep their BM25 order and
   entries are ordered inside them.
3. Pseudo-relevance feedback: the terms the best entries share (by summed
   idf) join the question's terms at a lower weight; BM25 with those terms
   adds its regions (their bonus scaled by the same weight), and the entries
   are scored again, so an entry that says what the best ones say in other
   words than the question's can still rank.
4. A question in the conversation passes most of its score to the entry
   after it (the reply that answers it), which often shares no word with the
   question asked of memory.
5. The semantic signal (:mod:`memcli.semantic`): the question's cosine
   similarity with every entry's sentence vector (the question's moved
   ``question_map`` of the way toward where lines that answer such questions
   lie, :mod:`memcli.semantic.query_map`), above the library's median,
   adds up to ``semantic_weight`` times the best lexical score, and the
   ``semantic_pool`` most similar entries join the candidates, so an entry that
   answers in other words ("swimming" for "activities") can rank. After the
   candidates come the ``SEMANTIC_TAIL`` other entries nearest by similarity, for a budget the
   candidates do not fill. Without the model (or with ``search.semantic``
   off) the words rank alone.
   A question naming one of two people who talk with each other ranks the other's lines at ``others`` of
   their score (:func:`own_first`): what is asked of Melanie is in Melanie's own lines.
6. The best ``diversity_pool`` entries are taken again as a set (maximal marginal relevance,
   :func:`diverse`): each next one by its score less its likeness in meaning to the nearest entry
   already taken, so a second fact comes before a restatement of the first.
7. Entries are taken best first (with ``context`` entries before each) until
   the token budget is full; the evidence readers show an entry (for an
   outer model, but the best ones that fit in ``whole_share`` of the budget)
   as its sentences that hold a term of the question, or, in an entry that
   holds none, as its sentence nearest the question in meaning
   (``ask.compact``), and a session's time once
   (:mod:`memcli.retrieve.evidence`), so more distinct entries fit.

The constants are chosen by cross-validation over the two LoCoMo development
conversations (``benchmarks/tune_evidence.py``; docs/benchmarks.md).

The same ranking is the recall guard of the agentic and hybrid readers: it
fills whatever budget their own choices leave.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from memcli.dates import Period
from memcli.errors import UsageError
from memcli.index import LibraryIndex
from memcli.ingest.turns import ROLES
from memcli.retrieve.current import newer_first
from memcli.retrieve.evidence import WHOLE, Evidence, Focus, assemble
from memcli.retrieve.people import named_people, short_forms
from memcli.store import Store
from memcli.store.lines import DocLines, Library, chat_of
from memcli.terms import term_set, terms

REGION_WEIGHT = 8.0  # measured on the development conversations against 4 and 16 (README, "ask")
PREFERRED_BOOST = 1.5  # region score factor for documents the hybrid reader selected
FEEDBACK_ENTRIES, FEEDBACK_TERMS, FEEDBACK_WEIGHT = 5, 20, 0.3  # pseudo-relevance feedback (README, "ask")
FOLLOW_WEIGHT = 0.9  # share of a conversational question's score its reply gets
SEMANTIC_TAIL = 2000  # entries by similarity alone after the candidates (more than any budget shows)
_WORD = re.compile(r"[^\W\d_]+")


@dataclass(frozen=True)
class Tuning:
    """The constants of the ranking that cross-validation chooses (benchmarks/tune_evidence.py).

    ``semantic_weight``: what the semantic signal adds to an entry's score, relative to the best
    lexical score (0: words alone); ``semantic_pool``: entries the semantic signal brings in as
    candidates beyond the lexical regions; ``session_decay``: an entry's score is multiplied by it
    once for every better entry of the same session (day) already taken beyond ``session_free``,
    so that a question whose answer is spread over many sessions gets evidence from many (1: no
    coverage rule); ``fusion``: ``score`` (:func:`fuse`) or ``rank`` (:func:`fuse_ranks`);
    ``compact``: entries shown as their sentences that hold a term of the question
    (:func:`memcli.retrieve.evidence.compact`); ``closest_sentence``: with ``compact``, an entry of
    which no sentence holds one is shown as its sentence nearest the question in meaning (the
    semantic signal's model; without it such an entry is shown whole); ``whole_share``: with
    ``compact``, the best-ranked entries are shown whole while they fit in this share of the budget
    (0: every entry compact); ``diversity``: the
    ``diversity_pool`` best entries are taken again as a set (:func:`diverse`), each next one by its
    score less ``diversity`` times its likeness to the nearest entry already taken (0: one by one);
    ``feedback_entries``, ``feedback_weight``: the question's vector is moved toward the mean of the
    vectors of the ``feedback_entries`` best entries by ``feedback_weight`` and the entries' similarities
    taken again with it (step 5 with relevance feedback; 0: the question's own); ``question_map``: how far
    the question's vector is moved toward the question map's (:mod:`memcli.semantic.query_map`, trained on
    public question / answer-line pairs; 0: the encoder's own); ``others``: in a chat between two people, the
    score share of the lines of the one a question does not name when it names the other (:func:`own_first`;
    1: any speaker's lines alike).
    """

    region_weight: float = REGION_WEIGHT
    semantic_weight: float = 0.0
    semantic_pool: int = 0
    session_decay: float = 1.0
    session_free: int = 0
    fusion: str = "score"
    compact: bool = False
    closest_sentence: bool = False
    whole_share: float = 0.0
    diversity: float = 0.0
    diversity_pool: int = 0
    feedback_entries: int = 0
    feedback_weight: float = 0.0
    question_map: float = 0.0
    others: float = 1.0


# The evidence an outer model reads (ask --evidence-only, memory_search): chosen on two kinds of chat by evidence
# recall and, for what an entry shows of itself, by the share of the answer's words the evidence shows,
# tune_evidence.py and bench_evidence_updates.py (docs/benchmarks.md, "Evidence ranking"). ``others``: conv-26
# chooses 0.4, conv-30 0.2 (by 0.002 of its mean recall, and 0.2 lowers conv-26 at 500 tokens 3.3 points): 0.4.
DEFAULT = Tuning(semantic_weight=0.75, semantic_pool=400, compact=True, closest_sentence=True, whole_share=0.25,
                 diversity=0.35, diversity_pool=100, question_map=0.5, others=0.4)
# The evidence memcli answers from (ask with an answer: its reader, the agent's and the hybrid reader's recall
# guard, composed KV memory): every entry compact (its reader reads the best entries whole), set selection and
# the question map chosen by the reader's answers, benchmarks/tune_reader.py (docs/benchmarks.md, "Evidence ranking");
# a pool of 30 (with the evidence's 400, memcli eval locomo: F1 1-4 0.410 -> 0.404 on conv-26, conv-30 the same);
# every speaker's lines alike (the person rule reads the other's to say "I don't know": with the evidence's 0.4,
# category 5 "I don't know" 72.3% -> 55.3% on conv-26, 79.2% -> 58.3% on conv-30).
ANSWERING = replace(DEFAULT, semantic_pool=30, diversity=1.0, whole_share=0.0, question_map=0.0, others=1.0)


@dataclass
class Retrieval:
    evidence: list[Evidence]
    trace: list[dict] = field(default_factory=list)
    order: list[tuple[str, int]] = field(default_factory=list)  # entries best first (what an answer reads first)
    library: Library | None = None  # the documents as the evidence was read (for best_part)
    restated: dict[tuple[str, int], list[tuple[str, int]]] = field(default_factory=dict)  # an older entry the
    # ranking put after newer ones that restate it (:func:`memcli.retrieve.current.newer_first`): to those


def ranked_entries(library: Library, index: LibraryIndex, question: str, *, partitions: int = 40,
                   context: int = 0, region_weight: float | None = None,
                   prefer: tuple[str, ...] = (), tuning: Tuning = DEFAULT,
                   moves: list | None = None, now: bool = False) -> list[tuple[str, int]]:
    """(doc, line) of entries, best first, for ``question``; ``moves`` gets each (older, newer) pair of entries
    the newer-first stage ordered (:func:`memcli.retrieve.current.newer_first`); ``now``: the question asks what
    is true now whatever its tense, as one asked as of a day does."""
    if region_weight is not None:
        tuning = replace(tuning, region_weight=region_weight)
    scores, similar, people = signals(library, index, question, tuning, partitions=partitions, prefer=prefer)
    ordered, similar = rank_candidates(library, scores, similar, tuning, people)
    ranked = newer_first(library, index, ordered, similar, moves=moves, question=question,
                         now=now or library.as_of is not None)
    if context <= 0:
        return dedupe(ranked)  # no document is read for the entries a budget will never reach
    picks: list[tuple[str, int]] = []
    for doc_id, line in ranked:
        for neighbour in library.doc(doc_id).neighbours(line, context):
            if neighbour <= line:  # the entry and the one(s) before it
                picks.append((doc_id, neighbour))
        picks.append((doc_id, line))
    return dedupe(picks)


def signals(library: Library, index: LibraryIndex, question: str, tuning: Tuning = DEFAULT, *, partitions: int = 40,
            prefer: tuple[str, ...] = ()) -> tuple[dict, Mapping, set[str]]:
    """What a question's entries are ranked by (steps 0-5's inputs): each candidate's score by the question's words
    (:func:`lexical_scores`), every entry's similarity in meaning (empty without the semantic signal or with
    ``tuning.semantic_weight`` 0), both among the documents of the person it names (:func:`named_documents`),
    and the speakers it names (:func:`named_speakers`)."""
    index.refresh()  # before the people it names are looked up: a process's first question sees what was ingested
    named = named_documents(index, question)
    scores = lexical_scores(library, index, question, partitions=partitions, prefer=prefer,
                            region_weight=tuning.region_weight, among=named, refresh=False)
    similar = index.similarities(meaning(index, question), tuning.question_map) if tuning.semantic_weight > 0 else {}
    if named is not None and similar:
        similar = within(similar, named)
    if library.as_of is not None:  # only the entries said by then
        similar = {key: value for key, value in similar.items() if key[1] in library.doc(key[0]).entries}
    return scores, similar, named_speakers(index, question)


def named_documents(index: LibraryIndex, question: str) -> set[str] | None:
    """The documents a question that names a person is answered from: those where a speaker it names
    (:func:`named_speakers`) speaks, those of the conversations they speak in, the owner's own sessions
    (speakers ``user``/``assistant`` only) and notes (no speaker nor conversation); None when it names no
    speaker, or when that is every document. A question about Caroline is answered from what Caroline said
    and was told and from the owner's own memory, not from the conversations of other people who talk of
    the same things."""
    named = named_speakers(index, question)
    if not named:
        return None
    theirs = index.docs_with("speaker", named)
    docs = theirs | index.docs_with("conv", index.values_in("conv", theirs)) | index.docs_without("speaker", ROLES)
    return None if len(docs) >= index.document_count() else docs


def named_speakers(index: LibraryIndex, question: str) -> set[str]:
    """The speakers a question names (:func:`memcli.retrieve.people.named_people`)."""
    return named_people(question, index.speakers())


def meaning(index: LibraryIndex, question: str) -> str:
    """The question as its meaning is compared with the entries' (their vectors are of ``speaker: text``):
    without the name of the one person it names ("Which company does Vera work for?" -> "Which company does
    work for?"). With the name, every short line of that person's comes nearest ("Vera: Just got back from a
    walk." 0.47 against "Vera: I handed in my notice and joined Quarry Bank." 0.42); without it, the line
    about work does (0.14 against at most 0.09). Whose lines they are is the words' and :func:`named_documents`'
    part. A question naming two people keeps both (without them "What do Jon and Gina both have in common?"
    says nothing); measured in docs/benchmarks.md, "The question's meaning without its person's name"."""
    named = named_speakers(index, question)
    if len(named) != 1:
        return question
    name, short = {w.lower() for w in _WORD.findall(next(iter(named)))}, short_forms(question)

    def kept(match: re.Match) -> str:
        lowered = re.sub(r"['\u2019]s$", "", match.group()).lower()
        return "" if lowered in name or (lowered in short and any(w.startswith(lowered) for w in name)) \
            else match.group()

    left = " ".join(re.sub(r"[^\W\d_]+(?:['\u2019]s)?", kept, question).split())
    return left if _WORD.search(left) else question


def rank_candidates(library: Library, scores: dict[tuple[str, int], float], similar: Mapping[tuple[str, int], float],
                    tuning: Tuning = DEFAULT, named: set[str] = frozenset(),
                    ) -> tuple[list[tuple[str, int]], Mapping[tuple[str, int], float]]:
    """Steps 5-6: the lexical ``scores`` fused with the semantic signal (with relevance feedback when the
    tuning asks for it) and ordered (:func:`order`); returns the entries best first and the similarities
    they were ranked by. ``named``: the speakers the question names (:func:`named_speakers`); in a chat of two,
    the other's entries count ``tuning.others`` of their score (:func:`own_first`)."""
    fused = fuse(scores, similar, tuning)
    if tuning.feedback_entries > 0 and hasattr(similar, "toward"):
        similar = similar.toward(top_keys(fused, tuning.feedback_entries), tuning.feedback_weight)
        fused = fuse(scores, similar, tuning)
    fused = own_first(library, fused, named, tuning.others)
    return order(library, fused, similar, tuning), similar


def own_first(library: Library, scores: dict[tuple[str, int], float], named: set[str],
              others: float) -> dict[tuple[str, int], float]:
    """``scores`` with each entry the other person said in a conversation between two, one of whom is the one
    person a question names, counting ``others`` of its score (1: as any): what is asked of Melanie is mostly
    in Melanie's own lines. Notes, a session's roles and chats of more than two speakers (where what is said
    of Ross is often said by the others) keep their scores."""
    if others == 1.0 or len(named) != 1:
        return scores
    out = dict(scores)
    for key, value in scores.items():
        doc = library.doc(key[0])
        entry = doc.entries[key[1]]
        speaker = entry.meta.get("speaker")
        if speaker and speaker not in named and speaker not in ROLES:
            chat = doc.speakers(chat_of(entry))
            if len(chat) == 2 and named <= chat:
                out[key] = value * others
    return out


def order(library: Library, scores: dict[tuple[str, int], float], similar: dict[tuple[str, int], float],
          tuning: Tuning = DEFAULT) -> list[tuple[str, int]]:
    """Entries best first: the candidates by their scores (with the coverage rule), then, with the
    semantic signal, the ``SEMANTIC_TAIL`` other entries nearest the question by similarity, so that
    a budget the candidates do not fill is filled with the entries nearest the question in meaning
    (a question none of whose words is in memory has no candidates, and so still no evidence)."""
    ranked = cover_sessions(library, scores, tuning.session_decay, tuning.session_free)
    if tuning.diversity > 0 and tuning.diversity_pool > 1 and hasattr(similar, "pairwise"):
        ranked = diverse(ranked, scores, similar, tuning.diversity, tuning.diversity_pool)
    if scores and similar and tuning.semantic_weight > 0:
        ranked += top_similar(similar, SEMANTIC_TAIL, exclude=scores)
    return ranked


def diverse(ranked: list[tuple[str, int]], scores: Mapping[tuple[str, int], float], similar,
            weight: float, pool: int) -> list[tuple[str, int]]:
    """The first ``pool`` of ``ranked`` in the order maximal marginal relevance takes them (Carbonell and
    Goldstein): each next entry the one whose score, relative to the best, less ``weight`` times its
    cosine similarity with the nearest entry already taken, is highest (ties: the better ranked), so a
    second fact comes before a restatement of the first; the rest of ``ranked`` after them as it was."""
    head = ranked[:pool]
    if len(head) < 2:
        return ranked
    import numpy as np  # only with the semantic signal, which has loaded it (the CLI's start does not)

    likeness = similar.pairwise(head)
    value = np.array([scores.get(key, 0.0) for key in head], dtype=np.float64)
    value /= max(float(value.max()), 1e-12)
    nearest = np.zeros(len(head))
    left = np.ones(len(head), dtype=bool)
    out = []
    for _ in head:
        gain = np.where(left, value - weight * nearest, -np.inf)
        pick = int(np.argmax(gain))
        out.append(head[pick])
        left[pick] = False
        nearest = np.maximum(nearest, likeness[pick])
    return out + ranked[pool:]


def lexical_scores(library: Library, index: LibraryIndex, question: str, *, partitions: int = 40,
                   prefer: tuple[str, ...] = (), region_weight: float = REGION_WEIGHT,
                   among: set[str] | None = None, refresh: bool = True) -> dict[tuple[str, int], float]:
    """Steps 1-4 of the module's docstring: each candidate entry's score from the question's words;
    ``among``: the documents searched (:func:`named_documents`; None: all), their statistics (idf,
    lengths) taken as if they were the whole library; ``refresh=False``: the index as the caller refreshed it."""
    wanted = set(terms(question))
    hits = index.search(question, partitions, snippets=False, among=among, refresh=refresh)
    idf = index.idf(refresh=False, among=among)
    candidates: dict[tuple[str, int], tuple[float, set[str]]] = {}  # entry -> (region bonus, its terms)

    def add_regions(hits: list, weight: float) -> None:
        top = max((h.score for h in hits), default=0.0) or 1.0
        for hit in hits:
            doc = library.doc(hit.doc)
            region = weight * max(hit.score, 0.0) / top * (PREFERRED_BOOST if hit.doc in prefer else 1.0)
            for line in doc.lines:
                key = (hit.doc, line)
                if hit.start_line <= line <= hit.end_line and (key not in candidates or candidates[key][0] < region):
                    entry = doc.entries[line]
                    candidates[key] = (region, term_set(f"{entry.meta.get('speaker', '')} {entry.text}"))

    def score(weights: dict[str, float]) -> dict[tuple[str, int], float]:
        return {key: region + sum(weights[t] * idf(t) for t in own if t in weights)
                for key, (region, own) in candidates.items()}

    for doc_id in prefer:
        hits += [h for h in index.search(question, 10, doc=doc_id, refresh=False, snippets=False) if h not in hits]
    add_regions(hits, region_weight)
    weights = dict.fromkeys(wanted, 1.0)
    feedback = feedback_terms(candidates, score(weights), wanted, idf)
    if feedback:
        weights.update(dict.fromkeys(feedback, FEEDBACK_WEIGHT))
        add_regions(index.search(" ".join(feedback), partitions // 2, refresh=False, snippets=False, among=among),
                    region_weight * FEEDBACK_WEIGHT)
    scores = score(weights)
    for (doc_id, line), value in list(scores.items()):
        reply = reply_to(library.doc(doc_id), line)
        if reply is not None:
            key = (doc_id, reply)
            scores[key] = max(scores.get(key, 0.0), FOLLOW_WEIGHT * value)
    return scores


def fuse(lexical: dict[tuple[str, int], float], similar: dict[tuple[str, int], float],
         tuning: Tuning) -> dict[tuple[str, int], float]:
    """Lexical scores plus the semantic signal: each entry gains ``semantic_weight`` times the best
    lexical score times how far its cosine similarity stands above the library's median, relative
    to the best entry's (so the signal's scale does not depend on the model or the library); the
    ``semantic_pool`` most similar entries join the candidates. A question none of whose words is
    in memory gets no evidence (similarity alone always finds something)."""
    if not similar or not lexical or tuning.semantic_weight <= 0:
        return lexical  # no word of the question anywhere: no evidence, not the nearest vectors
    if tuning.fusion == "rank":
        return fuse_ranks(lexical, similar, tuning)
    pool = top_similar(similar, tuning.semantic_pool)
    middle, best = median_similarity(similar), similar[(pool or top_similar(similar, 1))[0]]
    spread = (best - middle) or 1.0
    top = max(lexical.values(), default=0.0) or 1.0
    scores = dict(lexical)
    for key in [*lexical, *pool]:
        gain = max(0.0, similar.get(key, middle) - middle) / spread
        scores[key] = lexical.get(key, 0.0) + tuning.semantic_weight * top * gain
    return scores


RANK_OFFSET = 60  # reciprocal rank fusion's constant (Cormack et al.)


def rank_fusion(first: list, second: list, k: float, weight: float, admit=None) -> dict:
    """Reciprocal rank fusion of two rankings (best first, ranks from 0): 1/(k + rank in ``first``) +
    ``weight``/(k + rank in ``second``). With ``admit``, a key missing from ``first`` counts only
    when ``admit(key)``."""
    scores = {key: 1.0 / (k + at) for at, key in enumerate(first)}
    for at, key in enumerate(second):
        if admit is None or key in scores or admit(key):
            scores[key] = scores.get(key, 0.0) + weight / (k + at)
    return scores


def fuse_ranks(lexical: dict[tuple[str, int], float], similar: dict[tuple[str, int], float],
               tuning: Tuning) -> dict[tuple[str, int], float]:
    """Reciprocal rank fusion: 1/(k + lexical rank) + semantic_weight/(k + semantic rank); of the
    entries without a word of the question, only the ``semantic_pool`` most similar join."""
    near = top_similar(similar, len(similar))
    pool = set(near[:tuning.semantic_pool])
    return rank_fusion(sorted(lexical, key=lambda key: (-lexical[key], key)), near, RANK_OFFSET,
                       tuning.semantic_weight, admit=pool.__contains__)


def top_keys(scores: Mapping[tuple[str, int], float], n: int) -> list[tuple[str, int]]:
    """The ``n`` keys with the highest scores, highest first (ties by key)."""
    return heapq.nsmallest(n, scores, key=lambda key: (-scores[key], key))


def top_similar(similar: Mapping[tuple[str, int], float], n: int, exclude=frozenset()) -> list[tuple[str, int]]:
    """The ``n`` keys of ``similar`` with the highest values not in ``exclude``, highest first (ties by
    key), as a full sort gives them; a :class:`memcli.semantic.vectors.Similarities` finds them in numpy."""
    if hasattr(similar, "top"):
        return similar.top(n, exclude)
    return sorted((key for key in similar if key not in exclude), key=lambda key: (-similar[key], key))[:n]


def within(similar: Mapping[tuple[str, int], float], docs: set[str]) -> Mapping[tuple[str, int], float]:
    """The similarities of the entries of ``docs`` alone: a question answered from some documents
    ranks among them, and takes its median from them, as if they were the whole library."""
    if hasattr(similar, "within"):
        return similar.within(docs)
    return {key: value for key, value in similar.items() if key[0] in docs}


def median_similarity(similar: Mapping[tuple[str, int], float]) -> float:
    """The upper median of ``similar``'s values."""
    if hasattr(similar, "median"):
        return similar.median()
    values = sorted(similar.values())
    return values[len(values) // 2]


def cover_sessions(library: Library, scores: dict[tuple[str, int], float], decay: float,
                   free: int = 0) -> list[tuple[str, int]]:
    """Entries best first; with ``decay`` < 1 an entry's score shrinks by ``decay`` for each entry of
    its session (its day) ranked before it, so evidence spreads over sessions."""
    ranked = sorted(scores, key=lambda key: (-scores[key], key))
    if decay >= 1.0:
        return ranked
    taken: dict[str, int] = {}
    heap = [(-scores[key], key) for key in ranked]
    out: list[tuple[str, int]] = []
    heapq.heapify(heap)
    while heap:
        negative, key = heapq.heappop(heap)
        session = session_of(library, key)
        adjusted = scores[key] * decay ** max(0, taken.get(session, 0) - free)
        if heap and adjusted < -heap[0][0] and -negative != adjusted:
            heapq.heappush(heap, (-adjusted, key))  # re-ranked with its session's discount
            continue
        out.append(key)
        taken[session] = taken.get(session, 0) + 1
    return out


def session_of(library: Library, key: tuple[str, int]) -> str:
    """An entry's session: the day of its time (entries without one are each their own)."""
    entry = library.doc(key[0]).entries[key[1]]
    return (entry.time or "")[:10] or f"{key[0]}:{key[1]}"


def feedback_terms(candidates: dict, scores: dict, wanted: set[str], idf) -> list[str]:
    """The ``FEEDBACK_TERMS`` terms with the most summed idf over the ``FEEDBACK_ENTRIES`` best entries."""
    best = sorted(scores, key=lambda key: (-scores[key], key))[:FEEDBACK_ENTRIES]
    weight: dict[str, float] = {}
    for key in best:
        for term in candidates[key][1] - wanted:
            weight[term] = weight.get(term, 0.0) + idf(term)
    return sorted(weight, key=lambda t: (-weight[t], t))[:FEEDBACK_TERMS]


def reply_to(doc: DocLines, line: int) -> int | None:
    """The entry after ``line`` when ``line`` ends with a question and someone else says the next entry."""
    entry = doc.entries[line]
    if not entry.text.rstrip().endswith("?"):
        return None
    after = [n for n in doc.neighbours(line, 1) if n > line]
    if not after:
        return None
    speaker, other = entry.meta.get("speaker"), doc.entries[after[0]].meta.get("speaker")
    return None if speaker and speaker == other else after[0]


def evidence_only(store: Store, index: LibraryIndex, question: str, *, budget: int, compact: bool | None = None,
                  tuning: Tuning = DEFAULT, where: Mapping[str, str] | None = None, recent: bool = False,
                  as_of: str | None = None, period: Period | None = None, **options) -> Retrieval:
    """The deterministic evidence for ``question`` within ``budget`` tokens; ``compact`` (default:
    the tuning's): entries shown as their sentences that matter (:func:`focus`). ``where``: only
    entries whose signature has these values (``{"project": "/home/me/app"}``); ``recent``: the
    entries ``where`` keeps that the question does not rank come after the ranked ones, newest first
    (what a digest of a project shows when its words are not the question's). ``as_of``: only what
    had been said by that day (``YYYY-MM-DD``), superseded entries included
    (:mod:`memcli.retrieve.current`); ``period``: only entries of that stretch of time, on its clock
    (:class:`memcli.dates.Period`)."""
    library = Library(store, index.parsed, as_of=as_of)
    moves: list = []
    picks = ranked_entries(library, index, question, tuning=tuning, moves=moves, **options)
    if where is not None:
        kept = matching(library, store, where)
        picks = [pick for pick in picks if pick in kept]
        if recent:
            rest = kept - set(picks)
            picks += sorted(rest, key=lambda p: (library.doc(p[0]).entries[p[1]].time or "", p), reverse=True)
    elif recent:
        raise UsageError("recent follows the entries a where filter keeps")
    if period is not None:
        picks = [pick for pick in picks if period.holds(library.doc(pick[0]).entries[pick[1]])]
    trace = [{"tool": "search", "query": question, "entries": len(picks)}]
    shown = focus(index, question, tuning, budget) if (tuning.compact if compact is None else compact) else WHOLE
    return Retrieval(assemble(library, picks, budget, focus=shown), trace, picks, library, restatements(moves))


def restatements(moves: list) -> dict[tuple[str, int], list[tuple[str, int]]]:
    """Each older entry of ``moves`` ((older, newer) pairs) to the newer ones that restate it."""
    out: dict = {}
    for old, new in moves:
        out.setdefault(old, []).append(new)
    return out


def matching(library: Library, store: Store, where: Mapping[str, str]) -> set[tuple[str, int]]:
    """(doc, line) of every entry whose signature holds each ``where`` value."""
    return {(doc_id, line) for doc_id in store.all_ids() for line, entry in library.doc(doc_id).entries.items()
            if all(entry.meta.get(key) == value for key, value in where.items())}


def focus(index: LibraryIndex, question: str, tuning: Tuning = DEFAULT, budget: int = 0) -> Focus:
    """What compact evidence keeps of an entry for ``question``: the sentences holding its terms and,
    with ``tuning.closest_sentence`` and the semantic signal, the sentence nearest it in meaning of
    an entry that holds none; the best entries whole while they fit in ``tuning.whole_share`` of
    ``budget``."""
    nearest = (index.sentence_similarity(meaning(index, question), tuning.question_map)
               if tuning.closest_sentence and tuning.semantic_weight > 0 else None)
    return Focus(frozenset(terms(question)), nearest, int(tuning.whole_share * budget))


def interleave(first: list[tuple[str, int]], second: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """One of ``first``, one of ``second``, and so on (duplicates dropped): two rankings, neither ahead."""
    merged = [pick for pair in zip(first, second) for pick in pair]
    shorter = min(len(first), len(second))
    return dedupe(merged + first[shorter:] + second[shorter:])


def dedupe(picks: list[tuple[str, int]]) -> list[tuple[str, int]]:
    seen: set[tuple[str, int]] = set()
    out = []
    for pick in picks:
        if pick not in seen:
            seen.add(pick)
            out.append(pick)
    return out
