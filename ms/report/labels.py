"""What the report calls each registered option, in words: one table, keyed by registry (ms.config.parts).

The report reads which option a run used from its recorded run fields (metrics.json `run`) and says it
through this table, e.g. "learned dense retriever", "random gate matched to the rubric gate", "access rule
half0". An option's words may read its own settings from those fields (the gate a random gate matched,
the rule file an access rule came from). Nothing else in ms.report compares a field with an option's name
(tests/test_structure.py checks): a new option is described by one line here, and one the table lacks
(a plugin's) is still named, as "<name> <noun>".
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional, Union

from ms.config.added import before
from ms.config.parts import ACCESS_RULES, GATES, POISONS, POLICIES, POOL_BACKENDS, RETRIEVERS
from ms.config.registry import Registry

Fields = dict  # a run's recorded run fields (metrics.json `run`), or the part of them an option reads
Words = Union[str, Callable[[Fields], str]]


@dataclass(frozen=True)
class Label:
    name: str  # the registered option
    words: Words  # the option in words; a callable reads the option's settings from the run's fields
    quiet: bool = False  # what every run has unless told otherwise: a description leaves it unsaid
    # Retrievers: memory train can learn it (the class's `trainable`, which would import torch to ask), so
    # its words say whether the run's did (the `learned` run field): "learned dense retriever".
    trainable: bool = False
    server: bool = False  # pool backends: the pool lives on a server (ms.report.pool_server reads it), not a file


@dataclass(frozen=True)
class Kind:
    noun: str  # names an option the table does not hold: "<name> <noun>"
    read: Callable[[Fields], Optional[str]]  # the option the fields record; None where they record none
    labels: tuple[Label, ...]  # in the order reports list the kind's options
    # The setting that names the option: where a run's record names none, it ran with the option runs
    # ran with before the setting's record field was added (ms.config.added).
    setting: str


def _victim(what: str) -> Callable[[Fields], str]:
    """A poisoning writer: whose stream questions it answers (the `poison` run field's victim), and how."""
    return lambda f: f"poisoner of {(f.get('poison') or {}).get('victim') or 'an agent'}: {what}"


def _random_gate(f: Fields) -> str:
    if f.get("matched_gate"):
        return f"random gate matched to the {f['matched_gate']} gate"
    return "random gate" if f.get("rate") is None else f"random gate admitting {f['rate']:g} of the pairs"


def _rule(f: Fields) -> str:
    file = (f.get("access") or {}).get("file")
    return f"access rule {Path(str(file)).stem}" if file else "access rule"


LABELS: dict[Registry, Kind] = {
    GATES: Kind(
        "gate",
        lambda f: f.get("gate"),
        (
            Label("rubric", "rubric gate"),
            Label("utility", "utility gate"),
            Label("both", "both gate (rubric, then utility)"),
            Label("rubric_qdep", "rubric gate with the question-dependence test"),
            Label("all", "all gate (admits every pair)"),
            Label("random", _random_gate),
        ),
        "gate.name",
    ),
    RETRIEVERS: Kind(  # the ablation's order: the baselines first
        "retriever",
        lambda f: f.get("retriever"),
        (
            Label("random", "random retriever"),
            Label("bm25", "BM25 retriever"),
            Label("dense", "dense retriever", trainable=True),
            Label("composite", "composite retriever", trainable=True),
        ),
        "retriever.name",
    ),
    POLICIES: Kind(
        "memory",
        lambda f: f.get("memory"),
        (
            Label("plain", "plain memory"),
            Label("stm_ltm", "short- and long-term memory"),
        ),
        "memory.policy",
    ),
    ACCESS_RULES: Kind(
        "access rule",
        lambda f: (f.get("access") or {}).get("rule"),
        (
            Label("open", "open access", quiet=True),
            Label("rule", _rule),
        ),
        "access.name",
    ),
    POISONS: Kind(
        "poisoner",
        lambda f: (f.get("poison") or {}).get("kind"),
        (
            Label("none", "no poisoning writer", quiet=True),
            Label("off_task", _victim("off-task answers")),
            Label("on_style", _victim("on-style answers")),
            Label("injection", _victim("an injected instruction")),
            Label("self_assessment", _victim("self-assessments")),
            Label("answer_plus_assessment", _victim("answers plus self-assessments")),
            Label("grader_instruction", _victim("answers instructing the grader")),
        ),
        "poison.name",
    ),
    POOL_BACKENDS: Kind(
        "pool backend",
        lambda f: (f.get("pool") or {}).get("backend"),  # a run's config, not its run fields
        (
            Label("sqlite", "SQLite pool file"),
            Label("postgres", "PostgreSQL pool server", server=True),
        ),
        "pool.backend",
    ),
}


def label(kind: Registry, name: Optional[str]) -> Optional[Label]:
    """The table's label of the option; None for one it does not hold."""
    return next((entry for entry in LABELS[kind].labels if entry.name == name), None)


def unrecorded(kind: Registry) -> Optional[str]:
    """The option a run that records none of this kind ran with; None where every run records one."""
    return before(LABELS[kind].setting)


def option(kind: Registry, fields: Fields) -> Optional[str]:
    """The option the fields record, else the one a run that records none ran with."""
    found = LABELS[kind].read(fields)
    return str(found) if found else unrecorded(kind)


def words(kind: Registry, fields: Fields) -> str:
    """The option the fields record, in words, with the settings it records."""
    name = option(kind, fields)
    found = label(kind, name)
    if found is None:
        return f"{name} {LABELS[kind].noun}"
    text = found.words if isinstance(found.words, str) else found.words(fields)
    return f"{_learned(fields)} {text}" if found.trainable else text


def said(kind: Registry, fields: Fields) -> Optional[str]:
    """words(), or None for an option a description leaves unsaid (open access, no poisoner)."""
    found = label(kind, option(kind, fields))
    return None if found is not None and found.quiet else words(kind, fields)


def rank(kind: Registry, name: Optional[str]) -> tuple[int, str]:
    """Where the option comes in the kind's order; one the table lacks after them, by name."""
    names = [entry.name for entry in LABELS[kind].labels]
    return (names.index(name), "") if name in names else (len(names), str(name))


def on_server(backend: Optional[str]) -> bool:
    """Whether a pool backend keeps the pool on a server, where no file of the run holds its memories."""
    found = label(POOL_BACKENDS, backend)
    return found is not None and found.server


def _learned(fields: Fields) -> str:
    return "learned" if fields.get("learned") else "frozen"


def retriever_key(fields: Fields) -> str:
    """The test questions' retriever, short: its name, and for one memory train can learn whether the run's
    did ("dense-learned", "dense-frozen", "bm25")."""
    name = option(RETRIEVERS, fields)
    found = label(RETRIEVERS, name)
    return f"{name}-{_learned(fields)}" if found is not None and found.trainable else str(name)


def gate_key(fields: Fields) -> str:
    """What admitted a run's stream pairs, short, from its run fields: the gate's name (runs record it only
    where it is not the paper's), `~` the gate a random control matched or `@` its rate, `+` what the stream
    wrote where it was not the model's answers: "rubric", "random~both", "random@0.5", "all+reference"."""
    gate = str(option(GATES, fields))
    if fields.get("matched_gate"):
        gate += f"~{fields['matched_gate']}"
    elif "rate" in fields:
        gate += f"@{fields['rate']}"
    return gate + (f"+{fields['stream_answers']}" if fields.get("stream_answers") else "")


def answers_words(fields: Fields) -> Optional[str]:
    """What the stream wrote into the pool, where the run records it (only where it was not the model's answers)."""
    answers = fields.get("stream_answers")
    return f"the stream writing its {answers} answers" if answers else None


def pool_words(pool: str) -> str:
    """A pool mode as the paper names it: "Domain pool", "Single pool"."""
    return f"{str(pool).capitalize()} pool"
