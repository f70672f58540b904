"""Agents' lifecycle hooks: a session saved to memory when it ends, the project recalled when one starts.

Claude Code, Codex and Gemini CLI run ``memcli hook AGENT`` with one event as JSON on stdin
(:data:`memcli.hook_start.HOSTS`: each one's transcript format and save events).

* The save events (Claude Code ``SessionEnd``, ``PreCompact``, ``Stop``; Codex ``Stop``, the end of
  each turn, and ``PreCompact``; Gemini CLI ``SessionEnd``, ``PreCompress``): the transcript the
  event names is ingested by a detached ``memcli ingest`` (new turns only; the usual automatic
  consolidation follows), so the hook answers at once: hosts give these hooks a short budget.
  ``--wait`` ingests before answering.
* ``SessionStart``: the project's recent sessions (what each asked for and how it ended) and the lines of
  decisions and open items, within ``hook.start_tokens`` (:mod:`memcli.session_start`), for the host to add
  to the session's context (:func:`start_output`: text for Claude Code, ``hookSpecificOutput.additionalContext``
  for the hosts that read a hook's stdout as JSON); nothing when memory holds nothing about it. A process
  answers it without the CLI's framework (:func:`context_quick`: the commands are not loaded).
* The prompt event (Claude Code and Codex ``UserPromptSubmit``, Gemini CLI ``BeforeAgent``): the lines of earlier
  sessions that bear on the prompt, within ``hook.prompt_tokens`` (:mod:`memcli.prompt_recall`), added the same
  way; nothing when none bears on it enough, and nothing past ``hook.prompt_seconds``: it never holds a prompt
  up (a payload that is not such an event is exit 4, which no host reads as blocking).

Which store: ``--store`` or ``$MEMCLI_STORE`` when given, else the nearest ``.memcli/`` above the
event's ``cwd`` (a project store: everything in it is the project's), else the user store, where
each turn is tagged ``project=<root>`` (the nearest folder above ``cwd`` holding ``.git``, else
``cwd``) and a session start recalls only the entries tagged with its project.
"""

from __future__ import annotations

import json
from pathlib import Path

from memcli import hook_start, parsing
from memcli.errors import InputError, MemcliError
from memcli.hook_start import HOSTS, LOG  # noqa: F401  (the hook's own names, said once)
from memcli.paths import Resolved


def read_hook_event(raw: str, agent: str = "claude-code") -> dict:
    """The hook's JSON object, checked."""
    try:
        event = parsing.loads(raw)
    except ValueError as exc:
        raise InputError("<hook stdin>", f"not JSON: {exc}") from None
    except RecursionError:
        raise InputError("<hook stdin>", "not a hook event: JSON nested too deeply") from None
    if not isinstance(event, dict) or not isinstance(event.get("hook_event_name"), str):
        raise InputError("<hook stdin>", f"not a {HOSTS[agent]['label']} hook event (no hook_event_name)")
    return event


def _usable(path: str, field: str) -> Path:
    """A path from the event, checked: one the file system can take (no lone surrogate, no NUL,
    not longer than a path may be)."""
    why = hook_start.usable(path)
    if why:
        raise InputError("<hook stdin>", why, where=field)
    return Path(path).expanduser()


def event_cwd(event: dict) -> Path | None:
    cwd = event.get("cwd")
    if not isinstance(cwd, str) or not cwd:
        return None
    return _usable(cwd, "cwd")


def hook_store(event: dict, flag: str | None) -> tuple[Resolved, str | None]:
    """The store an event's session goes to, and the project tag its turns carry there (None in a
    project store, where everything is the project's): :func:`memcli.hook_start.store_for`."""
    cwd = event_cwd(event)
    path, why, project = hook_start.store_for(str(cwd) if cwd is not None else None, flag)
    return Resolved(Path(path), why), project


def transcript(event: dict) -> Path:
    """The event's transcript: a regular file, its relative path resolved against the event's cwd."""
    name = event["hook_event_name"]
    path = event.get("transcript_path")
    if not isinstance(path, str) or not path:
        raise InputError("<hook stdin>", f"{name} event without a transcript_path")
    _usable(path, "transcript_path")
    cwd = event_cwd(event)
    resolved, why = hook_start.transcript_file(path, str(cwd) if cwd is not None else None)
    if why:
        raise InputError("<hook stdin>", f"{resolved}: {why}", where="transcript_path")
    return Path(resolved)


def nothing_to_save(event: dict, agent: str) -> bool:
    """A save event of a host that keeps no transcript of this session (Codex: ``transcript_path``
    null): answered with nothing saved, not as a bad event."""
    return HOSTS[agent]["null_transcript"] and "transcript_path" in event and event["transcript_path"] is None


def start_saving(event: dict, store: Path, project: str | None, agent: str = "claude-code") -> dict:
    """Ingest the event's transcript in a detached process; returns at once ``{event, action, pid, log}``."""
    return hook_start.start_saving(event["hook_event_name"], str(transcript(event)), str(store), project,
                                   HOSTS[agent]["format"])


