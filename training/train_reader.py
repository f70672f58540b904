"""Train memcli's reader (``memcli/qa/reader.safetensors``) from the public QA sets in ../shared/data/qa/.

    pip install -e '.[train]'          # torch, for training only: memcli never imports it
    python training/train_reader.py    # seeded; the shipped weights are what this writes

The recipe (docs/reader.md, the model card, says why each part and what it measured):

- all-MiniLM-L6-v2 (the weights memcli installs) with a start/end head on its last layer; "no
  answer" is the [CLS] position (SQuAD 2.0 style);
- the embeddings and the lowest ``--frozen`` layers are not trained (run without gradients), so only
  the layers above them and the head are shipped;
- windows shaped as memcli reads memory: SQuAD answers in their sentence with 0-1 neighbours each
  side, and a share of no-answer windows of the same passage's far sentences; Molweni dialogues
  whole, as ``speaker: text`` lines (its unanswerable questions kept); FriendsQA answers in a run
  of the scene's lines around them, and no-answer runs far from them; dialogue lines dated
  ``[YYYY-MM-DD HH:MM]`` at random, as memcli shows a session's first line;
- AdamW with warm-up and linear decay, batches of similar length;
- optionally (``--squad2-part 1/4``; ``--from`` the shipped weights to run it alone) a second stage
  on SQuAD 2.0 dev's written unanswerable questions with a share of the first stage's sets again:
  measured and not shipped (docs/reader.md says what it gave); likewise ``--distractors N``, a second
  stage on SQuAD questions read among the sentences of their article that share the most of their words.
"""

from __future__ import annotations

import argparse
import json
import lzma
import math
import random
import re
import struct
import sys
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from memcli.qa import features  # noqa: E402
from memcli.qa.sets import Example, load  # noqa: E402
from memcli.semantic.encoder import EPSILON, HEADS, model_files, read_safetensors  # noqa: E402
from memcli.semantic.wordpiece import WordPiece  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "qa"
OUT = ROOT / "memcli" / "qa" / "reader.safetensors"
FIXTURE = ROOT / "tests" / "fixtures" / "reader_outputs.json"
BUNDLE_BASE, BUNDLE_WINDOWS = "base.safetensors", "windows.npz"  # what a lent GPU machine is given (--make-bundle)
PART_BYTES = 15 << 20  # a file that comes back from a lent GPU machine holds at most 16 MiB


# ---------------------------------------------------------------------------- the model, BERT's names

class Linear(nn.Linear):
    pass


