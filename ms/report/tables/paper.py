"""The paper's published Table 1 and Table 2 numbers, read from paper_tables.yaml beside this module."""

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import yaml

# The yaml sits beside this module (package data `"ms.report.tables" = ["*.yaml"]` in pyproject.toml).
PAPER_TABLES = Path(__file__).resolve().parent / "paper_tables.yaml"


@dataclass(frozen=True)
class PaperTables:
    source: str
    metric: str  # what the published numbers are, in words
    metric_key: str  # which of P, R, F1 they are; differences only make sense against the same one
    backbones: tuple[str, ...]
    agents: tuple[str, ...]  # the paper's row order
    table1_pool: str
    table1: dict[tuple[int, str], dict[str, float]]  # (k, backbone) -> agent -> score
    table2_k: int
    table2: dict[tuple[str, str], dict[str, float]]  # (pool, backbone) -> agent -> score


def load_paper_tables(path: Path = PAPER_TABLES) -> PaperTables:
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    agents = tuple(raw["agents"])
    t1, t2 = raw["table1"], raw["table2"]
    table1: dict[tuple[int, str], dict[str, float]] = defaultdict(dict)
    for agent, values in t1["rows"].items():
        if len(values) != len(t1["columns"]):
            raise ValueError(f"{path}: table1 row {agent} has {len(values)} values for {len(t1['columns'])} columns")
        for (k, backbone), value in zip(t1["columns"], values):
            table1[(int(k), backbone)][agent] = float(value)
    table2 = {}
    for row in t2["rows"]:
        if len(row["values"]) != len(agents):
            raise ValueError(f"{path}: table2 row {row['pool']}/{row['backbone']} has {len(row['values'])} values")
        table2[(row["pool"], row["backbone"])] = dict(zip(agents, map(float, row["values"])))
    return PaperTables(
        source=raw["source"],
        metric=raw["metric"],
        metric_key=raw["metric_key"],
        backbones=tuple(raw["backbones"]),
        agents=agents,
        table1_pool=t1["pool"],
        table1=dict(table1),
        table2_k=int(t2["k"]),
        table2=table2,
    )
