"""The MCP server's first answer, before memcli or the MCP SDK is imported.

A host starts ``memcli mcp`` and sends ``initialize`` first (``server/discover`` from protocol
2026-07-28); loading the SDK, the store and the tools takes about a second of CPU, and hosts time the
handshake. So the command's start (``memcli.cli``) reads that first request here, with nothing but the
standard library, and sends the SDK's own answer to it at once when it has it recorded:

* in the cache (``mcp-initialize.json`` in the cache folder), kept from an earlier start of the same
  memcli with the same SDK files and flags, for the same request and protocol version;
* else in ``mcp_answers.json`` beside this module: the answers of the SDK version memcli pins
  (``constraints.txt``), recorded by ``scripts/record_mcp_answers.py``, used only when that very
  SDK version is the one installed (a test checks them against the SDK's own answers).

The server is then built as always and reads the same request again (:class:`Handoff`); its own
answer to it is not sent twice, and is what the cache keeps. With no answer recorded, the SDK
answers. Nothing here decides what the answer says: it is the SDK's, recorded.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os

from memcli import where

CACHE_FILE = "mcp-initialize.json"
SHIPPED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mcp_answers.json")
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
        """A file that writes to the wire, leaving out the SDK's answer to a handshake already
        answered, and keeping that answer for next time when it was not."""
        return _Wire(self)


HANDOFF: list[Handoff] = []  # set by begin(); read by memcli.mcp_server.serve


def serves(argv: list[str]) -> bool:
    """Whether ``argv`` starts the server (``[--store S] mcp [flags]``, not ``--print-config``)."""
    args = argv[2:] if argv[:1] == ["--store"] else argv
    return bool(args) and args[0] == "mcp" and all(a in _FLAGS for a in args[1:])


def _request_version(request: dict) -> str | None:
    params = request.get("params") if isinstance(request.get("params"), dict) else {}
    meta = params.get("_meta") if isinstance(params.get("_meta"), dict) else {}
    version = params.get("protocolVersion") or meta.get("io.modelcontextprotocol/protocolVersion")
    return version if isinstance(version, str) else None


def sdk_version() -> str | None:
    """The installed MCP SDK's version, from its ``dist-info`` folder (no import, no metadata scan)."""
    spec = importlib.util.find_spec("mcp")
    if spec is None or not spec.origin:
        return None
    site = os.path.dirname(os.path.dirname(spec.origin))
    for name in os.listdir(site):
        if name.startswith("mcp-") and name.endswith(".dist-info"):
            return name[len("mcp-"):-len(".dist-info")]
    return None


def shipped_key(request: dict) -> str:
    return f"{request.get('method')} {_request_version(request)}"


def _key(argv: list[str], request: dict) -> str | None:
    from memcli import __version__

    spec = importlib.util.find_spec("mcp")
    if spec is None or not spec.origin:
        return None
    sdk = os.stat(spec.origin)
    flags = sorted(a for a in argv if a in ("--read-only", "--no-ask"))
    raw = json.dumps([__version__, spec.origin, sdk.st_mtime_ns, sdk.st_size, flags, request.get("method"),
                      _request_version(request)])
    return hashlib.sha256(raw.encode()).hexdigest()[:24]


def _recorded(argv: list[str], request: dict) -> tuple[str | None, str | None, dict | None]:
    """(cache key, cache file, the answer recorded for ``request``: the cache's, else the shipped one)."""
    key = _key(argv, request)
    cache = os.path.join(where.cache()[0], CACHE_FILE)
    try:
        with open(cache, encoding="utf-8") as handle:
            kept = json.load(handle)
        result = kept.get(key) if key and isinstance(kept, dict) else None
    except (OSError, ValueError):
        result = None
    if not isinstance(result, dict):
        try:
            with open(SHIPPED, encoding="utf-8") as handle:
                shipped = json.load(handle)
            if shipped.get("sdk") == sdk_version():
                result = shipped.get("answers", {}).get(shipped_key(request))
        except (OSError, ValueError, AttributeError):
            result = None
    return key, cache, result if isinstance(result, dict) else None


def begin(argv: list[str]) -> None:
    """Read the first request; answer a handshake with its recorded answer when there is one; leave a
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
        key, cache, result = _recorded(argv, request)
        if result is not None:
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
                self._keep(message["result"])
                if self.handoff.answered:
                    return len(text)  # sent already, as recorded
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
            if kept.get(self.handoff.key) == result:
                return
            kept = dict(list(kept.items())[-15:])  # a few versions and flags, not a growing file
            kept[self.handoff.key] = result
            os.makedirs(os.path.dirname(self.handoff.cache), mode=0o700, exist_ok=True)
            temp = f"{self.handoff.cache}.{os.getpid()}.tmp"
            with open(temp, "w", encoding="utf-8") as handle:
                json.dump(kept, handle)
            os.replace(temp, self.handoff.cache)
        except OSError:
            pass
