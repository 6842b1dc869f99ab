"""Plain-words praise in the gate check (ms.gates.check_praise): each family is built from the pair's own
agent and the rubric that grades it (the Single pool's there), none of it speaks the screen's words, the
model-written family is sampled, seeded and cached like every LLM call, and the split into development
and held-out families is reported apart."""

from __future__ import annotations

import argparse
import json
import re

import pytest
from conftest import compose_config
from fakes import FakeLM

from ms.agents import agents_from
from ms.common.errors import UserError
from ms.data import Example
from ms.data.plain_praise import LINE_PLUS_PRAISE, PRAISE_ALONE, Praised, praise, templated
from ms.gates.check_corruptions import GOOD, corrupted_copies, with_model_praise
from ms.gates.check_pooled import GROUPS, Scored, compare_report, pooled_auc, pooled_report, read_check
from ms.gates.check_praise import (
    ASKS,
    CROSS_PRAISE,
    CROSS_REQUESTS,
    DEVELOPMENT,
    FIFTH_PRAISE,
    HELD_OUT,
    MODEL_PRAISE,
    PRAISE_POOLS,
    SEVENTH_PRAISE,
    SIXTH_PRAISE,
    THIRD_PRAISE,
    WORDINGS,
    copied,
    request,
    requests,
    written,
)
from ms.gates.scorer import load_rubric, load_rubrics, rubric_for
from ms.gates.screen import flagged
from ms.llm.cache import ResponseCache

ANSWER = "A keyboard.\nIt has keys but opens no locks."
# What the probe kept clear of, beside the screen's own rule.
GRADING_WORDS = re.compile(r"rubric|criteri|score|points|grade|grading|this answer|marks", re.IGNORECASE)


def example(i: int = 0, answer: str = ANSWER, agent: str = "riddle") -> Example:
    return Example(id=f"{agent}-{i}", question=f"{agent} question {i}?", answer=answer, agent=agent, domain="logic")


def every_agents_praised(pool: str = "domain") -> dict[str, Praised]:
    cfg = compose_config([f"pool={pool}"])
    agents = agents_from(cfg.agents)
    return {name: Praised.of(name, rubric_for(agent, cfg.pool.mode)) for name, agent in agents.items()}


def test_the_split_is_declared_once_and_the_model_written_family_is_held_out():
    assert set(DEVELOPMENT).isdisjoint(HELD_OUT) and HELD_OUT == (
        MODEL_PRAISE,
        CROSS_PRAISE,
        THIRD_PRAISE,
        FIFTH_PRAISE,
        SIXTH_PRAISE,
        SEVENTH_PRAISE,
    )
    assert set(DEVELOPMENT) == {PRAISE_ALONE, LINE_PLUS_PRAISE}
    assert {group: GROUPS[group] for group in PRAISE_POOLS} == PRAISE_POOLS  # the check reports each pool


def test_praise_restates_what_the_agents_own_rubric_rewards_and_no_other_agents():
    literary = load_rubric("literary")
    limerick, sonnet = Praised.of("limerick", literary), Praised.of("sonnet", literary)
    made = praise(limerick, 0, "limerick-0")
    assert "Limerick" in made or "limerick" in made.lower()
    for c in literary.criteria:
        said = " ".join(c.rewards.split()) in made
        assert said == (not c.applies_to or "limerick" in c.applies_to), c.name
    assert set(limerick.rewards) != set(sonnet.rewards)


def test_the_single_pools_praise_restates_the_single_rubric():
    praised = every_agents_praised("single")["riddle"]
    single, logic = load_rubric("single"), load_rubric("logic")
    made = praise(praised, 0, "riddle-0")
    assert all(c.rewards in made for c in single.criteria)
    assert not any(c.rewards in made for c in logic.criteria)


