"""memcli chat."""

from __future__ import annotations

import json as jsonlib
import sys
from typing import Annotated, Optional

import typer

from memcli.cli.app import app
from memcli.cli.common import JsonOpt, QuietOpt, VerboseOpt, open_store, output, settings
from memcli.errors import UsageError

HELP = """commands:
  /help      this help
  /forget    drop the last exchange from the conversation (and from memory if it was remembered)
  /evidence  the memory in the context: documents and CURRENT, with token counts
  /stats     tokens restored and prefilled, time to first token, generation speed
  /quit      leave (the session is already saved)"""


@app.command()
def chat(
    ctx: typer.Context,
    session: Annotated[Optional[str], typer.Option(
        "--session", metavar="NAME", help="Resume (or start) a named session; its KV state is restored.")] = None,
    no_remember: Annotated[bool, typer.Option(
        "--no-remember", help="Do not append the turns to CURRENT as new memories.")] = False,
    stats: Annotated[bool, typer.Option("--stats", help="Print each turn's token and timing numbers on stderr.")]
    = False,
    max_tokens: Annotated[int, typer.Option("--max-tokens", help="Longest reply, in tokens.")] = 256,
    kv_verify: Annotated[bool, typer.Option(
        "--kv-verify", help="Check each restored block's next-token prediction against save time; "
                            "prefill instead on a mismatch.")] = False,
    kv_compose: Annotated[bool, typer.Option(
        "--kv-compose", help="Restore each document's own block at its place (approximate) instead of an "
                             "exact chain: a changed document invalidates only its block.")] = False,
    json: JsonOpt = False, quiet: QuietOpt = False, verbose: VerboseOpt = False,
) -> None:
    """Chat with memory in context, restored from KV blocks instead of re-read.

    The memory context (a header, topic documents in stable order, then
    CURRENT's newest entries, up to chat.memory_tokens) is restored from
    saved blocks; each turn prefills only the new message. The session is
    saved after every turn, so --session NAME resumes with no re-prefill.
    On a terminal it is interactive (Rich); otherwise every stdin line is a
    message and every reply one stdout line (with --json, one JSON object per
    turn with its stats). Turns become CURRENT entries unless --no-remember.
    """
    from memcli.kv import kv_root, open_engine
    from memcli.kv.chat import ChatSession

    out = output(ctx, json, quiet, verbose)
    if max_tokens < 1:
        raise UsageError("--max-tokens must be at least 1")
    store = open_store(ctx)
    cfg = settings(ctx, store)
    engine = open_engine(store, cfg, verbose=out.verbose, verify=kv_verify)
    name = session or "default"
    talk = ChatSession(engine, store, kv_root(store, cfg) / "sessions", name, cfg.chat_memory_tokens,
                       max_tokens=max_tokens, compose=kv_compose)
    budget = cfg.kv_budget_mb * 1024 * 1024
    with store.reading():
        talk.start()
    for reason in engine.stats.refused:
        out.warn(f"KV block refused and rebuilt: {reason}")
    begin = talk.start_stats
    interactive = sys.stdin.isatty() and not json
    if interactive or verbose or stats:
        print(f"memcli chat: session {name} ({begin['resumed']}{', composed: approximate' if kv_compose else ''}), memory {begin['memory_tokens']} tokens in "
              f"{begin['memory_units']} blocks: {begin['restored_tokens']} restored, {begin['prefilled_tokens']} "
              f"prefilled, {begin['seconds']:.2f} s. /help for commands.", file=sys.stderr)
    console = None
    if interactive:
        from rich.console import Console

        console = Console(highlight=False)
    last = None
    while True:
        try:
            line = console.input("[bold]you>[/bold] ") if console else sys.stdin.readline()
        except EOFError:
            break
        if not console and not line:
            break
        text = line.strip()
        if not text:
            continue
        if text.startswith("/"):
            if _command(text, talk, last, store, console) == "quit":
                break
            continue
        reply, turn_stats = talk.turn(text)
        last = turn_stats
        engine.blocks.evict(budget, keep={*talk.memory_keys, talk.session_key or ""})
        if not no_remember:
            _remember(store, name, text, reply)
        if json:
            sys.stdout.write(jsonlib.dumps({"session": name, "message": text, "reply": reply,
                                            "stats": turn_stats.to_dict()}, ensure_ascii=False) + "\n")
        elif console:
            console.print(f"[bold cyan]memcli>[/bold cyan] {reply}")
        else:
            sys.stdout.write(reply.replace("\n", " ") + "\n")
        sys.stdout.flush()
        if stats:
            s = turn_stats
            print(f"[stats] prompt {s.prompt_tokens} tokens, prefilled {s.prefilled_tokens}, restored "
                  f"{s.restored_tokens}, generated {s.generated_tokens}, ttft {s.ttft_s * 1000:.0f} ms, "
                  f"{s.tokens_per_s:.1f} tokens/s; prepared {s.prepared_tokens} for the next turn",
                  file=sys.stderr)


def _command(text: str, talk, last, store, console) -> str | None:
    word = text.split()[0].lower()
    say = console.print if console else (lambda msg: print(msg, file=sys.stderr))
    if word in ("/quit", "/exit", "/q"):
        return "quit"
    if word == "/help":
        say(HELP)
    elif word == "/forget":
        dropped = talk.messages[-2:] if len(talk.messages) >= 2 else []
        if talk.forget_last():
            removed = _unremember(store, talk.name, dropped)
            say(f"forgot the last exchange ({removed} memory entries removed)")
        else:
            say("nothing to forget")
    elif word == "/evidence":
        for unit in talk.memory_units:
            if unit.label != "turn-open":
                say(f"{unit.label}: {len(unit.tokens)} tokens")
    elif word == "/stats":
        say(jsonlib.dumps({"start": talk.start_stats, "last_turn": last.to_dict() if last else None,
                           "engine": talk.engine.stats.to_dict()}))
    else:
        say(f"unknown command {word}; /help lists them")
    return None


def _remember(store, session: str, message: str, reply: str) -> None:
    from memcli.ingest import ingest_turns
    from memcli.store.store import now_iso
    from memcli.transcripts import Turn, fingerprint_turns

    when = now_iso("minutes")
    turns = [Turn(text=message, time=when, speaker="user", conv=f"chat:{session}"),
             Turn(text=reply, time=when, speaker="assistant", source="AI", conv=f"chat:{session}")]
    fingerprint_turns(turns, f"chat:{session}", "chat")
    ingest_turns(store, turns, source=f"chat:{session}", fmt="chat")


def _unremember(store, session: str, dropped: list[dict]) -> int:
    from memcli.ingest import forget_entries

    texts = [m["content"] for m in dropped]
    return forget_entries(store, conv=f"chat:{session}", texts=texts)
