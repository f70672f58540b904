"""The OpenAI-compatible backend against a real server (llama-cpp-python's) on 127.0.0.1."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from conftest import EXAMPLES, run_memcli

from memcli.llm.models import default_model_path
from memcli.llm.openai_compat import OpenAICompatModel

pytestmark = [pytest.mark.server, pytest.mark.slow]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    port = _free_port()
    log = tmp_path_factory.mktemp("server") / "server.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).with_name("llama_server.py")), "--model", str(default_model_path()),
             "--model_alias", "smollm2", "--n_ctx", "4096", "--n_threads", "2", "--seed", "0",
             "--host", "127.0.0.1", "--port", str(port)],
            stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)})
    base = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(base + "/models", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("server did not start:\n" + log.read_text()[-2000:])
            time.sleep(0.5)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_schema_constrained_json_through_the_server(server):
    model = OpenAICompatModel(server, "smollm2", timeout=120)
    schema = {"type": "object", "properties": {"summary": {"type": "string", "maxLength": 80}},
              "required": ["summary"]}
    completion = model.chat([{"role": "user", "content": "Summarize: Caroline applied to an adoption agency."}],
                            schema=schema, max_tokens=60)
    data = json.loads(completion.text)  # a grammar-constrained answer always parses
    assert isinstance(data["summary"], str)
    assert completion.prompt_tokens > 0 and completion.completion_tokens > 0
    # llama-cpp-python's server rejects the json_schema form; the backend switched to json_object
    assert model.json_format == "json_object"


def test_doctor_and_consolidation_through_the_server(server, tmp_path):
    store = tmp_path / "store"
    base = ["--store", store, "--base-url", server, "--model-name", "smollm2"]
    doctor = run_memcli(*base, "doctor", "--json")
    assert doctor.code == 0, doctor.stdout + doctor.stderr
    report = json.loads(doctor.stdout)
    assert report["model"]["backend"] == "openai" and report["ok"] is True
    assert run_memcli(*base, "ingest", EXAMPLES / "caroline-and-priya.json", "--no-auto").code == 0
    result = run_memcli(*base, "consolidate", "--json", env={"MEMCLI_MODEL_TIMEOUT": "300"})
    assert result.code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["llm"] is True and data["calls"]["calls"] >= 3 and data["calls"]["errors"] == 0
    assert data["entries_consolidated"] == 25 and data["current_entries_left"] == 0
    grep = run_memcli("--store", store, "grep", "Open Door", "--json")
    assert json.loads(grep.stdout)["count"] >= 4


def test_unreachable_server_falls_back_without_crashing(tmp_path):
    store = tmp_path / "store"
    dead = f"http://127.0.0.1:{_free_port()}/v1"
    assert run_memcli("--store", store, "ingest", EXAMPLES / "chat-messages.json", "--no-auto").code == 0
    result = run_memcli("--store", store, "--base-url", dead, "consolidate", "--json")
    assert result.code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["calls"]["errors"] >= 1 and data["entries_consolidated"] == 5
    doctor = run_memcli("--store", store, "--base-url", dead, "doctor", "--json")
    assert doctor.code != 0 and json.loads(doctor.stdout)["ok"] is False
