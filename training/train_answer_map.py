"""Train memcli's answer map (``memcli/qa/answer_map.safetensors``) from the public QA sets in ../shared/data/qa/.

    pip install -e '.[train]'              # torch, for training only: memcli never imports it
    python training/train_answer_map.py    # seeded; the shipped map is what this writes

memcli's reader picks a span from each line it reads, and it picks spans of the wrong kind: a phone
("Galaxy S22") for where someone lives, a car for the sport they play, a weekday for where they moved.
The reader judges a span in its line; nothing tells it what an answer to the question looks like. The
answer map does: ``normalize(W q + b)`` moves a question's sentence vector to where the vectors of its
answers lie (a city for "Where does she live now?", a sport for "Which sport does he play?"), and a
span's *fit* is its vector's cosine with that (:meth:`memcli.qa.model.Reader.fit`). The same form as the
question map (``training/train_query_map.py``), trained on answers instead of the lines that hold them.

The recipe (docs/reader.md, "The answer map", says what it gave):

- pairs of a question and its answer's text: SQuAD 1.1 train questions, Molweni and FriendsQA train
  questions (the dialogue's speakers' names taken out of the question, as memcli takes the asked
  person's name out, :func:`memcli.retrieve.evidence_reader.meaning`); each embedded by memcli's encoder;
- InfoNCE over the batch's other answers and ``--hard`` answers of other questions of the same article
  or dialogue (hard negatives: spans of the same text, often of another kind; one equal to the answer
  is not a negative), temperature 0.05; ``W`` starts as the identity and is kept near it
  (``1e-3 * ||W - I||^2``); AdamW 1e-3, batch 256, 3 epochs;
- held out: SQuAD 1.1 dev (a seeded sample), Molweni and FriendsQA dev, each answerable question's
  answer ranked among the other answers of its article or dialogue (mean reciprocal rank), the
  question's own vector against the mapped one; the figures go into the weights' metadata.

Most of the time is the encoder (short texts through memcli's numpy encoder); training takes seconds.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

import numpy as np
import torch
from torch.nn import functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "training"))

from train_query_map import QueryMap, without_names  # noqa: E402
from train_reader import sha256, write_safetensors  # noqa: E402

from memcli.qa.sets import Example, load  # noqa: E402
from memcli.semantic.encoder import MODEL_NAME, Encoder  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "qa"
OUT = ROOT / "memcli" / "qa" / "answer_map.safetensors"
FIXTURE = ROOT / "tests" / "fixtures" / "answer_map_outputs.json"
FIXTURE_QUESTIONS = ["Where does live now?", "Which sport does play?", "Who offered to babysit every Friday?"]

Row = tuple[str, str, list[str]]  # question, its answer, other answers of its article or dialogue


def rows_of(examples: list[Example], groups: int | None, rng: random.Random, dialogue: bool) -> list[Row]:
    """Answerable questions of ``groups`` articles or dialogues (all: None), each with its answer and the
    other answers of its group; in a dialogue the speakers' names are taken out of the question."""
    by_group: dict[str, list[Example]] = {}
    for ex in examples:
        if ex.answers and ex.answers[0].strip():
            by_group.setdefault(ex.group, []).append(ex)
    keys = sorted(by_group)
    rng.shuffle(keys)
    rows = []
    for key in keys[:groups]:
        answers = sorted({ex.answers[0].strip() for ex in by_group[key]})
        for ex in by_group[key]:
            answer = ex.answers[0].strip()
            question = ex.question
            if dialogue:
                names = {w for line in ex.context.split("\n") if ":" in line for w in line.split(":", 1)[0].split()}
                question = without_names(question, names)
            others = [a for a in answers if a.lower() != answer.lower()]
            rows.append((question, answer, others))
    return rows


