"""ms.config.added, the one table of what was added when: the resume identity, the run record and the
report's labels read it, and a field at the value older runs ran with is left out of the record."""

from ms.config.added import ADDED, before, recorded, since_cell
from ms.config.parts import ACCESS_RULES, GATES, POISONS, POLICIES, POOL_BACKENDS, RETRIEVERS
from ms.loop.cell import ADDED_SINCE, with_added
from ms.report.common.labels import unrecorded


def test_each_setting_and_field_is_listed_once():
    settings = [row.setting for row in ADDED if row.setting]
    fields = [name for row in ADDED for name in (row.field, *row.with_field) if name]
    assert len(settings) == len(set(settings)) and len(fields) == len(set(fields))


def test_the_resume_identity_fills_a_cell_record_from_the_table():
    assert ADDED_SINCE == since_cell() and since_cell()["access.name"] == "open"
    assert "gate.name" not in since_cell()  # every cell record holds the gate: nothing to fill
    old = with_added({"gate.name": "rubric", "k": 3})
    assert old["poison.name"] == "none" and old["stream.best_of"] == 1 and old["k"] == 3


def test_the_labels_say_what_a_run_recording_no_option_ran_with_from_the_table():
    assert unrecorded(GATES) == before("gate.name") == "rubric"
    assert unrecorded(POLICIES) == "plain" and unrecorded(ACCESS_RULES) == "open"
    assert unrecorded(POISONS) == "none" and unrecorded(POOL_BACKENDS) == "sqlite"
    assert unrecorded(RETRIEVERS) is None  # every run records its retriever


def test_a_field_at_its_older_value_leaves_the_record_with_the_fields_recorded_with_it():
    today = {"k": 3, "best_of": 1, "select": "rubric", "temperature": 0.7, "evaluated": True, "retire": None}
    assert recorded({**today, "stream_answers": "model", "grader": None, "threshold": 15}) == {"k": 3}
    sampled = recorded({**today, "best_of": 4, "evaluated": False, "grader": "gemma3", "threshold": 23})
    assert sampled == {
        "k": 3,
        "best_of": 4,
        "select": "rubric",
        "temperature": 0.7,
        "evaluated": False,
        "grader": "gemma3",
        "threshold": 23,
    }
    assert recorded({"memory": "plain"}) == {"memory": "plain"}  # recorded by every run since it was added
