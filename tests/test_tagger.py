"""memcli's part-of-speech tagger (memcli/tagging) and the noun phrases titles are made of."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import REPO

from memcli.tagging.tagger import ADVERBIAL, noun_phrases, tagged, tokens, upos

TREEBANK = REPO.parent / "shared" / "data" / "treebank"


def test_words_are_split_as_the_treebank_splits_them_and_a_hyphenated_word_is_one():
    assert [m.group() for m in tokens("Caroline's self-care didn't stop.")] == \
        ["Caroline", "'s", "self-care", "did", "n't", "stop", "."]


def test_the_tagger_reads_nouns_verbs_and_a_noun_used_as_an_adverb():
    tags = dict((m.group(), tag) for m, tag in tagged("We went to the pottery class last week and painted a bowl."))
    assert tags["went"] == tags["painted"] == "VERB" and tags["pottery"] == tags["class"] == tags["bowl"] == "NOUN"
    assert tags["week"] == ADVERBIAL and upos(tags["week"]) == "NOUN" and tags["the"] == "DET"


def test_noun_phrases_end_in_their_noun_and_hold_no_verb_pronoun_or_possessive():
    found = [" ".join(m.group() for m, _ in run) for run in
             noun_phrases("Jon's dance studio had its grand opening last week, and the first customers loved it!")]
    assert "dance studio" in found and "first customers" in found and "Jon" in found
    assert not any(w in phrase.split() for phrase in found for w in ("had", "its", "loved", "it", "week", "'s"))
    found = [" ".join(m.group() for m, _ in run) for run in
             noun_phrases("I went to an information evening at Open Door Adoptions last Tuesday.")]
    assert "Open Door Adoptions" in found  # an adjective after the noun begins a phrase of its own
    assert not any("Adoptions last" in phrase for phrase in found)


@pytest.mark.slow  # the dev split tagged in pure Python (25,000 words); CI runs it
@pytest.mark.skipif(not TREEBANK.exists(), reason="../shared/data/treebank is not beside the checkout")
def test_the_shipped_weights_score_what_the_card_says_on_the_dev_split(tmp_path):
    sys.path.insert(0, str(REPO / "training"))
    from train_tagger import accuracy, sentences

    from memcli.tagging.tagger import Tagger

    dev = sentences(TREEBANK / "en_ewt-ud-dev.conllu.gz")
    assert sum(map(len, dev)) == 24961
    assert accuracy(Tagger.load(), dev)["upos_accuracy"] == pytest.approx(0.9377, abs=5e-4)  # docs/tagger.md


def test_training_writes_weights_the_tagger_reads(tmp_path):
    """The training command end to end on a small treebank (the real one's first sentences)."""
    import gzip

    source = TREEBANK / "en_ewt-ud-train.conllu.gz"
    if not source.exists():
        pytest.skip("../shared/data/treebank is not beside the checkout")
    text = gzip.decompress(source.read_bytes()).decode().split("\n\n")[:300]
    small = tmp_path / "treebank"
    small.mkdir()
    for name in ("en_ewt-ud-train.conllu.gz", "en_ewt-ud-dev.conllu.gz"):
        (small / name).write_bytes(gzip.compress(("\n\n".join(text) + "\n\n").encode()))
    out, report = tmp_path / "tagger.json.gz", tmp_path / "report.json"
    done = subprocess.run([sys.executable, str(REPO / "training" / "train_tagger.py"), "--treebank", str(small),
                           "--iterations", "2", "--out", str(out), "--json", str(report)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    from memcli.tagging.tagger import Tagger

    assert Tagger.load(out).tag(["the", "dog", "runs"])[0] == "DET"
    assert json.loads(report.read_text())["dev"]["upos_accuracy"] > 0.8  # its own training sentences
