"""The Hydra entry point: compose the config, then hand it to the plain `run` function."""

from __future__ import annotations

from pathlib import Path

import hydra
from omegaconf import DictConfig

from ms.config import register

CONF_DIR = str(Path(__file__).resolve().parent.parent / "conf")

register()


@hydra.main(version_base=None, config_path=CONF_DIR, config_name="config")
def main(cfg: DictConfig) -> None:
    from hydra.core.hydra_config import HydraConfig

    from ms.pipeline import run

    run(cfg, Path(HydraConfig.get().runtime.output_dir))
