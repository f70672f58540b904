"""Contract: every command has help, --json parses, errors are JSON, --help stays light."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import EXAMPLES, run_memcli

from memcli import __version__

COMMANDS = ["ingest", "remember", "docs", "read", "grep", "search", "init", "status", "embed", "consolidate", "doctor", "ask", "chat", "forget",
            "kv build", "kv ls", "kv stats", "kv verify", "kv prune", "eval locomo", "eval qa", "mcp", "hook",
            "sync", "log", "undo", "merge-driver", "trust", "skill"]


def test_the_list_names_every_registered_command():

    from memcli.cli import commands  # noqa: F401  (registers the commands)
    from memcli.cli.app import app

    def names(group, prefix=""):
        for info in group.registered_commands:
            yield prefix + (info.name or info.callback.__name__)
        for sub in group.registered_groups:
            yield from names(sub.typer_instance, prefix + sub.name + " ")

    assert sorted(names(app)) == sorted(COMMANDS)


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help_and_json(command):
    result = run_memcli(*command.split(), "--help")
    assert result.code == 0
    assert "--json" in result.stdout and "Usage" in result.stdout
    assert len(result.stdout.strip().splitlines()) > 5


def test_help_and_version_import_nothing_heavy():
    for args in (["--help"], ["--version"], ["grep", "--help"]):
        proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "memcli", *args],
                              capture_output=True, text=True)
        assert proc.returncode == 0
        imported = {line.split("|")[-1].strip() for line in proc.stderr.splitlines() if "|" in line}
        assert "llama_cpp" not in imported and "numpy" not in imported and "mcp" not in imported, args


def test_version():
    assert run_memcli("--version").stdout.strip() == f"memcli {__version__}"


@pytest.mark.slow  # a fast-tier budget of 5 minutes; CI runs it
def test_json_output_of_every_command_parses(tmp_path):
    store = tmp_path / "s"
    base = ["--store", str(store)]
    assert run_memcli(*base, "ingest", EXAMPLES / "caroline-and-priya.json", "--json").code == 0
    for args in (["docs"], ["read", "CURRENT", "--lines", "1-5"], ["grep", "Priya"],
                 ["search", "minivan"], ["status"], ["trust"], ["init", tmp_path / "proj"], ["ask", "minivan", "--evidence-only"],
                 ["remember", "the build uses make"], ["skill"]):
        result = run_memcli(*base, *args, "--json")
        assert result.code == 0, (args, result.stderr)
        json.loads(result.stdout)
        # global --json works as well as the per-command flag
        glob = run_memcli("--json", *base, *args)
        json.loads(glob.stdout)


def test_usage_errors_exit_2_with_json_error(tmp_path):
    result = run_memcli("grep", "--json", "--no-such-flag", "x")
    assert result.code == 2
    assert json.loads(result.stdout)["error"]["type"] == "usage"
    assert "memcli: error:" in result.stderr
    assert run_memcli("frobnicate").code == 2


def test_missing_store_is_a_clear_error(tmp_path):
    result = run_memcli("--store", tmp_path / "nowhere", "docs")
    assert result.code == 1 and "no memcli store" in result.stderr and "hint" in result.stderr
    assert result.stdout == ""


def test_project_store_found_from_subdirectory(tmp_path):
    project = tmp_path / "project"
    (project / "deep" / "er").mkdir(parents=True)
    assert run_memcli("init", cwd=project).code == 0
    out = run_memcli("ingest", EXAMPLES / "chat-messages.json", "--json", cwd=project / "deep" / "er")
    assert out.code == 0, out.stderr
    assert json.loads(out.stdout)["store"] == str(project / ".memcli")
    status = json.loads(run_memcli("status", "--json", cwd=project / "deep").stdout)
    assert status["store_source"].startswith("nearest .memcli/")
    env_store = run_memcli("status", "--json", cwd=project, env={"MEMCLI_STORE": str(tmp_path / "other")})
    assert env_store.code == 1  # MEMCLI_STORE wins over .memcli/, and it does not exist


def test_stdout_is_data_only(tmp_path):
    store = tmp_path / "s"
    result = run_memcli("--store", store, "ingest", EXAMPLES / "chat-messages.json", "-q", "--json")
    assert result.code == 0 and result.stderr == ""
    grep = run_memcli("--store", store, "grep", "ledgerd")
    assert all(":" in line for line in grep.stdout.splitlines())


@pytest.mark.slow  # 4-6 s: the fast tier keeps within 5 minutes
def test_doctor_checks_the_real_default_model(tmp_path):
    result = run_memcli("--store", tmp_path / "s", "doctor", "--json")
    assert result.code == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert report["ok"] is True
    assert report["model"]["path"].endswith("SmolLM2-135M-Instruct.Q4_1.gguf")
    assert len(report["model"]["sha256"]) == 64 and isinstance(report["model"]["gpu_offload"], bool)
    assert {c["name"] for c in report["checks"]} >= {"model file", "gpu offload", "generation", "profile"}
    assert report["model"]["profile"]["name"] == "small" and "135M parameters" in report["model"]["profile"]["reason"]
    assert report["paths"]["store"]["source"] == "--store"
    missing = run_memcli("--model", tmp_path / "nope.gguf", "doctor", "--json")
    assert missing.code == 3 and json.loads(missing.stdout)["ok"] is False

    # offload asked for explicitly: the check passes only when the build can offload
    asked = run_memcli("--store", tmp_path / "s", "--gpu-layers", "10", "doctor", "--json")
    gpu = next(c for c in json.loads(asked.stdout)["checks"] if c["name"] == "gpu offload")
    assert gpu["ok"] is report["model"]["gpu_offload"]
    assert asked.code == (0 if report["model"]["gpu_offload"] else 1)


def test_the_reference_settings_table_matches_the_settings():
    from conftest import REPO

    from memcli.config import SETTINGS

    readme = (REPO / "docs" / "reference.md").read_text()
    table = readme.split("<!-- settings-table")[1].split("\n\n")[0]
    rows = {}
    for line in table.splitlines():
        cells = [c.strip().strip("`") for c in line.strip("|").split("|")]
        if len(cells) == 4 and cells[0] not in ("key (TOML)", "---"):
            rows[cells[0]] = cells
    assert set(rows) == {s.key for s in SETTINGS}
    for setting in SETTINGS:
        key, env, default, meaning = rows[setting.key]
        shown = str(setting.default).lower() if isinstance(setting.default, bool) else str(setting.default)
        assert (env, default) == (setting.env, shown), setting.key
        assert meaning, setting.key


def test_ruff_is_clean():
    from conftest import REPO

    ruff = subprocess.run([sys.executable, "-m", "ruff", "check", str(REPO)], capture_output=True, text=True)
    assert ruff.returncode == 0, ruff.stdout[-3000:]
