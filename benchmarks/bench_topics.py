#!/usr/bin/env python3
"""What deterministic consolidation files: scope purity, evidence locality, titles and summaries.

    python benchmarks/bench_topics.py [--split N]

One store ingests both development conversations (conv-26, conv-30), the shipped example and the real
agent sessions in tests/samples (Codex, Claude Code), then ``memcli consolidate --no-llm`` files them
together. Reported:

- scope purity: the share of documents whose entries come from one conversation, or whose conversations
  share a speaker (a session's user and assistant count as one party, the store's owner);
- evidence locality: for the development questions whose gold turns are two or more, the mean number of
  documents holding them, against the number of sessions they come from (one document per session);
- titles: how many are a comma list of single words; the share whose every phrase is a noun phrase by
  memcli's tagger (it ends in a noun and holds no verb nor pronoun); the most documents of the same
  people whose titles begin with the same phrase, and the most sections of one document whose headings do; the file names that end in a piece of a word; the share whose every phrase (split at "and" and
  commas, the people in parentheses aside) occurs in the document's text; the share holding a content word
  beyond the people's names (and no markup); and title-only retrieval: for each development question
  (categories 1-4) whose gold turns are all in one document, every document ranked by the MiniLM cosine
  of the question with its title alone, hit@1, hit@5 and the median place of the right one;
- summary faithfulness: the share of summaries each of whose sentences is a sentence of an entry;
- documents, their sizes in tokens, and the consolidation time.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time
import unicodedata
from pathlib import Path

from memcli.memory import Memory
from memcli.store.lines import sentences
from memcli.terms import STOPWORDS

os.environ.setdefault("MEMCLI_VECTORS", "inline")
ROLES = {"user", "assistant"}  # a session's roles: one party, the store's owner

REPO = Path(__file__).resolve().parent.parent
LOCOMO = REPO.parent / "shared" / "data" / "locomo"
SOURCES = [(LOCOMO / "conv-26.json", {"format": "locomo", "sample": "conv-26"}),
           (LOCOMO / "conv-30.json", {"format": "locomo", "sample": "conv-30"}),
           (REPO / "examples" / "caroline-and-priya.json", {}),
           (REPO / "tests" / "samples" / "codex-0.125-codemie.jsonl", {}),
           (REPO / "tests" / "samples" / "claude-code-2.0.76-codemie.jsonl", {})]


def documents(memory: Memory) -> dict[str, dict]:
    out = {}
    for doc_id in memory.store.doc_ids():
        doc = memory.store.load(doc_id).doc
        lines = [line for _, line in doc.lines()]
        out[doc_id] = {"entries": [e for _, e in doc.entries()], "summary": str(doc.meta.get("summary") or ""),
                       "title": next((line[2:].strip() for line in lines if line.startswith("# ")), ""),
                       "headings": [line[3:].strip() for line in lines if line.startswith("## ")],
                       "tokens": int(doc.meta.get("token_count") or 0)}
    return out


def party(speaker: str | None) -> str | None:
    return "owner" if speaker in ROLES else speaker


def pure(doc: dict) -> bool:
    convs: dict[str, set] = {}
    for e in doc["entries"]:
        convs.setdefault(e.meta.get("conv") or "", set()).add(party(e.meta.get("speaker")))
    if len(convs) <= 1:
        return True
    groups = list(convs.values())
    return all(groups[0] & g for g in groups[1:])


def title_parts(doc: dict) -> tuple[list[str], list[str]]:
    """A title's phrases (the people in parentheses taken off, split at "and" and at commas) and its
    people."""
    title = doc["title"]
    people = [p.strip() for group in re.findall(r"\((.*?)\)", title) for p in group.split(",")]
    bare = re.sub(r"\(.*?\)", "", title).strip()
    return [p.strip() for p in re.split(r",| and ", bare) if p.strip()], people


def keyword_list(doc: dict) -> bool:
    """A title that is a comma list of single words ("Learn, bye, wait")."""
    parts, _ = title_parts(doc)
    return len(parts) > 1 and "," in doc["title"] and all(len(p.split()) == 1 for p in parts)


def noun_phrase(text: str) -> bool:
    """The tagger's reading of a phrase alone (memcli/tagging): it ends in a noun or proper noun and holds no
    verb, auxiliary or pronoun (a possessive "'s" may join two nouns)."""
    from memcli.tagging.tagger import tagged, upos

    tags = [upos(tag) for _, tag in tagged(text)]
    return bool(tags) and tags[-1] in {"NOUN", "PROPN"} and not {"VERB", "AUX", "PRON"} & set(tags)


def noun_phrases(doc: dict) -> bool:
    """Every phrase of the title (the people in parentheses aside) is a noun phrase (:func:`noun_phrase`)."""
    parts, _ = title_parts(doc)
    return bool(parts) and all(noun_phrase(p) for p in parts)


def heads(docs: dict[str, dict]) -> tuple[int, str]:
    """The most documents of the same people whose title begins with the same phrase, and that phrase."""
    counts: dict[tuple[str, tuple[str, ...]], int] = {}
    for doc in docs.values():
        parts, _ = title_parts(doc)
        people = tuple(sorted({party(e.meta.get("speaker")) or "" for e in doc["entries"]}))
        if parts:
            key = (re.sub(r"^\w+['\u2019]s ", "", parts[0].lower()), people)
            counts[key] = counts.get(key, 0) + 1
    (phrase, _), most = max(counts.items(), key=lambda item: item[1], default=(("", ()), 0))
    return most, phrase


def section_heads(docs: dict[str, dict]) -> tuple[int, str]:
    """The most sections of one document whose headings (their dates aside) begin with the same phrase."""
    from memcli.consolidate.titles import lead

    most, phrase = 0, ""
    for doc in docs.values():
        counts: dict[str, int] = {}
        for heading in doc["headings"]:
            first = lead(heading.split(" · ", 1)[-1])
            counts[first] = counts.get(first, 0) + 1
        for first, count in counts.items():
            if count > most:
                most, phrase = count, first
    return most, phrase


def words_of(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", unicodedata.normalize("NFKD", text).lower().encode("ascii", "ignore").decode()))


def cut_name(doc_id: str, known: set[str]) -> bool:
    """The file name (its six-letter id suffix aside) ends in a piece of a word: no word of any title or
    entry of the store (a document keeps the name its first title gave it, from entries since moved), nor
    "continued" (a split's new part: memcli/consolidate/reshape.py)."""
    words = re.findall(r"[a-z0-9]+", doc_id.rsplit("-", 1)[0])
    return bool(words) and words[-1] not in known | {"continued"}


def occurs(doc: dict) -> bool:
    """Every phrase of the title occurs in the document's entries (case aside, as whole words)."""
    parts, _ = title_parts(doc)
    text = " ".join(" ".join(e.text.split()) for e in doc["entries"]).casefold()
    return bool(parts) and all(re.search(rf"(?<!\w){re.escape(p.casefold())}(?!\w)", text) for p in parts)


def names_more(doc: dict) -> bool:
    """The title holds a content word beyond the people's names, and no markup."""
    parts, people = title_parts(doc)
    names = {w.lower() for p in people for w in p.split()}
    content = [w for p in parts for w in re.findall(r"[^\W_]+", p.lower()) if w not in STOPWORDS and w not in names]
    return bool(content) and not re.search(r"[<>\[\]{}`|\ue000-\uf8ff]", doc["title"])


def by_title(docs: dict[str, dict], questions: list[tuple[str, str]]) -> dict:
    """Title-only retrieval: each question whose gold turns are all in one document ranks every document
    by the MiniLM cosine of the question and the title alone; where the right one lands."""
    from memcli.semantic.encoder import Encoder

    encoder = Encoder()
    ids = list(docs)
    titles = encoder.encode([docs[i]["title"] for i in ids])
    asked = encoder.encode([q for q, _ in questions]) if questions else []
    places = []
    for vector, (_, right) in zip(asked, questions):
        order = sorted(range(len(ids)), key=lambda k: -float(titles[k] @ vector))
        places.append(next(at for at, k in enumerate(order) if ids[k] == right) + 1)
    return {"questions": len(places), "hit@1": round(sum(p == 1 for p in places) / len(places), 3),
            "hit@5": round(sum(p <= 5 for p in places) / len(places), 3),
            "median_place": statistics.median(places)}


def faithful(doc: dict) -> bool:
    """Whether the summary is made of whole sentences of the document's entries (each taken out of it,
    longest first, leaves nothing)."""
    own = {" ".join(s.split()) for e in doc["entries"] for s in sentences(" ".join(e.text.split()))}
    rest = " ".join(doc["summary"].split())
    if not rest:
        return False
    for sentence in sorted(own, key=len, reverse=True):
        if len(sentence.split()) > 3 or sentence == rest:
            rest = rest.replace(sentence, " ")
    return not rest.strip()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--split", type=int, default=None)
    parser.add_argument("--examples", type=int, default=6, help="documents shown with their title and summary")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="memcli-topics-") as tmp:
        memory = Memory(Path(tmp) / "store", create=True, cache_dir=Path(tmp) / "cache",
                        settings={"consolidate.auto": False})
        for path, options in SOURCES:
            memory.ingest(path, consolidate=False, **options)
        begin = time.perf_counter()
        memory.consolidate(llm=False, split=args.split)
        took = time.perf_counter() - begin
        docs = documents(memory)
        where = {}  # (conv, dialogue id) -> document
        for doc_id, doc in docs.items():
            for e in doc["entries"]:
                where[(e.meta.get("conv"), e.meta.get("ref"))] = doc_id
        located, sessions, single = [], [], []
        for path, options in SOURCES[:2]:
            data = json.loads(path.read_text())
            for qa in (data[0] if isinstance(data, list) else data)["qa"]:
                gold = [g for g in qa.get("evidence", []) if isinstance(g, str)]
                held = {where.get((options["sample"], g)) for g in gold}
                if gold and len(held) == 1 and None not in held and qa.get("category") != 5:
                    single.append((qa["question"], held.pop()))
                if len(gold) < 2:
                    continue
                held = {where.get((options["sample"], g)) for g in gold} - {None}
                if held:
                    located.append(len(held))
                    sessions.append(len({g.split(":")[0] for g in gold}))
        sizes = [doc["tokens"] for doc in docs.values()]
        known = set().union(*(words_of(" ".join([d["title"], *(f"{e.meta.get('speaker', '')} {e.text}"
                                                              for e in d["entries"])])) for d in docs.values()))
        report = {
            "documents": len(docs), "consolidation_s": round(took, 2),
            "scope_purity": round(sum(pure(d) for d in docs.values()) / len(docs), 3),
            "evidence_locality": {"questions": len(located), "documents_mean": round(statistics.mean(located), 3),
                                  "sessions_mean": round(statistics.mean(sessions), 3)},
            "titles": {"keyword_lists": sum(keyword_list(d) for d in docs.values()),
                       "phrases_occur": round(sum(occurs(d) for d in docs.values()) / len(docs), 3),
                       "content_beyond_names": round(sum(names_more(d) for d in docs.values()) / len(docs), 3),
                       "noun_phrases": round(sum(noun_phrases(d) for d in docs.values()) / len(docs), 3),
                       "most_documents_one_head": dict(zip(("documents", "phrase"), heads(docs))),
                       "most_sections_one_head": dict(zip(("sections", "phrase"), section_heads(docs))),
                       "file_names_cutting_a_word": sum(cut_name(i, known) for i in docs),
                       "by_title": by_title(docs, single)},
            "summary_faithfulness": round(sum(faithful(d) for d in docs.values()) / len(docs), 3),
            "size_tokens": {"median": statistics.median(sizes), "max": max(sizes)},
            "examples": [{"id": i, "title": d["title"], "summary": d["summary"][:160]}
                         for i, d in list(docs.items())[:args.examples]],
        }
        memory.close()
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
