"""The root config (ms.config.schema.Config, the whole composed config) stops at the composition root: only
the modules below read it; every other module takes its part's section, or a small frozen dataclass of the
settings it reads, which one of them builds. Which `cfg` is the root is decided as
experiments/count_config_reads.py decides it (its docstring says how), in the syntax tree."""

import ast
import importlib.util
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("count_config_reads", REPO / "experiments" / "count_config_reads.py")
count_config_reads = importlib.util.module_from_spec(spec)
sys.modules["count_config_reads"] = count_config_reads
spec.loader.exec_module(count_config_reads)

# The entry points compose the config and hand it on; compose_run builds a run's parts from it, the planner
# a plan's; validation checks settings across parts; a run's cell identity is the whole flattened config.
# ms.loop.pipeline's `run` is not here: it passes the root config on and reads none of it.
ROOT_READERS = {
    "ms.cli.run",
    "ms.cli.compose",
    "ms.cli.plan",
    "ms.cli.data",
    "ms.cli.gate_commands",
    "ms.loop.compose_run",
    "ms.loop.cell",
    "ms.loop.validation",
    "ms.plan.planner",
}


def outside_the_root(trees: dict[str, ast.Module]) -> dict[str, int]:
    """module -> its reads of the root config, for each module outside ROOT_READERS that reads it."""
    return {
        module: sum(reads.values())
        for module, reads in count_config_reads.root_config_reads(trees).items()
        if reads and module not in ROOT_READERS
    }


def test_only_the_composition_root_reads_the_root_config():
    assert outside_the_root(count_config_reads.modules(REPO)) == {}


def test_a_read_of_the_root_config_elsewhere_is_found():
    trees = count_config_reads.modules(REPO)
    trees["ms.gates.planted"] = ast.parse("def answers(cfg):\n    return cfg.stream.answers\n")
    assert outside_the_root(trees) == {"ms.gates.planted": 1}


def test_the_allowed_modules_exist():
    """A module renamed away from ROOT_READERS would leave its name allowing nothing, and its new name refused."""
    assert ROOT_READERS <= set(count_config_reads.modules(REPO))
