"""Command modules; importing this package registers every command on the app."""

from memcli.cli.commands import (  # noqa: F401
    ask,
    chat,
    consolidate,
    doctor,
    evaluate,
    forget,
    hook,
    ingest,
    kv,
    mcp,
    read,
    share,
    skill,
    store,
)
