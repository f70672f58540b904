"""Ingest never waits for a long consolidation: quick deterministic consolidation inline, a model's in a
detached background process that holds the job lock, can be waited for or stopped, lets ingests in, and
loses nothing when killed at any moment."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import EXAMPLES

from memcli import Memory
from memcli.consolidate import job
from memcli.ingest.turns import Turn
from memcli.store.census import seq_counts

CONV = EXAMPLES / "caroline-and-priya.json"


def memcli(root, *args, env=None):
    """The real command in a subprocess, with automatic consolidation on (the test environment turns it off)."""
    return subprocess.run([sys.executable, "-m", "memcli", "--store", str(root), *map(str, args)],
                          capture_output=True, text=True,
                          env={**os.environ, "MEMCLI_AUTO_CONSOLIDATE": "true", **(env or {})})


def turns(n: int, tag: str) -> list[Turn]:
    return [Turn(text=f"{tag} note {i}: the blue kettle is on shelf {i}", time=f"2024-05-0{1 + i % 9}T10:00",
                 speaker="Sam") for i in range(n)]


def hold(tmp_path, flush: int) -> dict:
    """The environment that makes a consolidation job wait before its flush ``flush`` until released."""
    (tmp_path / "hold").write_text(str(flush))
    return {"MEMCLI_TEST_JOB_HOLD": str(tmp_path / "hold")}


def _waiting(pid: int) -> bool:
    """Whether the process has got as far as polling for the job (it sleeps between looks, with the
    consolidation modules loaded): seen from outside, it has been alive a second and is asleep."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text().split()
    except OSError:
        return True
    ticks = os.sysconf("SC_CLK_TCK")
    started = int(stat[21]) / ticks
    uptime = float(Path("/proc/uptime").read_text().split()[0])
    return stat[2] == "S" and uptime - started > 1.0


def release(tmp_path) -> None:
    (tmp_path / "hold").unlink()


def every_seq_once(root, n: int) -> None:
    counts = seq_counts(root)
    assert sorted(counts) == list(range(1, n + 1)) and set(counts.values()) == {1}, counts


def test_small_profile_consolidates_inline_and_quickly(tmp_path):
    root = tmp_path / "store"
    proc = memcli(root, "ingest", CONV, "--json", env={"MEMCLI_CONSOLIDATE_TOKENS": "400"})
    assert proc.returncode == 0, proc.stderr
    done = json.loads(proc.stdout)["consolidation"]
    assert done["llm"] is False and done["entries_consolidated"] == 25 and not done.get("background")
    every_seq_once(root, 25)
    assert Memory(root).consolidation_status()["state"] == "finished"