class SelfAttention(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.query, self.key, self.value = Linear(d, d), Linear(d, d), Linear(d, d)


class DenseNorm(nn.Module):
    def __init__(self, d_in, d):
        super().__init__()
        self.dense = Linear(d_in, d)
        self.LayerNorm = nn.LayerNorm(d, eps=EPSILON)


class Attention(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.self = SelfAttention(d)
        self.output = DenseNorm(d, d)


class Intermediate(nn.Module):
    def __init__(self, d, inner):
        super().__init__()
        self.dense = Linear(d, inner)


class Layer(nn.Module):
    def __init__(self, d, inner):
        super().__init__()
        self.attention = Attention(d)
        self.intermediate = Intermediate(d, inner)
        self.output = DenseNorm(inner, d)

    def forward(self, x, blocked):
        n, length, d = x.shape
        head = d // HEADS
        a = self.attention.self

        def split(h):
            return h.view(n, length, HEADS, head).transpose(1, 2)

        q, k, v = split(a.query(x)), split(a.key(x)), split(a.value(x))
        scores = q @ k.transpose(-1, -2) / math.sqrt(head) + blocked
        attended = (scores.softmax(-1) @ v).transpose(1, 2).reshape(n, length, d)
        o = self.attention.output
        x = o.LayerNorm(x + o.dense(attended))
        hidden = self.output.dense(F.gelu(self.intermediate.dense(x), approximate="tanh"))
        return self.output.LayerNorm(x + hidden)


class Embeddings(nn.Module):
    def __init__(self, vocab, positions, types, d):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab, d)
        self.position_embeddings = nn.Embedding(positions, d)
        self.token_type_embeddings = nn.Embedding(types, d)
        self.LayerNorm = nn.LayerNorm(d, eps=EPSILON)


class Encoder(nn.Module):
    def __init__(self, layers, d, inner):
        super().__init__()
        self.layer = nn.ModuleList(Layer(d, inner) for _ in range(layers))


class Reader(nn.Module):
    def __init__(self, shapes: dict):
        super().__init__()
        vocab, d = shapes["embeddings.word_embeddings.weight"]
        positions = shapes["embeddings.position_embeddings.weight"][0]
        types = shapes["embeddings.token_type_embeddings.weight"][0]
        inner = shapes["encoder.layer.0.intermediate.dense.weight"][0]
        layers = 1 + max(int(k.split(".")[2]) for k in shapes if k.startswith("encoder.layer."))
        self.embeddings = Embeddings(vocab, positions, types, d)
        self.encoder = Encoder(layers, d, inner)
        self.qa_outputs = Linear(d, 2)

    def bottom(self, ids, types, mask, frozen):
        e = self.embeddings
        positions = torch.arange(ids.shape[1], device=ids.device)
        x = e.LayerNorm(e.word_embeddings(ids) + e.position_embeddings(positions)[None]
                        + e.token_type_embeddings(types))
        blocked = ((1.0 - mask) * -1e9)[:, None, None, :]
        for layer in self.encoder.layer[:frozen]:
            x = layer(x, blocked)
        return x

    def top(self, x, mask, frozen):
        blocked = ((1.0 - mask) * -1e9)[:, None, None, :]
        for layer in self.encoder.layer[frozen:]:
            x = layer(x, blocked)
        logits = self.qa_outputs(x)
        return logits[..., 0], logits[..., 1]

    def forward(self, ids, types, mask, frozen=0):
        return self.top(self.bottom(ids, types, mask, frozen), mask, frozen)


def base_reader(bundle: Path | None = None) -> tuple[Reader, dict[str, np.ndarray]]:
    """all-MiniLM-L6-v2 with a new head; from a device bundle (:func:`make_bundle`), its base layers with the
    shipped reader's trained layers and head over them (the second stage starts where the first ended)."""
    if bundle is None:
        source = read_safetensors(model_files() / "model.safetensors")
    else:
        source = {**read_safetensors(bundle / BUNDLE_BASE), **read_safetensors(OUT)}
    weights = {k: np.array(v, dtype=np.float32) for k, v in source.items()
               if not k.startswith("pooler.") and "position_ids" not in k}
    reader = Reader({k: v.shape for k, v in weights.items()})
    state = reader.state_dict()
    missing = set(state) - set(weights) - {"qa_outputs.weight", "qa_outputs.bias"}
    assert not missing, missing
    reader.load_state_dict({**state, **{k: torch.from_numpy(v) for k, v in weights.items() if k in state}})
    if "qa_outputs.weight" not in weights:
        nn.init.normal_(reader.qa_outputs.weight, std=0.02)
        nn.init.zeros_(reader.qa_outputs.bias)
    return reader, weights


# ---------------------------------------------------------------------------- the training windows

SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")


def sentences(text: str) -> list[tuple[int, int]]:
    spans, at = [], 0
    for m in SENTENCE_END.finditer(text):
        spans.append((at, m.start()))
        at = m.end()
    spans.append((at, len(text)))
    return [s for s in spans if s[1] > s[0]]


def stamp(rng: random.Random) -> str:
    """A random ``[YYYY-MM-DD HH:MM] `` as memcli dates a line."""
    return f"[{rng.randint(2019, 2026)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d} " \
           f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}] "


def date_lines(text: str, rng: random.Random) -> tuple[str, list[int]]:
    """``text``'s lines with ``[YYYY-MM-DD HH:MM] `` before the first (and now and then another), and the
    characters added before each original offset (a map for moving answer offsets)."""
    lines = text.split("\n")
    out, shift = [], []
    added = 0
    for i, line in enumerate(lines):
        if i == 0 or rng.random() < 0.1:
            dated = stamp(rng)
            added += len(dated)
            out.append(dated + line)
        else:
            out.append(line)
        shift.append(added)
    return "\n".join(out), shift


def moved(text: str, shift: list[int], offset: int) -> int:
    return offset + shift[text.count("\n", 0, offset)]


