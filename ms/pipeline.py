"""What one Hydra job does. `run(cfg, out_dir)` is a plain function: tests call it directly."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from omegaconf import DictConfig

from ms.agents import AGENTS, PromptTemplate, chat
from ms.llm import build_lm

log = logging.getLogger(__name__)


def run(cfg: DictConfig, out_dir: Path) -> dict:
    out_dir.mkdir(parents=True, exist_ok=True)
    lm = build_lm(cfg.backbone, cfg.cache_dir, cfg.use_cache)
    template = PromptTemplate()
    rows = []
    for agent in AGENTS.values():
        path = Path(cfg.data_dir) / f"{agent.name}.jsonl"
        with path.open(encoding="utf-8") as f:
            questions = [json.loads(line)["question"] for _, line in zip(range(cfg.demo_queries), f)]
        rows += [(agent, q) for q in questions]
    answers = lm.generate([chat(a, template.render(q)) for a, q in rows])
    for (agent, question), answer in zip(rows, answers):
        print(f"\n[{agent.name}] {question}\n{answer}")
    usage = lm.usage.as_dict()
    (out_dir / "llm_usage.json").write_text(json.dumps(usage, indent=2))
    return usage
