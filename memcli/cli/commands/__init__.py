"""Command modules; importing this package registers every command on the app."""

from memcli.cli.commands import consolidate, ingest, read, store  # noqa: F401