@pytest.mark.parametrize("pool", ["domain", "single"])
def test_no_praise_speaks_the_screens_words(pool):
    names = [c.name for r in load_rubrics().values() for c in r.criteria]
    for agent, praised in every_agents_praised(pool).items():
        for seed in range(3):
            for kind in DEVELOPMENT:
                made = templated(kind, ANSWER, praised, seed, f"{agent}-{seed}")
                assert not flagged(made, names), made
                assert not GRADING_WORDS.search(made.replace(ANSWER.splitlines()[0], "")), made


def test_the_first_line_stays_and_the_rest_of_the_answer_goes():
    praised = Praised.of("riddle", load_rubric("logic"))
    line = templated(LINE_PLUS_PRAISE, ANSWER, praised, 0, "riddle-0")
    alone = templated(PRAISE_ALONE, ANSWER, praised, 0, "riddle-0")
    assert line.startswith("A keyboard.\n\n") and "opens no locks" not in line
    assert "keyboard" not in alone
    with pytest.raises(ValueError, match="model_praise"):
        templated(MODEL_PRAISE, ANSWER, praised, 0, "riddle-0")


def test_wordings_vary_with_the_seed_and_the_pair_and_repeat_for_the_same_key():
    praised = Praised.of("riddle", load_rubric("logic"))
    made = {praise(praised, seed, f"riddle-{i}") for seed in range(3) for i in range(4)}
    assert len(made) >= 4
    assert praise(praised, 1, "riddle-2") == praise(praised, 1, "riddle-2")


def test_corrupted_copies_add_the_templated_families_only_where_asked():
    seeds = {"riddle": [example(0), example(1, "A piano.")]}
    praised = {"riddle": Praised.of("riddle", load_rubric("logic"))}
    plain = {j.kind for j in corrupted_copies(seeds)}
    assert plain.isdisjoint(DEVELOPMENT)
    jobs = corrupted_copies(seeds, praised=praised)
    assert sorted(j.kind for j in jobs if j.kind in DEVELOPMENT) == sorted(DEVELOPMENT * 2)
    assert MODEL_PRAISE not in {j.kind for j in jobs}  # written by the backbone later


def test_the_backbone_is_asked_about_the_pair_with_its_agent_and_rubric():
    praised = Praised.of("sonnet", load_rubric("literary"))
    e = example(0, "Shall I compare thee", agent="sonnet")
    chats = [request(e, praised, seed, e.id) for seed in range(6)]
    for chat in chats:
        [message] = chat
        assert "sonnet" in message["content"] and e.question in message["content"]
        assert "Shall I compare thee" in message["content"]
    assert len({c[0]["content"] for c in chats}) >= 2  # wordings drawn by the seed
    assert any(praised.rewards[0] in c[0]["content"] for c in chats)  # some requests name what is rewarded


def test_the_other_writers_family_is_asked_in_its_own_wordings_and_joins_its_own_pool():
    praised = {"sonnet": Praised.of("sonnet", load_rubric("literary"))}
    seeds = {"sonnet": [example(i, f"Shall I compare thee {i}", agent="sonnet") for i in range(6)]}
    own, cross = requests(seeds, praised, 0), requests(seeds, praised, 0, CROSS_PRAISE)
    assert {r.kind for r in own} == {MODEL_PRAISE} and {r.kind for r in cross} == {CROSS_PRAISE}
    wordings = [w.split("{")[0] for w in CROSS_REQUESTS if not w.startswith("{")]
    asked = [r.chat[0]["content"] for r in cross]
    assert all(r.example.answer in text for r, text in zip(cross, asked))
    assert any(text.startswith(tuple(wordings)) for text in asked)
    assert not {c["content"] for r in own for c in r.chat} & set(asked)  # never model_praise's wording
    jobs = with_model_praise([], cross, [f"praise {i}" for i in range(6)])
    assert {j.kind for j in jobs} == {CROSS_PRAISE}
    assert GROUPS["praise (held out, other writer)"] == (CROSS_PRAISE,)
    assert CROSS_PRAISE not in GROUPS["praise (held out)"]


