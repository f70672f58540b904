"""Composed KV memory with the real default model: agreement with a full prefill, memory units and their
blocks, latent selection, ask --kv-compose, and chat's warm start from kept units."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import EXAMPLES

from memcli.kv.blocks import BlockStore
from memcli.llm.models import default_model_path

PEOPLE = [
    ("Caroline", "applied to Open Door Adoptions in April and met a social worker named Ruth"),
    ("Priya", "keeps three beehives in Leeds and sold forty jars of honey at the spring market"),
    ("Tomas", "trained for the Lisbon marathon and finished it in three hours and fifty minutes"),
    ("Mei", "painted the spare room yellow and hung a print of a lighthouse above the desk"),
    ("Omar", "learned to bake sourdough and feeds the starter every morning before work"),
    ("Lena", "adopted a grey cat called Pixel from the shelter on Baker Street"),
]


def open_engine(root, n_ctx: int = 4096):
    from memcli.kv.engine import KVEngine
    from memcli.llm.llamacpp import LlamaCppModel

    model = LlamaCppModel(default_model_path(), n_ctx=n_ctx, kv_sequences=2)
    return KVEngine(model, BlockStore(root))


def unit_text(person: str, fact: str, day: int) -> str:
    lines = [f"[2024-0{day % 9 + 1}-1{day % 9} 10:0{i}] {person}: " + part
             for i, part in enumerate([f"Guess what, I {fact}.", "It took a while to get there, honestly.",
                                       f"People keep asking me how it went, so yes, I {fact}.",
                                       "Anyway, that is my news for this month."])]
    return "\n".join(lines) + "\n"


def first_tokens(engine, n: int = 8) -> list[int]:
    out = []
    for _ in range(n):
        token = int(engine.last_logits().argmax())
        out.append(token)
        engine.prefill([token])
    return out


@pytest.mark.slow
def test_composed_context_agrees_with_a_full_prefill(tmp_path):
    """Composed units against a full prefill of the same tokens over a fixed set of small examples.

    With ``recompute`` tokens prefilled at each seam (the shipped default, chosen by bench_kv), the
    next token agrees on most examples; placing the blocks without moving their keys (the cells left at
    the positions they were made at) must do worse: agreement is not an accident of the examples."""
    from memcli.config import Settings
    from memcli.kv.composed_ask import ComposedPrompt
    from memcli.kv.engine import Unit

    engine = open_engine(tmp_path / "blocks")
    prompt = ComposedPrompt(engine)
    recompute = Settings.load(None).kv_compose_recompute
    agree, unshifted_agree, examples = 0, 0, 0
    for start in range(len(PEOPLE)):
        chosen = [PEOPLE[(start + k) % len(PEOPLE)] for k in range(3)]
        units = [Unit(f"u{start}-{k}", engine.tokenize(unit_text(p, f, start + k))) for k, (p, f) in enumerate(chosen)]
        tail = prompt.tail(f"What did {chosen[0][0]} do?")
        engine.reset()
        engine.prefill(prompt.prefix.tokens + [t for u in units for t in u.tokens] + tail)
        full = first_tokens(engine)
        engine.reset()
        engine.compose(prompt.prefix, units, recompute=recompute)
        engine.prefill(tail)
        composed = first_tokens(engine)
        agree += composed[0] == full[0]
        # the same blocks, left where they were made (all at the header's end): what a missing shift gives
        engine.reset()
        engine.load_chain([prompt.prefix])
        h = len(prompt.prefix.tokens)
        for unit in units:
            key = engine.composed_key(prompt.prefix, unit)
            assert engine._read_into_spare(key, h, len(unit.tokens)) is not None
            engine.rt.seq_cp(1, 0)
            engine.rt.seq_rm(1)
        engine.rt.placed(h, [t for u in units for t in u.tokens])
        engine.rt.decode(tail, start=h + max(len(u.tokens) for u in units))
        unshifted_agree += int(engine.last_logits().argmax()) == full[0]
        examples += 1
    assert agree >= examples - 1, f"composed agreed with the full prefill on {agree} of {examples}"
    assert unshifted_agree < agree


def test_memory_units_follow_days_and_keep_their_labels(tmp_path):
    """CURRENT's units are its day windows; new memories leave the earlier windows' labels (and so
    their blocks) alone; a window's label changes when its text does."""
    from memcli import Memory
    from memcli.kv.units import WINDOW_TOKENS, Units
    from memcli.store.lines import Library

    memory = Memory(tmp_path / "s", create=True)
    memory.ingest(EXAMPLES / "caroline-and-priya.json")
    first = Units(Library(memory.store)).every()
    days = [{e.time[:10] for e in u.evidence if e.time} for u in first]
    assert len(first) >= 3 and all(u.lines for u in first)
    assert all(len(d) >= 1 for d in days) and len({min(d) for d in days}) == len(first)
    assert all(sum(e.tokens for e in u.evidence) <= 2 * WINDOW_TOKENS for u in first)
    assert [line for u in first for line in u.lines] == sorted(line for u in first for line in u.lines)
    memory.remember("Priya moved her beehives to a new allotment.", speaker="Priya", time="2031-01-05T10:00")
    second = Units(Library(memory.store)).every()
    assert [u.label for u in second[:len(first)]] == [u.label for u in first]
    assert second[-1].label not in {u.label for u in first}
    memory.close()


