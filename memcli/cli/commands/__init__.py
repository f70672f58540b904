"""Command modules; importing this package registers every command on the app."""

from memcli.cli.commands import ask, consolidate, doctor, evaluate, ingest, read, store  # noqa: F401
