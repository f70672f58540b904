"""Test-only hooks for the memcli processes the tests start (conftest.py puts this folder on their
PYTHONPATH; Python imports ``sitecustomize`` at start-up), so memcli's own modules hold no test code.
Nothing happens unless one of these is set:

* ``MEMCLI_TEST_COMMIT_PAUSE=S``: a pause of S seconds before each rename of a commit (each operation
  of :func:`memcli.store.atomic._apply`), so a kill lands inside a commit's renames;
* ``MEMCLI_TEST_JOB_HOLD=FILE``: a consolidation job waits before flush N while FILE exists and holds a
  number no greater than N (ten minutes at most), so a test acts on a job that is certainly mid-run;
* ``MEMCLI_TEST_ROUNDING=EPS``: every transformer output (the sentence encoder's and the reader's)
  multiplied by 1 + EPS times noise fixed by each text's own tokens: another processor's rounding,
  exaggerated. A test that fails under it asserts an outcome that hangs on a score margin:
  ``PYTHONPATH=tests/shims MEMCLI_TEST_ROUNDING=0.01 pytest -m "not slow"``.
"""

import os
import time
from pathlib import Path


def _pause_commits(pause: float) -> None:
    from memcli.store import atomic

    applying = [False]
    store_path, apply = atomic.store_path, atomic._apply

    def paused_store_path(root, relpath):
        if applying[0]:
            time.sleep(pause)  # _apply names each operation's file first: the pause comes before it
        return store_path(root, relpath)

    def paused_apply(root, ops):
        applying[0] = True
        try:
            return apply(root, ops)
        finally:
            applying[0] = False

    atomic.store_path, atomic._apply = paused_store_path, paused_apply


def _hold_jobs(hold: str) -> None:
    from memcli.consolidate import job

    begin = job.Job.begin_flush

    def held(self, flush: int, flushes: int) -> None:
        begin(self, flush, flushes)
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            try:
                if int(Path(hold).read_text().strip() or 1) > flush:
                    return
            except (OSError, ValueError):
                return
            time.sleep(0.05)

    job.Job.begin_flush = held


def _round_differently(eps: float) -> None:
    """Patch ``memcli.semantic.encoder.transformer`` when that module is first imported (not before: a
    command that needs no model imports no numpy)."""
    import importlib.abc
    import importlib.machinery
    import sys

    def patch(encoder) -> None:
        import hashlib

        import numpy as np

        transformer = encoder.transformer

        def rounded(weights, ids, mask, *rest):
            out = transformer(weights, ids, mask, *rest)
            for row in range(len(ids)):
                n = int(np.asarray(mask[row]).sum())  # the text's own tokens: the same noise in a batch or alone
                seed = int.from_bytes(hashlib.sha1(np.asarray(ids[row][:n], np.int64).tobytes()).digest()[:8],
                                      "little")
                noise = np.random.default_rng(seed).standard_normal((n, out.shape[-1]))
                out[row, :n] *= (1 + eps * noise).astype(out.dtype)
            return out

        encoder.transformer = rounded  # memcli.qa.model imports it from there, after this

    class Finder(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name != "memcli.semantic.encoder":
                return None
            spec = importlib.machinery.PathFinder.find_spec(name, path)
            if spec is not None and spec.loader is not None:
                execute = spec.loader.exec_module

                def exec_module(module):
                    execute(module)
                    patch(module)

                spec.loader.exec_module = exec_module
            return spec

    sys.meta_path.insert(0, Finder())


if float(os.environ.get("MEMCLI_TEST_ROUNDING", "0") or 0):
    _round_differently(float(os.environ["MEMCLI_TEST_ROUNDING"]))
if float(os.environ.get("MEMCLI_TEST_COMMIT_PAUSE", "0") or 0):
    _pause_commits(float(os.environ["MEMCLI_TEST_COMMIT_PAUSE"]))
if os.environ.get("MEMCLI_TEST_JOB_HOLD"):
    _hold_jobs(os.environ["MEMCLI_TEST_JOB_HOLD"])