@pytest.mark.slow  # a fast-tier budget of 5 minutes; CI runs it
def test_unit_blocks_are_invalidated_when_their_text_changes(cli, store_dir, monkeypatch):
    monkeypatch.setenv("MEMCLI_ASK_ANSWER", "generate")  # the model reads a composition (the reader composes none)
    assert cli("ingest", str(EXAMPLES / "caroline-and-priya.json"), "--no-auto").code == 0
    asked = cli("ask", "--kv-compose", "Where did Priya travel?", "--json")
    assert asked.code in (0, 1) and "tokens" in asked.json, asked.stderr  # 1: I don't know (it never travels)
    labels = {b["unit"] for b in cli("kv", "ls", "--json").json["blocks"]}
    windows = {label for label in labels if label.startswith("compose:window:CURRENT@")}
    assert windows and len(windows) == asked.json["tokens"]["units"]
    result = cli("consolidate", "--no-llm", "--json").json  # CURRENT's entries move into documents
    assert result["kv_invalidated_blocks"] >= len(windows)
    left = {b["unit"] for b in cli("kv", "ls", "--json").json["blocks"]}
    assert not left & windows


@pytest.mark.slow
def test_kv_build_ask_units_makes_the_blocks_a_composed_ask_places(cli, store_dir, monkeypatch):
    from memcli.tokens import count_tokens

    monkeypatch.setenv("MEMCLI_ASK_ANSWER", "generate")  # the model reads a composition (the reader composes none)
    assert cli("ingest", str(EXAMPLES / "caroline-and-priya.json"), "--no-auto").code == 0
    built = cli("kv", "build", "--ask-units", "--json")
    assert built.code == 0, built.stderr
    assert built.json["ask_units"] >= 2 and built.json["ask_unit_tokens"] > 300
    question = "Which agency did Caroline choose?"
    asked = cli("ask", "--kv-compose", question, "--json").json["tokens"]  # the first composed ask
    assert asked["composed"] > 0 and asked["prefilled"] <= count_tokens(question) + 16
    again = cli("kv", "build", "--ask-units", "--json").json  # everything stored: nothing prefilled
    assert again["prefilled_tokens"] == 0 and again["ask_units"] == built.json["ask_units"]
    plain = cli("kv", "build", "--json").json
    assert "ask_units" not in plain


