#!/usr/bin/env python3
"""Foundation benchmark: cold --version, ingest of a LoCoMo conversation, grep and search at scale.

Every figure is the wall time of the real ``memcli`` command in a subprocess
(Python start-up included), the median of ``--repeat`` runs.

    python benchmarks/bench_foundation.py [--docs 1000] [--doc-tokens 3000] [--repeat 5] [--json]

The synthetic library is written with memcli's own document format: topic
documents of headings and signed entries whose words are drawn from a Zipf
distribution over a made-up vocabulary plus common English words.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LOCOMO = REPO.parent / "shared" / "data" / "locomo" / "conv-26.json"
sys.path.insert(0, str(REPO))

from memcli.store.folder import refresh_token_count  # noqa: E402
from memcli.store.format import Document, Entry  # noqa: E402
from memcli.tokens import count_tokens  # noqa: E402

COMMON = ["the", "of", "and", "to", "in", "is", "was", "for", "on", "that", "with", "as", "at", "by", "from", "it", "this", "be", "are", "have", "had", "not", "but", "they", "she", "he", "we", "you", "her", "his", "my", "our", "their", "went", "made", "said", "told", "about", "after", "before", "during", "when", "while", "because", "like", "just", "really", "very"]


def timed(argv: list[str], env: dict, repeat: int) -> tuple[float, list[float], subprocess.CompletedProcess]:
    times, proc = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        proc = subprocess.run(argv, capture_output=True, env=env)
        times.append(time.perf_counter() - start)
        if proc.returncode not in (0, 1):
            raise SystemExit(f"{' '.join(argv)} failed: {proc.stderr.decode()}")
    return statistics.median(times), times, proc


def make_library(root: Path, docs: int, doc_tokens: int, seed: int = 1) -> int:
    rng = random.Random(seed)
    vocab = ["".join(rng.choice("bcdfghjklmnprstvz") + rng.choice("aeiou") for _ in range(rng.randint(2, 4)))
             for _ in range(30000)]
    weights = [1 / (rank + 1) for rank in range(len(vocab))]
    people = [w.capitalize() for w in vocab[:200]]
    (root / "docs").mkdir(parents=True, exist_ok=True)
    seq, total = 1, 0
    for d in range(docs):
        body, size = [f"# {rng.choice(people)}"], 0
        while size < doc_tokens:
            body.append(f"## {' '.join(rng.choices(vocab[:3000], k=2)).title()}")
            for _ in range(rng.randint(6, 14)):
                words = rng.choices(vocab, weights=weights, k=rng.randint(8, 24))
                words += rng.choices(COMMON, k=len(words) // 2)
                rng.shuffle(words)
                text = f"{rng.choice(people)} " + " ".join(words) + "."
                entry = Entry({"seq": str(seq), "time": f"2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T10:00",
                               "speaker": rng.choice(people), "ref": f"D{d}:{seq}"}, text)
                body.append(entry.render())
                size += count_tokens(body[-1])
                seq += 1
        doc_id = f"topic-{d:04d}-{rng.getrandbits(24):06x}"
        doc = Document(meta={"id": doc_id, "summary": " ".join(rng.choices(vocab[:2000], k=8)),
                             "token_count": 0, "created_time": "2024-01-01T00:00:00",
                             "updated_time": "2024-06-01T00:00:00", "update_log": [], "aux": {}},
                       body=[*body, ""])
        total += refresh_token_count(doc)
        (root / "docs" / f"{doc_id}.md").write_text(doc.render())
    (root / "state.json").write_text(json.dumps({"format": 1, "next_seq": seq}) + "\n")
    return total, vocab


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--docs", type=int, default=1000)
    parser.add_argument("--doc-tokens", type=int, default=3000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    memcli = [sys.executable, "-m", "memcli"]
    work = Path(tempfile.mkdtemp(prefix="memcli-bench-"))
    env = {**os.environ, "XDG_CACHE_HOME": str(work / "cache"), "XDG_CONFIG_HOME": str(work / "config")}
    results: dict[str, dict] = {}
    try:
        version, runs, _ = timed([*memcli, "--version"], env, args.repeat * 2)
        results["version"] = {"median_s": version, "runs": runs}

        ingest_runs = []
        for i in range(args.repeat):
            store = work / f"ingest-{i}"
            _, [elapsed], proc = timed([*memcli, "--store", str(store), "ingest", str(LOCOMO), "--no-auto", "--json"], env, 1)
            ingest_runs.append(elapsed)
            # the vectors job the ingest started must not run beside the next measurement
            subprocess.run([*memcli, "--store", str(store), "embed", "-q"], check=True, env=env, capture_output=True)
        results["ingest_conv26"] = {"median_s": statistics.median(ingest_runs), "runs": ingest_runs,
                                    "added": json.loads(proc.stdout)["added"]}

        lib = work / "library"
        subprocess.run([*memcli, "--store", str(lib), "init", "-q"], check=True, env=env, capture_output=True)
        start = time.perf_counter()
        tokens, vocab = make_library(lib, args.docs, args.doc_tokens)
        results["library"] = {"docs": args.docs, "tokens": tokens, "build_s": time.perf_counter() - start}
        base = [*memcli, "--store", str(lib)]
        cold_index, _, _ = timed([*base, "search", "warmup"], env, 1)
        results["index_cold_build"] = {"seconds": cold_index}
        grep_pat = vocab[5000]
        grep_t, grep_runs, grep_proc = timed([*base, "grep", grep_pat, "--json"], env, args.repeat)
        results["grep"] = {"median_s": grep_t, "runs": grep_runs, "pattern": grep_pat,
                           "matches": json.loads(grep_proc.stdout)["count"]}
        query = " ".join([vocab[40], vocab[900], vocab[7000]])
        search_t, search_runs, search_proc = timed([*base, "search", query, "--json"], env, args.repeat)
        results["search"] = {"median_s": search_t, "runs": search_runs, "query": query,
                             "hits": len(json.loads(search_proc.stdout)["hits"])}
    finally:
        shutil.rmtree(work, ignore_errors=True)

    if args.json:
        print(json.dumps(results, indent=2))
        return
    lib = results["library"]
    print(f"cold `memcli --version`            {results['version']['median_s'] * 1000:8.0f} ms   (target < 150 ms)")
    print(f"ingest conv-26 ({results['ingest_conv26']['added']} turns)        "
          f"{results['ingest_conv26']['median_s'] * 1000:8.0f} ms   (target < 1000 ms)")
    print(f"library: {lib['docs']} docs, {lib['tokens']:,} tokens; first search (index build) "
          f"{results['index_cold_build']['seconds']:.1f} s")
    print(f"grep, warm                          {results['grep']['median_s'] * 1000:8.0f} ms   "
          f"({results['grep']['matches']} matches; target < 500 ms)")
    print(f"search, warm index                  {results['search']['median_s'] * 1000:8.0f} ms   "
          f"({results['search']['hits']} hits; target < 500 ms)")


if __name__ == "__main__":
    main()
