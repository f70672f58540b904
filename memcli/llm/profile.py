"""The model profile: ``small`` or ``capable``, and the defaults that follow from it.

A small model (the embedded 135M one) follows JSON schemas but not
instructions: it cannot drive the agentic reader or consolidate better than
the deterministic path, so with it memcli consolidates deterministically and
answers from the deterministic evidence reader. A capable model (a user's
7-8B GGUF, or an OpenAI-compatible server) gets the agent and model-driven
consolidation. The profile is decided from what the model is, without loading
it: the parameter count in the GGUF file's tensor table, or, for a server,
``capable`` (a server is configured by the user for real work). The
``model.profile`` setting overrides the decision.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

from memcli.config import READERS, switch
from memcli.errors import ConfigError
from memcli.llm import model_path, uses_server
from memcli.results import Result

PROFILES = ("small", "capable")
_SERVER = "an OpenAI-compatible server (set model.profile=small for a small served model)"
CAPABLE_PARAMS = 3_000_000_000  # models with at least this many parameters are capable

# GGUF metadata value types (ggml/include/gguf.h): their sizes, or None for string and array
_SCALAR = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_STRING, _ARRAY = 8, 9


@dataclass
class Profile(Result):
    name: str  # small | capable
    reason: str
    n_params: int | None = None


def gguf_parameters(path: Path) -> int:
    """The number of weights in a GGUF file, summed over its tensor table (the weights are not read). The file
    is mapped, not read: its metadata (a tokenizer's 100,000 strings) is walked in memory, a few tens of ms."""
    import mmap

    with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
        at = 0

        def take(fmt: str) -> int:
            nonlocal at
            size = struct.calcsize(fmt)
            if at + size > len(data):
                raise ValueError("the file ends inside its header")
            value = struct.unpack_from(fmt, data, at)[0]
            at += size
            return value

        def skip(n: int) -> None:
            nonlocal at
            if n < 0 or at + n > len(data):
                raise ValueError("the file ends inside its header")
            at += n

        def skip_value(kind: int) -> None:
            if kind in _SCALAR:
                skip(_SCALAR[kind])
            elif kind == _STRING:
                skip(take("<Q"))
            elif kind == _ARRAY:
                item, count = take("<I"), take("<Q")
                if item in _SCALAR:
                    skip(_SCALAR[item] * count)
                elif item == _STRING:
                    for _ in range(count):
                        skip(take("<Q"))
                else:
                    for _ in range(count):
                        skip_value(item)
            else:
                raise ValueError(f"unknown metadata type {kind}")

        if len(data) < 8 or data[:4] != b"GGUF":
            raise ValueError("not a GGUF file")
        at = 4
        if take("<I") < 2:
            raise ValueError("GGUF version 1 is not supported")
        n_tensors, n_kv = take("<Q"), take("<Q")
        for _ in range(n_kv):
            skip(take("<Q"))  # the key
            skip_value(take("<I"))
        total = 0
        for _ in range(n_tensors):
            skip(take("<Q"))  # the name
            count = 1
            for _ in range(take("<I")):
                count *= take("<Q")
            skip(12)  # type, offset
            total += count
        return total


def _short(n: int) -> str:
    return f"{n / 1e9:.1f}B" if n >= 1e9 else f"{n / 1e6:.0f}M"


def _by_size(n: int, what: str) -> Profile:
    name = "capable" if n >= CAPABLE_PARAMS else "small"
    relation = "at least" if name == "capable" else "under"
    return Profile(name, f"{what} has {_short(n)} parameters ({relation} {_short(CAPABLE_PARAMS)})", n)


def decide(settings, model=None) -> Profile:
    """The profile: the ``model.profile`` setting when not ``auto``, else from ``model`` (an open
    model's ``describe()``) or the configured model (read from its file's header, not loaded)."""
    chosen = str(settings.model_profile).strip().lower()
    if chosen in PROFILES:
        return Profile(chosen, f"model.profile is {chosen} ({settings.source('model.profile')})")
    if chosen != "auto":
        raise ConfigError(f"model.profile must be auto, small or capable, got {settings.model_profile!r}")
    if model is not None:
        described = model.describe()
        if isinstance(described.get("n_params"), int) and described["n_params"] > 0:
            return _by_size(described["n_params"], str(getattr(model, "name", "the model")))
        if described.get("backend") == "openai":
            return Profile("capable", _SERVER)
        return Profile("small", "the model's size is unknown")
    if uses_server(settings):
        return Profile("capable", _SERVER)
    try:
        path = model_path(settings)
        n = gguf_parameters(path)
    except Exception as exc:  # a missing or unreadable file fails later, where the model is opened
        return Profile("small", f"the model's size is unknown ({getattr(exc, 'message', None) or exc})")
    return _by_size(n, path.name)


def _by_profile(value, key: str, choices: tuple[str, ...], profile: Profile, capable: str, small: str) -> str:
    """A setting that may be ``auto``: its value, or for ``auto`` the profile's choice."""
    chosen = str(value).strip().lower()
    if chosen == "auto":
        return capable if profile.name == "capable" else small
    if chosen not in choices:
        raise ConfigError(f"{key} must be auto or one of {', '.join(choices)}, got {chosen!r}")
    return chosen


def reader_for(settings, profile: Profile) -> str:
    """ask's reader: the ``ask.reader`` setting, or for ``auto`` the profile's (capable: agent; small:
    evidence, the deterministic evidence and one answer call)."""
    return _by_profile(settings.ask_reader, "ask.reader", READERS, profile, "agent", "evidence")


ANSWERS = ("extract", "generate")


GENERATE_PARAMS = 1_000_000_000  # models with at least this many parameters write their answers


def answer_for(settings, profile: Profile) -> str:
    """How ask answers: the ``ask.answer`` setting, or for ``auto`` by the model: a capable one, or a
    small one of at least 1B parameters, writes it (``generate``, checked against the evidence); a
    smaller one only scores spans of the evidence (``extract``). On a sample of the development
    questions the 1.5B reference model wrote better answers than it picked spans (F1 0.378 against
    0.217), the 135M default model picked better spans than it wrote (0.221 against 0.171;
    docs/benchmarks.md)."""
    small = "generate" if (profile.n_params or 0) >= GENERATE_PARAMS else "extract"
    return _by_profile(settings.ask_answer, "ask.answer", ANSWERS, profile, "generate", small)


def consolidates_with_model(settings, profile: Profile) -> bool:
    """Whether consolidation uses the model: ``consolidate.llm``, or for ``auto`` a capable profile."""
    chosen = switch(settings.consolidate_llm, "consolidate.llm")
    return profile.name == "capable" if chosen is None else chosen
