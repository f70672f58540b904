"""Train memcli's reader (``memcli/qa/reader.safetensors``) from the public QA sets in ../shared/data/qa/, over
as many sittings as it takes.

    pip install -e '.[train]'                                   # torch, for training only: memcli never imports it
    nice -n 19 python training/train_reader.py --budget 2h30m &  # starts, or continues, the run
    kill -TERM <pid>                                            # a clean stop: checkpoint, then exit 0
    python training/train_reader.py --curve                     # the held-out scores against training time
    python training/train_reader.py --export ~/.cache/memcli-train/reader/snapshots/step004000.safetensors

The run lives in ``--run-dir`` (``~/.cache/memcli-train/reader``, or ``$MEMCLI_TRAIN_DIR``), outside the work
tree: the recipe, the windows (built once), a checkpoint every ``--checkpoint-minutes`` (weights, optimizer
and schedule, the batch plan and the step it stands at, random states, seconds spent), fp16 snapshots every
``--snapshot-every`` steps with their held-out scores (``log.jsonl``). Run again with the same options, it
continues where it stopped; the same seed and data give the same weights in one sitting or five. A run
starts from the last shipped weights (the package's), so a lost folder costs the run, not the reader.

The recipe (docs/reader.md, the model card, says what each part measured): all-MiniLM-L6-v2 with a start/end
head, "no answer" the [CLS] position; windows shaped as memcli reads memory (:mod:`reader_windows`);
AdamW with warm-up and linear decay, batches of similar length, ``--frozen`` lowest layers not trained.
"""

from __future__ import annotations

import argparse
import json
import lzma
import os
import platform
import random
import sys
import time
from pathlib import Path

import numpy as np
import torch
from reader_net import (
    OUT,
    ROOT,
    Reader,
    batches,
    load_weights,
    loss_of,
    sha256,
    shipped_reader,
    shipped_weights,
    write_safetensors,
)
from reader_windows import DATA, report, training_windows
from run_state import DEFAULT_DIR, Run, RunError, Sitting, parse_budget, write_atomic

from memcli.qa import features
from memcli.semantic.encoder import model_files, read_safetensors
from memcli.semantic.wordpiece import WordPiece

FIXTURE = ROOT / "tests" / "fixtures" / "reader_outputs.json"
BUNDLE_BASE, WINDOWS = "base.safetensors", "windows.npz"
PART_BYTES = 15 << 20  # a file that comes back from a lent GPU machine holds at most 16 MiB
RECIPE = ("seed", "squad", "molweni", "friendsqa", "no_answer", "wrong_speaker", "paired", "updates", "frozen", "batch",
          "lr", "epochs", "warmup")
CURVE_SETS = (("friendsqa_dev", None), ("molweni_dev", None), ("squad_v1.1_dev", None), ("squad_v2.0_dev", "2/2"))


# ---------------------------------------------------------------------------- the windows, saved once

def save_windows(path: Path, rows: list, recipe: dict) -> None:
    """The tokenized windows (the token ids xz-compressed: a dialogue's windows repeat it) and their recipe."""
    lengths = np.array([len(r[0]) for r in rows], dtype=np.int32)
    ids = np.concatenate([np.asarray(r[0], np.uint16) for r in rows])
    partial = path.with_name(path.name + ".partial.npz")
    np.savez_compressed(partial, ids_xz=np.frombuffer(lzma.compress(ids.tobytes()), np.uint8), lengths=lengths,
                        labels=np.array([r[1:4] for r in rows], dtype=np.int16),
                        recipe=np.array(json.dumps(recipe, sort_keys=True)))
    os.replace(partial, path)


def load_windows(path: Path) -> tuple[list, str]:
    """The rows :func:`save_windows` saved, and the recipe that made them."""
    saved = np.load(path)
    ends = np.cumsum(saved["lengths"])
    ids = np.frombuffer(lzma.decompress(saved["ids_xz"].tobytes()), np.uint16)
    rows = [(ids[end - n:end].astype(np.int64).tolist(), *map(int, label))
            for end, n, label in zip(ends, saved["lengths"], saved["labels"], strict=True)]
    return rows, str(saved["recipe"])


