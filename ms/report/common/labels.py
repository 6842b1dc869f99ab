"""What the report calls each registered option, in words: one table, keyed by registry (ms.config.parts).

The report reads which option a run used from its typed record (metrics.json `run`: ms.loop.run_record)
and says it through this table, e.g. "learned dense retriever", "random gate matched to the rubric gate", "access rule
half0". An option's words may read its own settings from its part of the record (the gate a random gate matched,
the rule file an access rule came from). Nothing else in ms.report compares a field with an option's name
(tests/test_structure.py checks): a new option is described by one line here, a poisoner by its class
(Poisoner.in_words, so a new one, a plugin's too, needs no line), and one the table lacks (another kind's
plugin) is still named, as "<name> <noun>".
"""

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, NamedTuple, Optional, Union

from ms.config.added import before
from ms.config.parts import ACCESS_RULES, GATES, POISONS, POLICIES, POOL_BACKENDS, RETRIEVERS
from ms.config.registry import Registry
from ms.data.poison import Poisoner
from ms.gates.record import GateRecord
from ms.pool.access.record import AccessRecord

# What an option is read from: the part of a run's record (ms.loop.run_record) its kind names (Kind.read),
# or None for a run that records none of the kind.
Part = Any
Words = Union[str, Callable[[Part], str]]


class Retrieval(NamedTuple):
    """What the test questions retrieved with, as a run records it (RunRecord.retriever, .learned): the
    part RETRIEVERS reads, which a run's record is too."""

    retriever: Optional[str]
    learned: Optional[bool] = False


@dataclass(frozen=True)
class Label:
    name: str  # the registered option
    words: Words  # the option in words; a callable reads the option's settings from the run's record
    quiet: bool = False  # what every run has unless told otherwise: a description leaves it unsaid
    # Retrievers: memory train can learn it (the class's `trainable`, which would import torch to ask), so
    # its words say whether the run's did (the `learned` run field): "learned dense retriever".
    trainable: bool = False
    # Pool backends: the pool lives on a server (ms.report.common.pool_server reads it), not a file.
    server: bool = False


@dataclass(frozen=True)
class Kind:
    noun: str  # names an option the table does not hold: "<name> <noun>"
    # The option the part records; None where it records none. The parts: the gate's section (GateRecord),
    # the record's retrieval (a RunRecord or a Retrieval), the memory policy's name, the access rule's
    # section (AccessRecord), the poisoner's (PoisonRecord), and for pool backends a run's saved config.
    read: Callable[[Part], Optional[str]]
    labels: tuple[Label, ...]  # in the order reports list the kind's options
    # The setting that names the option: where a run's record names none, it ran with the option runs
    # ran with before the setting's record field was added (ms.config.added).
    setting: str


def _poisoner(name: str, writer: type[Poisoner]) -> Label:
    """A poisoner in the words its class gives (ms.data.poison.Poisoner.in_words), after whose stream questions
    it answers (the `poison` section's victim); one that writes nothing, quiet and in its words alone."""
    if not writer.active:
        return Label(name, writer.in_words, quiet=True)
    return Label(name, lambda p: f"poisoner of {p.victim or 'an agent'}: {writer.in_words}")


def _random_gate(g: GateRecord) -> str:
    if g.matched_gate:
        return f"random gate matched to the {g.matched_gate} gate"
    return "random gate" if g.rate is None else f"random gate admitting {g.rate:g} of the pairs"


def _genre_gate(g: GateRecord) -> str:
    on = f" on {g.genre_backbone}" if g.genre_backbone else ""
    return f"rubric gate with the genre test{on}"


def _rule(a: AccessRecord) -> str:
    return f"access rule {Path(str(a.file)).stem}" if a.file else "access rule"


