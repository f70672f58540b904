"""The model profile: decided from what the model is (the GGUF's parameter count, a server), overridable, and
choosing the defaults of ask's reader and of consolidation."""

from __future__ import annotations

import struct

import pytest
from fakes import ScriptedModel

from memcli import Memory
from memcli.config import Settings
from memcli.errors import ConfigError
from memcli.llm.profile import CAPABLE_PARAMS, decide, gguf_parameters


def write_gguf(path, tensors: list[list[int]], kv: int = 2) -> None:
    """A GGUF header with ``kv`` metadata pairs (a string and a string array) and the given tensor shapes."""
    def string(text: str) -> bytes:
        data = text.encode()
        return struct.pack("<Q", len(data)) + data

    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), kv)
    out += string("general.name") + struct.pack("<I", 8) + string("tiny")
    out += string("tokenizer.tokens") + struct.pack("<IIQ", 9, 8, 3) + string("a") + string("bb") + string("c")
    for number, dims in enumerate(tensors):
        out += string(f"t{number}") + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        out += struct.pack("<IQ", 0, 0)
    path.write_bytes(out + b"\0" * 64)


def test_parameters_come_from_the_tensor_table(tmp_path):
    write_gguf(tmp_path / "tiny.gguf", [[4, 3], [7], [2, 2, 2]])
    assert gguf_parameters(tmp_path / "tiny.gguf") == 12 + 7 + 8
    (tmp_path / "bad.gguf").write_bytes(b"NOPE" + b"\0" * 20)
    with pytest.raises(ValueError):
        gguf_parameters(tmp_path / "bad.gguf")
    (tmp_path / "cut.gguf").write_bytes((tmp_path / "tiny.gguf").read_bytes()[:40])
    with pytest.raises(ValueError):
        gguf_parameters(tmp_path / "cut.gguf")


def test_the_embedded_default_model_is_small(tmp_path):
    profile = decide(Settings.load())
    assert profile.name == "small" and 100_000_000 < profile.n_params < 200_000_000
    assert "135M parameters" in profile.reason
    memory = Memory(tmp_path / "store", create=True)
    assert memory.default_reader() == "evidence" and not memory.consolidates_with_model()


def test_a_large_model_is_capable_and_the_override_wins(tmp_path, monkeypatch):
    big = ScriptedModel(lambda *_: "", n_params=8_000_000_000)
    memory = Memory(tmp_path / "store", create=True, model=big)
    assert memory.profile.name == "capable" and "8.0B parameters" in memory.profile.reason
    assert memory.default_reader() == "agent" and memory.consolidates_with_model()
    forced = Memory(tmp_path / "store", create=True, model=big, settings={"model.profile": "small"})
    assert forced.profile.name == "small" and forced.default_reader() == "evidence"
    assert not forced.consolidates_with_model()
    chosen = Memory(tmp_path / "store", create=True, model=big,
                    settings={"ask.reader": "no-agent", "consolidate.llm": "false"})
    assert chosen.default_reader() == "no-agent" and not chosen.consolidates_with_model()
    monkeypatch.setenv("MEMCLI_MODEL_PROFILE", "capable")
    assert decide(Settings.load()).name == "capable"
    monkeypatch.setenv("MEMCLI_MODEL_PROFILE", "huge")
    with pytest.raises(ConfigError, match="model.profile"):
        decide(Settings.load())


def test_a_gguf_file_at_the_boundary_and_a_server(tmp_path):
    rows = CAPABLE_PARAMS // 1000
    write_gguf(tmp_path / "big.gguf", [[1000, rows]])  # a header only: the weights are never read
    assert decide(Settings.load(None, {"model.path": str(tmp_path / "big.gguf")})).name == "capable"
    write_gguf(tmp_path / "under.gguf", [[1000, rows - 1]])
    assert decide(Settings.load(None, {"model.path": str(tmp_path / "under.gguf")})).name == "small"
    served = decide(Settings.load(None, {"model.base_url": "http://127.0.0.1:9/v1"}))
    assert served.name == "capable" and "server" in served.reason
    missing = decide(Settings.load(None, {"model.path": str(tmp_path / "none.gguf")}))
    assert missing.name == "small" and "unknown" in missing.reason


