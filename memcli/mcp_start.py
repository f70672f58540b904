"""The MCP server's first answer, before memcli or the MCP SDK is imported.

A host starts ``memcli mcp`` and sends ``initialize`` first (``server/discover`` from protocol
2026-07-28); loading the SDK, the store and the tools takes about a second of CPU, and hosts time the
handshake. So the command's start (``memcli.cli``) reads that first request here, with nothing but the
standard library, and sends the SDK's own answer to it at once when it has it recorded:

* in the cache (``mcp-initialize.json`` in the cache folder): the bytes the SDK wrote in answer to
  this very first line, kept from an earlier start of the same memcli with the same SDK files and
  flags (a host sends the same line at every start);
* else in ``mcp_answers.json`` beside this module: the answers of the SDK version memcli pins
  (``constraints.txt``), recorded by ``scripts/record_mcp_answers.py``, used only when that very
  SDK version is the one installed and the request is of the plain shape they were recorded for
  (:func:`plain`).

It answers only when the server will start (:func:`ready`) and the line is one the SDK reads the same
way (:func:`first_request`); anything else (a batch, a carriage return, a byte order mark, an id or
params the SDK would refuse, a depth it would refuse) is handed to the SDK untouched. The server is
then built as always and reads every byte again as the SDK reads its standard input
(:class:`Handoff`); its own answer to a request answered already is not sent twice, and is what the
cache keeps. Nothing here decides what an answer says: it is the SDK's, recorded.
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import json
import os
import re

from memcli import parsing, where
from memcli.regular import read_bounded

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
        """The wire as the SDK reads its standard input (UTF-8 text, undecodable bytes replaced,
        universal newlines), starting with the bytes read already: every line is the SDK's own."""
        return io.TextIOWrapper(io.BufferedReader(_Prefixed(self.first + self.rest, self.read_fd)),
                                encoding="utf-8", errors="replace")

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


def _key(argv: list[str], request: dict, line: bytes) -> str | None:
    from memcli import __version__

    spec = importlib.util.find_spec("mcp")
    if spec is None or not spec.origin:
        return None
    sdk = os.stat(spec.origin)
    flags = sorted(a for a in argv if a in ("--read-only", "--no-ask"))
    raw = json.dumps([__version__, spec.origin, sdk.st_mtime_ns, sdk.st_size, flags, request.get("method"),
                      hashlib.sha256(line).hexdigest()])
    return hashlib.sha256(raw.encode()).hexdigest()[:24]


def read_json(path: str) -> object:
    """A JSON file's value, or None: a regular file of at most a few MB, opened without blocking."""
    try:
        return parsing.loads(read_bounded(path, 8 << 20).decode("utf-8"))
    except (OSError, ValueError, RecursionError):
        return None


def _recorded(argv: list[str], request: dict, line: bytes) -> tuple[str | None, str | None, bytes | None]:
    """(cache key, cache file, the answer to send for ``line``: the SDK's own bytes kept in the cache
    for this very line, else the shipped answer for a request of the plain shape it was recorded
    for, else None: the SDK answers)."""
    key = _key(argv, request, line)
    cache = os.path.join(where.cache()[0], CACHE_FILE)
    kept = read_json(cache)
    answer = kept.get(key) if key and isinstance(kept, dict) else None
    answer = answer.get("answer") if isinstance(answer, dict) else None
    if isinstance(answer, str) and answer.endswith("\n"):
        return key, cache, answer.encode("utf-8")
    if not plain(request):
        return key, cache, None
    shipped = read_json(SHIPPED)
    try:
        result = shipped.get("answers", {}).get(shipped_key(request)) if shipped.get("sdk") == sdk_version() else None
    except AttributeError:
        result = None
    if not isinstance(result, dict):
        return key, cache, None
    return key, cache, (json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result}, ensure_ascii=False,
                                   separators=(",", ":")) + "\n").encode("utf-8")


# ---------------------------------------------------------------- what the SDK is sure to take

_ID = re.compile(r"[A-Za-z0-9_.:-]{1,128}")
_INFO_KEYS = {"name", "version", "title", "description", "websiteUrl"}
_META_KEYS = {"io.modelcontextprotocol/protocolVersion", "io.modelcontextprotocol/clientInfo",
              "io.modelcontextprotocol/clientCapabilities"}


