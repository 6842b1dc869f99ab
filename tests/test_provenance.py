"""The reproducibility record every run writes into metrics.json, and ms-report's warnings where the
runs it pools or pairs were made with different model files, engines or package versions."""

from __future__ import annotations

import hashlib
import json
import logging
import re

from conftest import compose_config
from test_report import make_run

from ms.loop import provenance as prov
from ms.report import write_report

SHA256 = re.compile(r"[0-9a-f]{64}")


def test_record_names_the_commit_versions_batch_sizes_and_hashes_the_gguf():
    cfg = compose_config()
    record = prov.provenance({"smollm2": cfg.backbone}, {"retriever": None, "bertscore": None}, cfg.micro_batch)
    assert set(record) == {"commit", "dirty", "changed", "versions", "backbones", "encoders", "micro_batch"}
    assert re.fullmatch(r"[0-9a-f]{40}", record["commit"]) and isinstance(
        record["dirty"], bool
    )  # tests run in a checkout
    assert {"python", "torch", "transformers"} <= set(record["versions"])
    assert all(record["versions"][p] for p in ("python", "torch", "transformers"))
    backbone = record["backbones"]["smollm2"]
    assert (
        backbone["engine"] == getattr(cfg.backbone, "engine", "hf")
        and backbone["batch_size"] == cfg.backbone.batch_size
    )
    [(gguf, sha)] = backbone["sha256"].items()
    assert gguf.endswith(".gguf") and SHA256.fullmatch(sha)
    for role in ("retriever", "bertscore"):
        hashes = record["encoders"][role]["sha256"]
        assert hashes and all(SHA256.fullmatch(h) for h in hashes.values())
    assert record["micro_batch"] == cfg.micro_batch
    json.dumps(record)  # metrics.json must hold it as it is


def test_outside_a_git_checkout_the_commit_is_none(tmp_path):
    assert prov.git_state(tmp_path) == {"commit": None, "dirty": None, "changed": None}


def test_a_dirty_tree_records_what_differs(tmp_path):
    """An untracked output folder and an edited file each make the tree dirty, and the record names them."""
    import subprocess

    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / "code.py").write_text("x = 1\n")
    git("add", "code.py")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "c")
    clean = prov.git_state(tmp_path)
    assert clean["dirty"] is False and clean["changed"] == [] and re.fullmatch(r"[0-9a-f]{40}", clean["commit"])
    (tmp_path / "gate_check").mkdir()
    (tmp_path / "gate_check" / "out.md").write_text("table\n")
    (tmp_path / "code.py").write_text("x = 2\n")
    dirty = prov.git_state(tmp_path)
    assert dirty["dirty"] is True and sorted(dirty["changed"]) == [" M code.py", "?? gate_check/"]


def test_a_file_is_hashed_again_only_when_it_changes(tmp_path, monkeypatch):
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(b"first")
    assert prov.file_sha256(weights) == hashlib.sha256(b"first").hexdigest()
    reads = []
    real_open = type(weights).open
    monkeypatch.setattr(type(weights), "open", lambda self, *a, **k: reads.append(self) or real_open(self, *a, **k))
    prov.file_sha256(weights)
    assert reads == []  # same path, size and mtime: the cached hash
    weights.write_bytes(b"second, longer")
    reads.clear()  # writing opened it too
    assert prov.file_sha256(weights) == hashlib.sha256(b"second, longer").hexdigest() and reads == [weights]


def test_an_api_backbone_has_its_provider_as_engine_and_no_files():
    cfg = compose_config(["backbone=openai-compatible", "backbone.model=some-model"])
    backbone = prov.backbone_record(cfg.backbone)
    assert backbone["engine"] == (getattr(cfg.backbone, "engine", None) or "openai")
    assert backbone["sha256"] is None


# ---- ms-report ------------------------------------------------------------------------------

RECORD = {
    "commit": "a" * 40,
    "dirty": False,
    "versions": {"python": "3.11.9", "torch": "2.13.0", "transformers": "4.57.0"},
    "backbones": {
        "smollm2": {
            "provider": "hf",
            "engine": "hf",
            "batch_size": 8,
            "model": "x::m.gguf",
            "sha256": {"m.gguf": "1" * 64},
        }
    },
    "encoders": {"retriever": {"model": "minilm", "sha256": {"model.safetensors": "2" * 64}}},
    "micro_batch": 32,
}


def with_record(run, record: dict | None) -> None:
    metrics = json.loads((run / "metrics.json").read_text())
    if record is not None:
        metrics["provenance"] = record
    (run / "metrics.json").write_text(json.dumps(metrics))


def replicates(root, first: dict | None, second: dict | None) -> None:
    """Two seed replicates of one condition, carrying the given records (None: none, as old runs)."""
    for seed, record in ((0, first), (1, second)):
        with_record(make_run(root, f"seed={seed}", backbone="smollm2", seed=seed), record)


def report_warnings(root, caplog) -> tuple[list[str], str]:
    with caplog.at_level(logging.WARNING, logger="ms.report.tables.pages"):
        summary = write_report([root], root / "report").read_text()
    return [r.getMessage() for r in caplog.records if r.name == "ms.report.tables.pages"], summary


def test_report_warns_once_per_difference_between_pooled_runs(tmp_path, caplog):
    other = json.loads(json.dumps(RECORD))
    other["commit"] = "b" * 40  # a commit alone is no warning
    other["backbones"]["smollm2"]["sha256"]["m.gguf"] = "3" * 64
    other["versions"]["torch"] = "2.12.0"
    replicates(tmp_path, RECORD, other)
    warnings, summary = report_warnings(tmp_path, caplog)
    assert len(warnings) == 2, warnings
    assert any("backbone smollm2 file m.gguf SHA-256" in w and "1" * 64 in w and "3" * 64 in w for w in warnings)
    assert any("torch version: 2.13.0 in seed=0, 2.12.0 in seed=1" in w for w in warnings)
    assert all(f"- warning: {w}" in summary for w in warnings)


def test_report_is_silent_on_equal_records(tmp_path, caplog):
    other = json.loads(json.dumps(RECORD))
    other["commit"], other["dirty"] = "b" * 40, True
    replicates(tmp_path, RECORD, other)
    warnings, summary = report_warnings(tmp_path, caplog)
    assert warnings == [] and "## Reproducibility records" in summary and "No differences." in summary


def test_runs_without_a_record_load_with_a_note(tmp_path, caplog):
    replicates(tmp_path, RECORD, None)
    warnings, summary = report_warnings(tmp_path, caplog)
    assert warnings == [] and "1 run(s) carry no record" in summary and "`seed=1`" in summary


def test_report_warns_on_a_different_engine_between_paired_runs(tmp_path, caplog):
    other = json.loads(json.dumps(RECORD))
    other["backbones"]["smollm2"]["engine"] = "llama.cpp"
    with_record(make_run(tmp_path, "k=0", backbone="smollm2", k=0, base=0.2), RECORD)
    with_record(make_run(tmp_path, "k=3", backbone="smollm2", k=3, base=0.3), other)
    warnings, _ = report_warnings(tmp_path, caplog)
    assert warnings == [
        "runs paired in claim (a) k = 3 against k = 0 differ in backbone smollm2 engine: llama.cpp in k=3, hf in k=0"
    ]
