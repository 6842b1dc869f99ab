"""gate=random, an admission control that judges nothing: each candidate joins with probability
`gate.rate`, drawn from the run's seed; or, matched to a finished run (`gate.match=RUN_FOLDER`),
exactly as many candidates per agent and per micro-batch as that run admitted, chosen at random, so
that at every fill the pool has the size and the per-agent make-up of the pool it controls for."""

import json
import random
from collections import Counter
from pathlib import Path
from typing import Iterator, Sequence

from ms.common.errors import UserError
from ms.config.files import DECISIONS_FILE, METRICS_FILE
from ms.gates.base import Acceptance, Backbones, Gate, GateParts, GatePlan, decision
from ms.gates.decisions import Decision
from ms.gates.record import GateRecord
from ms.gates.replay import Candidate


def matched_counts(run_folder: str | Path) -> dict[int, dict[str, tuple[int, int]]]:
    """step -> agent -> (candidates, admitted) in a finished run's decisions.jsonl."""
    path = Path(run_folder) / DECISIONS_FILE
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as err:
        raise UserError(f"gate.match={run_folder}: cannot read {path}: {err.strerror or err}") from None
    seen: Counter = Counter()
    admitted: Counter = Counter()
    for number, line in enumerate(lines, 1):
        try:
            row = json.loads(line)
            key = (int(row["step"]), str(row["agent"]))
            accepted = bool(row["accepted"])
        except (ValueError, KeyError, TypeError):
            raise UserError(f"{path}, line {number}: not a decision with step, agent and accepted") from None
        seen[key] += 1
        admitted[key] += accepted
    out: dict[int, dict[str, tuple[int, int]]] = {}
    for (step, agent), n in seen.items():
        out.setdefault(step, {})[agent] = (n, admitted[(step, agent)])
    return out


def matched_gate(run_folder: str | Path) -> str:
    """The gate of the run a matched control copies its counts from, as its metrics.json records it."""
    try:
        fields = json.loads((Path(run_folder) / METRICS_FILE).read_text(encoding="utf-8"))["run"]
        return GateRecord.from_json(fields).name
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return "unknown"


class RandomGate(Gate):
    """A coin per candidate at `rate`; built from a config with `match`, the matched control below."""

    name = "random"

    def __init__(self, rate: float, seed: int):
        self.rate = rate
        self.rng = random.Random(seed)

    @classmethod
    def build(cls, cfg, parts: GateParts) -> "RandomGate | MatchedRandomGate":
        return MatchedRandomGate(cfg.match, parts.seed) if cfg.match else cls(cfg.rate, parts.seed)

    def judge(self, candidates: Sequence[Candidate]) -> list[Decision]:
        out = []
        for c in candidates:
            draw = self.rng.random()
            said = f"random draw {draw:.4f} {'<' if draw < self.rate else '>='} rate {self.rate:g}"
            out.append(decision(c, draw < self.rate, said, "random"))
        return out

    @classmethod
    def problems(cls, cfg, backbones: Backbones) -> Iterator[str]:
        if cfg.match and not (Path(cfg.match) / DECISIONS_FILE).is_file():
            yield (
                f"invalid setting gate.match={cfg.match}: no {DECISIONS_FILE} there; name the folder of a "
                f"finished run to match"
            )

    @classmethod
    def acceptance(cls, cfg, plan: GatePlan) -> Acceptance:
        if cfg.match:
            counts = [n for agents in matched_counts(cfg.match).values() for n in agents.values()]
            rate = sum(a for _, a in counts) / max(sum(n for n, _ in counts), 1)
            return Acceptance(
                rate, f"{rate:.2f} of stream pairs admitted, as the matched run {cfg.match} admitted", assumed=False
            )
        return Acceptance(float(cfg.rate), f"{cfg.rate:.2f} of stream pairs admitted: gate.rate", assumed=False)

    @classmethod
    def files_read(cls, cfg) -> dict[str, Path]:
        return {"gate.match's decisions": Path(cfg.match) / DECISIONS_FILE} if cfg.match else {}

    @classmethod
    def record(cls, cfg) -> dict:
        return {
            "gate": cfg.name,
            **({"match": cfg.match, "matched_gate": matched_gate(cfg.match)} if cfg.match else {"rate": cfg.rate}),
        }


class MatchedRandomGate(RandomGate):
    """Admits, at the n-th micro-batch, as many of each agent's candidates as the matched run admitted
    at its step n, the pairs drawn at random. The streams must be the same question for question, so
    each agent's candidates per step are checked against the matched run's."""

    def __init__(self, run_folder: str | Path, seed: int):
        self.folder = str(run_folder)
        self.counts = matched_counts(run_folder)
        self.rng = random.Random(seed)
        self.step = 0

    def judge(self, candidates: Sequence[Candidate]) -> list[Decision]:
        self.step += 1
        by_agent: dict[str, list[int]] = {}
        for i, c in enumerate(candidates):
            by_agent.setdefault(c.agent, []).append(i)
        expected = self.counts.get(self.step, {})
        mine = {agent: len(idx) for agent, idx in by_agent.items()}
        if mine != {agent: n for agent, (n, _) in expected.items()}:
            raise UserError(
                f"gate.match={self.folder}: micro-batch {self.step} holds candidates per agent {mine}, "
                f"the matched run's {dict(sorted((a, n) for a, (n, _) in expected.items()))}: "
                f"its stream was not this run's (data, agents, micro_batch and fills must agree)"
            )
        chosen = set()
        for agent, idx in by_agent.items():
            chosen.update(self.rng.sample(idx, expected[agent][1]))
        return [
            decision(
                c,
                i in chosen,
                f"matched to {expected[c.agent][1]} of {expected[c.agent][0]} admitted "
                f"for {c.agent} at step {self.step}",
                "random",
            )
            for i, c in enumerate(candidates)
        ]