def embedded(rows: list[Row], encoder: Encoder) -> tuple[torch.Tensor, dict[str, int]]:
    """Every question's and answer's vector (memcli's encoder), and each text's row."""
    texts = sorted({q for q, _, _ in rows} | {a for _, a, _ in rows} | {o for _, _, others in rows for o in others})
    started, vectors = time.time(), []
    for at in range(0, len(texts), 1024):
        vectors.append(encoder.encode(texts[at:at + 1024]))
        print(f"\rembedded {min(at + 1024, len(texts))} of {len(texts)} texts ({time.time() - started:.0f} s)",
              end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    return torch.from_numpy(np.concatenate(vectors)), {t: i for i, t in enumerate(texts)}


def mrr(rows: list[Row], vectors: torch.Tensor, at: dict[str, int], amap: QueryMap | None) -> float:
    """Mean reciprocal rank of each question's answer among the other answers of its group (questions
    whose group has no other answer left out)."""
    rows = [r for r in rows if r[2]]
    with torch.no_grad():
        questions = vectors[[at[q] for q, _, _ in rows]]
        if amap is not None:
            questions = amap(questions)
    total = 0.0
    for (_, answer, others), q in zip(rows, questions):
        gold = float(vectors[at[answer]] @ q)
        total += 1.0 / (1 + int((vectors[[at[o] for o in others]] @ q > gold).sum()))
    return total / max(len(rows), 1)


def train(rows: list[Row], vectors: torch.Tensor, at: dict[str, int], args) -> QueryMap:
    rng = np.random.default_rng(args.seed)
    amap = QueryMap(vectors.shape[1])
    optimizer = torch.optim.AdamW(amap.parameters(), lr=args.lr, weight_decay=0.0)
    questions = torch.tensor([at[q] for q, _, _ in rows])
    answers = np.array([at[a] for _, a, _ in rows])
    others = [np.array([at[o] for o in others], dtype=np.int64) for _, _, others in rows]
    eye = torch.eye(vectors.shape[1])
    for epoch in range(args.epochs):
        order, total = rng.permutation(len(rows)), 0.0
        for start in range(0, len(rows), args.batch):
            picks = order[start:start + args.batch]
            q = amap(vectors[questions[picks]])
            positive = vectors[answers[picks]]
            hard = np.stack([rng.choice(others[i], args.hard, replace=len(others[i]) < args.hard)
                             if len(others[i]) else np.full(args.hard, answers[i]) for i in picks])
            negatives = torch.einsum("bd,bkd->bk", q, vectors[torch.from_numpy(hard)])
            negatives = negatives.masked_fill(torch.from_numpy(hard == answers[picks][:, None]), -1e4)
            inbatch = q @ positive.T  # an in-batch answer with the same text as the question's own is no negative
            same = torch.from_numpy(answers[picks][None, :] == answers[picks][:, None]) & ~torch.eye(len(picks),
                                                                                                   dtype=torch.bool)
            logits = torch.cat([inbatch.masked_fill(same, -1e4), negatives], 1) / args.temperature
            loss = F.cross_entropy(logits, torch.arange(len(picks))) + args.near * ((amap.W - eye) ** 2).sum()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += float(loss.detach()) * len(picks)
        print(f"epoch {epoch + 1}: loss {total / len(rows):.4f}", file=sys.stderr)
    return amap


def export(amap: QueryMap, info: dict[str, str]) -> None:
    tensors = {"W": amap.W.detach().numpy().astype(np.float32), "b": amap.b.detach().numpy().astype(np.float32)}
    write_safetensors(OUT, tensors, info)
    encoder = Encoder()
    with torch.no_grad():
        mapped = amap(torch.from_numpy(encoder.encode(FIXTURE_QUESTIONS)))
    FIXTURE.write_text(json.dumps({"weights_sha256": sha256(OUT), "cases": [
        {"question": q, "mapped": [round(float(x), 6) for x in v]} for q, v in zip(FIXTURE_QUESTIONS, mapped)]},
        indent=1) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--squad", type=int, default=100, help="SQuAD 1.1 train articles (about 200 questions each)")
    parser.add_argument("--molweni", type=int, default=3000, help="Molweni train dialogues")
    parser.add_argument("--friendsqa", type=int, default=800, help="FriendsQA train scenes")
    parser.add_argument("--held-squad", type=int, default=10, help="SQuAD 1.1 dev articles held out")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--hard", type=int, default=7, help="other answers of the question's group per question")
    parser.add_argument("--temperature", type=float, default=0.05)
    parser.add_argument("--near", type=float, default=1e-3, help="weight of ||W - I||^2")
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--no-export", action="store_true", help="train and score only; write nothing")
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    rng = random.Random(args.seed)
    began = time.time()
    rows = (rows_of(load(DATA / "molweni_train.json.gz")[1], args.molweni, rng, True)
            + rows_of(load(DATA / "friendsqa_trn.json.gz")[1], args.friendsqa, rng, True)
            + rows_of(load(DATA / "squad_v1.1_train.json.gz")[1], args.squad, rng, False))
    held = {"molweni_dev": rows_of(load(DATA / "molweni_dev.json.gz")[1], None, random.Random(0), True),
            "friendsqa_dev": rows_of(load(DATA / "friendsqa_dev.json.gz")[1], None, random.Random(0), True),
            "squad_dev": rows_of(load(DATA / "squad_v1.1_dev.json.gz")[1], args.held_squad, random.Random(0), False)}
    print(f"{len(rows)} pairs; held out " + ", ".join(f"{k} {len(v)}" for k, v in held.items()), file=sys.stderr)
    vectors, at = embedded(rows + [r for part in held.values() for r in part], Encoder())
    embedding = time.time() - began
    amap = train(rows, vectors, at, args)
    scores = {name: {"stock": round(mrr(part, vectors, at, None), 4), "mapped": round(mrr(part, vectors, at, amap), 4)}
              for name, part in held.items()}
    print(json.dumps(scores), file=sys.stderr)
    if args.no_export:
        return
    export(amap, {"base": MODEL_NAME, "seed": str(args.seed), "recipe": json.dumps(vars(args), sort_keys=True),
                  "pairs": str(len(rows)), "held_out_mrr": json.dumps(scores, sort_keys=True),
                  "embed_seconds": f"{embedding:.0f}", "train_seconds": f"{time.time() - began - embedding:.0f}"})
    print(f"wrote {OUT} and {FIXTURE}; {time.time() - began:.0f} s")


if __name__ == "__main__":
    main()