def test_status_shows_the_profile_and_extraction_warns_with_a_small_model(cli, monkeypatch):
    assert cli("init").code == 0
    data = cli("status", "--json").json
    assert data["profile"]["name"] == "small" and data["reader"] == "evidence" and data["consolidate_llm"] is False
    assert "profile small" in cli("status").stdout
    model = ScriptedModel(lambda step, messages, schema: {"facts": []})
    monkeypatch.setattr("memcli.llm.open_model", lambda *_, **__: model)
    from conftest import EXAMPLES

    result = cli("ingest", EXAMPLES / "caroline-and-priya.json", "--extract")
    assert result.code == 0 and "needs a larger model" in result.stderr


def test_threads_default_to_half_the_cores_and_a_setting_wins(monkeypatch):
    """llama.cpp threads when none are set: half the cores, at least one (all cores collapse beside another busy
    program: docs/benchmarks.md, "Threads"); model.threads / --threads set them."""
    from memcli.config import Settings
    from memcli.llm import runtime

    for cores, wanted in ((1, 1), (2, 1), (8, 4), (None, 1)):
        monkeypatch.setattr(runtime.os, "cpu_count", lambda cores=cores: cores)
        assert runtime.default_threads() == wanted
    monkeypatch.delenv("MEMCLI_THREADS", raising=False)
    assert Settings.load(None, None).model_threads == 0  # 0: the default above
    monkeypatch.setenv("MEMCLI_THREADS", "3")
    assert Settings.load(None, None).model_threads == 3


def test_models_of_a_billion_parameters_or_more_write_their_answers():
    from memcli.llm.profile import Profile, answer_for

    class Auto:
        ask_answer = "auto"

    class Extract:
        ask_answer = "extract"

    assert answer_for(Auto, Profile("small", "", 135_000_000)) == "extract"
    assert answer_for(Auto, Profile("small", "", 1_500_000_000)) == "generate"
    assert answer_for(Auto, Profile("capable", "a server")) == "generate"
    assert answer_for(Auto, Profile("small", "size unknown")) == "extract"
    assert answer_for(Extract, Profile("capable", "", 8_000_000_000)) == "extract"


def test_prompt_threads_follow_the_generation_threads_unless_model_batch_threads_says(monkeypatch):
    """model.batch_threads (MEMCLI_BATCH_THREADS) sets the threads that read a prompt, apart from those
    generating; unset (0) they are the generation threads (docs/benchmarks.md, "Threads"). The real
    default model is loaded each way."""
    from memcli import llm
    from memcli.config import Settings

    monkeypatch.setenv("MEMCLI_THREADS", "1")
    monkeypatch.delenv("MEMCLI_BATCH_THREADS", raising=False)
    model = llm.open_model(Settings.load(None, None))
    assert (model.runtime.threads, model.runtime.batch_threads) == (1, 1)
    assert model.settings["batch_threads"] == 1
    del model
    monkeypatch.setenv("MEMCLI_BATCH_THREADS", "2")
    model = llm.open_model(Settings.load(None, None))
    assert (model.runtime.threads, model.runtime.batch_threads) == (1, 2)
    said = model.chat([{"role": "user", "content": "Say hello."}], max_tokens=4)
    assert said.text.strip() and said.completion_tokens > 0  # a prompt read by two threads still answers


def test_scoring_reads_on_every_core_unless_model_batch_threads_says(monkeypatch):
    """A call that generates nothing (the extractive answer's scores) reads its prompt and candidates on
    every core, then gives the context back its own prompt threads; model.batch_threads, when set, is
    what it reads with. The scores are the ones one thread gives. The real default model."""
    import os

    from memcli import llm

    messages = [{"role": "user", "content": "Which agency did Caroline choose? Caroline: I chose Open Door."}]
    candidates = ["Open Door", "Harbor Light", "I don't know"]
    monkeypatch.setenv("MEMCLI_THREADS", "1")
    scores = {}
    for setting in ("1", ""):
        monkeypatch.setenv("MEMCLI_BATCH_THREADS", setting)
        model = llm.open_model(Settings.load(None, None))
        runtime, seen = model.runtime, []
        read = runtime._score

        def spy(*args, runtime=runtime, read=read, seen=seen):
            seen.append(runtime._ll.llama_n_threads_batch(runtime._ctx))
            return read(*args)

        monkeypatch.setattr(runtime, "_score", spy)
        scores[setting], _ = model.score(messages, candidates)
        wanted = 1 if setting else max(1, os.cpu_count() or 1)
        assert runtime.scoring_threads == wanted and seen == [wanted]
        assert runtime._ll.llama_n_threads_batch(runtime._ctx) == runtime.batch_threads == 1  # given back
        assert model.settings["scoring_threads"] == wanted
        del model
    for one, every in zip(scores["1"], scores[""]):
        assert one == pytest.approx(every, abs=1e-3)
