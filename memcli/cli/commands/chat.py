"""memcli chat."""

from __future__ import annotations

import json as jsonlib
import sys
from typing import Annotated, Optional

import typer

from memcli.cli.app import app
from memcli.cli.common import JsonOpt, QuietOpt, VerboseOpt, memory, output
from memcli.llm import priority

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
    remember_replies: Annotated[Optional[bool], typer.Option(
        "--remember-replies/--no-remember-replies",
        help="Also remember the model's replies (default: only a capable model's; your messages always).")]
    = None,
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
    turn with its stats). Your messages become CURRENT entries unless
    --no-remember; the model's replies only with a capable model or
    --remember-replies, so a small model's mistakes never return as
    memories. A reply that starts to loop (a repeated phrase or line, or a
    speaker label) is cut there ("cut": "repetition" in --json and --stats).
    """
    out = output(ctx, json, quiet, verbose)
    with out.stages() as progress:  # a bar on a terminal's stderr while memory is restored or prefilled
        talk = memory(ctx).chat(session or "default", remember=not no_remember, max_tokens=max_tokens,
                                verify=kv_verify, compose=kv_compose, remember_replies=remember_replies,
                                progress=lambda done, total: progress("memory into context (tokens)", done, total))
    for reason in talk.warnings:
        out.warn(f"KV block refused and rebuilt: {reason}")
    begin = talk.start_stats
    interactive = sys.stdin.isatty() and not out.json  # --json before or after the command
    if interactive or verbose or stats:
        print(f"memcli chat: session {talk.name} ({begin['resumed']}{', composed: approximate' if kv_compose else ''}), "
              f"memory {begin['memory_tokens']} tokens in {begin['memory_units']} blocks: "
              f"{begin['restored_tokens']} restored, {begin['prefilled_tokens']} prefilled, "
              f"{begin['seconds']:.2f} s. /help for commands.", file=sys.stderr)
    console = None
    if interactive:
        from rich.console import Console

        console = Console(highlight=False)
    while True:
        try:
            with priority.idle():  # a background consolidation may compute while the user types
                line = console.input("[bold]you>[/bold] ") if console else sys.stdin.readline()
        except EOFError:
            break
        if not console and not line:
            break
        text = line.strip()
        if not text:
            continue
        if text.startswith("/"):
            if _command(text, talk, console) == "quit":
                break
            continue
        if console:
            reply, turn_stats = _streamed(talk, text, console)
        else:
            reply, turn_stats = talk.say(text)
        if out.json:
            sys.stdout.write(jsonlib.dumps({"session": talk.name, "message": text, "reply": reply,
                                            "stats": turn_stats.to_dict()}, ensure_ascii=False) + "\n")
        elif not console:
            sys.stdout.write(reply.replace("\n", " ") + "\n")
        sys.stdout.flush()
        if stats:
            s = turn_stats
            print(f"[stats] prompt {s.prompt_tokens} tokens, prefilled {s.prefilled_tokens}, restored "
                  f"{s.restored_tokens}, generated {s.generated_tokens}, ttft {s.ttft_s * 1000:.0f} ms, "
                  f"{s.tokens_per_s:.1f} tokens/s; prepared {s.prepared_tokens} for the next turn"
                  + ("; cut where it began to repeat itself" if s.cut else ""),
                  file=sys.stderr)


def _streamed(talk, text: str, console):
    """One turn on a terminal: the reply is printed as it is generated."""
    shown = 0
    console.print("[bold cyan]memcli>[/bold cyan] ", end="")

    def show(so_far: str) -> None:
        nonlocal shown
        console.out(so_far[shown:].lstrip() if shown == 0 else so_far[shown:], end="", highlight=False)
        shown = len(so_far)

    reply, turn_stats = talk.say(text, on_text=show)
    console.out("")
    return reply, turn_stats


def _command(text: str, talk, console) -> str | None:
    word = text.split()[0].lower()
    say = console.print if console else (lambda msg: print(msg, file=sys.stderr))
    if word in ("/quit", "/exit", "/q"):
        return "quit"
    if word == "/help":
        say(HELP)
    elif word == "/forget":
        removed = talk.forget()
        say("nothing to forget" if removed is None else f"forgot the last exchange ({removed} memory entries removed)")
        for warning in talk.forget_warnings if removed else ():
            say(f"warning: {warning}")
    elif word == "/evidence":
        for label, tokens in talk.units():
            say(f"{label}: {tokens} tokens")
    elif word == "/stats":
        say(jsonlib.dumps(talk.stats()))
    else:
        say(f"unknown command {word}; /help lists them")
    return None
