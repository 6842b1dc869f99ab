"""A candidate memory's utility u, measured by replay: what the pair (X, Y) does to the questions it
would be retrieved for, its probes (ARCHITECTURE.md, "Utility", defines the probes and u). u is in
nats per token, the quantity memory train's labels and `ref_logprob` use. The displaced shot's effect
is the same comparison seen from the other side (each probe's change, negated), so one measurement
informs the utility kept for both memories.

Probes and their shots obey the access rule (ms.pool.access) of the candidate's agent, the agent the
measurement acts for: a memory that agent may not retrieve is neither a probe nor a shot.
"""

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping, Optional, Sequence

from ms.agents import Agent, PromptTemplate, chat
from ms.common.stats import mean_ci
from ms.llm.base import LM
from ms.pool import Memory
from ms.pool.access import Reader
from ms.pool.records import normalize_space

UTILITY_ROLE = "utility"


@dataclass(frozen=True)
class Candidate:
    """A new pair asking to join a scope: the agent that answered, and the pair as it would be stored."""

    agent: str
    scope: str
    question: str
    answer: str


@dataclass
class Utility:
    """One candidate's measurement. `lo`/`hi` bound u with a 95% bootstrap CI over its probes (BCa,
    percentile where BCa is undefined); with fewer than 2 probes there is none, and with the few
    probes a gate uses (m = 3 by default) the interval is coarse: it cannot reach beyond the
    smallest and largest delta, so it is narrower than the uncertainty it stands for."""

    u: Optional[float]  # None: the scope held no memory to probe with
    lo: Optional[float]
    hi: Optional[float]
    probes: list[int] = field(default_factory=list)  # probe memory ids, nearest first
    deltas: list[float] = field(default_factory=list)  # nats per token, one per probe
    displaced: list[Optional[int]] = field(default_factory=list)  # the shot the candidate replaced, per probe
    shots: int = 1


def effects(measured: Iterable[tuple[Optional[Mapping], Optional[int]]]) -> dict[int, list[float]]:
    """The per-memory values measurements show. `measured`: (a Utility as a dict or None where
    nothing was measured, the memory id the candidate became or None). Each delta counts for the
    candidate, and its negation for the shot it displaced."""
    out: dict[int, list[float]] = defaultdict(list)
    for utility, memory_id in measured:
        if utility is None:
            continue
        for delta, displaced in zip(utility["deltas"], utility["displaced"]):
            if memory_id is not None:
                out[memory_id].append(delta)
            if displaced is not None:
                out[displaced].append(-delta)
    return out


# (queries, scope, n, reader) -> per query its n nearest memories that reader may retrieve
Retrieve = Callable[[Sequence[str], str, int, Optional[Reader]], list[list[Memory]]]
Group = tuple[str, Optional[frozenset]]  # (scope, the grants of the readers searching it)


