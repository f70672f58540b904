"""Test-only hooks for the memcli processes the tests start (conftest.py puts this folder on their
PYTHONPATH; Python imports ``sitecustomize`` at start-up), so memcli's own modules hold no test code.
Nothing happens unless one of these is set:

* ``MEMCLI_TEST_COMMIT_PAUSE=S``: a pause of S seconds before each rename of a commit (each operation
  of :func:`memcli.store.atomic._apply`), so a kill lands inside a commit's renames;
* ``MEMCLI_TEST_JOB_HOLD=FILE``: a consolidation job waits before flush N while FILE exists and holds a
  number no greater than N (ten minutes at most), so a test acts on a job that is certainly mid-run.
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


if float(os.environ.get("MEMCLI_TEST_COMMIT_PAUSE", "0") or 0):
    _pause_commits(float(os.environ["MEMCLI_TEST_COMMIT_PAUSE"]))
if os.environ.get("MEMCLI_TEST_JOB_HOLD"):
    _hold_jobs(os.environ["MEMCLI_TEST_JOB_HOLD"])
