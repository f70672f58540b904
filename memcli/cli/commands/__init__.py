"""Command modules; importing this package registers every command on the app."""

from memcli.cli.commands import ask, chat, consolidate, doctor, evaluate, hook, ingest, kv, mcp, read, store  # noqa: F401
