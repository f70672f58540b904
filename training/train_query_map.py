"""Train memcli's question map (``memcli/semantic/query_map.safetensors``) from the public QA sets in ../shared/data/qa/.

    pip install -e '.[train]'             # torch, for training only: memcli never imports it
    python training/train_query_map.py    # seeded; the shipped map is what this writes

memcli ranks entries partly by the cosine of a question's sentence vector with each entry's
(all-MiniLM-L6-v2, :mod:`memcli.semantic`). That model was trained to put *paraphrases* near each
other, and a question is not a paraphrase of the line that answers it ("What activities does Melanie
do with her family?" / "We went swimming with the kids"). The map moves the question's vector toward
the vectors of lines that answer questions like it: ``normalize(W q + b)``. Only the question side
changes, so no entry's stored vector is computed again, and the cost per question is one 384 x 384
product (:mod:`memcli.semantic.query_map`).

The recipe (docs/benchmarks.md, "Evidence ranking", says what it gave):

- pairs of a question and the line that answers it: SQuAD 1.1 train questions with their answer's
  sentence (half of them as ``Name: sentence``, names from the dialogue sets' speakers), Molweni and
  FriendsQA train questions with the ``speaker: text`` line that holds the answer, the dialogue's
  speakers' names taken out of the question (as memcli's ranking takes the asked person's name out,
  :func:`memcli.retrieve.evidence_reader.meaning`); each line embedded as memcli embeds an entry;
- InfoNCE over the batch's other answers and 7 other lines of the question's own passage (hard
  negatives; a line with the answer's text is not one), temperature 0.05; ``W`` starts as the identity
  and is kept near it (``1e-3 * ||W - I||^2``); AdamW 1e-3, batch 256, 3 epochs;
- held out: Molweni and FriendsQA dev, each answerable question's answer line ranked among the lines
  of its dialogue (mean reciprocal rank), stock vectors against mapped; the figures go into the
  weights' metadata.

Most of the time is the encoder (about 150,000 lines through memcli's numpy encoder, ~20 minutes on
two cores); the training itself takes seconds.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import time
from pathlib import Path

import numpy as np
import torch
from torch.nn import functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "training"))

from reader_net import sha256, write_safetensors  # noqa: E402
from reader_windows import sentences  # noqa: E402

from memcli.qa.sets import Example, load  # noqa: E402
from memcli.semantic.encoder import MODEL_NAME, Encoder  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "qa"
OUT = ROOT / "memcli" / "semantic" / "query_map.safetensors"
FIXTURE = ROOT / "tests" / "fixtures" / "query_map_outputs.json"
FIXTURE_QUESTIONS = ["What activities does she do with her family?", "Where did he travel last year?",
                     "Which sport does Ana play?"]
_WORD = re.compile(r"[^\W\d_][\w'\u2019]*")


def without_names(question: str, names: set[str]) -> str:
    """``question`` without the words of ``names`` (and their possessives), unless nothing would be left."""
    lowered = {n.lower() for n in names}
    left = " ".join(_WORD.sub(lambda m: "" if re.sub(r"['\u2019]s$", "", m.group()).lower() in lowered
                              else m.group(), question).split())
    return left if _WORD.search(left) else question


Row = tuple[str, list[str], int]  # question, the lines of its passage, which line answers


def dialogue_rows(examples: list[Example], groups: int | None, rng: random.Random) -> list[Row]:
    """Answerable questions of ``groups`` dialogues (all: None), each with its dialogue's lines."""
    by_group: dict[str, list[Example]] = {}
    for ex in examples:
        if ex.answers:
            by_group.setdefault(ex.group, []).append(ex)
    keys = sorted(by_group)
    rng.shuffle(keys)
    rows = []
    for key in keys[:groups]:
        for ex in by_group[key]:
            lines = ex.context.split("\n")
            names = {w for line in lines if ":" in line for w in line.split(":", 1)[0].split()}
            rows.append((without_names(ex.question, names), lines, ex.context.count("\n", 0, ex.starts[0])))
    return rows


def squad_rows(examples: list[Example], count: int, names: list[str], rng: random.Random) -> list[Row]:
    """``count`` SQuAD questions with their paragraph's sentences (half as ``Name: sentence``)."""
    examples = list(examples)
    rng.shuffle(examples)
    rows = []
    for ex in examples[:count]:
        spans = sentences(ex.context)
        at = next((i for i, (_, end) in enumerate(spans) if end > ex.starts[0]), 0)
        who = f"{rng.choice(names)}: " if rng.random() < 0.5 else ""
        rows.append((ex.question, [who + ex.context[a:b] for a, b in spans], at))
    return rows


