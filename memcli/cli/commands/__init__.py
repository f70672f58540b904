"""Command modules; importing this package registers every command on the app."""

from memcli.cli.commands import ask, chat, consolidate, doctor, evaluate, ingest, kv, read, store  # noqa: F401
