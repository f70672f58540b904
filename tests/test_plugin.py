"""The Claude Code plugin and marketplace in this repository (.claude-plugin/, plugins/memcli/) and the
skill (`memcli skill`). Claude Code's own validator and installer run where its CLI is found
(`claude` on PATH, or `$MEMCLI_CLAUDE_CLI`; `npm install @anthropic-ai/claude-code`); the rest
needs nothing but memcli."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_memcli

ROOT = Path(__file__).resolve().parents[1]
PLUGIN = ROOT / "plugins" / "memcli"
CLAUDE = os.environ.get("MEMCLI_CLAUDE_CLI") or shutil.which("claude")


def test_memcli_skill_prints_the_shipped_skill_and_the_plugin_ships_the_same():
    done = run_memcli("skill")
    assert done.code == 0
    shipped = (ROOT / "memcli" / "skill" / "SKILL.md").read_text()
    assert done.stdout == shipped
    assert (PLUGIN / "skills" / "memcli" / "SKILL.md").read_text() == shipped  # one text, two places it is read
    as_json = run_memcli("skill", "--json")
    assert as_json.code == 0 and as_json.json["name"] == "memcli" and as_json.json["text"] == shipped
    assert len(as_json.json["description"]) <= 1024 and len(shipped.splitlines()) < 300


@pytest.mark.slow  # 6 s: a --help process for each command the skill names
def test_every_command_and_flag_the_skill_names_is_one_memcli_has():
    """The skill tells agents to run commands: each `memcli COMMAND ... --flag` in it must exist."""
    shipped = (ROOT / "memcli" / "skill" / "SKILL.md").read_text()
    uses: dict[str, set[str]] = {}
    commands = re.findall(r"`(memcli [^`]+)`", shipped) + re.findall(r"^ {4}(memcli .+?)(?:\s+#.*)?$", shipped, re.M)
    for line in commands:
        words = line.split()
        if len(words) > 1 and words[1].isalpha():
            uses.setdefault(words[1], set()).update(w.rstrip(",.:)") for w in words[2:] if w.startswith("--"))
    assert {"ask", "grep", "search", "read", "docs", "remember", "forget", "status", "doctor", "ingest"} <= set(uses)
    for command, flags in uses.items():
        if command == "COMMAND":
            continue
        helped = run_memcli(command, "--help", env={"COLUMNS": "200"})
        assert helped.code == 0, (command, helped.stderr)
        for flag in flags - {"--help"}:
            assert flag.split("/")[0] in helped.stdout, (command, flag)


def test_the_plugin_files_say_what_the_hooks_command_and_the_mcp_server_are():
    from memcli.registrations import HOOK_TIMEOUTS

    market = json.loads((ROOT / ".claude-plugin" / "marketplace.json").read_text())
    (entry,) = market["plugins"]
    assert (entry["name"], market["name"]) == ("memcli", "memcli")  # claude plugin install memcli@memcli
    assert (ROOT / entry["source"]).resolve() == PLUGIN
    manifest = json.loads((PLUGIN / ".claude-plugin" / "plugin.json").read_text())
    from memcli import __version__
    assert manifest["name"] == "memcli" and manifest["version"] == entry["version"] == __version__
    hooks = json.loads((PLUGIN / "hooks" / "hooks.json").read_text())["hooks"]
    assert {e: g[0]["hooks"][0]["timeout"] for e, g in hooks.items()} == HOOK_TIMEOUTS["claude-code"]
    assert all(g[0]["hooks"][0]["command"].endswith("/bin/memcli-on-path\" hook claude-code") for g in hooks.values())
    server = json.loads((PLUGIN / ".mcp.json").read_text())["mcpServers"]["memcli"]
    assert server == {"command": "${CLAUDE_PLUGIN_ROOT}/bin/memcli-on-path", "args": ["mcp"]}
    assert os.access(PLUGIN / "bin" / "memcli-on-path", os.X_OK)


def test_without_memcli_on_path_the_plugin_says_how_to_install_it(tmp_path):
    done = subprocess.run([str(PLUGIN / "bin" / "memcli-on-path"), "hook", "claude-code"], input=b"{}",
                          capture_output=True, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert done.returncode == 1 and done.stdout == b""
    assert b"not on PATH" in done.stderr and b"pipx install" in done.stderr


def test_with_memcli_on_path_the_plugin_runs_it(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "memcli").write_text(f"#!/bin/sh\nexec {sys.executable} -m memcli \"$@\"\n")
    (bin_dir / "memcli").chmod(0o755)
    done = subprocess.run([str(PLUGIN / "bin" / "memcli-on-path"), "--version"], capture_output=True, text=True,
                          env={**os.environ, "PATH": f"{bin_dir}:/usr/bin:/bin"})
    assert done.returncode == 0 and done.stdout.startswith("memcli ")


@pytest.mark.skipif(not CLAUDE, reason="Claude Code's CLI is not installed (npm install @anthropic-ai/claude-code)")
@pytest.mark.slow  # Claude Code's CLI starts in 2-5 s a command
def test_claude_code_validates_installs_and_connects_the_plugin(tmp_path):
    env = {**os.environ, "CLAUDE_CONFIG_DIR": str(tmp_path / "claude"), "HOME": str(tmp_path),
           "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}", "MEMCLI_STORE": str(tmp_path / "s")}

    def claude(*args: str) -> str:
        done = subprocess.run([CLAUDE, *args], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
        assert done.returncode == 0, (args, done.stdout, done.stderr)
        return done.stdout + done.stderr

    assert "Validation passed" in claude("plugin", "validate", str(ROOT))
    assert "Validation passed" in claude("plugin", "validate", str(PLUGIN))
    claude("plugin", "marketplace", "add", str(ROOT))
    claude("plugin", "install", "memcli@memcli")
    (listed,) = [p for p in json.loads(claude("plugin", "list", "--json")) if p["id"] == "memcli@memcli"]
    assert listed["enabled"] and "memcli" in listed["mcpServers"]
    details = claude("plugin", "details", "memcli@memcli")
    assert re.search(r"Hooks \(3\)\s+SessionStart, PreCompact, SessionEnd", details)
    assert re.search(r"Skills \(1\)\s+memcli", details) and re.search(r"MCP servers \(1\)\s+memcli", details)
    assert re.search(r"plugin:memcli:memcli: .*memcli-on-path mcp - . Connected", claude("mcp", "list"))


CODEX_PLUGIN = ROOT / "plugins" / "memcli-codex"
CODEX = os.environ.get("MEMCLI_CODEX_CLI") or shutil.which("codex")


def test_the_codex_plugin_files_say_what_the_hooks_and_the_mcp_server_are():
    from memcli import __version__
    from memcli.registrations import ABSOLUTE_PATH_SEARCH, hook_entries, plugin_command

    market = json.loads((ROOT / ".agents" / "plugins" / "marketplace.json").read_text())
    (entry,) = market["plugins"]
    assert (entry["name"], market["name"]) == ("memcli", "memcli")  # codex plugin add memcli@memcli
    assert (ROOT / entry["source"]["path"]).resolve() == CODEX_PLUGIN
    manifest = json.loads((CODEX_PLUGIN / ".codex-plugin" / "plugin.json").read_text())
    assert manifest["name"] == "memcli" and manifest["version"] == __version__
    for field in ("skills", "mcpServers", "hooks"):  # paths Codex takes: ./ inside the plugin
        assert manifest[field].startswith("./") and (CODEX_PLUGIN / manifest[field]).exists()
    hooks = json.loads((CODEX_PLUGIN / "hooks" / "hooks.json").read_text())["hooks"]
    assert hooks == hook_entries("codex", plugin_command("hook", "codex"))
    server = json.loads((CODEX_PLUGIN / ".mcp.json").read_text())["mcpServers"]["memcli"]
    assert (server["command"], server["args"]) == ("/bin/sh", ["-c", ABSOLUTE_PATH_SEARCH, "memcli", "mcp"])
    shipped = (ROOT / "memcli" / "skill" / "SKILL.md").read_text()
    assert (CODEX_PLUGIN / "skills" / "memcli" / "SKILL.md").read_text() == shipped


@pytest.mark.skipif(not CODEX, reason="Codex's CLI is not installed (npm install @openai/codex)")
@pytest.mark.slow
def test_codex_adds_the_marketplace_installs_the_plugin_and_lists_its_server(tmp_path, monkeypatch):
    env = {**os.environ, "CODEX_HOME": str(tmp_path / "codex"), "HOME": str(tmp_path)}
    (tmp_path / "codex").mkdir()

    def codex(*args: str) -> str:
        done = subprocess.run([CODEX, *args], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
        assert done.returncode == 0, (args, done.stdout, done.stderr)
        return done.stdout

    codex("plugin", "marketplace", "add", str(ROOT))
    codex("plugin", "add", "memcli@memcli")
    assert re.search(r"memcli@memcli\s+installed, enabled", codex("plugin", "list"))
    server = json.loads(codex("mcp", "get", "memcli", "--json"))
    assert server["enabled"] and server["transport"]["command"] == "/bin/sh" and server["transport"]["args"][-1] == "mcp"
    cached = tmp_path / "codex" / "plugins" / "cache" / "memcli" / "memcli"
    (version,) = cached.iterdir()
    assert json.loads((version / "hooks" / "hooks.json").read_text())["hooks"].keys() == {
        "SessionStart", "UserPromptSubmit", "Stop", "PreCompact"}
    from memcli.wiring import hosts
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codex"))
    (found,) = [h for h in hosts(project=tmp_path, home=tmp_path) if h.host == "codex"]
    assert found.plugin  # memcli doctor sees it


@pytest.mark.parametrize("path", [":/usr/bin:/bin", "/usr/bin::/bin", "/usr/bin:/bin:", ".:/usr/bin:/bin",
                                  "bin:/usr/bin:/bin", ""])
def test_the_plugins_never_run_a_memcli_the_project_commits(tmp_path, path):
    """An empty PATH entry (a leading, doubled or trailing ':', or PATH=$EXTRA:$PATH with EXTRA unset), '.' or a
    relative entry names the session's folder, the project: its ./memcli (or bin/memcli) is never run, by the
    Claude Code plugin's script or by the Codex plugin's hook and MCP server commands."""
    from memcli.registrations import ABSOLUTE_PATH_SEARCH, plugin_command

    marker = tmp_path / "ran"
    for where in (tmp_path / "memcli", tmp_path / "bin" / "memcli"):
        where.parent.mkdir(exist_ok=True)
        where.write_text(f"#!/bin/sh\ntouch {marker}\n")
        where.chmod(0o755)
    env = {"PATH": path, "HOME": str(tmp_path)}
    runs = [[str(PLUGIN / "bin" / "memcli-on-path"), "hook", "claude-code"],
            ["/bin/sh", "-c", plugin_command("hook", "codex")],
            ["/bin/sh", "-c", ABSOLUTE_PATH_SEARCH, "memcli", "mcp"]]
    for argv in runs:
        done = subprocess.run(argv, input=b"{}", capture_output=True, env=env, cwd=tmp_path, timeout=30)
        assert done.returncode == 1 and done.stdout == b"" and b"not on PATH" in done.stderr, (argv, done)
        assert not marker.exists(), argv
    done = subprocess.run(runs[0], input=b"{}", capture_output=True, env=env, cwd=tmp_path, timeout=30)
    assert b"were not searched" in done.stderr  # says what it skipped


def test_the_codex_plugin_runs_the_memcli_on_an_absolute_path_entry(tmp_path):
    from memcli.registrations import plugin_command

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "memcli").write_text(f"#!/bin/sh\nexec {sys.executable} -m memcli \"$@\"\n")
    (bin_dir / "memcli").chmod(0o755)
    done = subprocess.run(["/bin/sh", "-c", plugin_command("--version")], capture_output=True, text=True,
                          env={**os.environ, "PATH": f":{bin_dir}:/usr/bin:/bin"}, cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.startswith("memcli "), done.stderr
