"""The session-end hook's fast path, with nothing but the standard library's ``os`` and ``json``.

An agent waits for a ``SessionEnd`` (or ``Stop``) hook, and gives it little time. ``memcli hook
AGENT`` therefore reads the event, chooses the store (:func:`store_for`) and starts the ingest of the
transcript as a process of its own session (``posix_spawn``, no ``subprocess``), then answers:
before Typer, Rich, pathlib, dataclasses or the store code are imported. Anything it cannot settle
(a bad event, another event) goes to the full command (:mod:`memcli.hooks`), which says why.
"""

from __future__ import annotations

import json
import os
import stat
import sys

from memcli import parsing, where
from memcli.errors import MemcliError

# The agents whose lifecycle hooks memcli answers: the format of the transcript their events name,
# the events that save it, the event sent before a prompt reaches the model (its ``prompt`` field is what the
# user typed), and whether the host reads a hook's stdout as JSON only (Codex, Gemini CLI: context goes in
# ``hookSpecificOutput.additionalContext``) or as text (Claude Code).
HOSTS = {
    "claude-code": {"label": "Claude Code", "format": "claude-code", "save": ("SessionEnd", "PreCompact", "Stop"),
                    "prompt": "UserPromptSubmit", "json_output": False, "null_transcript": False},
    # Codex: Stop ends each turn (no SessionEnd); transcript_path is null for a session it keeps no rollout of
    "codex": {"label": "Codex", "format": "codex", "save": ("Stop", "PreCompact"),
              "prompt": "UserPromptSubmit", "json_output": True, "null_transcript": True},
    "gemini": {"label": "Gemini CLI", "format": "gemini", "save": ("SessionEnd", "PreCompress"),
               "prompt": "BeforeAgent", "json_output": True, "null_transcript": False},
}
CONTEXT_EVENTS = ("SessionStart", "UserPromptSubmit", "BeforeAgent")  # the events whose answer adds context
LOG = "hooks.log"  # the detached ingests' output, in the cache folder
_FLAGS = ("--json", "-q", "--quiet")


def usable(path: str) -> str | None:
    """Why ``path`` (from the event) is not one the file system can take, or None."""
    try:
        encoded = os.fsencode(path)
    except UnicodeError:
        return "not a usable path (it holds a lone surrogate)"
    if b"\x00" in encoded:
        return "not a usable path (it holds a NUL byte)"
    if len(encoded) > 4096 or any(len(part) > 255 for part in encoded.split(b"/")):
        return f"not a usable path ({len(encoded):,} bytes; too long for a file name)"
    return None


def transcript_file(path: str, cwd: str | None) -> tuple[str, str | None]:
    """(the event's transcript as an absolute path, why it is not one to ingest or None). A relative
    path is the event's: resolved against the event's ``cwd`` (never the hook's own working folder),
    and refused without one. It must be a regular file (a FIFO, a device or a folder would hang or
    fail the detached ingest after the hook had said it was saving)."""
    path = os.path.expanduser(path)
    if not os.path.isabs(path):
        if not cwd or not os.path.isabs(os.path.expanduser(cwd)):
            return path, "a relative path, and the event has no absolute cwd to resolve it against"
        path = os.path.join(os.path.expanduser(cwd), path)
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return path, "no such file"
    except OSError as exc:
        return path, f"cannot read: {exc.strerror}"
    if stat.S_ISDIR(mode):
        return path, "is a directory"
    if not stat.S_ISREG(mode):
        return path, "not a regular file (a FIFO, device or socket)"
    return path, None


def project_root(cwd: str) -> str:
    """The project a working directory belongs to: the nearest folder holding ``.git``, else itself."""
    here = folder = os.path.realpath(cwd)
    while True:
        if os.path.exists(os.path.join(folder, ".git")):
            return folder
        parent = os.path.dirname(folder)
        if parent == folder:
            return here
        folder = parent


def store_for(cwd: str | None, flag: str | None) -> tuple[str, str, str | None]:
    """(store, why, project tag) of a session that ran in ``cwd``: ``--store`` or ``$MEMCLI_STORE``,
    else the nearest ``.memcli/`` above ``cwd`` (a project store: its turns carry no tag), else the
    user's store, where each turn is tagged with its project's root."""
    if flag or os.environ.get("MEMCLI_STORE") or cwd is None:
        path, why = where.store(flag)
    elif (found := where.project_store(cwd)) is not None:  # a cwd since removed: the folders above it
        path, why = found, f"nearest {where.PROJECT_STORE_DIRNAME}/ above the session's cwd"
    else:
        path, why = where.user_store()
    if cwd is None:
        return path, why, None
    if os.path.basename(path) == where.PROJECT_STORE_DIRNAME:
        inside = os.path.realpath(cwd) + os.sep
        if inside.startswith(os.path.realpath(os.path.dirname(path)) + os.sep):
            return path, why, None  # a project store: everything in it is the project's
    return path, why, project_root(cwd)


def start_saving(name: str, transcript: str, store: str, project: str | None, format: str = "claude-code") -> dict:
    """``memcli ingest`` of the transcript started in its own session (no standard input, output
    appended to the private log, never through a link); returns at once ``{event, action, pid, log}``."""
    folder = where.cache()[0]
    os.makedirs(folder, mode=0o700, exist_ok=True)
    log = os.path.join(folder, LOG)
    args = [sys.executable, "-m", "memcli", "--store", store, "ingest", transcript, "--format", format,
            "--json", *(["--project", project] if project else [])]
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        pid = os.posix_spawn(sys.executable, args, os.environ, setsid=True, file_actions=[
            (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0), (os.POSIX_SPAWN_DUP2, fd, 1),
            (os.POSIX_SPAWN_DUP2, fd, 2), (os.POSIX_SPAWN_CLOSE, fd)])
    finally:
        os.close(fd)
    return {"event": name, "action": "saving", "store": store, "project": project, "pid": pid, "log": log}


def quick(argv: list[str], raw: str) -> int | None:
    """A well-formed save event handed to a detached ingest and answered at once. None: not such an
    event (the full command handles it, errors included)."""
    args, flag = list(argv), None
    if args[:1] == ["--store"] and len(args) >= 2:
        flag, args = args[1], args[2:]
    if args[:1] != ["hook"] or len(args) < 2 or args[1] not in HOSTS or any(a not in _FLAGS for a in args[2:]):
        return None
    host = HOSTS[args[1]]
    try:
        event = parsing.loads(raw)
    except (ValueError, RecursionError):
        return None
    name = event.get("hook_event_name") if isinstance(event, dict) else None
    transcript, cwd = (event.get("transcript_path"), event.get("cwd")) if name in host["save"] else (None, None)
    if not isinstance(transcript, str) or not transcript or usable(transcript) or (
            cwd is not None and (not isinstance(cwd, str) or usable(cwd))):
        return None
    transcript, bad = transcript_file(transcript, cwd)
    if bad:
        return None  # said properly by the full command
    try:
        store, _why, project = store_for(os.path.expanduser(cwd) if cwd else None, flag)
        done = start_saving(name, transcript, store, project, host["format"])
    except (OSError, ValueError, MemcliError):
        return None  # said properly by the full command
    if "--json" in args:
        print(json.dumps(done, ensure_ascii=False))
    return 0