def _map_of_maps(value) -> bool:
    return isinstance(value, dict) and all(isinstance(v, dict) for v in value.values())


def _capabilities(caps) -> bool:
    """Client capabilities of the shapes the SDK's model takes as they are (no key its fields could
    read another way, no value it would coerce or refuse)."""
    if not isinstance(caps, dict):
        return False
    for name, value in caps.items():
        if name == "roots":
            if not isinstance(value, dict) or set(value) - {"listChanged"} or not isinstance(
                    value.get("listChanged", True), bool):
                return False
        elif name == "sampling":
            if not _map_of_maps(value) or set(value) - {"context", "tools"}:
                return False
        elif name == "elicitation":
            if not _map_of_maps(value) or set(value) - {"form", "url"}:
                return False
        elif name in ("experimental", "extensions"):
            if not _map_of_maps(value):
                return False
        else:
            return False  # tasks, or a capability memcli has not checked against the SDK: the SDK reads it
    return True


def _client_info(info) -> bool:
    return isinstance(info, dict) and {"name", "version"} <= set(info) <= _INFO_KEYS and all(
        isinstance(v, str) for v in info.values())


def plain(request: dict) -> bool:
    """Whether ``request`` is a handshake of exactly the shape the shipped answers were recorded for,
    so that the SDK would answer it with that very answer: a JSON-RPC 2.0 request (the four members,
    nothing else), an id that is a whole number or a short plain string, and params the SDK's models
    take as they are. Anything else (a null, fractional, boolean or object id, no ``jsonrpc``, extra
    members, params it would refuse or coerce) is the SDK's to answer."""
    if set(request) != {"jsonrpc", "id", "method", "params"} or request["jsonrpc"] != "2.0":
        return False
    ident, params = request["id"], request["params"]
    if isinstance(ident, bool) or not (isinstance(ident, int) and abs(ident) < 2 ** 53
                                       or isinstance(ident, str) and _ID.fullmatch(ident)):
        return False
    if not isinstance(params, dict) or not isinstance(_request_version(request), str):
        return False
    if request["method"] == "initialize":
        return set(params) == {"protocolVersion", "capabilities", "clientInfo"} and _capabilities(
            params["capabilities"]) and _client_info(params["clientInfo"])
    meta = params.get("_meta")
    return request["method"] == "server/discover" and set(params) == {"_meta"} and isinstance(meta, dict) \
        and set(meta) == _META_KEYS and _client_info(meta["io.modelcontextprotocol/clientInfo"]) \
        and _capabilities(meta["io.modelcontextprotocol/clientCapabilities"])


class _Refused(ValueError):
    pass


def _refuse(*_args):
    raise _Refused


def _no_twice(pairs):
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        raise _Refused  # a member given twice: which one a decoder takes is its own choice
    return dict(pairs)


def first_request(line: bytes) -> dict | None:
    """The first line as a request the fast path may answer, or None (the SDK reads it): the line must
    be what the SDK's reader reads as one line (it ends in a line feed with no carriage return before
    it: the SDK's universal newlines split at either), strict UTF-8 without a byte order mark, and
    JSON without anything two decoders could read apart (no fraction, no NaN, no member twice, no
    lone surrogate), nested no deeper than a request is."""
    if not line.endswith(b"\n") or b"\r" in line or line.startswith(b"\xef\xbb\xbf"):
        return None
    try:
        text = line.decode("utf-8")
        request = parsing.loads(text, parse_float=_refuse, parse_constant=_refuse, object_pairs_hook=_no_twice)
        json.dumps(request, ensure_ascii=False).encode("utf-8")  # a lone surrogate cannot be encoded
    except (ValueError, RecursionError, UnicodeError):
        return None
    return request if isinstance(request, dict) and request.get("method") in HANDSHAKES else None


