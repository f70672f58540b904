"""training/train_reader.py on a few windows, on the CPU: a run stopped and continued gives the weights one
sitting gives; a stop signal checkpoints and exits cleanly; a folder of another recipe is refused; the path
through a lent GPU machine (the bundle it is given, the parts it sends back) exports weights memcli's numpy
reader reads. CI installs no training framework: skipped there (and without ../shared's QA sets)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from conftest import REPO

QA = REPO.parent / "shared" / "data" / "qa"
SCRIPT = REPO / "training" / "train_reader.py"
SMALL = ["--squad", "30", "--molweni", "10", "--friendsqa", "10", "--updates", "20", "--batch", "8",
         "--curve-limit", "0", "--nice", "0"]

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not (QA / "squad_v1.1_train.json.gz").is_file(), reason=f"the QA sets are not at {QA}")]


def train(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=900)
    assert not check or done.returncode == 0, done.stderr[-3000:]
    return done


def weights(path):
    from memcli.semantic.encoder import read_safetensors

    return {k: np.asarray(v, dtype=np.float32) for k, v in read_safetensors(path).items()}


def test_a_run_continued_over_three_sittings_gives_the_weights_of_one(tmp_path):
    pytest.importorskip("torch")
    one, three = tmp_path / "one", tmp_path / "three"
    plan = [*SMALL, "--epochs", "2", "--snapshot-every", "1000"]
    train("--run-dir", str(one), *plan)
    assert "stopped at step 3 of" in train("--run-dir", str(three), *plan, "--steps", "3").stdout
    assert "sitting 2: step 3 of" in train("--run-dir", str(three), *plan, "--steps", "4").stdout
    train("--run-dir", str(three), *plan)
    (last,) = sorted((one / "snapshots").glob("*.safetensors"))[-1:]
    a, b = weights(last), weights(three / "snapshots" / last.name)
    assert a.keys() == b.keys() and "encoder.layer.0.attention.self.query.weight" in a  # every layer trained
    assert max(float(np.abs(a[k] - b[k]).max()) for k in a) < 1e-3
    shipped = weights(REPO / "memcli" / "qa" / "reader.safetensors")
    assert not np.array_equal(a["qa_outputs.weight"], shipped["qa_outputs.weight"])  # it trained from the shipped
    log = [json.loads(line) for line in (three / "log.jsonl").read_text().splitlines()]
    assert [r["sitting"] for r in log if r["kind"] == "sitting"] == [1, 2, 3]
    again = train("--run-dir", str(three), *SMALL, "--epochs", "3", check=False)  # another recipe: refused
    assert again.returncode == 2 and "epochs" in again.stderr


def test_a_stop_signal_checkpoints_and_the_next_sitting_goes_on_from_there(tmp_path):
    pytest.importorskip("torch")
    run = tmp_path / "run"
    args = [sys.executable, str(SCRIPT), "--run-dir", str(run), *SMALL, "--squad", "300", "--checkpoint-minutes", "60"]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    log = run / "log.jsonl"
    deadline = time.monotonic() + 300
    while not (log.exists() and "sitting" in log.read_text()) and time.monotonic() < deadline:
        time.sleep(0.5)  # training has begun (the windows are built)
    time.sleep(3)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-2000:]
    stop = [json.loads(line) for line in log.read_text().splitlines()][-1]
    assert stop["kind"] == "stop" and stop["why"] == "SIGTERM" and stop["step"] > 0
    assert (run / "checkpoint.pt").exists() and not (run / "checkpoint.partial").exists()
    assert f"sitting 2: step {stop['step']} of" in train("--run-dir", str(run), *SMALL, "--squad", "300",
                                                         "--steps", "1").stdout


def test_a_bundle_trains_elsewhere_and_its_parts_export_as_weights_numpy_reads(tmp_path):
    pytest.importorskip("torch")
    from memcli.qa.model import Reader, weights_path
    from memcli.semantic.encoder import read_safetensors

    bundle, parts, exported = tmp_path / "bundle", tmp_path / "parts", tmp_path / "exported"
    train("--make-bundle", str(bundle), *SMALL)
    assert sorted(p.name for p in bundle.iterdir()) == ["base.safetensors", "windows.npz"]
    base = read_safetensors(bundle / "base.safetensors")
    assert "embeddings.word_embeddings.weight" in base and not any(k in base for k in read_safetensors(weights_path()))
    train("--run-dir", str(tmp_path / "run"), "--bundle", str(bundle), *SMALL, "--epochs", "1", "--out", str(parts))
    files = sorted(parts.glob("reader-part*.safetensors"))
    assert len(files) == 2 and all(p.stat().st_size <= 16 << 20 for p in files)  # what comes back: 16 MiB a file
    train("--export", *map(str, files), "--out", str(exported))
    merged = exported / "reader.safetensors"
    joined = {k: v for p in files for k, v in weights(p).items()}
    assert weights(merged).keys() == joined.keys()
    fixture = json.loads((exported / "reader_outputs.json").read_text())
    assert len(fixture["cases"]) == 3
    span = Reader(path=merged).best("Where does Priya live?", ["Priya: I moved to Lisbon last spring."])
    assert span is not None and span.text.strip()
    assert os.path.getsize(merged) <= 25_000_000  # the package's weights: 25 MB at most
