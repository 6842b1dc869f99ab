"""LLM usage per role (ms.llm.base, ms.llm.usage): every call counts under the role it was made in,
the roles add up to the total, and a price turns tokens into an estimated cost."""

from __future__ import annotations

import pytest
from conftest import compose_config
from fakes import FakeLM

from ms.llm import ResponseCache
from ms.llm.base import ROLES
from ms.llm.usage import by_role, format_usage, usage_report
from ms.loop.validation import problems


def word_lm(model: str, **options) -> FakeLM:
    """Replies "ok ok": a prompt costs one token per word, a reply two."""
    return FakeLM(default="ok ok", model=model, **options)


def test_calls_count_under_their_role_and_the_roles_add_up_to_the_total(tmp_path):
    lm = word_lm("words", cache=ResponseCache(tmp_path / "responses.sqlite"))
    lm.name = "words-backbone"
    with lm.acting_as("answer"):
        lm.generate(["one two three", "four five"])
    with lm.acting_as("score"):
        lm.generate(["one two three"])  # the same request: the cache answers it, under score
        with lm.acting_as("label"):  # roles nest: the inner one counts
            lm.generate(["six"])
        lm.generate(["seven eight"])
    lm.generate(["nine"])  # outside any role
    with pytest.raises(ValueError, match="unknown LM role 'grade'"):
        with lm.acting_as("grade"):
            pass
    assert lm.role == "other"

    report = usage_report([lm, lm])  # an LM that serves two parts counts once
    roles = report["backbones"]["words-backbone"]["roles"]
    assert list(roles) == [*ROLES, "other"]
    answer = roles["answer"]
    assert (answer["calls"], answer["prompt_tokens"], answer["completion_tokens"]) == (2, 5, 4)
    assert (roles["score"]["calls"], roles["score"]["cache_hits"], roles["score"]["prompt_tokens"]) == (1, 1, 2)
    assert (roles["label"]["calls"], roles["other"]["calls"], roles["evaluate"]["calls"]) == (1, 1, 0)
    total = report["backbones"]["words-backbone"]["total"]
    for field in total:
        assert sum(u[field] for u in roles.values()) == pytest.approx(total[field]), field
    assert report["total"] == total and (total["calls"], total["cache_hits"]) == (5, 1)
    assert report["cost"] is None and "cost" not in report["backbones"]["words-backbone"]


def test_a_price_turns_the_tokens_that_reached_the_backend_into_a_cost():
    priced, unpriced = word_lm("a"), word_lm("b")
    priced.name, unpriced.name = "priced", "unpriced"
    priced.price = {"input_per_million": 2.5, "output_per_million": 10.0}
    with priced.acting_as("answer"):
        priced.generate(["one two three four"])  # 4 prompt tokens, 2 completion tokens
    with priced.acting_as("evaluate"):
        priced.generate(["one", "two"])  # 2 and 4
    with unpriced.acting_as("score"):
        unpriced.generate(["x"])

    both = usage_report([priced, unpriced])
    cost = both["backbones"]["priced"]["cost"]
    assert cost["answer"] == pytest.approx((4 * 2.5 + 2 * 10.0) / 1e6)
    assert cost["evaluate"] == pytest.approx((2 * 2.5 + 4 * 10.0) / 1e6)
    assert cost["total"] == pytest.approx(sum(v for k, v in cost.items() if k != "total"))
    # A run with an unpriced backbone has no cost in all: a partial sum would read as the whole.
    assert both["cost"] is None and by_role(both)["answer"]["cost"] is None
    alone = usage_report([priced])
    assert alone["cost"] == pytest.approx(cost["total"]) and by_role(alone)["answer"]["cost"] == cost["answer"]

    lines = format_usage(alone).splitlines()
    assert [line.split()[0] for line in lines[2:]] == ["answer", "evaluate", "total"]  # idle roles left out
    assert lines[-1].split()[1:3] == ["3", "0"] and lines[-1].endswith(f"{cost['total']:.4f}")


def test_price_settings_are_checked_with_their_key():
    found = problems(compose_config(["backbone.price.input_per_million=-1", "backbone.price.output_per_million=1"]))
    assert found == ["invalid setting backbone.price.input_per_million=-1.0: must be at least 0"]
    half = problems(compose_config(["backbone.price.output_per_million=1"]))
    assert len(half) == 1 and half[0].startswith("invalid setting backbone.price.input_per_million=None")
    assert problems(compose_config(["backbone.price.input_per_million=0", "backbone.price.output_per_million=0"])) == []


