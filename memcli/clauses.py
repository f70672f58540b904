"""Clauses: the parts of a sentence an answer or a correction is read from.

A sentence is cut at commas, colons, semicolons, brackets and dashes, never inside an amount ("£13,300") or a
time ("10:30"), and before "and" or "but" that joins a clause with a subject of its own ("It runs on Postgres 15
and we deploy it with Nomad"; not "and I", most often one subject with another: "Taylor and I"); a short label
that leads it ("Correction: ...") is no clause of its own; a clause that begins by denying ("..., not Tessel")
says what is not so. Read by the corrections ingest and consolidation mark (:mod:`memcli.ingest.corrections`).
"""

from __future__ import annotations

import re

DENIED = re.compile(r"\W*not\b", re.I)  # a clause that begins by denying: "..., not Tessel"
CLAUSE = re.compile(r"\s*(?:(?<!\d)[,:]|[,:](?!\d)|[;()\u2014\u2013]|\s-\s)\s*"  # not "13,300" or "10:30"
                    r"|\s+(?=(?:and|but)\s+(?:we|you|he|she|they)\b)")  # "..., and we deploy it": a new subject
# ("and I" is left whole: "Taylor and I have been together two years" is one subject)
WORD = re.compile(r"[$\u00a3\u20ac\u00a5]?\d+(?:[.,:]\d+)*%?|[^\W_]+(?:['\u2019][^\W_]+)*")  # "£13,300" one word
LABEL_WORDS = 3  # the longest head before a colon read as a label (unlabelled); not tuned: see docs/benchmarks.md


def clauses(sentence: str, drop_denied: bool = True) -> list[str]:
    """The clauses of a sentence: after its label (:func:`unlabelled`), cut at commas,
    colons and the like, and without those that deny (:func:`denied`) when ``drop_denied``."""
    return [c for c in CLAUSE.split(unlabelled(sentence)) if c.strip() and not (drop_denied and denied(c))]


def unlabelled(sentence: str) -> str:
    """The sentence without a label that leads it: a head of at most ``LABEL_WORDS`` words before its first
    colon, when words follow ("Correction: the company is Orbital Foods", "New job alert: Tessel hired me!").
    The head names what kind of news follows; it is no answer to a question about it."""
    head, colon, rest = sentence.partition(":")
    if not colon or (head[-1:].isdigit() and rest[:1].isdigit()) or not WORD.search(rest):  # "10:30": no label
        return sentence
    return rest if 0 < len(WORD.findall(head)) <= LABEL_WORDS else sentence


def denied(clause: str) -> bool:
    """Whether the clause denies what it names ("Orbital Foods, not Tessel": "not Tessel" is what is not so),
    and so states no value."""
    return DENIED.match(clause) is not None


def asking(sentence: str) -> bool:
    """Whether a sentence (or a line, by its last sentence) asks rather than states ("Do you think I should
    learn to play piano?")."""
    return sentence.rstrip().endswith("?")
