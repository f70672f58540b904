"""Answer metrics against hand-computed cases."""

from __future__ import annotations

import math

import pytest

from memcli.eval.metrics import (
    answer_shown,
    bleu1,
    category_f1,
    evidence_recall,
    gold_dialog_ids,
    multi_part_f1,
    normalize,
    token_f1,
)


def test_normalize_drops_articles_punctuation_commas_and_case():
    assert normalize("The Pride parade, and a Speech!") == "pride parade speech"


def test_token_f1_by_hand():
    # prediction tokens: went pride parade (3); gold: pride parade (2); common 2 -> P 2/3, R 1 -> F1 0.8
    assert token_f1("went pride parade", "pride parade") == pytest.approx(0.8)
    assert token_f1("camping trips", "camped") == pytest.approx(2 * 0.5 * 1 / 1.5)  # camp + trip vs camp
    assert token_f1("nothing", "pride") == 0.0
    assert token_f1("", "pride") == 0.0


def test_multi_hop_parts_average_their_best_match():
    # gold parts: "pottery" (best 1.0 from part 1), "swimming" (best 0.0): mean 0.5
    assert multi_part_f1("pottery, hiking", "pottery, swimming") == pytest.approx(0.5)
    assert category_f1("pottery, hiking", "pottery, swimming", 1) == pytest.approx(0.5)


def test_open_domain_gold_is_cut_at_semicolon():
    assert category_f1("likely yes", "likely yes; she said so often", 3) == pytest.approx(1.0)
    assert category_f1("likely yes", "likely yes; she said so often", 4) < 1.0
    assert category_f1(None, "7 May 2023", 2) == 0.0


def test_bleu1_with_brevity_penalty():
    assert bleu1("pride parade", "pride parade") == pytest.approx(1.0)
    # one token of two: precision 1, brevity penalty exp(1 - 2/1)
    assert bleu1("pride", "pride parade") == pytest.approx(math.exp(-1))
    assert bleu1("pride parade march", "pride parade") == pytest.approx(2 / 3)


def test_evidence_recall_and_gold_ids():
    assert gold_dialog_ids(["D1:3", "D8:6; D9:17", "D 2"]) == {"D1:3", "D8:6", "D9:17"}
    assert evidence_recall({"D1:3", "D2:1"}, {"D1:3", "D5:5"}) == (False, 0.5)
    assert evidence_recall({"D1:3"}, {"D1:3"}) == (True, 1.0)
    assert evidence_recall(set(), set()) == (True, 1.0)


def test_answer_shown_is_the_share_of_the_answer_words_the_texts_show():
    # gold words: pottery, class (stemmed as for F1); a cut entry that shows "class" only: 1/2
    assert answer_shown("a pottery class", ["Caroline: … I signed up for a class. …"]) == pytest.approx(0.5)
    assert answer_shown("a pottery class", ["… a class.", "Pottery, yes."]) == 1.0
    assert answer_shown("pottery", []) == 0.0
    assert answer_shown("the", ["the"]) is None  # no word left to find