class UtilityMeter:
    """`retrieve(queries, scope, n, reader)` is the run's retriever (`retrieve_batch`); `lm_for(agent)`
    the backbone an agent answers on, which also scores its candidates' probes; `shots` the k of the
    prompts probes are measured in (at least 1); `test_questions` never serve as probes; `reader(agent)`
    the reader an agent's access rule makes it (default: open)."""

    def __init__(
        self,
        retrieve: Retrieve,
        lm_for: Callable[[str], LM],
        agents: Mapping[str, Agent],
        template: PromptTemplate,
        probes: int,
        shots: int,
        test_questions: Iterable[str] = (),
        reader: Optional[Callable[[str], Reader]] = None,
    ):
        if probes < 1:
            raise ValueError(f"gate.probes must be at least 1, got {probes}")
        self.retrieve, self.lm_for, self.agents, self.template = retrieve, lm_for, agents, template
        self.reader = reader or Reader
        self.m = probes
        self.shots = max(1, shots)
        self.tests = {normalize_space(q) for q in test_questions}

    def measure(self, candidates: Sequence[Candidate]) -> list[Utility]:
        """Each candidate's utility: one batched `loglikelihood` call per backbone, counted as `utility`."""
        probes = self._probes(candidates)
        shots = self._shots(candidates, probes)
        jobs: dict[int, list[tuple[int, Memory, list[Memory]]]] = defaultdict(list)  # lm -> (candidate, probe, shots)
        lms: dict[int, LM] = {}
        for i, c in enumerate(candidates):
            lm = self.lm_for(c.agent)
            lms[id(lm)] = lm
            jobs[id(lm)] += [(i, p, shots[self._group(c)[0]][p.id]) for p in probes[i]]
        deltas: list[list[float]] = [[] for _ in candidates]
        displaced: list[list[Optional[int]]] = [[] for _ in candidates]
        for key, todo in jobs.items():
            if not todo:
                continue
            lm = lms[key]
            contexts, answers = [], []
            for i, probe, base in todo:
                c = candidates[i]
                shown = [{"question": m.question, "answer": m.answer} for m in base]
                replaced = [*shown[:-1], {"question": c.question, "answer": c.answer}]
                for shots_shown in (shown, replaced):
                    contexts.append(lm.chat_context(self._chat(probe, c.agent, shots_shown)))
                    answers.append(probe.answer)
            with lm.acting_as(UTILITY_ROLE):
                scored = lm.loglikelihood(contexts, answers)
            for n, (i, _, base) in enumerate(todo):
                (before, tokens_before), (after, tokens_after) = scored[2 * n], scored[2 * n + 1]
                deltas[i].append(after / max(tokens_after, 1) - before / max(tokens_before, 1))
                displaced[i].append(base[-1].id if base else None)
        estimates = [mean_ci(d) for d in deltas]
        return [
            Utility(e.mean, e.lo, e.hi, [p.id for p in probes[i]], deltas[i], displaced[i], self.shots)
            for i, e in enumerate(estimates)
        ]

    def _group(self, c: Candidate) -> tuple[Group, Reader]:
        """The batch a candidate is searched in (its scope and its agent's grants), and its reader."""
        reader = self.reader(c.agent)
        return (c.scope, reader.writers), reader

    def _probes(self, candidates: Sequence[Candidate]) -> list[list[Memory]]:
        """Each candidate's m nearest memories of its scope that may serve as probes."""
        found: list[list[Memory]] = [[] for _ in candidates]
        groups: dict[Group, list[int]] = defaultdict(list)
        readers: dict[Group, Reader] = {}
        for i, c in enumerate(candidates):
            group, readers[group] = self._group(c)
            groups[group].append(i)
        for group, idx in groups.items():
            # Twice m, so that a few memories left out below still leave m probes.
            nearest = self.retrieve([candidates[i].question for i in idx], group[0], 2 * self.m, readers[group])
            for i, memories in zip(idx, nearest):
                barred = self.tests | {normalize_space(candidates[i].question)}
                found[i] = [m for m in memories if normalize_space(m.question) not in barred][: self.m]
        return found

    def _shots(
        self, candidates: Sequence[Candidate], probes: list[list[Memory]]
    ) -> dict[Group, dict[int, list[Memory]]]:
        """(scope, grants) -> probe id -> the shots its prompt holds now: its nearest memories that the
        candidate's agent may retrieve, never itself nor another memory asking its question (that
        would show its answer)."""
        wanted: dict[Group, dict[int, Memory]] = defaultdict(dict)
        readers: dict[Group, Reader] = {}
        for c, found in zip(candidates, probes):
            group, readers[group] = self._group(c)
            for p in found:
                wanted[group][p.id] = p
        out: dict[Group, dict[int, list[Memory]]] = {}
        for group, by_id in wanted.items():
            listed = list(by_id.values())
            nearest = self.retrieve([p.question for p in listed], group[0], self.shots + 1, readers[group])
            out[group] = {
                p.id: [
                    m for m in memories if m.id != p.id and normalize_space(m.question) != normalize_space(p.question)
                ][: self.shots]
                for p, memories in zip(listed, nearest)
            }
        return out

    def _chat(self, probe: Memory, fallback_agent: str, shots: list[dict[str, str]]) -> list:
        """The probe's prompt as its own agent sees it; a memory of an agent this run does not
        configure (a shared pool file) is asked as the candidate's agent."""
        agent = self.agents.get(probe.agent) or self.agents[fallback_agent]
        return chat(agent, self.template.render(probe.question, shots), self.template.system)
