#!/usr/bin/env python3
"""llama.cpp thread counts alone and beside a CPU-bound process: what the default should be.

    python benchmarks/bench_threads.py [--model GGUF] [--runs 3] [--prompt-tokens 600] [--gen 48]

For each thread count (1, half the cores, all but one, all cores: the distinct ones), and for each of
them below all cores also with every core for prompts (``model.batch_threads``: "1+2" is one thread
generating and two reading a prompt), a fresh process loads the model (the configured one by default),
prefills a prompt of ``--prompt-tokens`` tokens and generates ``--gen`` tokens greedily, reporting
prefill and generation speed. Every setting runs
alone and beside one busy process (a Python loop on one core), in alternating order, ``--runs``
times; the medians are printed, with the ratio busy/alone. Run it alone: other work on the machine
is exactly what it measures.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

CHILD = r"""
import json, sys, time
from pathlib import Path
from memcli.config import Settings
from memcli.llm import model_path
from memcli.llm.runtime import LlamaRuntime, extra_buffers_wanted
cfg = Settings.load(None, None)
path = Path(sys.argv[1]) if sys.argv[1] else model_path(cfg)
threads, _, batch = sys.argv[2].partition("+")
rt = LlamaRuntime(path, n_ctx=2048, threads=int(threads), batch_threads=int(batch or threads),
                  extra_buffers=extra_buffers_wanted("auto"))
words = ("memory evidence answer question document entry session time speaker reference " * 200).split()
prompt = rt.tokenize(" ".join(words))[: int(sys.argv[3])]
start = time.perf_counter()
rt.decode(prompt[:-1])
prefill = time.perf_counter() - start
done = rt.generate(prompt, max_tokens=int(sys.argv[4]))
print(json.dumps({"prefill_tps": (len(prompt) - 1) / prefill, "gen_tps": done.tokens_per_s,
                  "tokens": len(done.tokens)}))
"""


def busy() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "while True: pass"])


def run(model: str, threads: str, prompt: int, gen: int) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, model, str(threads), str(prompt), str(gen)],
                         capture_output=True, text=True, check=True, timeout=900)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="", help="GGUF file (default: the configured model)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--prompt-tokens", type=int, default=600)
    parser.add_argument("--gen", type=int, default=48)
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    cores = os.cpu_count() or 1
    plain = sorted({1, max(1, cores // 2), max(1, cores - 1), cores})
    counts = [str(n) for n in plain] + [f"{n}+{cores}" for n in plain if n < cores]
    results: dict[str, list[dict]] = {}
    for _ in range(args.runs):
        for threads in counts:
            for load in ("alone", "busy"):
                other = busy() if load == "busy" else None
                try:
                    time.sleep(0.2)
                    measured = run(args.model, threads, args.prompt_tokens, args.gen)
                finally:
                    if other is not None:
                        other.kill()
                        other.wait()
                results.setdefault(f"{threads}/{load}", []).append(measured)
                print(f"threads {threads} {load}: {measured}", file=sys.stderr)
    table = {}
    print(f"cores: {cores}; medians of {args.runs} runs (tokens/s)")
    print("| threads | prefill alone | prefill busy | generation alone | generation busy | generation busy/alone |")
    print("|---|---|---|---|---|---|")
    for threads in counts:
        row = {}
        for load in ("alone", "busy"):
            rows = results[f"{threads}/{load}"]
            row[load] = {k: round(statistics.median(r[k] for r in rows), 2) for k in ("prefill_tps", "gen_tps")}
        table[threads] = row
        print(f"| {threads} | {row['alone']['prefill_tps']} | {row['busy']['prefill_tps']} | "
              f"{row['alone']['gen_tps']} | {row['busy']['gen_tps']} | "
              f"{row['busy']['gen_tps'] / row['alone']['gen_tps']:.2f} |")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"cores": cores, "runs": results, "medians": table}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