def embedded(rows: list[Row], encoder: Encoder) -> tuple[torch.Tensor, dict[str, int]]:
    """Every question's and line's vector (memcli's encoder, as it embeds an entry), and each text's row."""
    texts = sorted({q for q, _, _ in rows} | {line for _, lines, _ in rows for line in lines})
    started, vectors = time.time(), []
    for at in range(0, len(texts), 1024):
        vectors.append(encoder.encode(texts[at:at + 1024]))
        print(f"\rembedded {min(at + 1024, len(texts))} of {len(texts)} texts ({time.time() - started:.0f} s)",
              end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    return torch.from_numpy(np.concatenate(vectors)), {t: i for i, t in enumerate(texts)}


class QueryMap(torch.nn.Module):
    def __init__(self, d: int):
        super().__init__()
        self.W = torch.nn.Parameter(torch.eye(d))
        self.b = torch.nn.Parameter(torch.zeros(d))

    def forward(self, q: torch.Tensor) -> torch.Tensor:
        return F.normalize(q @ self.W.T + self.b, dim=-1)


def mrr(rows: list[Row], vectors: torch.Tensor, at: dict[str, int], qmap: QueryMap | None) -> float:
    """Mean reciprocal rank of each question's answer line among its passage's lines."""
    with torch.no_grad():
        questions = vectors[[at[q] for q, _, _ in rows]]
        if qmap is not None:
            questions = qmap(questions)
    total = 0.0
    for (_, lines, gold), q in zip(rows, questions):
        scores = vectors[[at[line] for line in lines]] @ q
        total += 1.0 / (1 + int((scores > scores[gold]).sum()))
    return total / len(rows)


def train(rows: list[Row], vectors: torch.Tensor, at: dict[str, int], args) -> QueryMap:
    rng = np.random.default_rng(args.seed)
    qmap = QueryMap(vectors.shape[1])
    optimizer = torch.optim.AdamW(qmap.parameters(), lr=args.lr, weight_decay=0.0)
    questions = torch.tensor([at[q] for q, _, _ in rows])
    answers = np.array([at[lines[gold]] for _, lines, gold in rows])
    others = [np.array([at[line] for line in lines if at[line] != at[lines[gold]]]) for _, lines, gold in rows]
    eye = torch.eye(vectors.shape[1])
    for epoch in range(args.epochs):
        order, total = rng.permutation(len(rows)), 0.0
        for start in range(0, len(rows), args.batch):
            picks = order[start:start + args.batch]
            q = qmap(vectors[questions[picks]])
            positive = vectors[answers[picks]]
            hard = np.stack([rng.choice(others[i], args.hard, replace=len(others[i]) < args.hard)
                             if len(others[i]) else np.full(args.hard, answers[i]) for i in picks])
            negatives = torch.einsum("bd,bkd->bk", q, vectors[torch.from_numpy(hard)])
            negatives = negatives.masked_fill(torch.from_numpy(hard == answers[picks][:, None]), -1e4)
            logits = torch.cat([q @ positive.T, negatives], 1) / args.temperature
            loss = F.cross_entropy(logits, torch.arange(len(picks))) + args.near * ((qmap.W - eye) ** 2).sum()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += float(loss.detach()) * len(picks)
        print(f"epoch {epoch + 1}: loss {total / len(rows):.4f}", file=sys.stderr)
    return qmap


def export(qmap: QueryMap, info: dict[str, str]) -> None:
    tensors = {"W": qmap.W.detach().numpy().astype(np.float32), "b": qmap.b.detach().numpy().astype(np.float32)}
    write_safetensors(OUT, tensors, info)
    encoder = Encoder()
    with torch.no_grad():
        mapped = qmap(torch.from_numpy(encoder.encode(FIXTURE_QUESTIONS)))
    FIXTURE.write_text(json.dumps({"weights_sha256": sha256(OUT), "cases": [
        {"question": q, "mapped": [round(float(x), 6) for x in v]} for q, v in zip(FIXTURE_QUESTIONS, mapped)]},
        indent=1) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--squad", type=int, default=20000, help="SQuAD 1.1 train questions")
    parser.add_argument("--molweni", type=int, default=3000, help="Molweni train dialogues")
    parser.add_argument("--friendsqa", type=int, default=400, help="FriendsQA train scenes")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--hard", type=int, default=7, help="other lines of the question's passage per question")
    parser.add_argument("--temperature", type=float, default=0.05)
    parser.add_argument("--near", type=float, default=1e-3, help="weight of ||W - I||^2")
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    rng = random.Random(args.seed)
    began = time.time()
    rows = (dialogue_rows(load(DATA / "molweni_train.json.gz")[1], args.molweni, rng)
            + dialogue_rows(load(DATA / "friendsqa_trn.json.gz")[1], args.friendsqa, rng))
    names = sorted({line.split(":", 1)[0].split()[0] for _, lines, _ in rows for line in lines
                    if ":" in line and line.split(":", 1)[0].strip()})
    rows += squad_rows(load(DATA / "squad_v1.1_train.json.gz")[1], args.squad, names, rng)
    held = {name: dialogue_rows(load(DATA / file)[1], None, random.Random(0))
            for name, file in (("molweni_dev", "molweni_dev.json.gz"), ("friendsqa_dev", "friendsqa_dev.json.gz"))}
    encoder = Encoder()
    vectors, at = embedded(rows + [r for part in held.values() for r in part], encoder)
    embedding = time.time() - began
    qmap = train(rows, vectors, at, args)
    scores = {name: {"stock": round(mrr(part, vectors, at, None), 4), "mapped": round(mrr(part, vectors, at, qmap), 4)}
              for name, part in held.items()}
    print(json.dumps(scores), file=sys.stderr)
    export(qmap, {"base": MODEL_NAME, "seed": str(args.seed), "recipe": json.dumps(vars(args), sort_keys=True),
                  "pairs": str(len(rows)), "held_out_mrr": json.dumps(scores, sort_keys=True),
                  "embed_seconds": f"{embedding:.0f}", "train_seconds": f"{time.time() - began - embedding:.0f}"})
    print(f"wrote {OUT} and {FIXTURE}; {time.time() - began:.0f} s")


if __name__ == "__main__":
    main()
