"""Each run's label where a report names it (the site's Runs table, a run's page, a pool-growth figure):
its condition in words (Run.words), not its folder name. A folder is named by its overrides and may
run to hundreds of characters without a space, which no table column or figure title can hold; the
parts say the same thing in words that wrap."""

import hashlib
from typing import Sequence

from ms.report.common.runs import Run


def run_labels(runs: Sequence[Run]) -> dict[str, str]:
    """Run name -> its label: its condition in words, then its seed where runs of the same condition
    differ by seed, then its place among them where even that is shared (two folders of one setting)."""
    words = {run.name: run.words() for run in runs}
    same: dict[str, list[Run]] = {}
    for run in runs:
        same.setdefault(words[run.name], []).append(run)
    labels = {}
    for text, group in same.items():
        seeds = [run.seed for run in group]
        for i, run in enumerate(group, 1):
            label = text
            if len(group) > 1 and len(set(seeds)) == len(seeds):
                label = f"{text}, seed {run.seed}"
            elif len(group) > 1:
                label = f"{text} ({i} of {len(group)})"
            labels[run.name] = label
    return labels


NAME_MAX = 255  # bytes in one file name, where Linux and macOS file systems stop


def file_name(name: str, prefix: str = "", suffix: str = "") -> str:
    """`prefix + name + suffix`, a file of the report named after a run, with the name cut and ended in a
    hash of it where the whole would pass NAME_MAX: a run folder may itself be NAME_MAX bytes long, and
    the report's files about it add a prefix and a suffix."""
    whole = f"{prefix}{name}{suffix}"
    if len(whole.encode("utf-8")) <= NAME_MAX:
        return whole
    tag = "-" + hashlib.sha256(name.encode("utf-8")).hexdigest()[:8]
    room = NAME_MAX - len(f"{prefix}{tag}{suffix}".encode("utf-8"))
    cut = name.encode("utf-8")[:room].decode("utf-8", errors="ignore")  # never half a character
    return f"{prefix}{cut}{tag}{suffix}"
