"""memcli kv build | ls | stats | verify | prune."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Optional

import typer

from memcli.cli.app import app
from memcli.cli.common import JsonOpt, QuietOpt, VerboseOpt, open_store, output, settings
from memcli.cli.output import Output, register
from memcli.errors import EXIT_FAILURE, UsageError

kv_app = typer.Typer(help="The KV-block store: saved llama.cpp states of memory.", no_args_is_help=True)
app.add_typer(kv_app, name="kv")


@dataclass
class KVReport:
    action: str
    data: dict = field(default_factory=dict)
    rows: list[dict] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"action": self.action, **self.data, **({"blocks": self.rows} if self.action == "ls" else {})}


@kv_app.command("build")
def build(
    ctx: typer.Context,
    kv_verify: Annotated[bool, typer.Option(
        "--kv-verify", help="Check restored blocks' next-token predictions; rebuild on a mismatch.")] = False,
    json: JsonOpt = False, quiet: QuietOpt = False, verbose: VerboseOpt = False,
) -> None:
    """Prefill and save the blocks of chat's memory context (header, documents, CURRENT).

    Blocks already stored and valid are restored instead; a block saved under
    another model context is refused and rebuilt.
    """
    import time

    from memcli.kv import kv_root, open_engine
    from memcli.kv.chat import ChatSession

    out = output(ctx, json, quiet, verbose)
    store = open_store(ctx)
    cfg = settings(ctx, store)
    engine = open_engine(store, cfg, verbose=out.verbose, verify=kv_verify)
    begin = time.perf_counter()
    talk = ChatSession(engine, store, kv_root(store, cfg) / "sessions", "default", cfg.chat_memory_tokens)
    with store.reading():
        units = talk.memory()
        keys = engine.load_chain(units)
    evicted = engine.blocks.evict(cfg.kv_budget_mb * 1024 * 1024, keep=set(keys))
    out.emit(KVReport("build", {"units": [{"unit": u.label, "tokens": len(u.tokens)} for u in units],
                                "tokens": sum(len(u.tokens) for u in units), **engine.stats.to_dict(),
                                "evicted_blocks": evicted[0], "seconds": round(time.perf_counter() - begin, 3)}))


@kv_app.command("ls")
def ls(ctx: typer.Context, json: JsonOpt = False, quiet: QuietOpt = False, verbose: VerboseOpt = False) -> None:
    """List stored blocks: key, unit, start, tokens, size, last use (newest first)."""
    from memcli.kv import block_store

    out = output(ctx, json, quiet, verbose)
    store = open_store(ctx)
    blocks = sorted(block_store(store, settings(ctx, store)).blocks(), key=lambda b: -b.last_used)
    out.emit(KVReport("ls", {"count": len(blocks)}, [b.to_dict() for b in blocks]))


@kv_app.command("stats")
def stats(ctx: typer.Context, json: JsonOpt = False, quiet: QuietOpt = False, verbose: VerboseOpt = False) -> None:
    """Blocks, tokens and bytes stored, by kind of unit, against the budget (kv.budget_mb)."""
    from memcli.kv import block_store, kv_root

    out = output(ctx, json, quiet, verbose)
    store = open_store(ctx)
    cfg = settings(ctx, store)
    blocks = block_store(store, cfg).blocks()
    kinds: dict[str, dict] = {}
    for b in blocks:
        kind = b.header.unit.split(":", 1)[0].split("@", 1)[0]
        row = kinds.setdefault(kind, {"blocks": 0, "tokens": 0, "bytes": 0})
        row["blocks"] += 1
        row["tokens"] += b.header.n_tokens
        row["bytes"] += b.file_size
    total_bytes = sum(b.file_size for b in blocks)
    tokens = sum(b.header.n_tokens for b in blocks)
    out.emit(KVReport("stats", {"dir": str(kv_root(store, cfg)), "blocks": len(blocks), "tokens": tokens,
                                "bytes": total_bytes, "bytes_per_token": round(total_bytes / tokens) if tokens else None,
                                "budget_bytes": cfg.kv_budget_mb * 1024 * 1024, "by_unit": kinds}))


@kv_app.command("verify")
def verify(ctx: typer.Context, json: JsonOpt = False, quiet: QuietOpt = False, verbose: VerboseOpt = False) -> None:
    """Check every block's header, checksum and parent; exit 1 when any is bad (no model needed)."""
    from memcli.kv import block_store

    out = output(ctx, json, quiet, verbose)
    store = open_store(ctx)
    blocks = block_store(store, settings(ctx, store))
    bad = {}
    infos = blocks.blocks()
    for info in infos:
        reason = blocks.verify(info.header.key)
        if reason:
            bad[info.header.key] = reason
    out.emit(KVReport("verify", {"checked": len(infos), "bad": bad}))
    if bad:
        raise typer.Exit(EXIT_FAILURE)


@kv_app.command("prune")
def prune(
    ctx: typer.Context,
    budget: Annotated[Optional[int], typer.Option("--budget", metavar="MB", help="Evict to this size (default: "
                                                  "kv.budget_mb).")] = None,
    json: JsonOpt = False, quiet: QuietOpt = False, verbose: VerboseOpt = False,
) -> None:
    """Remove stale blocks (their document changed), broken ones, then least recently used ones over budget."""
    from memcli.kv import block_store
    from memcli.kv.context import stale_labels

    out = output(ctx, json, quiet, verbose)
    if budget is not None and budget < 0:
        raise UsageError("--budget must not be negative")
    store = open_store(ctx)
    cfg = settings(ctx, store)
    blocks = block_store(store, cfg)
    with store.reading():
        stale = stale_labels(store, {b.header.unit for b in blocks.blocks()})
    stale_blocks, stale_tokens = blocks.invalidate(stale)
    broken = [b.header.key for b in blocks.blocks() if blocks.verify(b.header.key)]
    for key in broken:
        blocks.remove(key)
    evicted, freed = blocks.evict((cfg.kv_budget_mb if budget is None else budget) * 1024 * 1024)
    out.emit(KVReport("prune", {"stale_blocks": stale_blocks, "stale_tokens": stale_tokens, "broken": len(broken),
                                "evicted_blocks": evicted, "evicted_bytes": freed}))


@register(KVReport)
def _render(report: KVReport, out: Output) -> None:
    if report.action == "ls":
        out.table("KV blocks", ["key", "unit", "start", "tokens", "MB", "parent"],
                  [[r["key"][:12], r["unit"], str(r["start"]), str(r["n_tokens"]), f"{r['bytes'] / 1e6:.1f}",
                    (r["parent"] or "-")[:12]] for r in report.rows])
        return
    for key, value in report.data.items():
        if isinstance(value, (dict, list)) and value:
            out.write(f"{key}:")
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for k, v in items:
                out.write(f"  {k}: {v}" if isinstance(value, dict) else f"  {v}")
        else:
            out.write(f"{key}: {value}")