def labelled(tokenizer, question, passage, answer: tuple[int, int] | None, window=features.WINDOW):
    """The windows of a passage with their labels: ``(ids, first, start, end)``; 0, 0 for no answer."""
    out = []
    for w in features.windows(tokenizer, question, passage, window=window):
        span = w.token_span(*answer) if answer else None
        if span and span[1] - span[0] >= features.MAX_ANSWER:
            continue
        out.append((w.ids, w.first, *(span or (0, 0))))
    return out


def squad_windows(tokenizer, examples: list[Example], rng, no_answer_share):
    out = []
    for ex in examples:
        spans = sentences(ex.context)
        start, text = ex.starts[0], ex.answers[0]
        end = start + len(text)
        first = next((i for i, (s, e) in enumerate(spans) if e > start), 0)
        last = next((i for i, (s, e) in enumerate(spans) if e >= end), len(spans) - 1)
        lo, hi = max(first - rng.randint(0, 1), 0), min(last + rng.randint(0, 1), len(spans) - 1)
        base = spans[lo][0]
        passage = ex.context[base:spans[hi][1]]
        out += labelled(tokenizer, ex.question, passage, (start - base, end - base))[:1]
        far = [i for i in range(len(spans)) if i < first - 2 or i > last + 2]
        if far and rng.random() < no_answer_share:
            i = rng.choice(far)
            lo, hi = i, min(i + rng.randint(0, 2), len(spans) - 1)
            passage = ex.context[spans[lo][0]:spans[hi][1]]
            if text.lower() not in passage.lower():
                out += labelled(tokenizer, ex.question, passage, None)[:1]
    return out


def dialogue_windows(tokenizer, examples: list[Example], rng, no_answer_share, around: tuple[int, int] | None):
    """Dialogue questions: whole (``around`` None) or the run of lines ``around`` the answer's (a random
    number of lines each side between the two), and no-answer runs far from it."""
    out = []
    for ex in examples:
        context, shift = date_lines(ex.context, rng) if rng.random() < 0.5 else (ex.context, None)
        offsets = [(ex.starts[0], ex.starts[0] + len(ex.answers[0]))] if ex.answers else []
        if shift is not None:
            offsets = [(moved(ex.context, shift, s), moved(ex.context, shift, e - 1) + 1) for s, e in offsets]
        if around is None:
            out += labelled(tokenizer, ex.question, context, offsets[0] if offsets else None)
            continue
        lines, at = [], 0
        for line in context.split("\n"):
            lines.append((at, at + len(line)))
            at += len(line) + 1
        if not offsets:
            continue
        s, e = offsets[0]
        first = next(i for i, (a, b) in enumerate(lines) if b >= s)
        last = next(i for i, (a, b) in enumerate(lines) if b >= e - 1)
        lo = max(first - rng.randint(*around), 0)
        hi = min(last + rng.randint(*around), len(lines) - 1)
        base = lines[lo][0]
        out += labelled(tokenizer, ex.question, context[base:lines[hi][1]], (s - base, e - base))[:1]
        span = around[1]
        far = [i for i in range(len(lines) - span) if i + span < first - 1 or i > last + 1]
        if far and rng.random() < no_answer_share:
            i = rng.choice(far)
            passage = context[lines[i][0]:lines[i + rng.randint(*around)][1]]
            if all(a.lower() not in passage.lower() for a in ex.answers):
                out += labelled(tokenizer, ex.question, passage, None)[:1]
    return out


def training_windows(tokenizer, args, rng):
    sets = {name: load(DATA / f"{name}.json.gz")[1] for name in
            ("squad_v1.1_train", "molweni_train", "friendsqa_trn")}
    out = {}
    squad = [e for e in sets["squad_v1.1_train"] if e.answers]
    rng.shuffle(squad)
    out["squad"] = squad_windows(tokenizer, squad[:args.squad], rng, args.no_answer)
    molweni = sets["molweni_train"]
    rng.shuffle(molweni)
    out["molweni"] = dialogue_windows(tokenizer, molweni[:args.molweni], rng, 0.0, None)
    friends = sets["friendsqa_trn"]
    rng.shuffle(friends)
    out["friendsqa"] = dialogue_windows(tokenizer, friends[:args.friendsqa], rng, args.no_answer, (1, 6))
    return report(out)


def passage_windows(tokenizer, examples: list[Example]):
    """Every window of each whole passage, labelled (SQuAD 2.0's written unanswerable questions)."""
    out = []
    for ex in examples:
        answer = (ex.starts[0], ex.starts[0] + len(ex.answers[0])) if ex.answers else None
        out += labelled(tokenizer, ex.question, ex.context, answer)
    return out


