"""How well `ms-data import-paper` assigned the authors' mixed files, against block boundaries read
by hand.

experiments/paper_import_truth.json holds, for each pool and problem file of the authors' repository
(commit e869b0a), the agent blocks as [agent, first line, last line], read line by line from the
files themselves. The importer never sees it: it is the measuring stick, kept out of ms/. Every
line's agent from the import report's blocks is compared with it. Given the repository too, the
script checks the hand-read blocks against each other: OnePool repeats the domain folders' records,
and a repeated question must have one agent in every file it appears in.

    ms-data import-paper ../shared/paper_repo /tmp/paper_data
    python experiments/check_paper_import.py /tmp/paper_data/import_report.json ../shared/paper_repo
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

TRUTH = Path(__file__).with_name("paper_import_truth.json")


def per_line(blocks: list[list]) -> dict[int, str | None]:
    return {line: agent for agent, first, last in blocks for line in range(first, last + 1)}


def truth_is_consistent(truth: dict, repo: Path) -> bool:
    """Whether every question that appears in several files has the same hand-read agent in all."""
    seen: dict[str, tuple[str, str, int]] = {}
    clashes = 0
    for name, blocks in truth.items():
        agents = per_line(blocks)
        lines = (repo / name).read_text(encoding="utf-8").splitlines()
        for number, text in enumerate(lines, start=1):
            if not text.strip():
                continue
            question = " ".join(json.loads(text)["messages"][0]["content"].split())
            if question in seen and seen[question][0] != agents[number]:
                clashes += 1
                print(
                    f"clash: {name}:{number} is {agents[number]}, {seen[question][1]}:{seen[question][2]} "
                    f"is {seen[question][0]}"
                )
            seen.setdefault(question, (agents[number], name, number))
    print(f"hand-read blocks: {len(seen)} distinct questions, {clashes} clash(es) between files")
    return clashes == 0


def main(report_path: str, repo: str | None = None) -> int:
    report = json.loads(Path(report_path).read_text(encoding="utf-8"))
    truth = json.loads(TRUTH.read_text(encoding="utf-8"))
    total = right = unassigned = 0
    print(f"{'file':<42} {'records':>7} {'right':>6} {'wrong':>6} {'unassigned':>10} {'unsure':>7}")
    for name, blocks in truth.items():
        row = report["files"].get(name)
        if row is None or "blocks" not in row:
            print(f"{name}: not in the report")
            return 1
        want, got = per_line(blocks), per_line(row["blocks"])
        if set(want) != set(got):
            print(f"{name}: the report covers lines {min(got)}-{max(got)}, the truth {min(want)}-{max(want)}")
            return 1
        n_right = sum(got[line] == agent for line, agent in want.items())
        n_none = sum(got[line] is None for line in want)
        wrong = [(line, got[line], agent) for line, agent in want.items() if got[line] not in (agent, None)]
        total, right, unassigned = total + len(want), right + n_right, unassigned + n_none
        print(
            f"{name:<42} {len(want):>7} {n_right:>6} {len(wrong):>6} {n_none:>10} {row['unsure']:>7}"
            + (f"  wrong: {wrong}" if wrong else "")
        )
    print(
        f"{'all mixed files':<42} {total:>7} {right:>6} {total - right - unassigned:>6} {unassigned:>10}   "
        f"accuracy {right / total:.2%}, unassigned {unassigned / total:.2%}"
    )
    copies = report["copies_agree"]
    print(
        f"importer's own check: {copies['same_agent']} of {copies['copies']} OnePool records that repeat a "
        f"domain record got the same agent"
    )
    if repo is not None and not truth_is_consistent(truth, Path(repo)):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