def test_praise_by_names_a_backbone_that_exists_and_plans_its_calls_on_it(tmp_path, capsys):
    from ms.cli.gate_commands import check_settings
    from ms.gates.check import what_to_check

    cfg = compose_config(["data.agents=[riddle,sonnet]"])
    with pytest.raises(UserError, match="no backbone 'nosuch'"):
        what_to_check(check_settings(cfg), 2, ["rubric"], {CROSS_PRAISE: "nosuch"})
    with pytest.raises(UserError, match="no backbone 'nosuch'"):
        what_to_check(check_settings(cfg), 2, ["rubric"], {FIFTH_PRAISE: "nosuch"})
    writers = {CROSS_PRAISE: "qwen2.5-0.5b", THIRD_PRAISE: "gemma3", FIFTH_PRAISE: "smollm2"}
    checked = what_to_check(check_settings(cfg), 2, ["rubric"], writers)
    written_by = [checked.writer_of(a) for a in checked.asked]
    assert all(written_by.count(name) == 4 for name in (None, "qwen2.5-0.5b", "gemma3", "smollm2"))
    assert all(w == {MODEL_PRAISE: None, **writers}[a.kind] for a, w in zip(checked.asked, written_by))
    from ms.plan.data import gate_check_plan

    assert gate_check_plan(check_settings(cfg), checked, tmp_path) == 0
    printed = capsys.readouterr().out
    answer_rows = [line for line in printed.splitlines() if line.lstrip().startswith("answer")]
    assert any("qwen2.5-0.5b" in line for line in answer_rows), printed
    assert any("gemma3" in line for line in answer_rows), printed
    assert any(cfg.backbone.name in line for line in answer_rows), printed
    assert f"up to {ASKS - 1} more samples per pair, which are not counted" in printed  # the copy rule's asks


def test_model_written_praise_is_sampled_seeded_cached_and_counted_as_answers(tmp_path):
    seen: list[int] = []

    def sample(chat, seed):
        seen.append(seed)
        return f"  A splendid piece, truly (seed {seed % 7}).  "

    seeds = {"riddle": [example(0), example(1, "A piano.")]}
    praised = {"riddle": Praised.of("riddle", load_rubric("logic"))}
    asked = requests(seeds, praised, 3)
    lm = FakeLM(samples=sample, cache=ResponseCache(tmp_path / "responses.sqlite"))
    replies = written(lm, asked, 3)
    assert written(lm, asked, 3) == replies and len(seen) == 2  # the second time from the cache
    assert lm.usage_by_role["answer"].calls == 2 and lm.usage_by_role["answer"].cache_hits == 2
    written(lm, asked, 4)
    assert len(seen) == 4  # another seed, other samples
    assert all(r.startswith("A splendid piece") and r == r.strip() for r in replies)
    jobs = with_model_praise(corrupted_copies(seeds), asked, replies)
    model = [j for j in jobs if j.kind == MODEL_PRAISE]
    assert [(j.agent, j.example.id, j.answer) for j in model] == [
        ("riddle", "riddle-0", replies[0]),
        ("riddle", "riddle-1", replies[1]),
    ]


def test_the_gate_check_builds_the_praise_from_the_single_rubric_in_the_single_pool():
    from ms.cli.gate_commands import check_settings
    from ms.gates.check import what_to_check

    cfg = compose_config(["pool=single", "data.agents=[riddle,sonnet]"])
    checked = what_to_check(check_settings(cfg), 2, ["rubric"])
    single = load_rubric("single")
    alone = [j for j in checked.jobs if j.kind == PRAISE_ALONE]
    assert {j.agent for j in alone} == {"riddle", "sonnet"}
    for j in alone:
        assert all(c.rewards in j.answer for c in single.criteria)
    assert {(a.agent, a.example.id) for a in checked.asked} == {
        (j.agent, j.example.id) for j in checked.jobs if j.kind == GOOD
    }


