"""The gate check's utility measurement (`ms-data gate-check --gate utility`): each pair's u as
`gate=utility` would measure it at the start of a run.

The pool is seeded as `ms-run` seeds it (every seed pair of the agents checked, in their scopes)
and read through the run's retriever as shipped, before memory train. A seed pair and its corrupted
copies are candidates of their agent's scope. While they are measured, the memories that ask their
question or carry one of their answers are withheld from retrieval: a candidate is new to the pool,
as a stream pair is, so it cannot be its own probe or shot, and a corrupted answer taken from
another seed pair cannot score by reproducing that pair's reference answer as a probe.
"""

from pathlib import Path
from typing import Callable, Mapping, Sequence

from ms.agents import Agent, PromptTemplate, seed_memories
from ms.gates.check_corruptions import GOOD, Job
from ms.gates.replay import Candidate, Retrieve, Utility, UtilityMeter
from ms.llm import LM
from ms.pool import POOL_FILENAME, Memory, Pool, normalize_space, scope_for
from ms.retrieval.base import Retriever


def withholding(retriever: Retriever, withheld: set[int]) -> Retrieve:
    """`retriever.retrieve_batch` as if the memories `withheld` were not in the pool: it asks for
    as many more as are withheld, so n are left."""

    def retrieve(queries: Sequence[str], scope: str, n: int, reader=None) -> list[list[Memory]]:
        found = retriever.retrieve_batch(queries, scope, n + len(withheld), reader)
        return [[m for m in memories if m.id not in withheld][:n] for memories in found]

    return retrieve


def measure_utility(
    jobs: Sequence[Job],
    pool: Pool,
    retriever: Retriever,
    agents: Mapping[str, Agent],
    pool_mode: str,
    meter_for: Callable[[Retrieve], UtilityMeter],
) -> list[Utility]:
    """Each job's u, in job order. `meter_for(retrieve)`: the run's meter over that retrieval.
    The jobs of one seed pair are measured together, its good pair first: the probes' prompts as
    retrieved are the same for all of them, so with the response cache on they are scored once."""
    from tqdm.auto import tqdm

    groups: dict[tuple[str, str], list[int]] = {}
    for i, job in enumerate(jobs):
        groups.setdefault((job.agent, job.example.id), []).append(i)
    out: list[Utility | None] = [None] * len(jobs)
    for (agent, _), idx in tqdm(groups.items(), desc="gate-check utility", unit="seed pair"):
        scope = scope_for(agents[agent].domain, pool_mode)
        question = normalize_space(jobs[idx[0]].example.question)
        answers = {normalize_space(jobs[i].answer) for i in idx}
        withheld = {
            m.id
            for m in pool.memories(scope)
            if normalize_space(m.question) == question or normalize_space(m.answer) in answers
        }
        meter = meter_for(withholding(retriever, withheld))
        for part in ([i for i in idx if jobs[i].kind == GOOD], [i for i in idx if jobs[i].kind != GOOD]):
            candidates = [Candidate(agent, scope, jobs[i].example.question, jobs[i].answer) for i in part]
            for i, utility in zip(part, meter.measure(candidates) if candidates else []):
                out[i] = utility
    return out


def utility_of_jobs(
    jobs: Sequence[Job],
    seeds: Mapping[str, Sequence],
    agents: Mapping[str, Agent],
    lm_for: Callable[[str], LM],
    folder: Path,
    *,
    retriever,
    pool_mode: str,
    template: PromptTemplate,
    probes: int,
    shots: int,
) -> list[Utility]:
    """Each job's u with the run's settings (the `retriever` section, the pool mode, the prompt
    template, gate.probes, and the stream's `shots` per prompt) over a pool in `folder` seeded with
    `seeds` (agent -> its whole seed split, as a run seeds it)."""
    from ms.retrieval import build_retriever

    with Pool(folder / POOL_FILENAME) as pool:
        pool.add([row for a, pairs in seeds.items() for row in seed_memories(agents[a], pairs, pool_mode)], step=0)
        built = build_retriever(retriever, pool, learned=False).retriever
        return measure_utility(
            jobs,
            pool,
            built,
            agents,
            pool_mode,
            lambda retrieve: UtilityMeter(retrieve, lm_for, agents, template, probes, shots),
        )