@pytest.mark.slow
def test_ask_kv_compose_prefills_only_the_question(cli, store_dir, monkeypatch):
    """The model writes the answer (ask.answer generate): the units are composed and only the question
    prefilled. (With the small profile's extractive answer memcli's reader answers: nothing is composed.)"""
    from memcli.tokens import count_tokens

    monkeypatch.setenv("MEMCLI_ASK_ANSWER", "generate")
    assert cli("ingest", str(EXAMPLES / "caroline-and-priya.json"), "--no-auto").code == 0
    question = "Which adoption agency did Caroline apply to?"
    first = cli("ask", "--kv-compose", question, "--json", "--stats")
    assert first.code == 0, first.stderr
    second = cli("ask", "--kv-compose", question, "--json", "--stats")
    tokens = second.json["tokens"]
    assert tokens["prefilled"] <= count_tokens(question) + 16
    assert tokens["composed"] > 300 and tokens["restored"] > 50  # the units, and the instructions' chain
    assert tokens["composed"] <= 600 + 512  # a generated answer's units fit ask.answer_context (one unit over at most)
    units = {reading: cli("ask", "--kv-compose", "--answer-context", reading, question, "--json").json["tokens"]["units"]
             for reading in ("300", "600", "0")}  # 0: the units fit --budget
    assert units["300"] <= units["600"] == tokens["units"] < units["0"]
    # the generated answer's prompt is counted within a token of its parts (the first-token check decodes the
    # question's last token once more: noticed in issue 77, left as it was)
    assert abs(tokens["prompt"] - (tokens["prefilled"] + tokens["composed"] + tokens["restored"])) <= 1
    assert second.json["answer"] and second.json["citations"]
    assert second.json["timings"]["answer_ttft_s"] < first.json["timings"]["answer_ttft_s"]
    assert "composed" in second.stderr  # --stats
    # latent and fused selection answer from the same kind of context; every unit has its block then
    for how in ("latent", "fused"):
        picked = cli("ask", "--kv-compose", "--select", how, question, "--json")
        assert picked.code == 0, picked.stderr
        assert picked.json["tool_calls"][0]["by"] == how and picked.json["tokens"]["units"] >= 1
    assert cli("ask", "--select", "latent", question).code == 2  # --select needs --kv-compose
    assert cli("ask", "--kv-compose", "--evidence-only", question).code == 2


def test_block_keys_read_from_a_state_undo_their_rotation(tmp_path):
    """The keys in a saved state, rotated back by their positions, are the same wherever the cells were
    (the basis of comparing blocks placed anywhere with a question's queries)."""
    from memcli.kv.latent import block_keys, unrotate

    engine = open_engine(tmp_path / "blocks", n_ctx=1024)
    rt = engine.rt
    tokens = engine.tokenize("Priya keeps three beehives in Leeds.")
    rt.seq_rm(1)
    rt.decode(tokens, seq=1, start=0)
    at_start = rt.state_get(1)
    rt.seq_rm(1)
    rt.decode(tokens, seq=1, start=0)
    rt.seq_shift(1, 0, len(tokens), 300)
    rt.decode(tokens[:1], seq=1, start=300 + len(tokens))  # applies the shift (keys re-rotated)
    moved = rt.state_get(1)
    rt.seq_rm(1)
    shape = rt.attention_shape
    p0, k0 = rt.state_keys(at_start)
    p1, k1 = rt.state_keys(moved)
    assert list(p0) == list(range(len(tokens))) and list(p1[:len(tokens)]) == list(range(300, 300 + len(tokens)))
    assert k0.shape == (shape["n_layer"], len(tokens), shape["n_head_kv"], shape["head_dim"])
    assert np.abs(k0 - k1[:, :len(tokens)]).max() > 1.0  # stored rotated: they differ
    same = np.abs(unrotate(k0, p0, shape) - unrotate(k1[:, :len(tokens)], p1[:len(tokens)], shape)).max()
    assert same < 0.05 * np.abs(k0).max()
    kept = block_keys(rt, at_start, [(3, 1), (0, 0)])  # two key/value heads, as a summary keeps them
    assert kept.shape == (len(tokens), 2, shape["head_dim"])
    assert np.allclose(kept[:, 0], unrotate(k0, p0, shape)[3, :, 1], atol=0.02)
    with pytest.raises(ValueError):
        rt.state_keys(b"\x01\x00\x00\x00" * 3)
    queries = rt.queries(engine.tokenize("Question: where are the beehives?", bos=True))
    assert queries.shape[0] == shape["n_layer"] and queries.shape[2:] == (shape["n_head"], shape["head_dim"])


