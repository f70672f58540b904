#!/usr/bin/env python3
"""Train memcli's part-of-speech tagger (memcli/tagging/tagger.py) on the UD English Web Treebank.

    python training/train_tagger.py [--treebank ../shared/data/treebank] [--iterations 5] [--seed 0]
                                    [--out memcli/tagging/tagger.json.gz] [--json REPORT]

An averaged perceptron over the features of ``memcli.tagging.tagger.features``, greedy left to right with
its own predicted tags as context (as it tags), the training sentences shuffled each iteration (seeded).
Words the treebank writes with glued hyphens ("self - care") are joined into one word with the last
part's tag, as memcli's tokenizer keeps them. A noun the treebank attaches as ``obl:unmarked`` or
``nmod:unmarked`` ("last *week*", "a *lot*", "*today*": a noun used as an adverb of time or measure) is
learnt as a tag of its own, ``ADVERBIAL``, which a title's noun phrase never ends in. Words seen at least ``--dict-count`` times with one tag at
least 97% of the time are tagged from a dictionary. Weights under ``--prune`` in size are dropped, the rest
rounded to three decimals. The sentences' noun phrases are trained on alone too (``--fragments``).
Prints (and with ``--json`` writes) the accuracy on the dev split; pure
Python, no dependency beyond memcli.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from memcli.tagging.tagger import ADVERBIAL, INSIDE, NOUNS, START, Tagger, features, padded, upos  # noqa: E402


def sentences(path: Path) -> list[list[tuple[str, str]]]:
    """(word, UPOS) of each sentence of a CoNLL-U file (multi-word token ranges and empty nodes skipped;
    glued hyphens joined)."""
    out, current, glued = [], [], []
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        for line in handle:
            line = line.rstrip("\n")
            if not line:
                if current:
                    out.append(join_hyphens(current, glued))
                current, glued = [], []
                continue
            if line.startswith("#"):
                continue
            cols = line.split("\t")
            if "-" in cols[0] or "." in cols[0]:
                continue
            adverbial = cols[3] == "NOUN" and cols[7].endswith(":unmarked")
            current.append((cols[1], ADVERBIAL if adverbial else cols[3]))
            glued.append("SpaceAfter=No" in cols[9])
    if current:
        out.append(join_hyphens(current, glued))
    return out


def join_hyphens(words: list[tuple[str, str]], glued: list[bool]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    i = 0
    while i < len(words):
        word, tag = words[i]
        while (i + 2 < len(words) and glued[i] and words[i + 1][0] == "-" and glued[i + 1]
               and words[i + 2][0][:1].isalnum() and word[-1:].isalnum()):
            word, tag = f"{word}-{words[i + 2][0]}", words[i + 2][1]
            i += 2
        out.append((word, tag))
        i += 1
    return out


def fragments(data: list[list[tuple[str, str]]]) -> list[list[tuple[str, str]]]:
    """The noun phrases of the training sentences on their own (runs of adjectives, nouns, proper nouns and
    numbers of two words or more, ending in a noun), as extra training sequences: titles and chat are
    fragments, and a phrase's first noun alone at the start is otherwise read as an imperative verb."""
    out = []
    for sentence in data:
        run: list[tuple[str, str]] = []
        for item in [*sentence, None]:
            if item is not None and item[1] in INSIDE:
                run.append(item)
                continue
            while run and run[-1][1] not in NOUNS:
                run.pop()
            if len(run) >= 2:
                out.append(run)
            run = []
    return out


class Training:
    """The perceptron's weights with the sums averaging needs (Collins 2002)."""

    def __init__(self, classes: list[str]):
        self.classes = classes
        self.weights: dict[str, dict[str, float]] = defaultdict(dict)
        self.totals: dict[tuple[str, str], float] = defaultdict(float)
        self.stamps: dict[tuple[str, str], int] = defaultdict(int)
        self.seen = 0

    def predict(self, feats: list[str]) -> str:
        scores: dict[str, float] = defaultdict(float)
        for feat in feats:
            for tag, weight in self.weights.get(feat, {}).items():
                scores[tag] += weight
        return max(self.classes, key=lambda tag: (scores.get(tag, 0.0), tag))

    def update(self, truth: str, guess: str, feats: list[str]) -> None:
        self.seen += 1
        if truth == guess:
            return
        for feat in feats:
            row = self.weights[feat]
            for tag, change in ((truth, 1.0), (guess, -1.0)):
                key = (feat, tag)
                value = row.get(tag, 0.0)
                self.totals[key] += (self.seen - self.stamps[key]) * value
                self.stamps[key] = self.seen
                row[tag] = value + change

    def averaged(self, prune: float) -> dict[str, dict[str, float]]:
        out: dict[str, dict[str, float]] = {}
        for feat, row in self.weights.items():
            kept = {}
            for tag, value in row.items():
                key = (feat, tag)
                total = self.totals[key] + (self.seen - self.stamps[key]) * value
                average = round(total / self.seen, 3)
                if abs(average) >= prune:
                    kept[tag] = average
            if kept:
                out[feat] = kept
        return out