WORD = re.compile(r"[a-z0-9]+")


def words(text: str) -> set[str]:
    return set(WORD.findall(text.lower()))


def distractor_windows(tokenizer, examples: list[Example], speakers: list[str], rng, count: int):
    """Memory-shaped windows that teach the reader that sharing the question's words is not answering it:
    for each of ``count`` SQuAD questions, the sentences of its article that share the most of the question's
    words (weighted by rarity across the article) and do not hold the answer, 1-3 of them as lines with the
    answer's sentence among them (labelled with the answer), and for half the questions the same lines alone
    (no answer). Lines are shown as memory is (``speaker: text``, now and then dated), speakers drawn from
    the dialogue sets' own."""
    articles: dict[str, list[str]] = {}
    for ex in examples:
        pool = articles.setdefault(ex.group, [])
        if not pool or pool[-1] != ex.context:
            pool.append(ex.context)
    out = []
    picked = [e for e in examples if e.answers]
    rng.shuffle(picked)
    for ex in picked[:count]:
        lines = list(dict.fromkeys(c[a:b] for c in articles[ex.group] for a, b in sentences(c)))
        df: dict[str, int] = {}
        for line in lines:
            for w in words(line):
                df[w] = df.get(w, 0) + 1
        asked = words(ex.question)
        start, answer = ex.starts[0], ex.answers[0]
        own = next(((a, b) for a, b in sentences(ex.context) if a <= start < b and start + len(answer) <= b), None)
        if own is None:
            continue
        target = ex.context[own[0]:own[1]]
        others = [x for x in lines if answer.lower() not in x.lower() and x != target]
        weight = {x: sum(math.log(len(lines) / df[w]) for w in words(x) & asked) for x in others}
        hard = [x for x in sorted(others, key=lambda x: -weight[x]) if weight[x] > 0][:3]
        if not hard:
            continue
        chosen = hard[:rng.randint(1, len(hard))]
        mixed = chosen + [target]
        rng.shuffle(mixed)
        shown = memory_lines(mixed, speakers, rng)
        at = mixed.index(target)
        base = sum(len(x) + 1 for x in shown[:at]) + len(shown[at]) - len(target)
        offset = start - own[0]
        out += labelled(tokenizer, ex.question, "\n".join(shown), (base + offset, base + offset + len(answer)))[:1]
        if rng.random() < 0.5:
            out += labelled(tokenizer, ex.question, "\n".join(memory_lines(chosen, speakers, rng)), None)[:1]
    return out


def memory_lines(texts: list[str], speakers: list[str], rng) -> list[str]:
    """``texts`` as memory shows lines: ``speaker: text``, the first now and then dated."""
    out = [f"{rng.choice(speakers)}: {t}" for t in texts]
    if out and rng.random() < 0.5:
        out[0] = stamp(rng) + out[0]
    return out


def second_stage_windows(tokenizer, args, rng):
    """The second stage: SQuAD 2.0 dev's ``--squad2-part`` (questions written to have no answer in
    their paragraph, which no training set here has) and ``--distractors`` (:func:`distractor_windows`),
    with a share of the first stage's sets again."""
    from memcli.eval.qa import parse_part, part_of
    out = {}
    if args.squad2_part != "none":
        squad2 = part_of(load(DATA / "squad_v2.0_dev.json.gz")[1], parse_part(args.squad2_part))
        out["squad2"] = passage_windows(tokenizer, squad2) * args.squad2_repeat
    molweni = load(DATA / "molweni_train.json.gz")[1]
    rng.shuffle(molweni)
    out["molweni"] = dialogue_windows(tokenizer, molweni[:args.again_molweni], rng, 0.0, None)
    friends = load(DATA / "friendsqa_trn.json.gz")[1]
    rng.shuffle(friends)
    out["friendsqa"] = dialogue_windows(tokenizer, friends[:args.again_friendsqa], rng, args.no_answer, (1, 6))
    squad = [e for e in load(DATA / "squad_v1.1_train.json.gz")[1] if e.answers]
    if args.distractors:
        speakers = sorted({line.split(": ", 1)[0] for ex in molweni + friends for line in ex.context.split("\n")
                           if ": " in line and len(line.split(": ", 1)[0]) <= 20})
        out["distractors"] = distractor_windows(tokenizer, squad, speakers, rng, args.distractors)
    rng.shuffle(squad)
    out["squad"] = squad_windows(tokenizer, squad[:args.again_squad], rng, args.no_answer)
    return report(out)


