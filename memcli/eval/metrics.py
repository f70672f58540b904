"""Answer metrics in the LoCoMo way: token F1 (per-category rules), BLEU-1, evidence recall.

Normalization follows LoCoMo's evaluation script: commas removed, lower
case, punctuation removed, the words a/an/the/and removed, whitespace
collapsed, each token stemmed. The stemmer is memcli's own (Porter's step 1,
``memcli.terms.stem``) rather than the full Porter algorithm LoCoMo takes from
NLTK: plurals, -ed and -ing fold the same way, derivational suffixes
(-ness, -ation, ...) do not, so a few scores can differ slightly.
"""

from __future__ import annotations

import math
import re
import string
from collections import Counter

from memcli.terms import stem

_ARTICLES = re.compile(r"\b(a|an|the|and)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation)


def normalize(text: str) -> str:
    text = str(text).replace(",", "").lower().translate(_PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def answer_tokens(text: str) -> list[str]:
    return [stem(w) for w in normalize(text).split()]


def token_f1(prediction: str, gold: str) -> float:
    pred, ref = answer_tokens(prediction), answer_tokens(gold)
    common = sum((Counter(pred) & Counter(ref)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(ref)
    return 2 * precision * recall / (precision + recall)


def multi_part_f1(prediction: str, gold: str) -> float:
    """Multi-hop answers: each comma-separated gold part scored against its best predicted part, averaged."""
    preds = [p for p in str(prediction).split(",") if p.strip()] or [""]
    golds = [g for g in str(gold).split(",") if g.strip()] or [""]
    return sum(max(token_f1(p, g) for p in preds) for g in golds) / len(golds)


def category_f1(prediction: str | None, gold: object, category: int) -> float:
    """LoCoMo's per-category F1: 1 multi-hop by parts, 3 open-domain gold cut at ';', else plain."""
    prediction = prediction or ""
    gold_text = str(gold)
    if category == 1:
        return multi_part_f1(prediction, gold_text)
    if category == 3:
        gold_text = gold_text.split(";")[0]
    return token_f1(prediction, gold_text)


def bleu1(prediction: str | None, gold: object) -> float:
    """Unigram BLEU with the brevity penalty (clipped counts over normalized tokens)."""
    pred, ref = answer_tokens(prediction or ""), answer_tokens(str(gold))
    if not pred or not ref:
        return 0.0
    clipped = sum((Counter(pred) & Counter(ref)).values())
    precision = clipped / len(pred)
    penalty = 1.0 if len(pred) > len(ref) else math.exp(1 - len(ref) / len(pred))
    return penalty * precision


def evidence_recall(gold_ids: set[str], refs: set[str]) -> tuple[bool, float]:
    """(all gold ids returned, share of gold ids returned); a question without gold counts as recalled."""
    if not gold_ids:
        return True, 1.0
    found = len(gold_ids & refs)
    return found == len(gold_ids), found / len(gold_ids)


def gold_dialog_ids(evidence: list) -> set[str]:
    """Dialog ids of a LoCoMo question's evidence; malformed items ("D8:6; D9:17") tolerated."""
    return {m for item in evidence for m in re.findall(r"D\d+:\d+", str(item))}


def answer_shown(answer: object, texts: list[str]) -> float | None:
    """The share of the gold answer's words (normalized and stemmed as for F1) that ``texts`` show: what
    an outer model reading the evidence can answer from. Given the shown text of the gold entries the
    evidence holds, it asks both that the evidence holds the entry and that it shows the entry's answer
    (compact evidence can cite an entry and leave out the sentence that answers). None without words."""
    words = answer_tokens(str(answer))
    if not words:
        return None
    seen = {w for text in texts for w in answer_tokens(text)}
    return sum(w in seen for w in words) / len(words)