def test_the_report_sums_usage_and_cost_over_a_sweeps_runs(tmp_path):
    import csv

    from ms.report.common.runs import Run
    from ms.report.usage.usage import write_usage

    def run(name: str, calls: int, price: dict | None) -> Run:
        lm = word_lm("m")
        lm.name, lm.price = "b", price
        with lm.acting_as("answer"):
            lm.generate(["one two"] * calls)  # 2 prompt and 2 completion tokens a call
        with lm.acting_as("score"):
            lm.generate(["x"])
        return Run(name, tmp_path / name, {"run": {"backbone": "b"}, "usage": usage_report([lm])}, [], 0.0)

    price = {"input_per_million": 1.0, "output_per_million": 3.0}
    summary = write_usage([run("r1", 2, price), run("r2", 3, price)], tmp_path)
    assert "LLM usage of 2 of 2 runs. " in summary
    lines = {
        line.split(" | ")[0].strip("| *"): line.split(" | ")[1:]
        for line in summary.splitlines()
        if line.startswith("| ") and "---" not in line
    }
    assert lines["answer"][0] == "5" and lines["score"][0] == "2" and lines["sweep total"][0] == "7"
    expected = ((2 * 5 + 1 * 2) * 1.0 + (2 * 5 + 2 * 2) * 3.0) / 1e6
    assert float(lines["sweep total"][-1].rstrip(" |")) == pytest.approx(expected, abs=1e-4)
    rows = list(csv.DictReader((tmp_path / "usage.csv").open()))
    totals = [r for r in rows if r["role"] == "total"]
    assert [r["run"] for r in totals] == ["r1", "r2"]
    assert sum(float(r["cost"]) for r in totals) == pytest.approx(expected)
    for name in ("r1", "r2"):  # per run, the roles add up to its total
        mine = [r for r in rows if r["run"] == name]
        assert sum(int(r["calls"]) for r in mine if r["role"] != "total") == int(mine[-1]["calls"])

    unpriced = write_usage([run("r1", 2, price), run("r3", 1, None)], tmp_path)
    assert "left out because 1 run(s) have an unpriced backbone" in unpriced


def test_the_report_reads_every_usage_shape_ms_has_written(tmp_path):
    """The first runs wrote one LM's counters, later ones {"agents": ..., "scorer": ...}, both without
    roles and the first without `retries`; some keep usage only in llm_usage.json. Each is counted."""
    import json

    from ms.report.common.runs import Run
    from ms.report.usage.usage import write_usage

    counters = {
        "calls": 5,
        "prompt_tokens": 50,
        "completion_tokens": 7,
        "cache_hits": 2,
        "cache_misses": 5,
        "backend_seconds": 1.5,
    }
    lm = word_lm("m")
    with lm.acting_as("answer"):
        lm.generate(["one two"])
    shapes = {
        "flat": counters,
        "parts": {"agents": counters, "scorer": dict(counters, calls=1)},
        "roles": usage_report([lm]),
    }
    runs = [
        Run(name, tmp_path / name, {"run": {"backbone": "smollm2"}, "usage": usage}, [], 0.0)
        for name, usage in shapes.items()
    ]
    (tmp_path / "file_only").mkdir()
    (tmp_path / "file_only" / "llm_usage.json").write_text(json.dumps({"agents": counters}))
    runs.append(Run("file_only", tmp_path / "file_only", {"run": {"backbone": "smollm2"}}, [], 0.0))
    summary = write_usage(runs, tmp_path)
    assert (
        "LLM usage of 4 of 4 runs (3 written before usage was kept per role: their calls count under `other`)"
        in summary
    )
    lines = {
        line.split(" | ")[0].strip("| *"): line.split(" | ")[1:]
        for line in summary.splitlines()
        if line.startswith("| ") and "---" not in line
    }
    assert lines["other"][:2] == ["16", "8"] and lines["answer"][0] == "1"  # 5 + (5 + 1) + 5 calls, 2 hits each
    assert lines["sweep total"][0] == "17"