def report(out: dict[str, list]) -> list:
    for name, rows in out.items():
        none = sum(1 for r in rows if r[2] == 0)
        print(f"{name}: {len(rows)} windows ({none} no answer), "
              f"{sum(len(r[0]) for r in rows) / max(len(rows), 1):.0f} tokens on average", flush=True)
    return [r for rows in out.values() for r in rows]


def batches(rows, size, rng):
    """Batches of rows of similar length, in random order."""
    order = list(range(len(rows)))
    rng.shuffle(order)
    pool = size * 64
    out = []
    for at in range(0, len(order), pool):
        chunk = sorted(order[at:at + pool], key=lambda i: len(rows[i][0]))
        out += [chunk[k:k + size] for k in range(0, len(chunk), size)]
    rng.shuffle(out)
    return out


def tensors(rows, picks, device="cpu"):
    length = max(len(rows[i][0]) for i in picks)
    ids = torch.zeros((len(picks), length), dtype=torch.long)
    types = torch.zeros_like(ids)
    mask = torch.zeros((len(picks), length))
    for r, i in enumerate(picks):
        seq, first = rows[i][0], rows[i][1]
        ids[r, :len(seq)] = torch.tensor(seq)
        types[r, first:len(seq)] = 1
        mask[r, :len(seq)] = 1
    starts = torch.tensor([rows[i][2] for i in picks])
    ends = torch.tensor([rows[i][3] for i in picks])
    return tuple(t.to(device) for t in (ids, types, mask, starts, ends))


# ---------------------------------------------------------------------------- export

def write_safetensors(path: Path, tensors: dict[str, np.ndarray], metadata: dict[str, str]) -> None:
    header, blobs, at = {"__metadata__": metadata}, [], 0
    kinds = {np.dtype(np.float16): "F16", np.dtype(np.float32): "F32"}
    for name in sorted(tensors):
        blob = np.ascontiguousarray(tensors[name]).tobytes()
        header[name] = {"dtype": kinds[tensors[name].dtype], "shape": list(tensors[name].shape),
                        "data_offsets": [at, at + len(blob)]}
        blobs.append(blob)
        at += len(blob)
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    temp = path.with_suffix(".tmp")
    temp.write_bytes(struct.pack("<Q", len(raw)) + raw + b"".join(blobs))
    temp.replace(path)


FIXTURE_INPUTS = [
    ("Who offered to help?", "[2024-03-03 18:40] Priya: I can take the kids on Friday.\nCaroline: Thanks!"),
    ("What colour is the sky?", "The sky is blue on a clear day, and grey when it rains."),
    ("Where did she go?", "Dalia: I play tennis now.\nMarco: Nice."),
]


def shipped_weights(reader: Reader, frozen: int) -> dict[str, np.ndarray]:
    return {k: v.detach().cpu().numpy().astype(np.float16) for k, v in reader.state_dict().items()
            if k.startswith("qa_outputs.") or (k.startswith("encoder.layer.") and int(k.split(".")[2]) >= frozen)}


def metadata(frozen: int, args, seconds: float) -> dict[str, str]:
    return {"frozen_layers": str(frozen), "base": "all-MiniLM-L6-v2", "seed": str(args.seed),
            "recipe": json.dumps({k: v for k, v in vars(args).items() if k != "checkpoint_every"}, sort_keys=True, default=str),
            "train_seconds": f"{seconds:.0f}"}


