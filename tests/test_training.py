"""training/train_reader.py's path through a lent GPU machine, run here on the CPU with a few windows: the
bundle it is given, the weights it sends back in parts, and memcli's numpy reader reading with them. CI
installs no training framework: skipped there (and without ../shared's QA sets)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import numpy as np
import pytest
from conftest import REPO

QA = REPO.parent / "shared" / "data" / "qa"
SCRIPT = REPO / "training" / "train_reader.py"


@pytest.mark.slow
@pytest.mark.skipif(not (QA / "squad_v1.1_train.json.gz").is_file(), reason=f"the QA sets are not at {QA}")
def test_a_bundle_trains_elsewhere_and_its_parts_read_with_numpy(tmp_path):
    pytest.importorskip("torch")
    from memcli.qa.model import Reader, weights_path
    from memcli.semantic.encoder import read_safetensors

    bundle, out = tmp_path / "bundle", tmp_path / "out"

    def run(*args: str) -> str:
        done = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout

    run("--make-bundle", str(bundle), "--squad", "40", "--molweni", "10", "--friendsqa", "10")
    assert sorted(p.name for p in bundle.iterdir()) == ["base.safetensors", "windows.npz"]
    base = read_safetensors(bundle / "base.safetensors")
    assert "embeddings.word_embeddings.weight" in base and not any(k in base for k in read_safetensors(weights_path()))
    run("--bundle", str(bundle), "--frozen", "0", "--epochs", "2", "--batch", "16", "--out", str(out))
    parts = sorted(out.glob("reader-part*.safetensors"))
    assert len(parts) == 2 and all(p.stat().st_size <= 16 << 20 for p in parts)  # what comes back: 16 MiB a file
    assert sorted(p.name for p in (out / "epoch1").iterdir()) == [p.name for p in parts]
    trained = {k: v for p in parts for k, v in read_safetensors(p).items()}
    shipped = read_safetensors(weights_path())
    assert "encoder.layer.0.attention.self.query.weight" in trained and set(shipped) < set(trained)
    assert not np.array_equal(trained["qa_outputs.weight"], shipped["qa_outputs.weight"])  # it trained
    again = tmp_path / "again"  # the parts read back as they are exported here (--from), unchanged
    assert "reader-part0" in run("--from", *map(str, parts), "--frozen", "0", "--out", str(again))
    joined = {k: v for p in sorted(again.glob("*.safetensors")) for k, v in read_safetensors(p).items()}
    assert joined.keys() == trained.keys() and all(np.array_equal(joined[k], trained[k]) for k in trained)

    spec = importlib.util.spec_from_file_location("train_reader", SCRIPT)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    merged = tmp_path / "reader.safetensors"
    script.write_safetensors(merged, dict(trained), {})
    span = Reader(path=merged).best("Where does Priya live?", ["Priya: I moved to Lisbon last spring."])
    assert span is not None and span.text.strip()
