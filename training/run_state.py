"""A training run that spans sittings: its folder outside the work tree, one process at a time training it,
checkpoints written atomically (the previous one kept until the next is whole), a time budget, and a clean
stop on SIGTERM or Ctrl-C (the step under way finishes, then a checkpoint, then exit 0)."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import time
from pathlib import Path

import torch

DEFAULT_DIR = Path(os.environ.get("MEMCLI_TRAIN_DIR") or Path.home() / ".cache" / "memcli-train" / "reader")
CHECKPOINT, PREVIOUS, PARTIAL = "checkpoint.pt", "checkpoint.prev.pt", "checkpoint.partial"


class RunError(SystemExit):
    """A run that cannot go on as asked (exit 2 with the reason)."""

    def __init__(self, message: str):
        super().__init__(f"train_reader: {message}")


class Run:
    """The folder of one run: ``recipe.json`` (what it trains, fixed at its start), ``windows.npz`` (the data,
    built once), ``checkpoint.pt`` (weights, optimizer, schedule, the batch plan and where it stands, random
    states, seconds spent), ``log.jsonl`` (sittings and the held-out curve), ``snapshots/`` (fp16 weights)."""

    def __init__(self, folder: Path, recipe: dict):
        self.folder = folder.expanduser()
        self.folder.mkdir(parents=True, exist_ok=True)
        self._lock = open(self.folder / "lock", "a+")  # noqa: SIM115: held for the process's life
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise RunError(f"{self.folder} is being trained by another process (its lock is held)") from None
        saved = self.folder / "recipe.json"
        if saved.exists():
            before = json.loads(saved.read_text())
            if before != recipe:
                changed = sorted(k for k in set(before) | set(recipe) if before.get(k) != recipe.get(k))
                raise RunError(f"{self.folder} holds a run of another recipe ({', '.join(changed)} differ): "
                               "continue it with the same options, or give another --run-dir")
        else:
            write_atomic(saved, json.dumps(recipe, indent=1, sort_keys=True).encode())

    def path(self, name: str) -> Path:
        return self.folder / name

    def load(self) -> dict | None:
        """The newest whole checkpoint (the previous one when the newest cannot be read), or None."""
        for name in (CHECKPOINT, PREVIOUS):
            path = self.folder / name
            if path.exists():
                try:
                    return torch.load(path, map_location="cpu", weights_only=False)
                except (OSError, RuntimeError, EOFError, ValueError) as exc:
                    print(f"{path} cannot be read ({exc}); trying the one before", flush=True)
        return None

    def save(self, state: dict) -> None:
        """Write a checkpoint whole: to a partial file, synced, then the current one becomes the previous."""
        partial = self.folder / PARTIAL
        with open(partial, "wb") as handle:
            torch.save(state, handle)
            handle.flush()
            os.fsync(handle.fileno())
        current = self.folder / CHECKPOINT
        if current.exists():
            os.replace(current, self.folder / PREVIOUS)
        os.replace(partial, current)
        sync_dir(self.folder)

    def log(self, record: dict) -> None:
        with open(self.folder / "log.jsonl", "a") as handle:
            handle.write(json.dumps(record, sort_keys=True) + "\n")

    def records(self, kind: str) -> list[dict]:
        path = self.folder / "log.jsonl"
        if not path.exists():
            return []
        return [r for line in path.read_text().splitlines() if line.strip() and (r := json.loads(line)).get("kind") == kind]


def write_atomic(path: Path, data: bytes) -> None:
    partial = path.with_name(path.name + ".partial")
    with open(partial, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(partial, path)
    sync_dir(path.parent)


def sync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Sitting:
    """This process's share of the run: stop when the budget is spent or a stop signal came."""

    def __init__(self, budget: float | None, steps: int | None):
        self.began = time.monotonic()
        self.budget, self.steps, self.done = budget, steps, 0
        self.signalled: str | None = None
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._stop)

    def _stop(self, signum, frame) -> None:
        self.signalled = signal.Signals(signum).name

    def why_stop(self) -> str | None:
        if self.signalled:
            return self.signalled
        if self.budget is not None and time.monotonic() - self.began >= self.budget:
            return f"the budget of {self.budget:.0f} s is spent"
        if self.steps is not None and self.done >= self.steps:
            return f"{self.steps} steps this sitting"
        return None


def parse_budget(text: str | None) -> float | None:
    """``90m``, ``2h30m``, ``3600`` (seconds) -> seconds."""
    if text is None:
        return None
    import re

    found = re.fullmatch(r"\s*(?:(\d+(?:\.\d+)?)h)?\s*(?:(\d+(?:\.\d+)?)m)?\s*(?:(\d+(?:\.\d+)?)s?)?\s*", text)
    if not found or not any(found.groups()):
        raise RunError(f"--budget {text!r}: give seconds, or hours and minutes as 2h30m")
    h, m, s = (float(g or 0) for g in found.groups())
    return h * 3600 + m * 60 + s
