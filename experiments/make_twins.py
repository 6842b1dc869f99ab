"""Twin agents for two families on the same task (experiment=sharing_twins_offline): for each agent
named, write its data file and a copy whose examples belong to `<agent><suffix>`, into one folder.

    python experiments/make_twins.py --agents sonnet,puzzle,study --out .cache/twins_data

The copy keeps every example's id, so the split (decided per agent by a hash of the id) is the same
for both: the twins answer the same stream questions and are tested on the same test questions. The
twin's seed pairs are the original's, so the pool keeps one copy of each (it holds each question and
answer once per scope). Configure the twin as an agent of the same domain and instruction on another
backbone (conf/experiment/sharing_twins_offline.yaml does)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ms.data import json_lines


def write_twins(data_dir: Path, agents: list[str], suffix: str, out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for agent in agents:
        source = data_dir / f"{agent}.jsonl"
        if not source.is_file():
            raise SystemExit(f"{source}: no such file (the data of agent {agent!r})")
        records = [record for _, _, record in json_lines(source)]
        for name in (agent, agent + suffix):
            path = out / f"{name}.jsonl"
            path.write_text(
                "".join(json.dumps({**r, "agent": name}, ensure_ascii=False) + "\n" for r in records), encoding="utf-8"
            )
            written.append(path)
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", required=True, help="comma-separated agent names, e.g. sonnet,puzzle,study")
    parser.add_argument("--suffix", default="_gemma3", help="the twin's name is the agent's plus this")
    parser.add_argument("--data", type=Path, default=Path("data"), help="the folder of <agent>.jsonl files")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    for path in write_twins(args.data, args.agents.split(","), args.suffix, args.out):
        print(path)


if __name__ == "__main__":
    main()
