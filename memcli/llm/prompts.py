"""Prompts and JSON schemas for every model step. Schemas bound every string and array.

The model never writes entry text or metadata into the store: it groups
entries by seq, marks superseded ones, chooses target documents from a list it
is given, and writes titles and summaries, all of which are validated in code.
"""

from __future__ import annotations


def _string(max_len: int) -> dict:
    return {"type": "string", "maxLength": max_len}


# ---------------------------------------------------------------- rewrite (group + supersede)

REWRITE_SYSTEM = """You organise an assistant's long-term memory.
You get numbered memory entries, oldest first, as: [seq] speaker (time): text.
Group entries about the same subject (a person's plan, an event, a preference, a project).
Every seq must be in exactly one group. Keep conversational replies with the entry they answer.
Give each group a short topic title (a few words, e.g. "Caroline's adoption plans").
If a newer entry replaces or contradicts an older one (a changed plan, a corrected fact), or repeats it,
list it under "superseded" as {"seq": older, "by": newer}. Prefer the user's words over the assistant's.
Answer with JSON only."""

def rewrite_schema(seqs: list[int]) -> dict:
    """Groups of the window's seqs (an enum: no other seq can be written) and superseded pairs."""
    n = max(1, len(seqs))
    seq = {"type": "integer", "enum": list(seqs)}
    return {
        "type": "object",
        "properties": {
            "groups": {"type": "array", "maxItems": min(8, n), "items": {
                "type": "object",
                "properties": {"topic": _string(48), "seqs": {"type": "array", "maxItems": n, "items": seq}},
                "required": ["topic", "seqs"]}},
            "superseded": {"type": "array", "maxItems": min(6, n), "items": {
                "type": "object", "properties": {"seq": seq, "by": seq}, "required": ["seq", "by"]}},
        },
        "required": ["groups", "superseded"],
    }


# ---------------------------------------------------------------- plan

PLAN_SYSTEM = """You file groups of new memory entries into a library of topic documents.
For each group choose the existing document about the same subject, or "new" when none fits.
Only use document ids from the list you are given. For "new", give a short title for the new document.
Answer with JSON only."""


def plan_schema(doc_ids: list[str], n_groups: int) -> dict:
    return {
        "type": "object",
        "properties": {"actions": {"type": "array", "maxItems": max(1, n_groups), "items": {
            "type": "object",
            "properties": {"group": {"type": "integer", "minimum": 0, "maximum": max(0, n_groups - 1)},
                           "doc": {"type": "string", "enum": [*doc_ids, "new"]},
                           "title": _string(60)},
            "required": ["group", "doc", "title"]}}},
        "required": ["actions"],
    }


# ---------------------------------------------------------------- summary

SUMMARY_SYSTEM = """Write a one-line summary (at most 25 words) of a memory document:
who it is about and what it covers, so it can be found in a catalog. Answer with JSON only."""

SUMMARY_SCHEMA = {"type": "object", "properties": {"summary": _string(200)}, "required": ["summary"]}


# ---------------------------------------------------------------- extraction (ingest --extract)

EXTRACT_SYSTEM = """You extract durable facts from a conversation for long-term memory.
Keep facts about people, their plans, events, preferences, relationships, possessions, dates and decisions.
Skip greetings, small talk and filler. Stay faithful to the source: do not guess or embellish.
Write each fact as one self-contained sentence that names the person (not "I" or "you").
For each fact list the ids of the turns it comes from. Answer with JSON only."""


def extract_schema(turn_ids: list[str]) -> dict:
    return {
        "type": "object",
        "properties": {"facts": {"type": "array", "maxItems": 12, "items": {
            "type": "object",
            "properties": {"text": _string(200),
                           "turns": {"type": "array", "minItems": 1, "maxItems": 8,
                                     "items": {"type": "string", "enum": turn_ids}}},
            "required": ["text", "turns"]}}},
        "required": ["facts"],
    }
