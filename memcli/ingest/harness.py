"""What an agent's harness writes into a session besides the conversation, taken out of each message.

Claude Code, Codex, ChatGPT and the other agents put their own text into the messages they log as the user's or the
assistant's: instruction files (``# AGENTS.md instructions for ... <INSTRUCTIONS>...``), context
blocks (``<environment_context>``, ``<system-reminder>``, ``<user_instructions>``...), slash-command
wrappers (``<command-name>/review</command-name><command-args>...``), image placeholders and
citation markers in private-use characters. :func:`clean` keeps the conversation:

* a slash command becomes one short line, the command and its arguments (``/review src``);
* an instruction-file block goes, from its heading to the end of its ``<INSTRUCTIONS>`` element
  (to the end of the text when there is none);
* elements whose tag is a harness's kind of name (two or more words joined by ``-`` or ``_``, or
  ``INSTRUCTIONS``) and that together fill their lines (``<bash-stdout></bash-stdout><bash-stderr>
  </bash-stderr>``) go whole;
* the texts a harness writes in its own words: Claude Code's "[Request interrupted by user...]"
  notice and the summary it opens a compacted session with ("This session is being continued
  from a previous conversation..."), the Codex IDE extension's "# Context from my IDE setup:"
  block before "## My request for Codex:";
* image placeholders (``[Image #2]``, ``<image ...>``), citation markers (private-use characters,
  ChatGPT's file-search ``【4:0†file.pdf†L1-L5】``; a ``【heading】`` without ``†`` is text) and any
  other private-use character go, and the space a marker leaves before a full stop;
* nothing inside a fenced code block is touched: code a person pastes is conversation.

The rules name the shapes harnesses write, never words of a conversation; ``--keep-harness`` keeps
everything (:func:`clean` is not called).
"""

from __future__ import annotations

import re

_FENCE = re.compile(r"^[ \t]*(```|~~~).*?(?:^[ \t]*\1[ \t]*$|\Z)", re.S | re.M)
_COMMAND_PART = re.compile(r"<command-(name|message|args)>(.*?)</command-\1>", re.S)
_INSTRUCTION_FILE = re.compile(r"^[ \t]*#+[ \t]*[\w.-]+\.md instructions for\b.*?(?:</INSTRUCTIONS>[ \t]*$|\Z)",
                               re.S | re.M | re.I)
_HARNESS_TAG = r"(?:[A-Za-z][A-Za-z0-9]*(?:[-_][A-Za-z0-9]+)+|INSTRUCTIONS)"
_ELEMENT = re.compile(rf"^[ \t]*(?:<({_HARNESS_TAG})(?:\s[^>]*)?>.*?</\1>[ \t]*)+$", re.S | re.M)
_EMPTY_ELEMENT = re.compile(rf"^[ \t]*<{_HARNESS_TAG}(?:\s[^>]*)?/>[ \t]*$", re.M)
_IMAGE = re.compile(r"\[Image #\d+\]|</?image\b[^>]*>", re.I)
_CITATION = re.compile("\ue200[^\ue201]{0,200}\ue201")
_FILE_CITATION = re.compile("\u3010[^\u3010\u3011\n]{0,200}\u2020[^\u3010\u3011\n]{0,300}\u3011")  # 【4:0†a.pdf†L1-L5】
_IDE_CONTEXT = re.compile(r"^# Context from my IDE setup:[ \t]*\n.*?^## My request for Codex:[ \t]*\n?", re.S | re.M)
_NOTICE = re.compile(r"^[ \t]*\[Request interrupted by user[^\]\n]{0,40}\][ \t]*$", re.M)
_CONTINUED = re.compile(r"\AThis session is being continued from a previous conversation that ran out of context\..*",
                        re.S)
_PRIVATE_USE = re.compile("[\ue000-\uf8ff]")


def clean(text: str) -> str:
    """The conversation in one message's text ('' when it is all harness)."""
    if not text:
        return text
    pieces, last = [], 0
    for fence in _FENCE.finditer(text):
        pieces.append(_clean_prose(text[last:fence.start()]))
        pieces.append(fence.group(0))
        last = fence.end()
    pieces.append(_clean_prose(text[last:]))
    out = "".join(pieces)
    if out == text:  # nothing was the harness's: the message as written, blank lines and all
        return text.strip()
    return re.sub(r"\n{3,}", "\n\n", out).strip()  # the gap a block taken out leaves


def _clean_prose(text: str) -> str:
    if "<command-name>" in text:
        text = _slash_command(text)
    text = _CONTINUED.sub("", _NOTICE.sub("", _IDE_CONTEXT.sub("", text)))
    text = _INSTRUCTION_FILE.sub("", text)
    text = _ELEMENT.sub("", text)
    text = _EMPTY_ELEMENT.sub("", text)
    marked = _PRIVATE_USE.sub("", _FILE_CITATION.sub("", _CITATION.sub("", _IMAGE.sub("", text))))
    if marked != text:  # a marker taken out of a sentence leaves one space, not two, and none before a stop
        marked = re.sub(r"(?<=\S)[ \t]{2,}(?=\S)", " ", marked)
        marked = re.sub(r"(?<=\S)[ \t]+(?=[.,;:!?](?:\s|$))", "", marked)
    return marked


def _slash_command(text: str) -> str:
    """``<command-name>/x</command-name><command-message>x</command-message><command-args>a b</command-args>``
    → ``/x a b``; text around the wrapper stays."""
    parts = {m.group(1): " ".join(m.group(2).split()) for m in _COMMAND_PART.finditer(text)}
    line = " ".join(p for p in (parts.get("name") or parts.get("message"), parts.get("args")) if p)
    first = _COMMAND_PART.search(text)
    rest = _COMMAND_PART.sub("", text)
    at = first.start() if first else 0
    return rest[:at] + line + rest[at:] if line else rest
