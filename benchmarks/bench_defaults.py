#!/usr/bin/env python3
"""What a new user gets with the defaults and the embedded model: ingest time, ask's answers, and chat
speed beside a background consolidation.

    python benchmarks/bench_defaults.py [--questions N] [--trials 3] [--skip ingest,ask,chat] [--json]

Run it alone on the machine (it measures time). Three parts, each with the real commands in
subprocesses and a fresh configuration (no user config, a scratch cache):

- **ingest**: `memcli ingest conv-26.json` with no flags into a fresh store, wall time to the
  summary (median of ``--trials``), and what the automatic consolidation did; then the same with
  the model's consolidation forced (`MEMCLI_CONSOLIDATE_LLM=true`), which must go to the background.
- **ask**: `memcli eval locomo --mode ask` (the reader `ask` uses by default) over the development
  conversations, raw and consolidated memory: F1, seconds per question, and the share of answers
  with a repeated 4-gram, with a speaker label, and that are "I don't know".
- **chat**: the generation speed and time to first token of `memcli chat` replies (memory restored
  from KV blocks) alone, beside the background consolidation an ingest starts (nice 19, half the
  cores), and beside a plain `memcli consolidate --llm` at normal priority with every core.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LOCOMO = REPO.parent / "shared" / "data" / "locomo"
FILES = [LOCOMO / "conv-26.json", LOCOMO / "conv-30.json"]
EXAMPLE = REPO / "examples" / "caroline-and-priya.json"
MEMCLI = [sys.executable, "-m", "memcli"]
sys.path.insert(0, str(REPO))

from memcli.consolidate import job  # noqa: E402


def run(*args, env: dict | None = None, check: bool = True, **kwargs) -> subprocess.CompletedProcess:
    done = subprocess.run([*MEMCLI, *map(str, args)], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, **kwargs)
    if check and done.returncode != 0:
        sys.exit(f"memcli {' '.join(map(str, args))} failed ({done.returncode}):\n{done.stderr}")
    return done


def timed_ingest(root: Path, env: dict | None = None) -> tuple[float, dict]:
    start = time.perf_counter()
    done = run("--store", root, "ingest", FILES[0], "--json", env=env)
    return time.perf_counter() - start, json.loads(done.stdout)


def ingest_part(work: Path, trials: int) -> dict:
    seconds, summary = [], {}
    for trial in range(trials):
        took, summary = timed_ingest(work / f"ingest-{trial}")
        seconds.append(took)
    done = summary.get("consolidation") or {}
    root = work / "ingest-llm"
    took_llm, summary_llm = timed_ingest(root, env={"MEMCLI_CONSOLIDATE_LLM": "true"})
    started = summary_llm.get("consolidation") or {}
    stopped = run("--store", root, "consolidate", "--stop", "--json")
    return {
        "entries": summary.get("added"),
        "median_s": round(statistics.median(seconds), 2), "runs_s": [round(s, 2) for s in seconds],
        "consolidation": {"llm": done.get("llm"), "background": bool(done.get("background")),
                          "entries_consolidated": done.get("entries_consolidated"), "seconds": done.get("seconds")},
        "with_model_consolidation_s": round(took_llm, 2),
        "model_consolidation_background": bool(started.get("background")),
        "model_consolidation_stopped": (json.loads(stopped.stdout).get("job") or {}).get("state"),
    }


def repeated_4gram(text: str) -> bool:
    words = re.findall(r"[\w']+", text.lower())
    grams = [tuple(words[i:i + 4]) for i in range(len(words) - 3)]
    return len(grams) != len(set(grams))


def speakers_of(path: Path) -> set[str]:
    data = json.loads(path.read_text())
    conversation = data.get("conversation", data)
    return {conversation[k] for k in ("speaker_a", "speaker_b") if isinstance(conversation.get(k), str)}


def ask_part(work: Path, questions: int | None) -> list[dict]:
    names = set().union(*(speakers_of(f) for f in FILES))
    label = re.compile(rf"(?:^|\s)(?:{'|'.join(map(re.escape, sorted(names)))})\s*:", re.I)
    rows = []
    for memory in ("raw", "consolidated"):
        out = work / f"ask-{memory}.jsonl"
        extra = ["--questions", str(questions)] if questions else []
        print(f"ask over {memory} memory ...", file=sys.stderr, flush=True)
        done = run("eval", "locomo", *FILES, "--mode", "ask", "--memory", memory, "--out", out, "--json", *extra)
        summary = json.loads(done.stdout)["summary"]["all"]
        answers = [json.loads(line)["answer"] for line in out.read_text().splitlines() if line.strip()]
        n = len(answers)
        rows.append({"memory": memory, "questions": n, "f1": summary["f1"],
                     "s_per_question": round(summary["latency_s"], 2),
                     "repeated_4gram": sum(map(repeated_4gram, answers)) / n,
                     "speaker_label": sum(bool(label.search(a)) for a in answers) / n,
                     "i_dont_know": sum(a == "I don't know" for a in answers) / n,
                     "mean_words": round(sum(len(a.split()) for a in answers) / n, 1)})
    return rows


MESSAGES = ["What did Caroline adopt?", "Where does Priya live?", "What happened at the home study?"]


def chat_replies(root: Path, session: str) -> list[dict]:
    done = run("--store", root, "chat", "--json", "--stats", "--no-remember", "--session", session,
               input="\n".join(MESSAGES) + "\n")
    return [json.loads(line)["stats"] for line in done.stdout.splitlines() if line.strip()]


def wait_for_model_work(root: Path, timeout: float = 120.0) -> None:
    """Until the consolidation has loaded its model and is in a flush's model stage."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = job.read_status(root) or {}
        if status.get("state") == "running" and status.get("stage"):
            time.sleep(3.0)
            return
        time.sleep(0.5)
    sys.exit(f"the consolidation of {root} did not start working within {timeout:g} s")