def save(memory, event: dict, project: str | None, agent: str = "claude-code") -> dict:
    """Ingest the event's transcript now (``--wait``)."""
    done = memory.ingest(transcript(event), format=HOSTS[agent]["format"], project=project)
    return {"event": event["hook_event_name"], "action": "ingested", "store": str(memory.root), "project": project,
            "added": done.added, "skipped": done.skipped, "consolidation": done.consolidation}


def digest(memory, event: dict, project: str | None) -> dict:
    """What a session start tells the agent of its project (:func:`memcli.session_start.digest`: the recent
    sessions, then decisions and open items; '' when memory holds nothing of it)."""
    from memcli.session_start import digest as start_digest
    from memcli.session_start import label_of

    label = label_of(project, event_cwd(event))
    text = start_digest(memory, project, label, memory.settings.hook_start_tokens)
    return {"event": event["hook_event_name"], "action": "digest", "digest": text}


def prompt_of(event: dict) -> str:
    """The prompt a prompt event carries, checked."""
    prompt = event.get("prompt")
    if not isinstance(prompt, str):
        raise InputError("<hook stdin>", f"{event['hook_event_name']} event without a prompt (a string)", where="prompt")
    return prompt


class _TooLate(Exception):
    """The prompt's recall ran past ``hook.prompt_seconds``."""


def _within(seconds: float, work):
    """``work()``, stopped with :class:`_TooLate` once ``seconds`` have passed (a timer signal: the main thread
    only; elsewhere, or with ``seconds`` <= 0, no limit). The recall only reads, so stopping it anywhere
    leaves nothing half written (the index's own refresh is one SQLite transaction)."""
    import signal
    import threading

    if seconds <= 0 or threading.current_thread() is not threading.main_thread():
        return work()

    def ring(_signum, _frame):
        raise _TooLate

    before = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        return work()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, before)


def recall(memory, event: dict, project: str | None, agent: str = "claude-code") -> dict:
    """What a prompt event adds to the agent's context (:func:`memcli.prompt_recall.recall`: '' when nothing
    bears on the prompt enough, or when it did not finish within ``hook.prompt_seconds``: then ``why``)."""
    from memcli.prompt_recall import recall as lines_for
    from memcli.prompt_recall import session_tail

    prompt, session = prompt_of(event), event.get("session_id")
    settings = memory.settings
    out = {"event": event["hook_event_name"], "action": "recall", "recall": ""}
    cwd = event.get("cwd") if isinstance(event.get("cwd"), str) else None
    try:
        out["recall"] = _within(settings.hook_prompt_seconds, lambda: lines_for(
            memory, prompt, project, session if isinstance(session, str) else None, settings.hook_prompt_tokens,
            context=session_tail(event.get("transcript_path"), cwd, HOSTS[agent]["format"])))
    except _TooLate:
        out["why"] = f"past hook.prompt_seconds ({settings.hook_prompt_seconds:g} s): nothing added"
    return out


def start_output(agent: str, digest_text: str, event: str = "SessionStart") -> str:
    """What a session start (or a prompt's recall: ``event``) prints for ``agent`` to add to the session: the
    text itself (Claude Code), or the host's JSON with it as ``additionalContext`` (Codex, Gemini CLI: their
    stdout must be JSON alone)."""
    if not HOSTS[agent]["json_output"]:
        return digest_text
    return json.dumps({"hookSpecificOutput": {"hookEventName": event, "additionalContext": digest_text}},
                      ensure_ascii=False)


def context_quick(argv: list[str], raw: str) -> int | None:
    """``memcli [--store S] hook AGENT [--json]`` with a well-formed SessionStart or prompt event, answered without
    the CLI's framework (its commands are not loaded: the host waits on it). None: not such a call, or one that
    failed; the full command then answers it (and says any error as it says errors)."""
    import sys

    args, flag = list(argv), None
    if args[:1] == ["--store"] and len(args) >= 2:
        flag, args = args[1], args[2:]
    if args[:1] != ["hook"] or len(args) < 2 or args[1] not in HOSTS or any(a != "--json" for a in args[2:]):
        return None
    try:
        event = read_hook_event(raw, args[1])
    except (MemcliError, ValueError):
        return None
    name = event["hook_event_name"]
    if name != "SessionStart" and (name != HOSTS[args[1]]["prompt"] or not isinstance(event.get("prompt"), str)):
        return None
    from memcli.memory import Memory

    try:
        where, project = hook_store(event, flag)
        with Memory(where, create=True, on_warning=lambda m: print(f"memcli: warning: {m}", file=sys.stderr)) as memory:
            done = digest(memory, event, project) if name == "SessionStart" else recall(memory, event, project, args[1])
    except (MemcliError, OSError):
        return None
    print_answer(args[1], done, "--json" in args)
    return 0


def print_answer(agent: str, done: dict, as_json: bool) -> None:
    """A context event's answer on stdout: ``--json``'s object, else what the host adds to the session (nothing
    when there is nothing to add); why nothing was added, on stderr."""
    import sys

    if as_json:
        print(json.dumps(done, ensure_ascii=False))
    elif text := done.get("digest") or done.get("recall"):
        print(start_output(agent, text, done["event"]))
    if done.get("why") and not as_json:
        print(f"memcli: {done['why']}", file=sys.stderr)