@pytest.mark.slow  # a fast-tier budget of 5 minutes; CI runs it
def test_background_consolidation_commits_the_ingest_first_and_can_be_waited_for(tmp_path):
    root = tmp_path / "store"
    env = {"MEMCLI_CONSOLIDATE_TOKENS": "300", "MEMCLI_CONSOLIDATE_BACKGROUND": "always",
           **hold(tmp_path, 1)}  # the job waits before its first flush: certainly running below
    proc = memcli(root, "ingest", CONV, "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    started = json.loads(proc.stdout)["consolidation"]
    assert started["background"] is True and started["pid"] > 0
    every_seq_once(root, 25)  # the ingest's own entries were committed before it printed its summary
    now = Memory(root).consolidation_status()
    assert now["running"] and now["pid"] == started["pid"] and now["background"]
    status = memcli(root, "status")
    assert "running:      consolidation, process" in status.stdout
    again = memcli(root, "consolidate", "--json")  # a second consolidation is refused, with the reason
    assert again.returncode != 0 and "already running" in again.stderr
    # the waiter starts while the job is still held, so it finds it running and waits for it to end
    waiter = subprocess.Popen([sys.executable, "-m", "memcli", "--store", str(root), "consolidate", "--wait", "--json"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env={**os.environ, "MEMCLI_AUTO_CONSOLIDATE": "true", **env})
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not _waiting(waiter.pid):
        time.sleep(0.1)
    release(tmp_path)
    out, err = waiter.communicate(timeout=300)
    assert waiter.returncode == 0, err
    final = json.loads(out)["job"]
    assert final["state"] == "finished" and final["result"]["entries_consolidated"] == 25
    every_seq_once(root, 25)
    assert Memory(root).status().current_entries == 0
    assert "background consolidation" in (root / job.LOG).read_text()
    assert memcli(root, "consolidate", "--wait").stdout.strip() == "no consolidation is running"


@pytest.mark.slow
def test_an_ingest_during_a_background_consolidation_is_kept(tmp_path):
    root = tmp_path / "store"
    env = {"MEMCLI_CONSOLIDATE_TOKENS": "300", "MEMCLI_CONSOLIDATE_BACKGROUND": "always", **hold(tmp_path, 2)}
    assert memcli(root, "ingest", CONV, env=env).returncode == 0
    assert job.running(root) is not None
    late = Memory(root, settings={"consolidate.threshold_tokens": 300, "consolidate.auto": True})
    added = late.ingest(turns(12, "late"))  # during the run: committed at once, no second job
    assert added.added == 12 and added.consolidation is None  # the running job is not started twice
    release(tmp_path)
    Memory(root).wait_for_consolidation()
    every_seq_once(root, 37)
    memory = Memory(root)
    left = {e.seq for _, e in memory.store.load("CURRENT").doc.entries()}
    assert left <= set(range(26, 38))  # what came in during the run waits for the next consolidation
    assert "late note 3" in " ".join(e.text for e in memory.ask("blue kettle shelf 3", reader="evidence-only").evidence)


@pytest.mark.slow  # 3-4 s: the fast tier keeps within 5 minutes
def test_stop_keeps_what_was_committed_and_the_rest_in_current(tmp_path):
    root = tmp_path / "store"
    env = {"MEMCLI_CONSOLIDATE_TOKENS": "300", "MEMCLI_CONSOLIDATE_BACKGROUND": "always", **hold(tmp_path, 2)}
    assert memcli(root, "ingest", CONV, env=env).returncode == 0
    while job.running(root) and (job.read_status(root) or {}).get("flush", 0) < 2:
        time.sleep(0.05)
    assert job.read_status(root)["flush"] == 2  # the first flush committed, held before the second
    stopped = memcli(root, "consolidate", "--stop", "--json")
    assert stopped.returncode == 0, stopped.stderr
    assert json.loads(stopped.stdout)["job"]["state"] == "stopped"
    every_seq_once(root, 25)
    left = Memory(root).status().current_entries
    assert 0 < left < 25  # stopped part-way: some flushes committed, the rest still in CURRENT
    assert Memory(root).consolidate(llm=False).entries_consolidated == left
    every_seq_once(root, 25)
    assert Memory(root).status().current_entries == 0


def _kill_at_random_points(tmp_path, env, trials: int, horizon: float, seed: int) -> int:
    rng = random.Random(seed)
    killed = 0
    for trial in range(trials):
        root = tmp_path / f"kill-{trial}"
        assert memcli(root, "ingest", CONV, env=env).returncode == 0
        pid = (job.running(root) or {}).get("pid")
        time.sleep(rng.uniform(0.0, horizon))
        hit = job.running(root) is not None and isinstance(pid, int)
        if hit:
            os.kill(pid, signal.SIGKILL)
            killed += 1
            while job.running(root) is not None:
                time.sleep(0.05)
        Memory(root).docs()  # a reader finishes the transaction the kill interrupted
        every_seq_once(root, 25)  # nothing lost, nothing twice, every document parses
        if trial % 2:  # a later ingest and consolidation finish the work
            Memory(root).ingest(turns(3, "after"), consolidate=False)
            Memory(root).consolidate(llm=False)
            every_seq_once(root, 28)
            assert Memory(root).status().current_entries == 0
        else:
            state = Memory(root).consolidation_status()["state"]
            if hit and state == "finished":  # the kill landed after the job said so, before it let go of the lock
                assert Memory(root).status().current_entries == 0
            else:
                assert state == ("killed" if hit else "finished")
    return killed


@pytest.mark.slow
def test_background_consolidation_killed_at_random_points_loses_nothing(tmp_path):
    env = {"MEMCLI_CONSOLIDATE_TOKENS": "300", "MEMCLI_CONSOLIDATE_BACKGROUND": "always",
           "MEMCLI_TEST_COMMIT_PAUSE": "0.15"}  # about 3 s of flushes to land in
    assert _kill_at_random_points(tmp_path, env, trials=8, horizon=3.0, seed=17) >= 4


@pytest.mark.slow
def test_background_model_consolidation_killed_at_random_points_loses_nothing(tmp_path):
    env = {"MEMCLI_CONSOLIDATE_TOKENS": "400", "MEMCLI_CONSOLIDATE_LLM": "true"}  # the real default model
    assert _kill_at_random_points(tmp_path, env, trials=4, horizon=20.0, seed=5) >= 2


def test_probing_for_a_running_job_never_refuses_a_new_one(tmp_path):
    import threading

    root = tmp_path / "store"
    Memory(root, create=True).remember("a note")
    stop = threading.Event()

    def probe():
        while not stop.is_set():
            job.running(root)  # what status and --wait do: a shared lock for an instant

    prober = threading.Thread(target=probe)
    prober.start()
    try:
        for _ in range(300):
            with job.Job(root):
                pass
    finally:
        stop.set()
        prober.join()
    assert job.read_status(root)["state"] == "finished"
