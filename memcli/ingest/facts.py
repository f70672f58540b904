"""Extraction on ingest (``memcli ingest --extract``): turns -> durable facts, by the model.

The model sees a window of turns with short ids and returns facts, each
citing the turns it came from (an enum of the ids shown, checked again in
code). A fact keeps its turns' ``ref``s (joined with ``;``), the time of its
first turn, the speaker when all its turns have one speaker, and
``source=AI`` when all of them are the assistant's. A window whose answer is
rejected twice is kept as raw turns: nothing is lost.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable

from memcli.ingest.turns import Turn
from memcli.llm.base import CallStats, ChatModel
from memcli.llm.prompts import EXTRACT_SYSTEM, extract_schema
from memcli.llm.structured import ask_json
from memcli.tokens import count_tokens, pack


def _windows(turns: list[Turn], window_tokens: int) -> list[list[Turn]]:
    return pack(turns, lambda turn: count_tokens(turn.text) + 8, window_tokens, most=40)


def _fact(text: str, sources: list[Turn]) -> Turn:
    speakers = {t.speaker for t in sources}
    refs = [t.ref for t in sources if t.ref]
    key = "\x00".join([text, *(t.fingerprint for t in sources)])
    return Turn(
        text=text, time=sources[0].time,
        speaker=sources[0].speaker if len(speakers) == 1 else None,
        source="AI" if all(t.source == "AI" for t in sources) else None,
        ref=";".join(dict.fromkeys(refs)) or None, conv=sources[0].conv,
        fingerprint="x" + hashlib.sha256(key.encode()).hexdigest()[:31],
    )


def extract_facts(turns: list[Turn], *, model: ChatModel, stats: CallStats, window_tokens: int = 900,
                  progress: Callable[[int, int], None] | None = None) -> list[Turn]:
    """Facts for ``turns`` (raw turns where the model's answer was rejected)."""
    out: list[Turn] = []
    parts = _windows(turns, window_tokens)
    for done, window in enumerate(parts, 1):
        ids = [f"t{i}" for i in range(len(window))]
        lines = [f"{tid} [{t.speaker or 'unknown'}, {t.time}]: {' '.join(t.text.split())}"
                 for tid, t in zip(ids, window)]

        def validate(data, window=window, ids=ids) -> list[Turn]:
            facts = []  # the shape, and that every cited turn was given, the schema has checked
            for item in data["facts"]:
                text = re.sub(r"\s+", " ", item["text"]).strip()
                cited = item["turns"]
                if len(text) < 5:
                    continue
                facts.append(_fact(text, [window[ids.index(c)] for c in dict.fromkeys(cited)]))
            return facts

        messages = [{"role": "system", "content": EXTRACT_SYSTEM}, {"role": "user", "content": "\n".join(lines)}]
        facts = ask_json(model, messages, extract_schema(ids), validate, step="extract", stats=stats,
                         max_tokens=min(900, 96 + 40 * len(window)))
        if facts is None:
            stats.fell_back("extract")
            facts = list(window)
        out.extend(facts)
        if progress:
            progress(done, len(parts))
    return out


def extractor(model: Callable[[], ChatModel], profile, warn: Callable[[str], None]):
    """What ingest calls to extract the facts of its turns: :func:`extract_facts` with the chat model (opened by
    ``model()`` when first needed); a small model's ``profile`` is warned of first (few or poor facts)."""
    if profile.name == "small":
        warn(f"fact extraction needs a larger model than this one ({profile.reason}); expect few or poor facts: pass "
             "--model with a GGUF of at least 3B parameters, or --base-url for a server")

    def facts(turns, stats, shown):
        return extract_facts(turns, model=model(), stats=stats, progress=shown)

    return facts
