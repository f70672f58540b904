"""The judgements the reader's training windows teach, held out: the same shapes built from the dev splits (never
trained on), read by memcli's numpy reader with given weights.

    python training/heldout.py memcli/qa/reader.safetensors ~/.cache/memcli-train/reader/snapshots/step004000.safetensors

- **someone else said it**: a dialogue question that names the speaker of its answer's line, asked of another
  speaker of the lines read (:func:`reader_windows.wrong_speaker_windows`): right when the reader says none
  (its best margin under the threshold);
- **the speaker said it**: the same questions as asked, on their lines: F1 of the reader's answer (a reader that
  refuses every question naming someone scores 0 here);
- **a value said again** (:func:`reader_windows.update_windows`): F1 of the answer against the later value, and
  how often it gives the earlier one instead.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

from reader_windows import (
    DATA,
    Item,
    dialogue_windows,
    line_spans,
    names,
    speaker_of,
    update_windows,
    wrong_speaker_windows,
)

from memcli.eval.qa import f1
from memcli.qa.sets import load

SEED = 20261207


def shapes(limit: int) -> dict[str, list[tuple[Item, str]]]:
    """Each held-out shape's items (at most ``limit``) with the text that answers it ('' for none)."""
    rng = random.Random(SEED)
    dialogues = [e for name in ("molweni_dev", "friendsqa_dev") for e in load(DATA / f"{name}.json.gz")[1]]
    rng.shuffle(dialogues)
    named = [e for e in dialogues if e.answers and (who := speaker_of(e.context[slice(*next(
        span for span in line_spans(e.context) if span[1] >= e.starts[0]))])) and names(e.question, who)]
    squad = load(DATA / "squad_v1.1_dev.json.gz")[1]
    rng.shuffle(squad)
    speakers = sorted({p for e in dialogues for line in e.context.split("\n") if (p := speaker_of(line))})
    said = dialogue_windows(named[:limit], rng, 0.0, (1, 6))
    updates = update_windows(squad[:limit] + dialogues[:limit], rng, limit, speakers)
    return {
        "someone else said it": [(item, "") for item in wrong_speaker_windows(named, rng, 1.0)[:limit]],
        "the speaker said it": [(item, item.passage[slice(*item.answer)]) for item in said if item.answer][:limit],
        "a value said again": [(item, item.passage[slice(*item.answer)]) for item in updates],
    }


def score(weights: Path, items: dict[str, list[tuple[Item, str]]]) -> dict:
    """Each shape's figures for the reader with ``weights`` (at its shipped threshold)."""
    from memcli.qa.model import Reader

    reader = Reader(path=weights)
    out = {}
    for name, pairs in items.items():
        answered, right, earlier = [], 0, 0
        for item, gold in pairs:
            span = reader.best(item.question, [item.passage])
            said = span.text if span is not None and span.margin >= reader.threshold else ""
            if not gold:
                right += not said
                continue
            answered.append(f1(said, gold) if said else 0.0)
            if name == "a value said again" and said:
                before = item.passage[:item.answer[0]]
                earlier += bool(said.strip()) and said.strip() in before and said.strip() not in gold
        n = len(pairs)
        out[name] = ({"questions": n, "none_right": round(right / max(n, 1), 4)} if name == "someone else said it"
                     else {"questions": n, "f1": round(sum(answered) / max(n, 1), 4)})
        if name == "a value said again":
            out[name]["gave_the_earlier"] = round(earlier / max(n, 1), 4)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("weights", type=Path, nargs="+")
    parser.add_argument("--limit", type=int, default=400, help="questions a shape")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    items = shapes(args.limit)
    rows = {str(w): score(w, items) for w in args.weights}
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    print("| weights | someone else said it: none | the speaker said it: F1 | a value said again: F1 (earlier) |")
    print("|---|---|---|---|")
    for w, r in rows.items():
        again = r["a value said again"]
        print(f"| {Path(w).name} | {r['someone else said it']['none_right']:.3f} | "
              f"{r['the speaker said it']['f1']:.3f} | {again['f1']:.3f} ({again['gave_the_earlier']:.3f}) |")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