def test_head_scores_rank_the_block_whose_keys_the_queries_meet():
    """The scoring itself: for each retrieval head, a block holding one key its queries point at scores
    first, whatever the spread of the other blocks' keys; heads sharing a key/value head read the
    same keys; other heads' keys play no part."""
    from memcli.kv.latent import BlockKeys, head_scores

    rng = np.random.default_rng(0)
    group, kv_heads = 2, [(1, 0), (1, 1)]  # layer 1's two key/value heads (query heads 0-1 and 2-3)
    blocks = []
    for b in range(5):
        keys = rng.normal(0, 0.3, size=(20 + 7 * b, 2, 8))  # (cells, kept kv heads, dims)
        keys[3, 0, b] = 4.0  # one sharp key along dimension b, in kv head 0
        keys[5, 1, 7 - b] = 4.0  # and along 7 - b in kv head 1
        blocks.append(keys.astype(np.float16))
    table = BlockKeys(blocks)
    for b in range(5):
        queries = np.zeros((2, 3, 4, 8), dtype=np.float32)  # (layers, tokens, query heads, dims)
        queries[1, :, 0:2, b] = 1.0
        queries[1, :, 2:4, 7 - b] = 1.0
        queries[0] = rng.normal(size=(3, 4, 8))  # another layer: not read
        scores = head_scores(queries, table, [(1, 0), (1, 1), (1, 3)], kv_heads, group)
        assert scores.shape == (5, 3) and (scores.argmax(axis=0) == b).all()
    assert head_scores(queries, BlockKeys([]), [(1, 0)], kv_heads, group).shape == (0, 1)
    with pytest.raises(ValueError):
        BlockKeys([np.zeros((0, 2, 8))])


