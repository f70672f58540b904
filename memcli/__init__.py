"""memcli: local long-term memory for LLM agents, kept as plain Markdown files."""

__version__ = "0.1.0"