def windows_of(args, recipe: dict, folder: Path) -> list:
    """The run's windows: saved in its folder, or a bundle's, or built now (seeded) and saved."""
    saved = folder / WINDOWS
    if saved.exists():
        return load_windows(saved)[0]
    if args.bundle is not None:
        rows = load_windows(args.bundle / WINDOWS)[0]
    else:
        rng = random.Random(args.seed)
        rows = report(training_windows(WordPiece.from_file(model_files() / "tokenizer.json"), args, rng))
    save_windows(saved, rows, recipe)
    return rows


def make_bundle(folder: Path, args, recipe: dict) -> None:
    """What a lent GPU machine needs and has not (PyTorch, but no registry, no data, and a call carries 64 MiB
    with the working tree): the windows, and the base model's layers the package does not ship, fp16."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(args.seed)
    save_windows(folder / WINDOWS, report(training_windows(WordPiece.from_file(model_files() / "tokenizer.json"),
                                                           args, rng)), recipe)
    shipped = set(read_safetensors(OUT))
    base = {k: np.asarray(v, dtype=np.float16) for k, v in read_safetensors(model_files() / "model.safetensors").items()
            if k not in shipped and not k.startswith("pooler.") and "position_ids" not in k}
    write_safetensors(folder / BUNDLE_BASE, base, {"base": "all-MiniLM-L6-v2", "dtype": "float16"})
    size = sum(p.stat().st_size for p in folder.iterdir())
    print(f"wrote {folder}: {size / 2**20:.1f} MiB (the working tree and this travel together, 64 MiB at most)")


# ---------------------------------------------------------------------------- training, step by step

def optimizer_for(reader: Reader, frozen: int, lr: float, steps: int, warmup: float):
    for name, p in reader.named_parameters():
        p.requires_grad = name.startswith("qa_outputs.") or (
            name.startswith("encoder.layer.") and int(name.split(".")[2]) >= frozen)
    params = [p for p in reader.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW([{"params": [p for p in params if p.dim() > 1], "weight_decay": 0.01},
                                   {"params": [p for p in params if p.dim() <= 1], "weight_decay": 0.0}], lr=lr)
    warm = max(int(steps * warmup), 1)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min((s + 1) / warm, max(steps - s, 0) / max(steps - warm, 1)))
    return params, optimizer, schedule


def train(run: Run, reader: Reader, rows: list, args, sitting: Sitting) -> dict:
    """Train from the run's checkpoint (or from the start) until the plan is done or the sitting must stop;
    the state it stopped in (checkpointed)."""
    state = run.load()
    if state is None:
        rng = random.Random(args.seed)
        plan = [b for _ in range(args.epochs) for b in batches(rows, args.batch, rng)]
        state = {"plan": plan, "step": 0, "seconds": 0.0, "sittings": 0, "python_random": rng.getstate()}
    else:
        reader.load_state_dict(state["model"])
        torch.set_rng_state(state["torch_random"])
    plan = state["plan"]
    params, optimizer, schedule = optimizer_for(reader, args.frozen, args.lr, len(plan), args.warmup)
    if "optimizer" in state:
        optimizer.load_state_dict(state["optimizer"])
        schedule.load_state_dict(state["schedule"])
    state["sittings"] += 1
    per_epoch = len(plan) // args.epochs
    run.log({"kind": "sitting", "sitting": state["sittings"], "from_step": state["step"], "steps": len(plan),
             "device": device_name(args.device), "threads": torch.get_num_threads(), "at": time.time()})
    print(f"sitting {state['sittings']}: step {state['step']} of {len(plan)} ({len(rows)} windows, {per_epoch} steps "
          f"an epoch), {state['seconds'] / 3600:.2f} h trained so far", flush=True)

    def checkpoint() -> None:
        state.update(model=reader.state_dict(), optimizer=optimizer.state_dict(), schedule=schedule.state_dict(),
                     torch_random=torch.get_rng_state())
        run.save(state)

    reader.train()
    saved_at, shown, began = time.monotonic(), None, time.monotonic()
    why = None
    while state["step"] < len(plan):
        if why := sitting.why_stop():
            break
        tick = time.monotonic()
        loss = loss_of(reader, rows, plan[state["step"]], args.frozen, args.device)
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        schedule.step()
        state["step"] += 1
        state["seconds"] += time.monotonic() - tick
        sitting.done += 1
        shown = loss.item() if shown is None else 0.98 * shown + 0.02 * loss.item()
        step = state["step"]
        if step % 50 == 0 or step == len(plan):
            spent = time.monotonic() - began
            print(f"step {step}/{len(plan)} loss {shown:.3f} {spent / sitting.done:.2f} s/step, "
                  f"{spent / sitting.done * (len(plan) - step) / 3600:.1f} h left", flush=True)
        if step % args.snapshot_every == 0 or step % per_epoch == 0 or step == len(plan):
            checkpoint()
            saved_at = time.monotonic()
            snapshot(run, reader, args, state, step / per_epoch)
            reader.train()
        elif time.monotonic() - saved_at >= args.checkpoint_minutes * 60:
            checkpoint()
            saved_at = time.monotonic()
    why = why or "the plan is done"
    checkpoint()
    reader.eval()
    run.log({"kind": "stop", "step": state["step"], "seconds": state["seconds"], "why": why, "at": time.time()})
    print(f"stopped at step {state['step']} of {len(plan)} ({why}); {state['seconds'] / 3600:.2f} h trained; "
          f"checkpoint in {run.folder}", flush=True)
    return state


def device_name(device: str) -> str:
    return torch.cuda.get_device_name() if device == "cuda" else f"{platform.processor() or platform.machine()} cpu"


def run_metadata(args, state: dict, epoch: float) -> dict[str, str]:
    return {"frozen_layers": str(args.frozen), "base": "all-MiniLM-L6-v2", "seed": str(args.seed),
            "recipe": json.dumps(recipe_of(args), sort_keys=True), "step": str(state["step"]),
            "epoch": f"{epoch:.3f}", "train_seconds": f"{state['seconds']:.0f}", "sittings": str(state["sittings"]),
            "start": "the shipped reader"}


def snapshot(run: Run, reader: Reader, args, state: dict, epoch: float) -> None:
    """The weights now as the package would ship them, and their held-out scores on the curve's sets."""
    folder = run.path("snapshots")
    folder.mkdir(exist_ok=True)
    path = folder / f"step{state['step']:06d}.safetensors"
    write_safetensors(path, shipped_weights(reader, args.frozen), run_metadata(args, state, epoch))
    if args.curve_limit:
        run.log({"kind": "curve", "step": state["step"], "epoch": round(epoch, 3), "seconds": round(state["seconds"]),
                 "snapshot": path.name, **held_out(path, args.curve_limit)})


