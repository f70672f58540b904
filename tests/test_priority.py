"""Foreground model work first: a background process's decoding waits while a foreground model is open
(and runs while chat waits for the user)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from memcli import joblock
from memcli.llm import priority

BACKGROUND = ("from memcli.llm import priority; priority.run_in_background(); "
              "priority.wait_turn(); print('computed', flush=True)")


@pytest.fixture
def fresh(monkeypatch, tmp_path):
    monkeypatch.setenv("MEMCLI_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(priority, "_state", {"background": False, "fd": None, "holds": 0, "idle": 0})
    yield
    if priority._state["fd"] is not None:
        priority._state["fd"] = priority.os.close(priority._state["fd"])


def background_step() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", BACKGROUND], stdout=subprocess.PIPE, text=True)


def blocked(proc: subprocess.Popen, seconds: float = 1.5) -> bool:
    time.sleep(seconds)
    return proc.poll() is None


def test_background_decoding_waits_for_the_foreground_model_and_runs_after_it(fresh):
    priority.hold()
    step = background_step()
    try:
        assert blocked(step)  # a foreground model is open: the background waits
        priority.release()
        assert step.wait(timeout=30) == 0 and step.stdout.read().strip() == "computed"
    finally:
        step.kill()


def test_the_background_runs_while_chat_waits_for_the_user(fresh):
    priority.hold()
    try:
        with priority.idle():
            step = background_step()
            assert step.wait(timeout=30) == 0  # the user is typing: the background computes
        step = background_step()
        assert blocked(step)  # the reply is being computed again: the background waits
        step.kill()
    finally:
        priority.release()


def test_nothing_waits_without_a_foreground_model_or_in_the_foreground(fresh):
    assert background_step().wait(timeout=30) == 0
    priority.wait_turn()  # a foreground process never waits for anyone


def test_a_real_model_holds_the_foreground_while_open(fresh):
    from memcli.llm.models import default_model_path
    from memcli.llm.runtime import LlamaRuntime

    runtime = LlamaRuntime(default_model_path(), n_ctx=256)
    try:
        step = background_step()
        assert blocked(step)
    finally:
        runtime.close()
    assert step.wait(timeout=30) == 0


AUTOGROUP = str(joblock.AUTOGROUP)


@pytest.mark.skipif(not joblock.AUTOGROUP.exists(), reason="a kernel without session scheduling groups")
def test_a_detached_job_is_niced_in_its_own_session_group_not_the_users():
    """Where the kernel groups a session's processes (``sched_autogroup_enabled``), a process's nice value
    orders it only within its session: a detached job yields to the user's command only if its session's
    group is niced too, and niced after it has that session of its own, not the user's."""
    mine = open(AUTOGROUP).read()
    child = subprocess.run([sys.executable, "-c", f"import os; print(open({AUTOGROUP!r}).read().split()[-1], "
                            "os.getpriority(os.PRIO_PROCESS, 0))"], capture_output=True, text=True, check=True,
                           start_new_session=True, preexec_fn=lambda: joblock.lower_priority(7))
    assert child.stdout.split() == ["7", str(min(19, os.getpriority(os.PRIO_PROCESS, 0) + 7))]
    assert open(AUTOGROUP).read() == mine  # the user's session keeps its priority