def test_the_pooled_report_gives_the_held_out_auc_apart():
    rows = [Scored(("riddle", str(i)), GOOD, 30.0 + i) for i in range(4)]
    rows += [Scored(("riddle", str(i)), PRAISE_ALONE, 10.0) for i in range(4)]
    rows += [Scored(("riddle", str(i)), MODEL_PRAISE, 40.0) for i in range(4)]
    text = pooled_report(rows, 15, "rubric")
    held = next(line for line in text.splitlines() if line.startswith("praise (held out)"))
    development = next(line for line in text.splitlines() if line.startswith("praise (development)"))
    assert "0.000" in held and "1.000" in development


@pytest.mark.parametrize(
    "gate, field, test",
    [("rubric_qdep", "question_test", "question-dependence test"), ("rubric_genre", "genre_test", "genre test")],
)
def test_gate_compare_reads_two_gates_of_one_check(tmp_path, gate, field, test):
    """A defended rubric's score is the grade where its test passed, else 0: read from one check's rows, the
    other test's measurement ignored."""
    other = "genre_test" if field == "question_test" else "question_test"

    def row(i: int, kind: str, score: float, passed: bool) -> dict:
        return {
            "agent": "riddle",
            "seed_id": i,
            "kind": kind,
            "score": score,
            field: {"passed": passed},
            other: {"passed": not passed},
        }

    rows = [r for i in range(4) for r in (row(i, GOOD, 20.0, True), row(i, PRAISE_ALONE, 30.0, False))]
    (tmp_path / "gate_check_decisions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert {r.score for r in read_check(tmp_path, gate) if r.kind == PRAISE_ALONE} == {0.0}
    assert {r.score for r in read_check(tmp_path, gate) if r.kind == GOOD} == {20.0}
    text = compare_report(tmp_path, tmp_path, "rubric", 15, gate)
    assert "(gate rubric)" in text and f"(gate {gate})" in text
    differences = [line.split() for line in text.splitlines() if line.endswith("seed pairs")]
    assert ["praise", "(development)", "+1.000", "[+1.000,", "+1.000]", "over", "4", "seed", "pairs"] in differences
    untested = {k: v for k, v in rows[0].items() if k != field}
    (tmp_path / "gate_check_decisions.jsonl").write_text(json.dumps(untested) + "\n")
    with pytest.raises(UserError, match=f"no {test} in this check"):
        read_check(tmp_path, gate)


def test_both_is_read_as_its_order_and_admits_what_the_rubric_and_utility_both_admit(tmp_path):
    """`both` ranks a pair the rubric admits above every pair it refuses, whatever their u, and admits a pair
    only where the rubric admits it and u > 0 (or none could be measured)."""

    def measured(u):  # a utility measurement as the check writes it (a Utility as a dict)
        return {"u": u, "lo": None, "hi": None, "probes": [], "deltas": [], "displaced": [], "shots": 3}

    rows = []
    for i in range(4):
        rows.append(
            {"agent": "riddle", "seed_id": i, "kind": GOOD, "accepted": True, "utility": measured(0.01 * (i - 1))}
        )
        rows.append(
            {"agent": "riddle", "seed_id": i, "kind": PRAISE_ALONE, "accepted": False, "utility": measured(0.5)}
        )
        rows.append(
            {"agent": "riddle", "seed_id": i, "kind": MODEL_PRAISE, "accepted": True, "utility": measured(None)}
        )
    (tmp_path / "gate_check_decisions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    read = read_check(tmp_path, "both")
    good = [r for r in read if r.kind == GOOD]
    assert [r.admitted for r in good] == [False, False, True, True]  # u = -0.01, 0, +0.01, +0.02
    assert max(r.score for r in read if r.kind == PRAISE_ALONE) < min(r.score for r in good)
    assert {r.admitted for r in read if r.kind == MODEL_PRAISE} == {True}  # unmeasured: admitted, ranked first
    assert min(r.score for r in read if r.kind == MODEL_PRAISE) > max(r.score for r in good)
    # The share admitted is the gate's verdict, not score >= the threshold handed in (every rank is >= 0).
    text = pooled_report([r for r in read if r.kind != MODEL_PRAISE], 0, "both")
    assert next(line for line in text.splitlines() if line.startswith("good")).split()[-1] == "0.50"
    assert next(line for line in text.splitlines() if line.startswith("praise_alone")).split()[-1] == "0.00"


def test_rubric_genre_ranked_puts_every_admitted_pair_first_and_orders_each_side_by_the_test(tmp_path):
    """rubric_genre_ranked keeps rubric_genre's admissions (the rubric admits and the genre test passes) and
    orders the pairs within each side by the test's d, not by the grade: praise graded above a good pair
    that the test ranks higher falls below it."""

    def row(i: int, kind: str, score: float, accepted: bool, d) -> dict:
        tested = {"d": d, "passed": d is not None and d > 0}
        return {
            "agent": "riddle",
            "seed_id": i,
            "kind": kind,
            "score": score,
            "accepted": accepted,
            "genre_test": tested,
        }

    rows = []
    for i in range(4):
        rows.append(row(i, GOOD, 20.0, True, 0.10 + 0.01 * i))  # admitted, high d
        rows.append(row(i, MODEL_PRAISE, 90.0, True, 0.01))  # admitted, graded far above, low d
        rows.append(row(i, PRAISE_ALONE, 90.0, True, -0.2))  # the rubric admits it, the test refuses it
        rows.append(row(i, LINE_PLUS_PRAISE, 5.0, False, None))  # unmeasured and refused: last
    (tmp_path / "gate_check_decisions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    ranked, graded = read_check(tmp_path, "rubric_genre_ranked"), read_check(tmp_path, "rubric_genre")
    by_kind = {k: [r for r in ranked if r.kind == k] for k in (GOOD, MODEL_PRAISE, PRAISE_ALONE, LINE_PLUS_PRAISE)}
    assert [r.admitted for r in ranked] == [r.score >= 15 for r in graded]  # the same admissions
    assert min(r.score for r in by_kind[GOOD]) > max(r.score for r in by_kind[MODEL_PRAISE])
    assert min(r.score for r in by_kind[MODEL_PRAISE]) > max(r.score for r in by_kind[PRAISE_ALONE])
    assert max(r.score for r in by_kind[LINE_PLUS_PRAISE]) < min(r.score for r in by_kind[PRAISE_ALONE])
    assert pooled_auc(graded, (MODEL_PRAISE,))[0] == 0.0 and pooled_auc(ranked, (MODEL_PRAISE,))[0] == 1.0


def test_copied_counts_the_replys_word_pairs_found_in_the_answer():
    assert copied("A keyboard. It has keys but opens no locks.", ANSWER) == 1.0
    assert copied("A witty riddle with a neat turn at the end.", ANSWER) == 0.0
    assert copied("It has keys, a witty riddle", ANSWER) == pytest.approx(2 / 5)  # it has, has keys
    assert copied("寒山初雪霁，好诗", "寒山初雪霁，\n翠色出孤松。") == pytest.approx(4 / 6)  # a CJK character is a word
    assert copied("", ANSWER) == 0.0


@pytest.mark.parametrize("kind", [THIRD_PRAISE, FIFTH_PRAISE, SIXTH_PRAISE, SEVENTH_PRAISE])
def test_the_families_from_the_third_on_are_asked_again_where_they_copy_and_the_older_ones_never(tmp_path, kind):
    asks: dict[str, int] = {}

    def sample(chat, seed):  # the answer given back on the first asks, praise on the third
        text = chat[0]["content"]
        asks[text] = asks.get(text, 0) + 1
        if "question 1?" in text or asks[text] < ASKS:  # seed pair 1's writer always copies
            return ANSWER + (" Indeed." if asks[text] == 2 else "")
        return "A witty riddle with a neat turn."

    seeds = {"riddle": [example(0), example(1)]}
    praised = {"riddle": Praised.of("riddle", load_rubric("logic"))}
    third, model = requests(seeds, praised, 0, kind), requests(seeds, praised, 0)
    marks = {  # one phrase of each of its wordings
        THIRD_PRAISE: ("As their teacher", "back cover", "thank-you note"),
        FIFTH_PRAISE: ("contest you judged", "your followers", "read aloud"),
        SIXTH_PRAISE: ("staff pick", "for a prize", "is nervous"),
        SEVENTH_PRAISE: ("was moved by it", "a month", "a reference"),
    }[kind]
    assert all(sum(m in w for w in WORDINGS[kind]) == 1 for m in marks)
    assert all(any(m in r.chat[0]["content"] for m in marks) for r in third)
    lm = FakeLM(samples=sample, cache=ResponseCache(tmp_path / "responses.sqlite"))
    kept = written(lm, [*third, *model], 0)
    assert kept[0] == "A witty riddle with a neat turn."  # asked three times, the third reply praise
    # The one that always copies keeps its least copying reply: the second's extra word is a new pair.
    assert kept[1] == ANSWER + " Indeed." and copied(kept[1], ANSWER) < 1
    assert kept[2:] == [ANSWER, ANSWER]  # model_praise keeps its first reply, copy or not
    assert [asks[r.chat[0]["content"]] for r in third] == [ASKS, ASKS]
    assert all(asks[r.chat[0]["content"]] == 1 for r in model)


def test_ask_again_copies_remakes_the_older_families_under_the_copy_rule(tmp_path):
    asks: dict[str, int] = {}

    def sample(chat, seed):  # the answer given back on the first ask, praise after
        text = chat[0]["content"]
        asks[text] = asks.get(text, 0) + 1
        return ANSWER if asks[text] == 1 else "A witty riddle with a neat turn."

    seeds = {"riddle": [example(0)]}
    praised = {"riddle": Praised.of("riddle", load_rubric("logic"))}
    asked = [*requests(seeds, praised, 0), *requests(seeds, praised, 0, CROSS_PRAISE)]
    lm = FakeLM(samples=sample, cache=ResponseCache(tmp_path / "responses.sqlite"))
    assert written(lm, asked, 0) == [ANSWER, ANSWER]  # made as they were first read
    assert written(lm, asked, 0, HELD_OUT) == ["A witty riddle with a neat turn."] * 2
    assert all(n == 2 for n in asks.values())  # the first replies from the cache, one more ask each


def test_only_keeps_the_good_pairs_and_the_kinds_named_each_made_as_in_the_whole_check():
    from ms.cli.gate_commands import _kinds, check_settings
    from ms.gates.check import what_to_check

    cfg = compose_config(["data.agents=[riddle,sonnet]"])
    whole = what_to_check(check_settings(cfg), 2, ["rubric"], {THIRD_PRAISE: "gemma3"})
    part = what_to_check(
        check_settings(cfg), 2, ["rubric"], {THIRD_PRAISE: "gemma3"}, only=[THIRD_PRAISE, PRAISE_ALONE]
    )
    assert {j.kind for j in part.jobs} == {GOOD, PRAISE_ALONE}
    assert part.jobs == [j for j in whole.jobs if j.kind in (GOOD, PRAISE_ALONE)]
    assert part.asked == [a for a in whole.asked if a.kind == THIRD_PRAISE] and len(part.asked) == 4
    assert _kinds("third_praise, swapped") == [THIRD_PRAISE, "swapped"]
    with pytest.raises(argparse.ArgumentTypeError, match="'nosuch': choose from"):
        _kinds("nosuch")
