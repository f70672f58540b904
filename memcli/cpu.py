"""How many threads memcli's own compute may take: half the cores, at least one. With every core a
step of work waits for its slowest thread, so another busy program on the machine (or memcli's own
background job beside a question) slows it far more than having half."""

from __future__ import annotations

import os

BLAS_THREADS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")  # read when numpy loads its BLAS


def half_the_cores() -> int:
    return max(1, (os.cpu_count() or 2) // 2)


def background_environment() -> dict[str, str]:
    """The environment for a detached job that computes with numpy: its BLAS kept to half the cores
    (unless the user set its threads), so the user's commands keep the rest. Measured on 2 cores with
    questions asked while the vectors job ran (docs/benchmarks.md, "Entry vectors in the background")."""
    env = dict(os.environ)
    for name in BLAS_THREADS:
        env.setdefault(name, str(half_the_cores()))
    return env