def export(reader: Reader, frozen: int, args, seconds: float, extra: dict[str, str] | None = None) -> None:
    """The package's weights (and the fixture the numpy test compares with); ``extra``: metadata kept from
    the weights started from (a lent machine's recipe and time, when its parts are exported here)."""
    shipped = shipped_weights(reader, frozen)
    write_safetensors(OUT, shipped, metadata(frozen, args, seconds) | (extra or {}))
    # what the shipped (fp16) weights give in torch, for the test that numpy gives the same
    state = reader.state_dict()
    reader.load_state_dict({**state, **{k: torch.from_numpy(v.astype(np.float32)) for k, v in shipped.items()}})
    tokenizer = WordPiece.from_file(model_files() / "tokenizer.json")
    cases = []
    with torch.no_grad():
        for question, passage in FIXTURE_INPUTS:
            w = features.windows(tokenizer, question, passage)[0]
            ids = torch.tensor([w.ids])
            types = torch.tensor([w.types])
            start, end = reader(ids, types, torch.ones(ids.shape), 0)
            cases.append({"question": question, "passage": passage, "ids": w.ids,
                          "start": [round(float(x), 5) for x in start[0]],
                          "end": [round(float(x), 5) for x in end[0]]})
    FIXTURE.parent.mkdir(parents=True, exist_ok=True)
    FIXTURE.write_text(json.dumps({"weights_sha256": sha256(OUT), "cases": cases}, indent=1) + "\n")


def sha256(path: Path) -> str:
    import hashlib
    return hashlib.sha256(path.read_bytes()).hexdigest()


# ---------------------------------------------------------------------------- main

def load_shipped(reader: Reader, paths: list[Path]) -> dict[str, str]:
    """Start from weights this script exported (fp16, the layers above the frozen ones and the head; one file,
    or the parts :func:`write_parts` wrote on a lent GPU machine). The first file's metadata."""
    shipped = {k: v for path in paths for k, v in read_safetensors(path).items()}
    state = reader.state_dict()
    assert set(shipped) <= set(state), set(shipped) - set(state)
    reader.load_state_dict({**state, **{k: torch.from_numpy(np.array(v, dtype=np.float32)) for k, v in shipped.items()}})
    from memcli.qa.model import metadata as read_metadata

    return read_metadata(paths[0])


# ---------------------------------------------------------------------------- a lent GPU machine

def make_bundle(folder: Path, rows: list, args) -> None:
    """What a full fine-tune on a lent GPU machine needs and that machine has not (it has PyTorch, no
    registry, and a call carries 64 MiB with the working tree): the training windows, tokenized here
    (``windows.npz``), and the base model's embeddings and the layers the shipped reader does not replace,
    fp16 (``base.safetensors``; the layers above come from the shipped reader in the working tree)."""
    folder.mkdir(parents=True, exist_ok=True)
    lengths = np.array([len(r[0]) for r in rows], dtype=np.int32)
    ids = np.concatenate([np.asarray(r[0], np.uint16) for r in rows])  # xz: a dialogue's windows repeat it
    np.savez_compressed(folder / BUNDLE_WINDOWS, ids_xz=np.frombuffer(lzma.compress(ids.tobytes()), np.uint8),
                        lengths=lengths, labels=np.array([r[1:4] for r in rows], dtype=np.int16),
                        recipe=np.array(json.dumps({k: v for k, v in vars(args).items()
                                                    if k not in ("make_bundle", "checkpoint_every")}, default=str)))
    shipped = set(read_safetensors(OUT))
    base = {k: np.asarray(v, dtype=np.float16) for k, v in read_safetensors(model_files() / "model.safetensors").items()
            if k.removeprefix("bert.") not in shipped and not k.startswith("pooler.") and "position_ids" not in k}
    write_safetensors(folder / BUNDLE_BASE, base, {"base": "all-MiniLM-L6-v2", "dtype": "float16"})
    size = sum(p.stat().st_size for p in folder.iterdir())
    print(f"wrote {folder}: {len(rows)} windows, {size / 2**20:.1f} MiB (the working tree and this travel together, "
          "64 MiB at most)", flush=True)


def load_windows(path: Path) -> tuple[list, str]:
    """The rows :func:`make_bundle` saved, and the recipe that made them."""
    saved = np.load(path)
    ends = np.cumsum(saved["lengths"])
    ids = np.frombuffer(lzma.decompress(saved["ids_xz"].tobytes()), np.uint16)
    rows = [(ids[end - n:end].astype(np.int64).tolist(), *map(int, label))
            for end, n, label in zip(ends, saved["lengths"], saved["labels"], strict=True)]
    return rows, str(saved["recipe"])


