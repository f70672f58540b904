"""Chat never writes a small model's noise into memory: your messages are kept, its replies only when the model is
capable or you ask for it; a reply that starts to loop is cut where the loop begins."""

from __future__ import annotations

import json

import pytest
from conftest import EXAMPLES, run_memcli

from memcli.llm.repetition import loop_start

ENV = {"MEMCLI_CHAT_MEMORY_TOKENS": "600", "MEMCLI_AUTO_CONSOLIDATE": "false"}


def test_loop_start_finds_repeats_stutters_repeated_lines_and_labels():
    assert loop_start("A: A: A: A: A: A:") is not None
    text = "research, research, research, research"
    assert text[:loop_start(text)].strip() == "research,"
    text = "I like the big lake. I like the big lake a lot."
    assert text[:loop_start(text)] == "I like the big lake. "
    text = "We went there.\nUser: and then?"
    assert text[:loop_start(text)] == "We went there."
    text = "First line of it\nsecond\nfirst line of it"
    assert text[:loop_start(text)] == "First line of it\nsecond\n"
    assert loop_start("Open Door Adoptions, because Harbor Light has a waiting list of over a year.") is None
    assert loop_start("Note: the study is in June.") is None  # a label at the very start is not a turn change


def piped_chat(store, *args, messages: list[str]):
    return run_memcli("--store", store, "chat", "--json", *args, stdin=("\n".join(messages) + "\n").encode(),
                      env=ENV)


@pytest.mark.slow  # a fast-tier budget of 5 minutes; CI runs it
def test_chat_remembers_your_messages_and_not_the_small_models_replies(tmp_path):
    store = tmp_path / "store"
    assert run_memcli("--store", store, "ingest", EXAMPLES / "caroline-and-priya.json", env=ENV).code == 0
    done = piped_chat(store, "--max-tokens", "24", messages=["My cat is called Pixel.", "What is my cat called?"])
    assert done.code == 0, done.stderr
    turns = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(turns) == 2 and all("cut" in t["stats"] for t in turns)
    short = piped_chat(store, "--max-tokens", "8", "--session", "short", messages=["hi", "thanks!", "ok then"])
    assert short.code == 0 and len(short.stdout.splitlines()) == 3  # answered, not remembered
    assert not [line for line in (store / "CURRENT.md").read_text().splitlines()
                if line.endswith(("> hi", "> thanks!"))]
    current = (store / "CURRENT.md").read_text()
    assert "My cat is called Pixel." in current and "What is my cat called?" in current
    for turn in turns:
        if turn["reply"].strip():
            assert turn["reply"].strip() not in current
    assert "source=AI" not in current
    kept = run_memcli("--json", "--store", store, "chat", "--max-tokens", "24", "--remember-replies", "--session",
                      "other", stdin=b"Tell me about Caroline.\n", env=ENV)  # --json before the command works too
    assert kept.code == 0, kept.stderr
    reply = json.loads(kept.stdout.splitlines()[0])["reply"].strip()
    assert reply and "source=AI" in (store / "CURRENT.md").read_text()


@pytest.mark.slow
def test_real_model_replies_that_loop_are_cut(tmp_path):
    """Prompts on which the default model, with the example consolidated and chat's default memory, wrote
    256-token replies that repeat themselves (four of these five, measured with the halt turned off)."""
    store = tmp_path / "store"
    assert run_memcli("--store", store, "ingest", EXAMPLES / "caroline-and-priya.json", env=ENV).code == 0
    assert run_memcli("--store", store, "consolidate", "--no-llm", env=ENV).code == 0
    prompts = ["Tell me everything about research.", "What did Caroline research? Answer in detail.",
               "German language", "Q: What is Open Door? A:", "Write a long story about Caroline."]
    done = run_memcli("--store", store, "chat", "--json", "--max-tokens", "256",
                      stdin=("\n".join(prompts) + "\n").encode(), env={"MEMCLI_AUTO_CONSOLIDATE": "false"})
    assert done.code == 0, done.stderr
    turns = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(turns) == len(prompts)
    for turn in turns:
        assert loop_start(turn["reply"]) is None, turn["reply"]
    assert any(t["stats"]["cut"] == "repetition" for t in turns)  # the model did loop, and was stopped
