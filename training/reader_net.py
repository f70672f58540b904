"""The reader as torch trains it: all-MiniLM-L6-v2 under BERT's parameter names with a start/end head, and
what moves weights in and out of it (safetensors, the fp16 the package ships, padded batches). Used by
``train_reader.py``; memcli itself runs the same weights with numpy (:mod:`memcli.qa.model`)."""

from __future__ import annotations

import json
import math
import struct
import sys
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from memcli.semantic.encoder import EPSILON, HEADS, model_files, read_safetensors  # noqa: E402

OUT = ROOT / "memcli" / "qa" / "reader.safetensors"



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


def shipped_reader(base: Path | None = None) -> Reader:
    """The last shipped reader: all-MiniLM-L6-v2 (the installed model's weights, or ``base``: a bundle's
    fp16 copy of the layers the package does not ship) with the package's trained layers and head over it."""
    source = {**read_safetensors(base if base is not None else model_files() / "model.safetensors"),
              **read_safetensors(OUT)}
    weights = {k: np.array(v, dtype=np.float32) for k, v in source.items()
               if not k.startswith("pooler.") and "position_ids" not in k}
    reader = Reader({k: v.shape for k, v in weights.items()})
    state = reader.state_dict()
    missing = set(state) - set(weights)
    assert not missing, missing
    reader.load_state_dict({k: torch.from_numpy(weights[k]) for k in state})
    return reader


def shipped_weights(reader: Reader, frozen: int) -> dict[str, np.ndarray]:
    """The trained layers (those above ``frozen``) and the head, fp16: what the package ships."""
    return {k: v.detach().cpu().numpy().astype(np.float16) for k, v in reader.state_dict().items()
            if k.startswith("qa_outputs.") or (k.startswith("encoder.layer.") and int(k.split(".")[2]) >= frozen)}


def load_weights(reader: Reader, paths: list[Path]) -> None:
    """Weights this project exported (fp16; one file, or parts) over ``reader``'s own."""
    shipped = {k: v for path in paths for k, v in read_safetensors(path).items()}
    state = reader.state_dict()
    assert set(shipped) <= set(state), set(shipped) - set(state)
    reader.load_state_dict({**state, **{k: torch.from_numpy(np.array(v, dtype=np.float32)).to(state[k].device)
                                        for k, v in shipped.items()}})


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


def sha256(path: Path) -> str:
    import hashlib
    return hashlib.sha256(path.read_bytes()).hexdigest()


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




def loss_of(reader: Reader, rows, picks, frozen: int, device: str):
    """The batch's start/end cross-entropy (padding masked out); the layers under ``frozen`` run without
    gradients."""
    ids, types, mask, starts, ends = tensors(rows, picks, device)
    if frozen:
        with torch.no_grad():
            bottom = reader.bottom(ids, types, mask, frozen)
    else:
        bottom = reader.bottom(ids, types, mask, 0)
    start_logits, end_logits = reader.top(bottom, mask, frozen)
    blocked = (1.0 - mask) * -1e4
    return (F.cross_entropy(start_logits + blocked, starts) + F.cross_entropy(end_logits + blocked, ends)) / 2
