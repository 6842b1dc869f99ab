"""The third model family offline: Qwen2.5-Coder-0.5B-Instruct, a GGUF file split over six PyPI
packages that state no hash (ms.llm.gguf_parts): joined once under a lock to the SHA-256 the repo
records, refused in one line naming a changed or missing part, read as ChatML, and known to plan mode."""

from __future__ import annotations

import hashlib
import importlib
import multiprocessing as mp
import os
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import compose_config

from ms.llm.base import BackendError
from ms.llm.gguf_chunks import assembled_gguf, assembled_path, chunked_package
from ms.llm.gguf_parts import QWEN25_CODER_05B, SPLIT_GGUFS, Part, SplitGGUF, gguf_metadata

BACKBONE = "backbone=qwen2.5-0.5b"
PACKAGE = QWEN25_CODER_05B.parts[0].package  # the backbone's gguf_package: its first part


def sha256_of(path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


@pytest.fixture(scope="module")
def qwen(models_cache):
    """Qwen2.5-Coder-0.5B as conf/backbone/qwen2.5-0.5b.yaml builds it: scoring on transformers,
    greedy decoding on llama.cpp; joined and converted once per machine (about 2 min the first time)."""
    from ms.llm import build_lm

    return build_lm(compose_config([BACKBONE]).backbone, models_cache, use_response_cache=False)


# ---- the model: its file, a forward pass, its chat template -----------------------------------


def test_the_joined_file_in_the_models_folder_has_the_recorded_hash_and_says_it_is_qwen2(qwen):
    from ms.llm.local import models_dir

    assert os.environ["HF_HUB_OFFLINE"] == "1"
    joined = assembled_path(QWEN25_CODER_05B, models_dir())
    assert joined.is_file() and sha256_of(joined) == QWEN25_CODER_05B.EXPECTED_SHA256
    found = gguf_metadata(joined, ("general.name", "general.architecture", "qwen2.block_count"))
    assert "Qwen2.5 Coder 0.5B" in found["general.name"] and found["general.architecture"] == "qwen2"
    assert found["qwen2.block_count"] == 24
    assert qwen.engine == "llamacpp" and qwen.generator is not None  # decoding off transformers


def test_a_forward_pass_puts_the_right_answer_above_a_wrong_one(qwen):
    chat = [
        {"role": "system", "content": "You are a Python expert. Answer with the value only."},
        {"role": "user", "content": "What does len([4, 5, 6]) return?"},
    ]
    context = qwen.chat_context(chat)
    (right, n_right), (wrong, n_wrong) = qwen.loglikelihood([context] * 2, ["3", "banana"])
    assert n_right > 0 and n_wrong > 0
    assert right / n_right > wrong / n_wrong + 2.0  # nats per token: by far, not by a rounding error


def test_its_chat_template_renders_a_system_and_a_user_turn_as_chatml(qwen):
    text = qwen.chat_context(
        [{"role": "system", "content": "You solve riddles."}, {"role": "user", "content": "What has keys?"}]
    )
    assert text == (
        "<|im_start|>system\nYou solve riddles.<|im_end|>\n"
        "<|im_start|>user\nWhat has keys?<|im_end|>\n<|im_start|>assistant\n"
    )
    ids = qwen._encode(text)
    start, end = qwen.tokenizer.convert_tokens_to_ids(["<|im_start|>", "<|im_end|>"])
    assert ids[0] == start and ids.count(start) == 3 and ids.count(end) == 2  # markers are single tokens, no BOS
    assert qwen.tokenizer.eos_token == "<|im_end|>"  # a reply ends with its turn


def test_a_greedy_reply_on_llamacpp_answers_and_ends_with_its_turn(qwen):
    reply = qwen.generate(
        [[{"role": "system", "content": "Reply with a number only."}, {"role": "user", "content": "What is 2 + 3?"}]],
        max_new_tokens=8,
    )[0]
    assert reply.strip() == "5"


# ---- plan mode ----------------------------------------------------------------------------------


def test_plan_mode_knows_the_backbone_and_finds_its_scored_requests_in_the_cache(tmp_path, qwen, ms_run):
    """Plan mode renders the scored context with Qwen's own chat template: a reference that the real
    model scored, as a run scores it, is found in the response cache by the plan."""
    from test_pipeline import TINY

    from ms.agents import PromptTemplate, agents_from, chat
    from ms.data import load_splits
    from ms.llm import ResponseCache
    from ms.plan.calls import key_model
    from ms.plan.planner import plan_run

    assert ms_run(*TINY, BACKBONE, "+plan=true") == (0, [])
    cfg = compose_config(TINY + [BACKBONE, f"cache_dir={tmp_path}", "k=0", "eval.metrics=[ref_logprob]"])
    assert key_model(cfg.backbone, "generate") == qwen._key_model("generate")  # its llama.cpp replies' keys
    agents = agents_from(cfg.agents)
    riddle = load_splits(cfg.data, agents)["riddle"].test[0]
    prompt = chat(agents["riddle"], PromptTemplate(**cfg.prompt).render(riddle.question), cfg.prompt.system)
    qwen.cache = ResponseCache(tmp_path / "responses.sqlite")
    try:
        qwen.loglikelihood([qwen.chat_context(prompt)], [riddle.answer])
    finally:
        qwen.cache = None
    evaluate = {r.role: r for r in plan_run(cfg).rows}["evaluate"]
    # 2 test questions x 2 fills: the riddle's score is held, and the second fill repeats the first.
    assert (evaluate.calls, evaluate.cached, evaluate.cached_exact) == (4, 3, True)


# ---- joining the parts ----------------------------------------------------------------------------


def _join(models_dir: str, start) -> None:
    start.wait()  # both processes begin at once
    assembled_gguf(PACKAGE, Path(models_dir))


def test_two_processes_joining_at_once_leave_one_whole_file_with_the_recorded_hash(tmp_path):
    whole = sum(p.stat().st_size for p in QWEN25_CODER_05B.chunk_paths())
    target = assembled_path(QWEN25_CODER_05B, tmp_path)
    spawn = mp.get_context("spawn")
    start = spawn.Barrier(2)
    workers = [spawn.Process(target=_join, args=(str(tmp_path), start)) for _ in range(2)]
    for w in workers:
        w.start()
    seen = set()  # a run that starts meanwhile must never find a part of the file under its name
    deadline = time.monotonic() + 300
    while any(w.is_alive() for w in workers) and time.monotonic() < deadline:
        if target.exists():
            seen.add(target.stat().st_size)
        time.sleep(0.005)
    for w in workers:
        w.join(timeout=10)
    assert [w.exitcode for w in workers] == [0, 0]
    assert seen <= {whole}
    left = sorted(p.name for p in tmp_path.iterdir() if p.suffix != ".lock")  # no staging file left
    assert left == [target.name] and sha256_of(target) == QWEN25_CODER_05B.EXPECTED_SHA256


# Fake parts: three small packages on sys.path, each `data/partNN.bin`, as the real ones are laid out.
FAKE = ("fake_qwen_part1", "fake_qwen_part2", "fake_qwen_part3")


def tiny_gguf(path: Path, name: str, architecture: str) -> bytes:
    from gguf import GGUFWriter

    writer = GGUFWriter(path, architecture)
    writer.add_name(name)
    writer.add_tensor("token_embd.weight", np.arange(4096, dtype=np.float32).reshape(64, 64))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path.read_bytes()


def fake_split(root: Path, monkeypatch, data: bytes, name: str = "fake-model.gguf") -> SplitGGUF:
    """`data` in three fake part packages under `root` and a record of them, as gguf_package FAKE[0]."""
    cut = [0, len(data) // 3, 2 * len(data) // 3, len(data)]
    parts = []
    for i, package in enumerate(FAKE):
        chunk = data[cut[i] : cut[i + 1]]
        (root / package / "data").mkdir(parents=True)
        (root / package / "__init__.py").write_text("")
        (root / package / "data" / f"part0{i + 1}.bin").write_bytes(chunk)
        parts.append(Part(package, f"data/part0{i + 1}.bin", hashlib.sha256(chunk).hexdigest(), "0.9.0"))
    monkeypatch.syspath_prepend(str(root))
    importlib.invalidate_caches()
    split = SplitGGUF(
        MODEL_NAME=name,
        EXPECTED_SHA256=hashlib.sha256(data).hexdigest(),
        parts=tuple(parts),
        general_name="Qwen2.5 Coder 0.5B",
        architecture="qwen2",
        extra="qwen",
    )
    monkeypatch.setitem(SPLIT_GGUFS, FAKE[0], split)
    return split


def refused(models: Path) -> str:
    with pytest.raises(BackendError) as caught:
        assembled_gguf(FAKE[0], models)
    assert [p for p in models.iterdir() if p.suffix != ".lock"] == []  # nothing kept, no staging file left
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_fake_parts_of_a_qwen2_file_join_to_their_recorded_hash(tmp_path, monkeypatch):
    data = tiny_gguf(tmp_path / "whole.gguf", "Qwen2.5 Coder 0.5B Instruct AWQ", "qwen2")
    split = fake_split(tmp_path / "site", monkeypatch, data)
    assert chunked_package(FAKE[0]) is split
    joined = assembled_gguf(FAKE[0], tmp_path / "models")
    assert joined == assembled_path(split, tmp_path / "models") and joined.read_bytes() == data


def test_a_changed_part_is_refused_in_one_line_naming_it(tmp_path, monkeypatch):
    data = tiny_gguf(tmp_path / "whole.gguf", "Qwen2.5 Coder 0.5B Instruct AWQ", "qwen2")
    fake_split(tmp_path / "site", monkeypatch, data)
    part = tmp_path / "site" / FAKE[1] / "data" / "part02.bin"
    part.write_bytes(b"x" + part.read_bytes()[1:])  # one byte changed
    message = refused(tmp_path / "models")
    assert message.startswith("part 2 of 3 of fake-model.gguf") and str(part) in message
    assert "fake-qwen-part2==0.9.0" in message


def test_a_missing_part_is_refused_in_one_line_naming_it(tmp_path, monkeypatch):
    data = tiny_gguf(tmp_path / "whole.gguf", "Qwen2.5 Coder 0.5B Instruct AWQ", "qwen2")
    fake_split(tmp_path / "site", monkeypatch, data)
    (tmp_path / "site" / FAKE[2] / "data" / "part03.bin").unlink()  # the package is there, its part gone
    assert refused(tmp_path / "models").startswith("part 3 of 3 of fake-model.gguf is missing: no file")
    (tmp_path / "site" / FAKE[2] / "__init__.py").unlink()  # no package at all
    (tmp_path / "site" / FAKE[2] / "data").rmdir()
    (tmp_path / "site" / FAKE[2]).rmdir()
    importlib.invalidate_caches()
    message = refused(tmp_path / "models")
    assert message.startswith("part 3 of 3 of fake-model.gguf is missing: package 'fake_qwen_part3' is not installed")
    assert "[qwen]" in message


@pytest.mark.parametrize(
    "name, architecture, says",
    [
        ("Gemma 3 270M", "qwen2", "general.name is 'Gemma 3 270M'"),
        ("Qwen2.5 Coder 0.5B Instruct", "llama", "general.architecture is 'llama'"),
    ],
)
def test_a_file_whose_metadata_names_another_model_is_refused(tmp_path, monkeypatch, name, architecture, says):
    """The hashes hold (they are recorded for these very bytes), but the file is not the model."""
    fake_split(tmp_path / "site", monkeypatch, tiny_gguf(tmp_path / "whole.gguf", name, architecture))
    assert says in refused(tmp_path / "models")


def test_parts_that_join_to_no_gguf_file_are_refused(tmp_path, monkeypatch):
    fake_split(tmp_path / "site", monkeypatch, b"not a model file at all, " * 40)
    assert "is not a readable GGUF file (no GGUF magic number)" in refused(tmp_path / "models")