def tag_dictionary(data: list[list[tuple[str, str]]], count: int) -> dict[str, str]:
    by_word: dict[str, Counter] = defaultdict(Counter)
    for sentence in data:
        for word, tag in sentence:
            by_word[word][tag] += 1
    out = {}
    for word, tags in by_word.items():
        tag, n = tags.most_common(1)[0]
        total = sum(tags.values())
        if total >= count and n / total >= 0.97:
            out[word] = tag
    return out


def accuracy(tagger: Tagger, data: list[list[tuple[str, str]]]) -> dict[str, float]:
    """UPOS accuracy (an adverbial noun counted as the NOUN it is), and the adverbial nouns' precision and
    recall among the nouns."""
    right = total = found = marked = both = 0
    for sentence in data:
        guess = tagger.tag([w for w, _ in sentence])
        for g, (_, t) in zip(guess, sentence):
            right += upos(g) == upos(t)
            total += 1
            found += g == ADVERBIAL
            marked += t == ADVERBIAL
            both += g == t == ADVERBIAL
    return {"upos_accuracy": round(right / total, 4), "adverbial_precision": round(both / max(found, 1), 3),
            "adverbial_recall": round(both / max(marked, 1), 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--treebank", type=Path, default=ROOT.parent / "shared" / "data" / "treebank")
    parser.add_argument("--iterations", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dict-count", type=int, default=20)
    parser.add_argument("--prune", type=float, default=0.01)
    parser.add_argument("--fragments", action=argparse.BooleanOptionalAction, default=True,
                        help="train on the sentences' noun phrases alone too (default: yes)")
    parser.add_argument("--out", type=Path, default=ROOT / "memcli" / "tagging" / "tagger.json.gz")
    parser.add_argument("--json", type=Path, help="write the report here")
    args = parser.parse_args()
    started = time.perf_counter()
    train = sentences(args.treebank / "en_ewt-ud-train.conllu.gz")
    dev = sentences(args.treebank / "en_ewt-ud-dev.conllu.gz")
    classes = sorted({tag for sentence in train for _, tag in sentence})
    tagdict = tag_dictionary(train, args.dict_count)
    sentence_count = len(train)
    if args.fragments:
        train += fragments(train)
    model = Training(classes)
    rng = random.Random(args.seed)
    for iteration in range(args.iterations):
        right = total = 0
        for sentence in train:
            words = [w for w, _ in sentence]
            context, written = padded(words)
            prev, prev2 = START
            for i, (word, truth) in enumerate(sentence):
                guess = tagdict.get(word)
                if guess is None:
                    feats = features(i, word, context, written, prev, prev2)
                    guess = model.predict(feats)
                    model.update(truth, guess, feats)
                prev2, prev = prev, guess
                right += guess == truth
                total += 1
        rng.shuffle(train)
        print(f"iteration {iteration + 1}: train accuracy {right / total:.4f} "
              f"({time.perf_counter() - started:.0f} s)", file=sys.stderr)
    weights = model.averaged(args.prune)
    tagger = Tagger.from_weights(weights, tagdict, classes)
    dev_accuracy = accuracy(tagger, dev)
    blob = tagger.save()
    args.out.write_bytes(blob)
    dev_fragments = fragments(dev)
    report = {"dev": dev_accuracy, "dev_words": sum(map(len, dev)),
              "dev_noun_phrases_alone": accuracy(tagger, dev_fragments), "dev_noun_phrases": len(dev_fragments),
              "train_sentences": sentence_count, "train_sequences": len(train), "features": len(weights), "bytes": len(blob),
              "seconds": round(time.perf_counter() - started, 1), "iterations": args.iterations, "seed": args.seed}
    print(json.dumps(report))
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