def held_out(weights: Path, limit: int) -> dict:
    """F1 (and "none" right) of ``memcli eval qa`` with these weights, a seeded sample of each curve set, and the
    judgements the training shapes teach, held out (:mod:`heldout`)."""
    from memcli.eval.qa import evaluate
    from memcli.qa.model import Reader as NumpyReader

    reader, began, out = NumpyReader(path=weights), time.monotonic(), {}
    for name, part in CURVE_SETS:
        path = DATA / f"{name}.json.gz"
        if path.exists():
            scored = evaluate([path], limit=limit, part=part, reader=reader).files[0]
            out[name] = {"f1": scored["f1"], "none_right": scored["no_answer_right"],
                         "best_threshold": scored["best_threshold"], "f1_at_best": scored["f1_at_best_threshold"]}
    import heldout

    out["shapes"] = heldout.score(weights, heldout.shapes(limit))
    out["eval_seconds"] = round(time.monotonic() - began)
    return out


# ---------------------------------------------------------------------------- the package's weights

FIXTURE_INPUTS = [
    ("Who offered to help?", "[2024-03-03 18:40] Priya: I can take the kids on Friday.\nCaroline: Thanks!"),
    ("What colour is the sky?", "The sky is blue on a clear day, and grey when it rains."),
    ("Where did she go?", "Dalia: I play tennis now.\nMarco: Nice."),
]


