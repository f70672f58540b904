"""memcli: local long-term memory for LLM agents, kept as plain Markdown files.

``from memcli import Memory`` is the Python API (:mod:`memcli.memory`); it is
imported on first use, so ``memcli --version`` stays light.
"""

__version__ = "0.1.0"
__all__ = ["Memory", "__version__"]


def __getattr__(name: str):
    if name == "Memory":
        from memcli.memory import Memory

        return Memory
    raise AttributeError(f"module 'memcli' has no attribute {name!r}")
