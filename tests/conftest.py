"""Shared fixtures: an isolated environment and a way to run the real CLI."""

from __future__ import annotations

import io
import json
import os
import random
import subprocess
import sys
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"
LOCOMO = SHARED / "data" / "locomo"
EXAMPLES = REPO / "examples"
SHIMS = Path(__file__).resolve().parent / "shims"

# tests that read the LoCoMo development conversations skip, saying why, when ../shared is not beside the checkout
# tests that check numpy's outputs against what torch recorded skip under tests/shims' MEMCLI_TEST_ROUNDING
exact_outputs = pytest.mark.skipif(bool(os.environ.get("MEMCLI_TEST_ROUNDING")),
                                   reason="MEMCLI_TEST_ROUNDING changes every transformer output on purpose")
needs_locomo = pytest.mark.skipif(not (LOCOMO / "conv-26.json").is_file(),
                                  reason=f"LoCoMo development data not found at {LOCOMO} (../shared beside the checkout)")


@pytest.fixture(autouse=True)
def isolated_env(tmp_path, monkeypatch):
    """No test touches a real home: store, config and cache all live in tmp_path."""
    for var in list(os.environ):
        if var.startswith("MEMCLI_") and var != "MEMCLI_TEST_ROUNDING":  # kept for the processes tests start
            monkeypatch.delenv(var)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg-data"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    # automatic consolidation is tested on its own; elsewhere an ingest only ingests
    monkeypatch.setenv("MEMCLI_AUTO_CONSOLIDATE", "false")
    # likewise the background vectors job (tests/test_vectors_job.py): elsewhere a question computes the
    # vectors it needs, so what it ranks does not depend on how far a detached process got
    monkeypatch.setenv("MEMCLI_VECTORS", "inline")
    # the suite runs alone on its machine, where every core is fastest (the default, half the cores, is
    # for machines shared with other work: tests/test_profile.py checks it)
    monkeypatch.setenv("MEMCLI_THREADS", str(os.cpu_count() or 1))
    # the test hooks (MEMCLI_TEST_COMMIT_PAUSE, MEMCLI_TEST_JOB_HOLD) live in tests/shims, which every memcli
    # process a test starts loads at start-up (memcli's own modules hold no test code)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(SHIMS), os.environ.get("PYTHONPATH")])))
    monkeypatch.chdir(tmp_path)
    return tmp_path


@dataclass
class Result:
    code: int
    stdout: str
    stderr: str

    @property
    def json(self):
        return json.loads(self.stdout)


@pytest.fixture
def store_dir(tmp_path) -> Path:
    return tmp_path / "store"


@pytest.fixture
def cli(store_dir, capsys, monkeypatch):
    """Run memcli in-process through its real entry point (argument parsing, error map)."""
    from memcli.cli import run

    def invoke(*args: str, stdin: bytes | None = None, store: bool = True) -> Result:
        argv = (["--store", str(store_dir)] if store else []) + [str(a) for a in args]
        if stdin is not None:
            monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
        capsys.readouterr()
        code = run(argv)
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return invoke


def run_memcli(*args: str, stdin: bytes | None = None, env: dict | None = None, cwd=None) -> Result:
    """Run the installed ``memcli`` in a subprocess (real process, real exit code)."""
    proc = subprocess.run([sys.executable, "-m", "memcli", *map(str, args)], input=stdin,
                          capture_output=True, env={**os.environ, **(env or {})}, cwd=cwd)
    return Result(proc.returncode, proc.stdout.decode(), proc.stderr.decode())


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (except the lock) with its bytes."""
    if not folder.exists():
        return {}
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and p.name != ".lock"}


@contextmanager
def small_disk(tmp_path, size: str):
    """A tmpfs of ``size`` (root can mount one here); skips where that is not allowed."""
    mount = tmp_path / f"disk-{size}"
    mount.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount)],
                      capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here (the injected-error test covers these failures)")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


# How far a steady answer's scores may move: another processor's float32 rounding moves the reader's margins by
# about 1e-4 (numpy's kernels sum in another order), so an outcome that survives moves 500 times that does not
# hang on the processor.
JITTER = 0.05


@contextmanager
def steady_reader(trials: int = 24, jitter: float = JITTER):
    """Every answer memcli's reader decides in this process within the block (``reading.decide``, as ``ask``
    calls it) is decided again ``trials`` times with each line's margin (read in windows and alone, and the gap to
    its second span) moved by up
    to +-``jitter`` and each likeness (of two spans, of a line to the question) by up to +-``jitter`` / 5; any
    other answer fails the test. A test that asserts what ``ask`` answers wraps it in this, so that what it
    asserts does not hang on a score margin another machine's rounding could turn over."""
    from memcli.retrieve import reading

    original, fragile = reading.decide, []

    def checked(question, library, lines, threshold, choice=reading.Choice(), restated=None, alike=None, alone=None):
        said = original(question, library, lines, threshold, choice, restated, alike, alone)
        rng = random.Random(question)
        for _ in range(trials):
            moved = sorted((replace(x, margin=x.margin + rng.uniform(-jitter, jitter),
                                    likeness=x.likeness + rng.uniform(-jitter / 5, jitter / 5),
                                    gap=x.gap + rng.uniform(-jitter, jitter)) for x in lines),
                           key=lambda x: -x.margin)
            bent: dict = {}

            def bent_alike(a, b, bent=bent):
                return alike(a, b) + bent.setdefault((a, b), rng.uniform(-jitter / 5, jitter / 5))

            alone_moved = alone and {key: replace(x, margin=x.margin + rng.uniform(-jitter, jitter))
                                     for key, x in alone.items()}  # the lines read alone, likewise
            again = original(question, library, moved, threshold, choice, restated, alike and bent_alike, alone_moved)
            if again.text != said.text:
                fragile.append(f"{question!r}: {said.text!r}, or {again.text!r} with the scores moved "
                               f"(best lines: {[(x.span, round(x.margin, 3)) for x in lines[:4]]})")
                break
        return said

    reading.decide = checked
    try:
        yield
    finally:
        reading.decide = original
    assert not fragile, "answers that hang on a margin a processor could flip: " + "; ".join(fragile)