def write_parts(folder: Path, shipped: dict[str, np.ndarray], meta: dict[str, str]) -> list[Path]:
    """The trained weights as files of at most :data:`PART_BYTES` (what comes back from a lent machine), each
    with the metadata; ``--from`` them all exports the package's weights here."""
    folder.mkdir(parents=True, exist_ok=True)
    parts: list[dict[str, np.ndarray]] = [{}]
    for name in sorted(shipped):
        if parts[-1] and sum(v.nbytes for v in parts[-1].values()) + shipped[name].nbytes > PART_BYTES:
            parts.append({})
        parts[-1][name] = shipped[name]
    paths = []
    for at, part in enumerate(parts):
        paths.append(folder / f"reader-part{at}.safetensors")
        write_safetensors(paths[-1], part, meta)
    return paths


def train(reader: Reader, rows: list, args, lr: float, epochs: float, rng, stage: str, on_epoch=None) -> None:
    """AdamW with warm-up and linear decay over ``epochs`` of ``rows``, the lowest layers frozen;
    ``on_epoch(n)`` after each whole epoch but the last."""
    for name, p in reader.named_parameters():
        p.requires_grad = name.startswith("qa_outputs.") or (
            name.startswith("encoder.layer.") and int(name.split(".")[2]) >= args.frozen)
    plan = []
    whole = int(epochs)
    for _ in range(max(whole, 1)):
        plan += batches(rows, args.batch, rng)
    per_epoch = len(plan) // max(whole, 1)
    if epochs != whole:
        plan = plan[:int(len(batches(rows, args.batch, rng)) * epochs)] if whole == 0 else \
            plan + batches(rows, args.batch, rng)[:int(len(plan) / whole * (epochs - whole))]
    if args.max_steps:
        plan = plan[:args.max_steps]
    params = [p for p in reader.parameters() if p.requires_grad]
    decay = [p for p in params if p.dim() > 1]
    rest = [p for p in params if p.dim() <= 1]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": rest, "weight_decay": 0.0}],
                                  lr=lr)
    warm = max(len(plan) // 16, 1)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min((s + 1) / warm, max(len(plan) - s, 0) / max(len(plan) - warm, 1)))
    print(f"{stage}: {len(rows)} windows, {len(plan)} steps", flush=True)
    began = time.time()
    reader.train()
    shown = 0.0
    for step, picks in enumerate(plan):
        ids, types, mask, starts, ends = tensors(rows, picks, args.device)
        with torch.no_grad():
            bottom = reader.bottom(ids, types, mask, args.frozen)
        start_logits, end_logits = reader.top(bottom, mask, args.frozen)
        blocked = (1.0 - mask) * -1e4
        loss = (F.cross_entropy(start_logits + blocked, starts) + F.cross_entropy(end_logits + blocked, ends)) / 2
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        schedule.step()
        shown = 0.98 * shown + 0.02 * loss.item() if step else loss.item()
        if args.checkpoint_every and step and step % args.checkpoint_every == 0:
            write_safetensors(ROOT / "training" / "checkpoint.safetensors", shipped_weights(reader, args.frozen),
                              metadata(args.frozen, args, time.time() - began) | {"step": str(step), "stage": stage})
        if on_epoch is not None and (step + 1) % per_epoch == 0 and step + 1 < len(plan):
            reader.eval()
            on_epoch((step + 1) // per_epoch)
            reader.train()
        if step % 50 == 0 or step == len(plan) - 1:
            spent = time.time() - began
            print(f"{stage} step {step + 1}/{len(plan)} loss {shown:.3f} {spent / (step + 1):.2f} s/step "
                  f"eta {spent / (step + 1) * (len(plan) - step - 1) / 60:.0f} min", flush=True)
    reader.eval()


def rounded(reader: Reader, frozen: int) -> None:
    """The trained layers as the shipped fp16 would give them: the second stage starts from what the
    first one exports, so ``--from`` the first stage's weights gives what the whole run gives."""
    state = reader.state_dict()
    reader.load_state_dict({**state, **{k: torch.from_numpy(v.astype(np.float32)).to(state[k].device)
                                        for k, v in shipped_weights(reader, frozen).items()}})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--squad", type=int, default=24000, help="SQuAD 1.1 train questions")
    parser.add_argument("--molweni", type=int, default=20000, help="Molweni train questions")
    parser.add_argument("--friendsqa", type=int, default=9874, help="FriendsQA train questions")
    parser.add_argument("--no-answer", type=float, default=0.33, help="share of questions with a no-answer window")
    parser.add_argument("--frozen", type=int, default=2, help="lowest layers not trained")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--epochs", type=float, default=1.0)
    parser.add_argument("--from", dest="start", type=Path, nargs="+", default=None,
                        help="skip the first stage: start the second from these exported weights (or export "
                        "them: the parts a lent GPU machine wrote)")
    parser.add_argument("--squad2-part", default="none", help="a second stage on this part of SQuAD 2.0 dev "
                        "(1/4: measured, not shipped, docs/reader.md; the threshold chosen on 2/4, scored on 2/2); "
                        "'none', the shipped recipe: no second stage")
    parser.add_argument("--squad2-repeat", type=int, default=2)
    parser.add_argument("--again-molweni", type=int, default=6000, help="second stage: Molweni train questions")
    parser.add_argument("--again-friendsqa", type=int, default=2000, help="second stage: FriendsQA questions")
    parser.add_argument("--again-squad", type=int, default=3000, help="second stage: SQuAD 1.1 questions")
    parser.add_argument("--distractors", type=int, default=0, help="second stage: SQuAD 1.1 questions read "
                        "among the lines of their article most like them (0: none)")
    parser.add_argument("--lr2", type=float, default=3e-5, help="second stage's learning rate")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--checkpoint-every", type=int, default=0, help="write training/checkpoint.safetensors")
    parser.add_argument("--max-steps", type=int, default=0, help="stop each stage after this many steps (0: all)")
    parser.add_argument("--make-bundle", type=Path, default=None, help="write the first stage's windows and the "
                        "base weights a lent GPU machine needs to this folder, and stop (docs/reader.md)")
    parser.add_argument("--bundle", type=Path, default=None, help="train on a bundle's windows, from the shipped "
                        "reader over the bundle's base (on a lent GPU machine: no data or model package there)")
    parser.add_argument("--device", default="cpu", help="torch device: cpu, cuda")
    parser.add_argument("--out", type=Path, default=None, help="write the trained weights here as parts of at "
                        "most 15 MiB (no fixture), not into the package")
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    torch.backends.cuda.matmul.allow_tf32 = True
    rng = random.Random(args.seed)
    if args.make_bundle is not None:
        tokenizer = WordPiece.from_file(model_files() / "tokenizer.json")
        make_bundle(args.make_bundle, training_windows(tokenizer, args, rng), args)
        return
    reader, _ = base_reader(args.bundle)
    reader.to(args.device)
    began = time.time()
    meta: dict[str, str] = {}
    if args.start is None:
        if args.bundle is not None:
            rows, recipe = load_windows(args.bundle / BUNDLE_WINDOWS)
            meta = {"windows": recipe, "device": torch.cuda.get_device_name() if args.device == "cuda" else args.device,
                    "from": "the shipped reader"}
        else:
            rows = training_windows(WordPiece.from_file(model_files() / "tokenizer.json"), args, rng)
        def checkpoint(epoch: int) -> None:  # a lent machine's run: each epoch's weights come back, to compare here
            if args.out is not None:
                write_parts(args.out / f"epoch{epoch}", shipped_weights(reader, args.frozen),
                            metadata(args.frozen, args, time.time() - began) | meta | {"epoch": str(epoch)})

        train(reader, rows, args, args.lr, args.epochs, rng, "first stage", checkpoint)
        rounded(reader, args.frozen)
    else:
        meta = {k: v for k, v in load_shipped(reader, args.start).items() if k not in ("frozen_layers", "seed")}
    if args.squad2_part != "none" or args.distractors:
        rng = random.Random(args.seed + 1)  # the same second stage whether or not the first ran here
        torch.manual_seed(args.seed + 1)
        train(reader, second_stage_windows(WordPiece.from_file(model_files() / "tokenizer.json"), args, rng), args,
              args.lr2, 1.0, rng, "second stage")
    seconds = time.time() - began
    if args.out is not None:
        paths = write_parts(args.out, shipped_weights(reader, args.frozen), metadata(args.frozen, args, seconds) | meta)
        print(f"wrote {', '.join(map(str, paths))}; {seconds:.0f} s training")
        return
    export(reader.cpu(), args.frozen, args, seconds, meta)
    print(f"wrote {OUT} ({OUT.stat().st_size / 1e6:.1f} MB) and {FIXTURE}; {seconds:.0f} s")


if __name__ == "__main__":
    main()