LABELS: dict[Registry, Kind] = {
    GATES: Kind(
        "gate",
        lambda g: g.name,
        (
            Label("rubric", "rubric gate"),
            Label("utility", "utility gate"),
            Label("both", "both gate (rubric, then utility)"),
            Label("rubric_qdep", "rubric gate with the question-dependence test"),
            Label("rubric_genre", _genre_gate),
            Label("all", "all gate (admits every pair)"),
            Label("random", _random_gate),
        ),
        "gate.name",
    ),
    RETRIEVERS: Kind(  # the ablation's order: the baselines first
        "retriever",
        lambda r: r.retriever,
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
        lambda name: name,
        (
            Label("plain", "plain memory"),
            Label("stm_ltm", "short- and long-term memory"),
        ),
        "memory.policy",
    ),
    ACCESS_RULES: Kind(
        "access rule",
        lambda a: a.rule,
        (
            Label("open", "open access", quiet=True),
            Label("rule", _rule),
        ),
        "access.name",
    ),
    POISONS: Kind(
        "poisoner",
        lambda p: p.kind,
        tuple(_poisoner(name, writer) for name, writer in POISONS.loaded().items()),  # each says its own words
        "poison.name",
    ),
    POOL_BACKENDS: Kind(
        "pool backend",
        lambda saved: saved.pool.backend,  # a run's saved config (SavedConfig), not its record
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


def option(kind: Registry, part: Part) -> Optional[str]:
    """The option the part records, else the one a run that records none ran with."""
    found = LABELS[kind].read(part) if part is not None else None
    return str(found) if found else unrecorded(kind)


def words(kind: Registry, part: Part) -> str:
    """The option the part records, in words, with the settings it records."""
    name = option(kind, part)
    found = label(kind, name)
    if found is None:
        return f"{name} {LABELS[kind].noun}"
    text = found.words if isinstance(found.words, str) else found.words(part)
    return f"{_learned(part)} {text}" if found.trainable else text


def said(kind: Registry, part: Part) -> Optional[str]:
    """words(), or None for an option a description leaves unsaid (open access, no poisoner)."""
    found = label(kind, option(kind, part))
    return None if found is not None and found.quiet else words(kind, part)


def rank(kind: Registry, name: Optional[str]) -> tuple[int, str]:
    """Where the option comes in the kind's order; one the table lacks after them, by name."""
    names = [entry.name for entry in LABELS[kind].labels]
    return (names.index(name), "") if name in names else (len(names), str(name))


def on_server(backend: Optional[str]) -> bool:
    """Whether a pool backend keeps the pool on a server, where no file of the run holds its memories."""
    found = label(POOL_BACKENDS, backend)
    return found is not None and found.server


def _learned(retrieval: Optional[Retrieval]) -> str:
    return "learned" if retrieval is not None and retrieval.learned else "frozen"


def retriever_key(retrieval: Retrieval) -> str:
    """The test questions' retriever, short: its name, and for one memory train can learn whether the run's
    did ("dense-learned", "dense-frozen", "bm25"). `retrieval`: a run's record, or a Retrieval."""
    name = option(RETRIEVERS, retrieval)
    found = label(RETRIEVERS, name)
    return f"{name}-{_learned(retrieval)}" if found is not None and found.trainable else str(name)


def other_answers(answers: Optional[str]) -> Optional[str]:
    """What the stream wrote into the pool (stream.answers), where it was not what runs wrote before the
    setting was added (the model's answers); None where it was."""
    return answers if answers and answers != before("stream.answers") else None


def gate_key(gate: GateRecord, answers: Optional[str] = None) -> str:
    """What admitted a run's stream pairs, short, from its gate's record and what its stream wrote
    (stream.answers): the gate's name, `~` the gate a random control matched or `@` its rate, `+` what
    the stream wrote where it was not the model's answers: "rubric", "random~both", "random@0.5",
    "all+reference"."""
    key = str(option(GATES, gate))
    if gate.matched_gate:
        key += f"~{gate.matched_gate}"
    elif gate.rate is not None:
        key += f"@{gate.rate}"
    written = other_answers(answers)
    return key + (f"+{written}" if written else "")


def answers_words(answers: Optional[str]) -> Optional[str]:
    """What the stream wrote into the pool, where it was not the model's answers."""
    written = other_answers(answers)
    return f"the stream writing its {written} answers" if written else None


def pool_words(pool: str) -> str:
    """A pool mode as the paper names it: "Domain pool", "Single pool"."""
    return f"{str(pool).capitalize()} pool"