def ready(argv: list[str]) -> bool:
    """Whether the server this command builds will start, checked by the rules it starts by: the
    store exists and its state is good (``--read-only`` never creates one; a store the server would
    create is left to it), and every configuration file and ``MEMCLI_*`` value it reads is good
    (:func:`memcli.config_files.resolve`). Only then may a handshake be answered before the server
    exists: else the host would be told "initialized" by a server that then exits."""
    from memcli import config_files, store_state

    try:
        path, _why = where.store(argv[1] if argv[:1] == ["--store"] else None)
        state, problem = store_state.decode(read_bounded(os.path.join(path, "state.json"), 1 << 20, follow=False))
        if problem or store_state.too_new(state):
            return False
        config_files.resolve(path)
    except Exception:  # said by the server itself, which then exits without having answered
        return False
    return True


def _read_first_line(read_fd: int) -> bytes:
    """Bytes off the wire up to the first line end the SDK would see (a line feed or a carriage
    return: a host that ends its line with a lone CR and waits must not wait on this read)."""
    data = b""
    while b"\n" not in data and b"\r" not in data and len(data) < _MAX_FIRST_LINE:
        chunk = os.read(read_fd, 65536)
        if not chunk:
            break
        data += chunk
    return data


def begin(argv: list[str]) -> None:
    """Read the first request; answer a handshake with its recorded answer when the SDK would answer
    it with exactly those bytes and the server will start; leave a :class:`Handoff` for the server,
    which reads every byte as they came. Stdin and stdout are moved aside (to the null device and to
    stderr) so that no child process and no stray print reaches the protocol stream."""
    read_fd, write_fd = os.dup(0), os.dup(1)
    data = _read_first_line(read_fd)
    cut = data.find(b"\n") + 1
    first, rest = (data[:cut], data[cut:]) if cut else (data, b"")
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    request = first_request(first)
    key = cache = None
    answered = False
    if request is not None and "id" in request:
        key, cache, answer = _recorded(argv, request, first)
        if answer is not None and ready(argv):
            os.write(write_fd, answer)
            answered = True
    HANDOFF[:] = [Handoff(first, rest, read_fd, write_fd, request, key, cache, answered)]


class _Prefixed(io.RawIOBase):
    """The wire as the bytes already read off it, then the file descriptor."""

    def __init__(self, pending: bytes, fd: int):
        self.pending, self.fd = pending, fd

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        if self.pending:
            size = min(len(buffer), len(self.pending))
            buffer[:size], self.pending = self.pending[:size], self.pending[size:]
            return size
        data = os.read(self.fd, len(buffer))
        buffer[:len(data)] = data
        return len(data)


class _Wire:
    def __init__(self, handoff: Handoff):
        self.handoff = handoff
        self.waiting = handoff.request is not None and "id" in handoff.request

    def write(self, text: str) -> int:
        if self.waiting:
            try:
                message = parsing.loads(text)
            except (ValueError, RecursionError):
                message = None
            if isinstance(message, dict) and "id" in message and message.get("id") == self.handoff.request.get("id") \
                    and type(message.get("id")) is type(self.handoff.request.get("id")):
                self.waiting = False
                if "result" in message:
                    self._keep(text)
                if self.handoff.answered:
                    return len(text)  # sent already: these very bytes
        os.write(self.handoff.write_fd, text.encode())
        return len(text)

    def flush(self) -> None:
        pass

    def _keep(self, answer: str) -> None:
        """The SDK's answer to this very first line kept for the next start (atomically; a cache nobody
        can write costs nothing)."""
        if not self.handoff.key or not self.handoff.cache or not answer.endswith("\n"):
            return
        try:
            kept = read_json(self.handoff.cache)
            kept = kept if isinstance(kept, dict) else {}
            if kept.get(self.handoff.key) == {"answer": answer}:
                return
            kept = dict(list(kept.items())[-15:])  # a few versions, flags and hosts, not a growing file
            kept[self.handoff.key] = {"answer": answer}
            os.makedirs(os.path.dirname(self.handoff.cache), mode=0o700, exist_ok=True)
            temp = f"{self.handoff.cache}.{os.getpid()}.tmp"
            with open(temp, "w", encoding="utf-8") as handle:
                json.dump(kept, handle)
            os.replace(temp, self.handoff.cache)
        except OSError:
            pass
