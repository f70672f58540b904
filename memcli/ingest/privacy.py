"""What memory never keeps: ``<private>...</private>`` spans (dropped) and secrets (API keys, tokens,
private keys, passwords in URLs and assignments, high-entropy credentials), each replaced by a typed
placeholder such as ``[redacted:aws-access-key]`` before anything is written.

Secrets are found by Yelp's detect-secrets (its default plugins and filters, the ones it runs on a
text file); this module only decides how much of the text a finding covers: the whole token the
reported value is part of (a detector may report only a token's prefix, ``ghp``), or a private key's
whole ``BEGIN``..``END`` block. It also measures the entropy of bare tokens, which detect-secrets
measures only in quoted strings.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass

_PRIVATE_TAG = re.compile(r"<\s*(/?)\s*private\s*>", re.I)  # <private>, </private>, < private >, </ private>
_KEY_BLOCK = re.compile(r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----.*?(?:-----END[A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----|\Z)",
                        re.S)
_ENTROPY = "high-entropy-string"
_SCANNED_AS = "memory.txt"  # detect-secrets picks filters by file name; memory is plain text
_lock = threading.Lock()  # detect-secrets keeps its settings in one global


@dataclass
class Scrubbed:
    text: str
    private: int = 0  # <private> spans dropped
    secrets: int = 0  # secrets replaced by a placeholder


def placeholder(kind: str) -> str:
    """``[redacted:github-token]`` for detect-secrets' "GitHub Token"."""
    return f"[redacted:{re.sub(r'[^a-z0-9]+', '-', kind.lower()).strip('-') or 'secret'}]"


def drop_private(text: str, depth: int = 0) -> tuple[str, int, int]:
    """``text`` without what is inside ``<private>`` spans: nesting counted (the span ends at the
    close that balances its open), a close with nothing open dropped, an unclosed span running to the
    end. ``depth``: spans left open by the messages before (a session's earlier messages). Returns
    (kept text, spans dropped, depth at the end)."""
    kept: list[str] = []
    spans = 0
    at = 0
    for tag in _PRIVATE_TAG.finditer(text):
        if depth == 0:
            kept.append(text[at:tag.start()])
        at = tag.end()
        if tag.group(1):  # a close
            depth = max(depth - 1, 0)
        else:
            spans += depth == 0
            depth += 1
    if depth == 0:
        kept.append(text[at:])
    elif not kept and not spans:
        spans = 1  # the whole message is inside a span an earlier one opened
    return "".join(kept), spans, depth


def scrub(text: str) -> Scrubbed:
    """``text`` without its private spans and with its secrets replaced."""
    return scrub_many([text])[0]


def scrub_fields(values: list[str]) -> dict[str, str]:
    """Each distinct value (a speaker, a file name, a session id...) with its secrets replaced and
    its private spans dropped, for every field that reaches the store, its file names or git."""
    distinct = sorted({v for v in values if v})
    return {value: clean.text for value, clean in zip(distinct, scrub_many(distinct), strict=True)}


def scrub_many(texts: list[str], sessions: list[str | None] | None = None) -> list[Scrubbed]:
    """:func:`scrub` of each text (detect-secrets set up once for all of them). ``sessions``: each
    text's session, when the texts are a session's messages in order: a ``<private>`` span opened
    in one message runs on into the next messages of its session until it is closed."""
    from detect_secrets.core import scan
    from detect_secrets.plugins.high_entropy_strings import Base64HighEntropyString
    from detect_secrets.settings import default_settings

    out = []
    with _lock, default_settings() as settings:
        # this filter hides a keyword assigned from code (`password = get_pw()`); memory is prose, and
        # the filter's regular expression is most of the scanning time (0.7 ms a line)
        settings.disable_filters("detect_secrets.filters.heuristic.is_indirect_reference")
        settings.disable_plugins("IPPublicDetector")  # a server's address is a fact to remember, not a credential
        entropy = Base64HighEntropyString()
        depths: dict[str | None, int] = {}
        for n, text in enumerate(texts):
            session = sessions[n] if sessions is not None else n
            kept, private, depths[session] = drop_private(text, depths.get(session, 0))
            if private or kept != text:
                kept = re.sub(r"[ \t]{2,}", " ", kept).strip()
            spans = _findings(kept, scan, entropy)
            out.append(Scrubbed(_replace(kept, spans), private, len(spans)))
    return out


_TOKEN_CHARS = r"[A-Za-z0-9_\-+/.~]"  # what a token is made of; '=' only ends one (base64 padding)
# a run of token characters an unquoted credential is made of; the separators around it are not
_CANDIDATE = re.compile(r"[A-Za-z0-9_\-+/.~]{20,}={0,2}")


def _findings(text: str, scan, entropy) -> list[tuple[int, int, str]]:
    """(start, end, type) of each secret in ``text``, merged where they overlap."""
    lines = text.split("\n")
    starts = [0]
    for line in lines[:-1]:
        starts.append(starts[-1] + len(line) + 1)
    numbered = [(n, line) for n, line in enumerate(lines, 1) if line.strip()]
    spans: list[tuple[int, int, str]] = []
    for secret in scan._process_line_based_plugins(numbered, filename=_SCANNED_AS) if numbered else ():
        offset, line = starts[secret.line_number - 1], lines[secret.line_number - 1]
        if secret.type == "Private Key":
            block = _KEY_BLOCK.search(text, offset)
            spans.append((block.start(), block.end(), secret.type) if block else (offset, offset + len(line),
                                                                                secret.type))
            continue
        value = secret.secret_value or ""
        for match in re.finditer(re.escape(value), line) if value else ():
            start, end = match.start(), match.end()  # the whole token the value is part of (a prefix: ghp_...)
            while start and re.match(_TOKEN_CHARS, line[start - 1]):
                start -= 1
            while end < len(line) and (re.match(_TOKEN_CHARS, line[end]) or line[end] == "="):
                end += 1
            while end > match.end() and line[end - 1] == ".":  # a sentence's full stop is not the token's
                end -= 1
            spans.append((offset + start, offset + end, secret.type))
    # detect-secrets measures entropy only in quoted strings; a credential pasted bare is measured too
    for match in _CANDIDATE.finditer(text):
        token = match.group(0).rstrip(".")
        if "://" in text[match.start():match.end() + 3] or not re.search(r"\d", token) \
                or not re.search(r"[A-Za-z]", token):
            continue
        if token.startswith(("/", "~/", "./", "../")):  # a file's path: each of its names is measured
            at = match.start()
            for name in token.split("/"):
                if len(name) >= 20 and entropy.calculate_shannon_entropy(name) > entropy.entropy_limit:
                    spans.append((at, at + len(name), _ENTROPY))
                at += len(name) + 1
        elif entropy.calculate_shannon_entropy(token) > entropy.entropy_limit:
            spans.append((match.start(), match.start() + len(token), _ENTROPY))
    merged: list[list] = []
    for start, end, kind in sorted(spans):
        if merged and start < merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
            if merged[-1][2] == _ENTROPY:  # a detector that names the kind says more
                merged[-1][2] = kind
        else:
            merged.append([start, end, kind])
    return [tuple(m) for m in merged]


def _replace(text: str, spans: list[tuple[int, int, str]]) -> str:
    for start, end, kind in reversed(spans):
        text = text[:start] + placeholder(kind) + text[end:]
    return text
