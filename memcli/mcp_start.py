"""The MCP server's first answer, before memcli or the MCP SDK is imported.

A host starts ``memcli mcp`` and sends ``initialize`` first (``server/discover`` from protocol
2026-07-28); loading the SDK, the store and the tools
takes about a second of CPU, and hosts time the handshake. So the command's start (``memcli.cli``)
reads that first request here, with nothing but the standard library, and, when the SDK answered
the same request before (same memcli, same SDK files, same flags, same protocol version asked), sends
that answer at once from the cache (``mcp-initialize.json`` in the cache folder). The server is then
built as always and reads the same request again (:class:`Handoff`); its own answer to it, the same
one, is not sent twice. With no answer cached, the SDK answers and its answer is kept for next time.

Nothing here decides what the answer says: it is the SDK's, recorded.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os

from memcli import where

CACHE_FILE = "mcp-initialize.json"
HANDSHAKES = ("initialize", "server/discover")  # the first request: up to protocol 2025-11-25, and from 2026-07-28
_FLAGS = ("--read-only", "--ask", "--no-ask", "-q", "--quiet", "-v", "--verbose")
_MAX_FIRST_LINE = 1 << 20


class Handoff:
    """The first request read off the wire (and anything read after it), for the server to read again;
    the wire itself (``read_fd``, ``write_fd``: the process's stdin and stdout, moved aside so that
    nothing else writes to the protocol stream); whether the answer went out already."""

    def __init__(self, first: bytes, rest: bytes, read_fd: int, write_fd: int, request: dict | None,
                 key: str | None, cache: str | None, answered: bool):
        self.first, self.rest = first, rest
        self.read_fd, self.write_fd = read_fd, write_fd
        self.request, self.key, self.cache, self.answered = request, key, cache, answered

    def reader(self):
        """A file whose lines are the first request, then the rest of the wire."""
        return _Replay(self.first + self.rest, os.fdopen(self.read_fd, "rb", buffering=0))

    def writer(self):
        """A file that writes to the wire, leaving out the SDK's answer to an ``initialize`` already
        answered, and keeping that answer for next time when it was not."""
        return _Wire(self)


HANDOFF: list[Handoff] = []  # set by begin(); read by memcli.mcp_server.serve


def serves(argv: list[str]) -> bool:
    """Whether ``argv`` starts the server (``[--store S] mcp [flags]``, not ``--print-config``)."""
    args = argv[2:] if argv[:1] == ["--store"] else argv
    return bool(args) and args[0] == "mcp" and all(a in _FLAGS for a in args[1:])


def _key(argv: list[str], request: dict) -> str | None:
    from memcli import __version__

    spec = importlib.util.find_spec("mcp")
    if spec is None or not spec.origin:
        return None
    sdk = os.stat(spec.origin)
    params = request.get("params") if isinstance(request.get("params"), dict) else {}
    meta = params.get("_meta") if isinstance(params.get("_meta"), dict) else {}
    flags = sorted(a for a in argv if a in ("--read-only", "--no-ask"))
    raw = json.dumps([__version__, spec.origin, sdk.st_mtime_ns, sdk.st_size, flags, request.get("method"),
                      params.get("protocolVersion"), meta.get("io.modelcontextprotocol/protocolVersion")])
    return hashlib.sha256(raw.encode()).hexdigest()[:24]


def begin(argv: list[str]) -> None:
    """Read the first request; answer an ``initialize`` from the cache when it can; leave a
    :class:`Handoff` for the server. Stdin and stdout are moved aside (to the null device and to
    stderr) so that no child process and no stray print reaches the protocol stream."""
    read_fd, write_fd = os.dup(0), os.dup(1)
    data = b""
    while b"\n" not in data and len(data) < _MAX_FIRST_LINE:
        chunk = os.read(read_fd, 65536)
        if not chunk:
            break
        data += chunk
    first, newline, rest = data.partition(b"\n")
    first += newline
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    request = None
    try:
        request = json.loads(first)
    except ValueError:
        pass
    key = cache = None
    answered = False
    if isinstance(request, dict) and request.get("method") in HANDSHAKES and "id" in request:
        try:
            key = _key(argv, request)
            cache = os.path.join(where.cache()[0], CACHE_FILE)
            with open(cache, encoding="utf-8") as handle:
                result = json.load(handle).get(key) if key else None
        except (OSError, ValueError, AttributeError):
            result = None
        if isinstance(result, dict):
            os.write(write_fd, (json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result},
                                           separators=(",", ":")) + "\n").encode())
            answered = True
    HANDOFF[:] = [Handoff(first, rest, read_fd, write_fd, request if isinstance(request, dict) else None,
                          key, cache, answered)]


class _Replay:
    def __init__(self, pending: bytes, wire):
        self.pending, self.wire = pending, wire

    def readline(self) -> str:
        while b"\n" not in self.pending:
            chunk = self.wire.read(65536)
            if not chunk:
                break
            self.pending += chunk
        line, newline, self.pending = self.pending.partition(b"\n")
        return (line + newline).decode("utf-8", "replace")


class _Wire:
    def __init__(self, handoff: Handoff):
        self.handoff = handoff
        self.waiting = handoff.request is not None and handoff.request.get("method") in HANDSHAKES

    def write(self, text: str) -> int:
        if self.waiting:
            try:
                message = json.loads(text)
            except ValueError:
                message = None
            if isinstance(message, dict) and message.get("id") == self.handoff.request.get("id") \
                    and "result" in message:
                self.waiting = False
                if self.handoff.answered:
                    return len(text)  # sent already, from the cache
                self._keep(message["result"])
        os.write(self.handoff.write_fd, text.encode())
        return len(text)

    def flush(self) -> None:
        pass

    def _keep(self, result: dict) -> None:
        """The SDK's answer kept for the next start (atomically; a cache nobody can write costs nothing)."""
        if not self.handoff.key or not self.handoff.cache:
            return
        try:
            try:
                with open(self.handoff.cache, encoding="utf-8") as handle:
                    kept = json.load(handle)
                kept = kept if isinstance(kept, dict) else {}
            except (OSError, ValueError):
                kept = {}
            kept = dict(list(kept.items())[-15:])  # a few versions and flags, not a growing file
            kept[self.handoff.key] = result
            os.makedirs(os.path.dirname(self.handoff.cache), mode=0o700, exist_ok=True)
            temp = f"{self.handoff.cache}.{os.getpid()}.tmp"
            with open(temp, "w", encoding="utf-8") as handle:
                json.dump(kept, handle)
            os.replace(temp, self.handoff.cache)
        except OSError:
            pass