def export(paths: list[Path], folder: Path | None = None) -> None:
    """Weights this script wrote (a snapshot, or a lent machine's parts) as the package's, with the fixture the
    numpy test compares with (what torch gives on fixed inputs); ``folder``: both written there instead."""
    out, fixture = (OUT, FIXTURE) if folder is None else (folder / OUT.name, folder / FIXTURE.name)
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
    reader = shipped_reader()
    load_weights(reader, paths)
    meta = {k: v for p in paths for k, v in read_metadata(p).items()}
    trained = {k: v for p in paths for k, v in read_safetensors(p).items()}
    write_safetensors(out, {k: np.asarray(v, dtype=np.float16) for k, v in trained.items()}, meta)
    tokenizer = WordPiece.from_file(model_files() / "tokenizer.json")
    cases = []
    reader.eval()
    with torch.no_grad():
        for question, passage in FIXTURE_INPUTS:
            w = features.windows(tokenizer, question, passage)[0]
            ids = torch.tensor([w.ids])
            start, end = reader(ids, torch.tensor([w.types]), torch.ones(ids.shape), 0)
            cases.append({"question": question, "passage": passage, "ids": w.ids,
                          "start": [round(float(x), 5) for x in start[0]], "end": [round(float(x), 5) for x in end[0]]})
    write_atomic(fixture, (json.dumps({"weights_sha256": sha256(out), "cases": cases}, indent=1) + "\n").encode())
    print(f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB) and {fixture}")


def read_metadata(path: Path) -> dict[str, str]:
    from memcli.qa.model import metadata

    return metadata(path)


def write_parts(folder: Path, shipped: dict[str, np.ndarray], meta: dict[str, str]) -> list[Path]:
    """The weights as files of at most :data:`PART_BYTES` (what comes back from a lent machine); ``--export``
    them all."""
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


def show_curve(run_dir: Path) -> None:
    """The run's held-out scores against training time, one line a snapshot (a Markdown table)."""
    path = run_dir.expanduser() / "log.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    names = [n for n, _ in CURVE_SETS]
    print("| step | epoch | hours | " + " | ".join(f"{n} F1" for n in names)
          + " | someone else said it: none | the speaker said it: F1 | a value said again: F1 (the earlier given) |")
    print("|---" * (6 + len(names)) + "|")
    for r in (r for r in rows if r.get("kind") == "curve"):
        cells = [f"{r[n]['f1']:.3f}" + (f" ({r[n]['none_right']:.2f})" if r[n].get("none_right") is not None else "")
                 if n in r else "-" for n in names]
        shapes = r.get("shapes") or {}
        cells.append(f"{shapes['someone else said it']['none_right']:.3f}" if shapes else "-")
        cells.append(f"{shapes['the speaker said it']['f1']:.3f}" if "the speaker said it" in shapes else "-")
        again = shapes.get("a value said again")
        cells.append(f"{again['f1']:.3f} ({again['gave_the_earlier']:.3f})" if again else "-")
        print(f"| {r['step']} | {r['epoch']} | {r['seconds'] / 3600:.2f} | " + " | ".join(cells) + " |")


# ---------------------------------------------------------------------------- main

