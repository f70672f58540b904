"""Claude Code's hooks: a session saved to memory when it ends, the project recalled when one starts.

Claude Code runs ``memcli hook claude-code`` with one event as JSON on stdin.

* ``SessionEnd``, ``PreCompact``, ``Stop``: the transcript the event names is ingested by a detached
  ``memcli ingest`` (new turns only; the usual automatic consolidation follows), so the hook answers
  at once: Claude Code gives these hooks a short budget. ``--wait`` ingests before answering.
* ``SessionStart``: what memory holds about the project, ranked, within :data:`DIGEST_BUDGET`
  tokens, printed for Claude Code to add to the session's context; nothing when memory holds
  nothing about it.

Which store: ``--store`` or ``$MEMCLI_STORE`` when given, else the nearest ``.memcli/`` above the
event's ``cwd`` (a project store: everything in it is the project's), else the user store, where
each turn is tagged ``project=<root>`` (the nearest folder above ``cwd`` holding ``.git``, else
``cwd``) and a session start recalls only the entries tagged with its project.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from memcli.errors import InputError
from memcli.joblock import detach
from memcli.paths import (
    PROJECT_STORE_DIRNAME,
    Resolved,
    find_project_store,
    resolve_cache_dir,
    resolve_store,
    user_store,
)

SAVE_EVENTS = ("SessionEnd", "PreCompact", "Stop")
DIGEST_BUDGET = 600  # tokens of evidence a session start gets
LOG = "hooks.log"  # the detached ingests' output, in the cache folder


def read_hook_event(raw: str) -> dict:
    """The hook's JSON object, checked."""
    try:
        event = json.loads(raw)
    except ValueError as exc:
        raise InputError("<hook stdin>", f"not JSON: {exc}") from None
    except RecursionError:
        raise InputError("<hook stdin>", "not a hook event: JSON nested too deeply") from None
    if not isinstance(event, dict) or not isinstance(event.get("hook_event_name"), str):
        raise InputError("<hook stdin>", "not a Claude Code hook event (no hook_event_name)")
    return event


def _usable(path: str, field: str) -> Path:
    """A path from the event, checked: one the file system can take (no lone surrogate, no NUL,
    not longer than a path may be)."""
    try:
        encoded = os.fsencode(path)
    except UnicodeError:
        raise InputError("<hook stdin>", "not a usable path (it holds a lone surrogate)", where=field) from None
    if b"\x00" in encoded:
        raise InputError("<hook stdin>", "not a usable path (it holds a NUL byte)", where=field)
    if len(encoded) > 4096 or any(len(part) > 255 for part in encoded.split(b"/")):
        raise InputError("<hook stdin>", f"not a usable path ({len(encoded):,} bytes; too long for a file name)",
                         where=field)
    return Path(path).expanduser()


def event_cwd(event: dict) -> Path | None:
    cwd = event.get("cwd")
    if not isinstance(cwd, str) or not cwd:
        return None
    return _usable(cwd, "cwd")


def project_root(cwd: Path) -> Path:
    """The project a working directory belongs to: the nearest folder holding ``.git``, else itself."""
    here = cwd.resolve()
    for folder in (here, *here.parents):
        if (folder / ".git").exists():
            return folder
    return here


def hook_store(event: dict, flag: str | None) -> tuple[Resolved, str | None]:
    """The store an event's session goes to, and the project tag its turns carry there (None in a
    project store, where everything is the project's)."""
    cwd = event_cwd(event)
    if flag or os.environ.get("MEMCLI_STORE") or cwd is None:
        chosen = resolve_store(flag)
    elif (found := find_project_store(cwd) if cwd.is_dir() else None) is not None:
        chosen = Resolved(found, f"nearest {PROJECT_STORE_DIRNAME}/ above the session's cwd")
    else:
        chosen = user_store()
    if cwd is None or (chosen.path.name == PROJECT_STORE_DIRNAME and _inside(cwd, chosen.path.parent)):
        return chosen, None  # a project store: everything in it is the project's
    return chosen, str(project_root(cwd))


def _inside(path: Path, folder: Path) -> bool:
    try:
        path.resolve().relative_to(folder.resolve())
        return True
    except ValueError:
        return False


def transcript(event: dict) -> Path:
    name = event["hook_event_name"]
    path = event.get("transcript_path")
    if not isinstance(path, str) or not path:
        raise InputError("<hook stdin>", f"{name} event without a transcript_path")
    return _usable(path, "transcript_path")


def start_saving(event: dict, store: Path, project: str | None) -> dict:
    """Ingest the event's transcript in a detached process; returns at once ``{event, action, pid, log}``."""
    path = transcript(event)
    log_dir = resolve_cache_dir().path
    log_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    pid = detach(["--store", str(store), "ingest", str(path), "--format", "claude-code", "--json",
                  *(["--project", project] if project else [])], log_dir / LOG)
    return {"event": event["hook_event_name"], "action": "saving", "store": str(store), "project": project,
            "pid": pid, "log": str(log_dir / LOG)}


def save(memory, event: dict, project: str | None) -> dict:
    """Ingest the event's transcript now (``--wait``)."""
    done = memory.ingest(transcript(event), format="claude-code", project=project)
    return {"event": event["hook_event_name"], "action": "ingested", "store": str(memory.root), "project": project,
            "added": done.added, "skipped": done.skipped, "consolidation": done.consolidation}


def digest(memory, event: dict, project: str | None) -> dict:
    """What memory holds about the session's project, best first within the budget ('' when nothing)."""
    name = event["hook_event_name"]
    cwd = event_cwd(event)
    label = Path(project).name if project else (cwd.name if cwd else "")
    if not memory.store.state_path.exists():
        return {"event": name, "action": "digest", "digest": ""}
    question = f"{label} project: what was decided, done and left to do"
    found = memory.ask(question, reader="evidence-only", budget=DIGEST_BUDGET,
                       where={"project": project} if project else {}, recent=True)
    evidence = found.evidence
    if not evidence:
        return {"event": name, "action": "digest", "digest": ""}
    lines = [f"Memory about {label or 'this project'} (memcli; cite as doc:lines, search more with the "
             "memory_search tool):"]
    lines += [f"{e.citation}\n{e.text}" for e in sorted(evidence, key=lambda e: e.rank or 0)]
    return {"event": name, "action": "digest", "digest": "\n".join(lines)}


def quick(argv: list[str], raw: str) -> int | None:
    """The hook's fast path, before the CLI is even imported: a well-formed save event is handed to a
    detached ingest and answered at once. None: not such an event (the full command handles it,
    errors included)."""
    args = list(argv)
    flag = None
    if args[:1] == ["--store"] and len(args) >= 2:
        flag, args = args[1], args[2:]
    if args[:2] != ["hook", "claude-code"] or any(a not in ("--json", "-q", "--quiet") for a in args[2:]):
        return None
    try:
        event = read_hook_event(raw)
        if event["hook_event_name"] not in SAVE_EVENTS:
            return None
        transcript(event)
        store, project = hook_store(event, flag)
        done = start_saving(event, store.path, project)
    except (InputError, OSError, ValueError):
        return None  # said properly by the full command
    if "--json" in args:
        print(json.dumps(done, ensure_ascii=False))
    return 0
