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

    from transformers.utils import logging as transformers_logging

    from ms.pipeline import run

    # Our own bars show progress; a loading bar per model load would only bury them.
    transformers_logging.disable_progress_bar()
    run(cfg, Path(HydraConfig.get().runtime.output_dir))