def recipe_of(args) -> dict:
    return {k: getattr(args, k) for k in RECIPE} | {"bundle": args.bundle is not None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--run-dir", type=Path, default=DEFAULT_DIR, help="the run's folder (default: %(default)s)")
    parser.add_argument("--budget", default=None, help="stop cleanly after this long (3600, 90m, 2h30m)")
    parser.add_argument("--steps", type=int, default=None, help="stop cleanly after this many steps this sitting")
    parser.add_argument("--checkpoint-minutes", type=float, default=5.0)
    parser.add_argument("--snapshot-every", type=int, default=1000, help="steps between snapshots (and epoch ends)")
    parser.add_argument("--curve-limit", type=int, default=300, help="questions a held-out set each snapshot (0: none)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--nice", type=int, default=19, help="run at this niceness (a background job: 19)")
    parser.add_argument("--device", default="cpu", help="torch device: cpu, cuda")
    recipe = parser.add_argument_group("the recipe (fixed for a run: its folder refuses others)")
    recipe.add_argument("--seed", type=int, default=1)
    recipe.add_argument("--squad", type=int, default=87599, help="SQuAD 1.1 train questions (all: 87,599)")
    recipe.add_argument("--molweni", type=int, default=24682, help="Molweni train questions (all)")
    recipe.add_argument("--friendsqa", type=int, default=9874, help="FriendsQA train questions (all)")
    recipe.add_argument("--no-answer", type=float, default=0.33, help="share of questions with a no-answer window")
    recipe.add_argument("--wrong-speaker", type=float, default=0.5,
                        help="share of the dialogue questions naming their answer's speaker asked of another (no answer)")
    recipe.add_argument("--unpaired", dest="paired", action="store_false",
                        help="the someone-else-said-it questions without the same question asked as it was (the first "
                        "run's recipe: measured worse, docs/reader.md)")
    recipe.add_argument("--updates", type=int, default=12000, help="questions read with their value said again later")
    recipe.add_argument("--frozen", type=int, default=0, help="lowest layers not trained")
    recipe.add_argument("--batch", type=int, default=32)
    recipe.add_argument("--lr", type=float, default=5e-5)
    recipe.add_argument("--epochs", type=int, default=2)
    recipe.add_argument("--warmup", type=float, default=0.03, help="share of the steps that warm up")
    recipe.add_argument("--bundle", type=Path, default=None, help="a bundle's windows and base (a lent GPU machine)")
    actions = parser.add_mutually_exclusive_group()
    actions.add_argument("--make-bundle", type=Path, default=None, help="write what a lent GPU machine needs, and stop")
    actions.add_argument("--export", type=Path, nargs="+", default=None,
                         help="make these weights (a snapshot, or parts) the package's, with the test fixture")
    actions.add_argument("--curve", action="store_true", help="print the run's held-out curve, and stop")
    parser.add_argument("--out", type=Path, default=None, help="also write the weights as parts of at most 15 MiB here "
                        "when the sitting stops (what comes back from a lent machine); with --export, write the "
                        "weights and the fixture here, not into the package")
    args = parser.parse_args()
    if args.curve:
        return show_curve(args.run_dir)
    if args.export is not None:
        return export(args.export, args.out)
    if args.make_bundle is not None:
        return make_bundle(args.make_bundle, args, recipe_of(args))
    os.nice(max(args.nice - os.nice(0), 0))
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    sitting = Sitting(parse_budget(args.budget), args.steps)
    run = Run(args.run_dir, recipe_of(args))
    rows = windows_of(args, recipe_of(args), run.folder)
    reader = shipped_reader(args.bundle / BUNDLE_BASE if args.bundle is not None else None).to(args.device)
    state = train(run, reader, rows, args, sitting)
    if args.out is not None:
        epoch = state["step"] / (len(state["plan"]) // args.epochs)
        paths = write_parts(args.out, shipped_weights(reader, args.frozen), run_metadata(args, state, epoch))
        print(f"wrote {', '.join(map(str, paths))}")


if __name__ == "__main__":
    try:
        main()
    except RunError as exc:
        print(exc.code, file=sys.stderr)
        sys.exit(2)
