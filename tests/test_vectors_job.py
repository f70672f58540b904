"""No cold wait: after a write the entries' vectors are computed by a detached job; a question in the meantime
ranks the entries it has not reached by their words and says so; a killed job resumes where it stopped.
Real processes, the real sentence-embedding model, a real LoCoMo conversation."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import LOCOMO, needs_locomo, run_memcli

from memcli.semantic import job as vectors_job

BACKGROUND = {"MEMCLI_VECTORS": "background"}


def texts_stored(folder: Path) -> int:
    try:
        with sqlite3.connect(folder / "vectors.sqlite", timeout=30) as db:
            return db.execute("SELECT COUNT(*) FROM texts").fetchone()[0]
    except sqlite3.Error:
        return 0


def cache_folder(store: Path) -> Path:
    status = run_memcli("--store", store, "status", "--json", env=BACKGROUND)
    return Path(status.json["index_cache"])


@pytest.mark.slow  # a fast-tier budget of 5 minutes; CI runs it
@needs_locomo
def test_a_question_right_after_a_long_ingest_does_not_wait_for_vectors(tmp_path):
    store = tmp_path / "s"
    done = run_memcli("--store", store, "ingest", LOCOMO / "conv-26.json", "--sample", "conv-26", "--json",
                      env=BACKGROUND)
    assert done.code == 0 and done.json["added"] == 419
    asked = run_memcli("--store", store, "ask", "What did Caroline research?", "--evidence-only", "--json",
                       env=BACKGROUND)
    assert asked.code == 0, asked.stderr
    assert asked.json["evidence"] and asked.json["timings"]["embed_s"] == 0.0  # ranked without computing any
    assert asked.json["unembedded"] > 0 and "no vector yet" in asked.stderr
    status = run_memcli("--store", store, "status", "--json", env=BACKGROUND).json["vectors"]
    assert status["missing"] > 0 or status["job"]["state"] in ("running", "done")
    # memcli embed waits for the job (or finishes what it left); then every entry ranks with its vector
    embedded = run_memcli("--store", store, "embed", "--json", env=BACKGROUND)
    assert embedded.code == 0 and embedded.json == {**embedded.json, "state": "done", "entries": 419}
    again = run_memcli("--store", store, "ask", "What did Caroline research?", "--evidence-only", "--json",
                       env=BACKGROUND)
    assert again.code == 0 and again.json["unembedded"] == 0 and "no vector yet" not in again.stderr
    # a second job (the first question's, started before the ingest's had taken its lock) may run after embed
    # returned, finding nothing left to compute: what the jobs say is read once none runs
    folder, deadline = cache_folder(store), time.monotonic() + 120
    while vectors_job.running(folder) is not None and time.monotonic() < deadline:
        time.sleep(0.2)
    job = json.loads((folder / "vectors.json").read_text())
    assert job["state"] == "done" and job["entries"] == 419


@pytest.mark.slow
@needs_locomo
def test_a_killed_job_resumes_from_its_last_chunk(tmp_path):
    store = tmp_path / "s"
    assert run_memcli("--store", store, "ingest", LOCOMO / "conv-26.json", "--sample", "conv-26",
                      env={"MEMCLI_VECTORS": "inline"}).code == 0  # inline: no job is started by the ingest
    folder = cache_folder(store)
    worker = subprocess.Popen([sys.executable, "-m", "memcli", "--store", str(store), "embed", "--worker", "--json",
                               "--index-dir", str(folder)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              env={**os.environ, **BACKGROUND})
    deadline = time.monotonic() + 300
    while texts_stored(folder) < 256 and worker.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    worker.send_signal(signal.SIGKILL)
    worker.wait()
    kept = texts_stored(folder)
    assert kept >= 256, "the first chunk was stored before the kill"
    status = run_memcli("--store", store, "status", "--json", env=BACKGROUND).json["vectors"]
    assert status["missing"] > 0 and (status["job"] or {}).get("state") != "done"
    resumed = run_memcli("--store", store, "embed", "--worker", "--json", "--index-dir", folder, env=BACKGROUND)
    assert resumed.code == 0, resumed.stderr
    total = texts_stored(folder)
    assert resumed.json["state"] == "done" and resumed.json["embedded"] == total - kept  # only what was missing
    assert run_memcli("--store", store, "status", "--json", env=BACKGROUND).json["vectors"]["missing"] == 0


@pytest.mark.slow  # 3-4 s: the fast tier keeps within 5 minutes
def test_a_few_new_texts_are_embedded_by_the_question_itself(tmp_path):
    """A short session leaves few texts to embed: the question computes them (no ranking by words alone)."""
    store = tmp_path / "s"
    chat = [{"speaker": "Ana", "text": "We adopted a greyhound called Biscuit.", "time": "2024-05-01T10:00"},
            {"speaker": "Ben", "text": "Lovely! How is she settling in?", "time": "2024-05-01T10:01"}]
    (tmp_path / "chat.json").write_text(json.dumps(chat))
    assert run_memcli("--store", store, "ingest", tmp_path / "chat.json", env=BACKGROUND).code == 0
    asked = run_memcli("--store", store, "ask", "Which pet dog does Ana have?", "--evidence-only", "--json",
                       env=BACKGROUND)
    assert asked.code == 0 and asked.json["unembedded"] == 0 and "Biscuit" in json.dumps(asked.json["evidence"])


@pytest.mark.slow
@needs_locomo
def test_writers_do_not_wait_for_the_job_and_it_covers_what_they_wrote(tmp_path):
    """The job holds the store's lock only while it reads documents: an ingest that waits at most 2 s for
    the lock succeeds while the job embeds, and the job's next pass embeds what that ingest added."""
    store = tmp_path / "s"
    assert run_memcli("--store", store, "ingest", LOCOMO / "conv-26.json", "--sample", "conv-26",
                      env={"MEMCLI_VECTORS": "inline"}).code == 0
    folder = cache_folder(store)
    worker = subprocess.Popen([sys.executable, "-m", "memcli", "--store", str(store), "embed", "--worker", "--json",
                               "--index-dir", str(folder)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              env={**os.environ, **BACKGROUND})
    deadline = time.monotonic() + 300
    while texts_stored(folder) == 0 and worker.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    chat = [{"speaker": "Ana", "text": "The new kiln arrives on Friday.", "time": "2024-05-01T10:00"}]
    (tmp_path / "chat.json").write_text(json.dumps(chat))
    added = run_memcli("--store", store, "ingest", tmp_path / "chat.json", "--json",
                       env={"MEMCLI_VECTORS": "inline", "MEMCLI_LOCK_TIMEOUT": "2"})
    assert worker.poll() is None, "the job was still embedding"
    assert added.code == 0 and added.json["added"] == 1, added.stderr
    out, err = worker.communicate(timeout=600)
    assert worker.returncode == 0, err
    assert json.loads(out)["state"] == "done"
    assert run_memcli("--store", store, "status", "--json", env=BACKGROUND).json["vectors"]["missing"] == 0


def test_the_job_keeps_numpy_to_half_the_cores_unless_told(monkeypatch):
    from memcli import cpu

    for name in cpu.BLAS_THREADS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(cpu.os, "cpu_count", lambda: 8)
    assert {name: cpu.background_environment()[name] for name in cpu.BLAS_THREADS} == dict.fromkeys(cpu.BLAS_THREADS, "4")
    monkeypatch.setattr(cpu.os, "cpu_count", lambda: 1)
    assert cpu.background_environment()["OPENBLAS_NUM_THREADS"] == "1"
    monkeypatch.setenv("OMP_NUM_THREADS", "3")  # the user's own choice stands
    assert cpu.background_environment()["OMP_NUM_THREADS"] == "3"