@pytest.mark.slow
def test_latent_selection_finds_the_unit_holding_the_answer(tmp_path):
    """With the real model: its retrieval heads are found on memcli's calibration memory once and kept
    by fingerprint (a damaged file is found again); in a constructed case (six units, one fact each,
    questions that do not name the person) the unit holding the answer ranks first for at least five
    of six questions; every unit gets its block and a summary beside it, deleted with the block."""
    from memcli.kv.composed_ask import ComposedPrompt, latent_ranking
    from memcli.kv.engine import Unit
    from memcli.kv.latent import HEADS, Summaries, kv_heads_of, retrieval_heads
    from memcli.kv.units import MemoryUnit
    from memcli.retrieve.evidence import Evidence

    engine = open_engine(tmp_path / "blocks")
    prompt = ComposedPrompt(engine)
    every = [MemoryUnit("CURRENT", [k + 1], [Evidence("CURRENT", k + 1, k + 1, text=unit_text(p, f, k).rstrip())])
             for k, (p, f) in enumerate(PEOPLE)]
    questions = ["Who met a social worker about an adoption?", "Who sold honey at the market?",
                 "Who ran a marathon?", "Who painted a room yellow?", "Who bakes sourdough bread?",
                 "Who adopted a cat from the shelter?"]
    tops = [latent_ranking(engine, prompt, every, q)[0].label for q in questions]
    assert sum(top == unit.label for top, unit in zip(tops, every)) >= 5, tops

    kept = tmp_path / "heads" / f"{engine.fp_id}.json"
    heads = retrieval_heads(engine, prompt.prefix)
    assert kept.exists() and len(heads.heads) == engine.rt.attention_shape["n_layer"] * engine.rt.attention_shape["n_head"]
    assert heads.quality[0] >= 0.9 and heads.quality == sorted(heads.quality, reverse=True)
    labels = [engine.blocks.header(p.stem).unit for p in engine.blocks.root.glob("*/*.kvb")]
    assert labels and not [label for label in labels if "calibration:" in label]  # calibration stores no block
    kept.write_text("{damaged")
    assert retrieval_heads(engine, prompt.prefix).heads == heads.heads  # found again, the same

    shape = engine.rt.attention_shape
    summaries = Summaries(engine.blocks, engine, kv_heads_of(heads.best(HEADS), shape["n_head"] // shape["n_head_kv"]))
    keys = [engine.composed_key(prompt.prefix, Unit(u.label, engine.tokenize(u.text))) for u in every]
    assert all(engine.blocks.path(k).exists() and summaries.path(k).exists() for k in keys)
    engine.blocks.remove(keys[0])
    assert not summaries.path(keys[0]).exists()  # a summary goes with its block
    summaries.path(keys[1]).write_bytes(b"damaged")
    assert summaries.get(keys[1]) is not None  # made again from the block
    with open(summaries.path(keys[1]), "wb") as handle:  # a summary of the earlier format (bounding boxes)
        np.save(handle, np.zeros((3, 30, 3, 64), dtype=np.float16))
    assert summaries.get(keys[1]).shape[1:] == (len(summaries.kv_heads), 64)  # made again
    engine.blocks.path(keys[2]).write_bytes(b"MEMCLI-KV 1\n{not a header}\n")  # a broken block
    again = latent_ranking(engine, prompt, every, "Who ran a marathon?")
    assert len(again) == len(every) and engine.blocks.header(keys[2]) is not None  # rebuilt, ranked
    assert engine.blocks.path(keys[0]).exists()  # the removed one was made again too
    engine.blocks.path(keys[3]).unlink()  # a block deleted by hand leaves its summary behind
    assert summaries.path(keys[3]).exists() and engine.blocks.orphans() == 1
    assert not summaries.path(keys[3]).exists() and summaries.path(keys[4]).exists()


@pytest.mark.slow
def test_warm_chat_start_reads_the_units_it_kept(tmp_path, monkeypatch):
    """Chat keeps its memory units as tokens by the store's file signatures: an unchanged store is not
    parsed or tokenized again; a changed document is."""
    from memcli import Memory
    from memcli.kv import context

    root = tmp_path / "s"
    memory = Memory(root, create=True)
    memory.ingest(EXAMPLES / "caroline-and-priya.json")
    first = memory.chat("w", remember=False)
    units = [(u.label, u.tokens) for u in first.session.memory_units]
    assert list((root / "kv" / "units").glob("*.json"))
    built = []
    original = context.memory_texts
    monkeypatch.setattr("memcli.kv.chat_session.memory_texts", lambda *a: built.append(1) or original(*a))
    again = memory.chat("w2", remember=False)
    assert [(u.label, u.tokens) for u in again.session.memory_units] == units and not built
    memory.remember("Caroline bought a blue sofa.", speaker="Caroline")
    changed = memory.chat("w3", remember=False)
    assert built and [u.label for u in changed.session.memory_units] != [label for label, _ in units]
    memory.close()


@pytest.mark.slow
def test_ask_kv_compose_answers_with_the_evidence_readers_extractive_answer(cli, store_dir, monkeypatch):
    """With the default model (ask.answer auto: extract), ask --kv-compose answers with memcli's reader over
    the units' entries: no model reads a composition (nothing composed, nothing generated), the answer is
    the reader's (``decided``) and the same abstentions hold. A generated answer's composition checks its
    first token (kv.compose_check) and is repaired under it."""
    assert cli("ingest", str(EXAMPLES / "caroline-and-priya.json"), "--no-auto").code == 0
    when = "When did Caroline pass the home study?"
    composed = cli("ask", "--kv-compose", when, "--json")
    assert composed.code in (0, 1), composed.stderr
    assert composed.json["decided"]["by"] == "reader" and composed.json["tokens"]["generated"] == 0
    assert composed.json["tokens"]["composed"] == 0 and "check" not in composed.json
    monkeypatch.setenv("MEMCLI_KV_COMPOSE_CHECK", "1.5")
    assert cli("ask", "--kv-compose", when).code == 3  # a configuration error: not a probability margin
    monkeypatch.delenv("MEMCLI_KV_COMPOSE_CHECK")
    monkeypatch.setenv("MEMCLI_ASK_ANSWER", "generate")  # the capable profile's way: the model writes it
    written = cli("ask", "--kv-compose", when, "--json").json
    assert written["why"] in (
        "written by the model", "the model found no answer", "the model's answer says what the evidence read does not")
    assert 0 <= written["check"]["margin"] <= 1 and written["check"]["repaired"] is (written["check"]["margin"] < 0.01)
    monkeypatch.setenv("MEMCLI_KV_COMPOSE_CHECK", "1")  # never sure enough: every composition is repaired
    repaired = cli("ask", "--kv-compose", when, "--json").json
    assert repaired["check"]["repaired"] is True and repaired["check"]["margin"] == written["check"]["margin"]
    assert repaired["tokens"]["prefilled"] > written["tokens"]["composed"]  # the units read in full, after all