def chat_part(work: Path) -> list[dict]:
    chat_store = work / "chat"
    run("--store", chat_store, "ingest", EXAMPLE, "--no-auto", "-q")
    run("--store", chat_store, "consolidate", "-q")
    chat_replies(chat_store, "warm-up")  # KV blocks of the memory: every condition restores them
    rows = []
    for condition in ("alone", "beside a background consolidation", "beside a foreground consolidate --llm"):
        other = work / f"other-{len(rows)}"
        competitor = None
        if condition.startswith("beside a background"):
            run("--store", other, "ingest", FILES[1], "-q", env={"MEMCLI_CONSOLIDATE_LLM": "true"})
            wait_for_model_work(other)
        elif condition.startswith("beside a foreground"):
            run("--store", other, "ingest", FILES[1], "--no-auto", "-q")
            competitor = subprocess.Popen([*MEMCLI, "--store", str(other), "consolidate", "--llm", "-q"],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            wait_for_model_work(other)
        try:
            stats = chat_replies(chat_store, f"bench-{len(rows)}")
        finally:
            if job.running(other) is not None:
                job.stop(other)
            if competitor is not None:
                competitor.wait()
        rows.append({"condition": condition, "replies": len(stats),
                     "tokens_per_s": round(statistics.mean(s["tokens_per_s"] for s in stats), 1),
                     "ttft_s": round(statistics.median(s["ttft_s"] for s in stats), 3),
                     "generated_tokens": sum(s["generated_tokens"] for s in stats)})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--questions", type=int, default=None, help="at most N questions per conversation "
                        "(default: all 233)")
    parser.add_argument("--trials", type=int, default=3, help="ingest runs (the median is reported)")
    parser.add_argument("--skip", default="", help="comma-separated parts to skip: ingest, ask, chat")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    work = Path(tempfile.mkdtemp(prefix="memcli-bench-defaults-"))
    os.environ.update({"XDG_CACHE_HOME": str(work / "cache"), "XDG_CONFIG_HOME": str(work / "config"),
                       "XDG_DATA_HOME": str(work / "data")})
    for key in [k for k in os.environ if k.startswith("MEMCLI_")]:
        del os.environ[key]  # the defaults, whatever the caller's shell says
    report = {}
    try:
        if "ingest" not in skip:
            report["ingest"] = ingest_part(work, args.trials)
        if "chat" not in skip:
            report["chat"] = chat_part(work)
        if "ask" not in skip:
            report["ask"] = ask_part(work, args.questions)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        print(json.dumps(report, indent=2))
        return
    if "ingest" in report:
        r = report["ingest"]
        c = r["consolidation"]
        print(f"ingest conv-26 ({r['entries']} entries), no flags, fresh store: {r['median_s']} s to the summary "
              f"(median of {r['runs_s']}); consolidation {'model' if c['llm'] else 'deterministic'}, "
              f"{'background' if c['background'] else 'inline'}, {c['entries_consolidated']} entries in "
              f"{c['seconds']} s")
        print(f"  with the model's consolidation forced: {r['with_model_consolidation_s']} s to the summary, "
              f"background {r['model_consolidation_background']}, then stopped: {r['model_consolidation_stopped']}")
    if "chat" in report:
        print("| chat | replies | generated tokens | tokens/s | time to first token (s) |\n|---|---|---|---|---|")
        for r in report["chat"]:
            print(f"| {r['condition']} | {r['replies']} | {r['generated_tokens']} | {r['tokens_per_s']} | "
                  f"{r['ttft_s']} |")
    if "ask" in report:
        print("| ask, default reader | questions | F1 | s per question | repeated 4-gram | speaker label | "
              "I don't know | words per answer |\n|---|---|---|---|---|---|---|---|")
        for r in report["ask"]:
            print(f"| {r['memory']} memory | {r['questions']} | {r['f1']:.3f} | {r['s_per_question']} | "
                  f"{r['repeated_4gram']:.1%} | {r['speaker_label']:.1%} | {r['i_dont_know']:.1%} | "
                  f"{r['mean_words']} |")


if __name__ == "__main__":
    main()
