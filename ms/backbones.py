"""The backbones a run uses, by name. The default is `backbone`, as composed with the command line's
overrides; an agent (`agents.NAME.backbone`), the scorer (`scorer.backbone`) or the labeller
(`train.backbone`) may name another conf/backbone file. Each distinct name is built once, so one
model is loaded once and its usage is counted in one place."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, Mapping, Optional

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from ms.agents import Agent
from ms.config.schema import BackboneConfig
from ms.config.store import CONF_DIR
from ms.errors import UserError, one_line
from ms.llm import LM, build_lm, provider_class

BACKBONE_DIR = Path(CONF_DIR) / "backbone"


def resolve(cfg: DictConfig, name: Optional[str]) -> str:
    """The backbone a role runs on: the one it names, else the default."""
    return name or cfg.backbone.name


def backbone_config(cfg: DictConfig, name: Optional[str]) -> DictConfig:
    """The config of backbone `name`. The default backbone's is the composed one, so overrides such
    as `backbone.base_url=...` reach every role that runs on it; another name is read from its
    file as it stands."""
    if resolve(cfg, name) == cfg.backbone.name:
        return cfg.backbone
    path = BACKBONE_DIR / f"{name}.yaml"
    if not path.is_file():
        options = sorted(p.stem for p in BACKBONE_DIR.glob("*.yaml"))
        raise UserError(f"no backbone '{name}' ({path}); choose one of {', '.join(options)}")
    try:
        raw = OmegaConf.load(path)
        return OmegaConf.merge(OmegaConf.structured(BackboneConfig), raw)
    except OmegaConfBaseException as err:  # an unknown or mistyped key in the file
        raise UserError(one_line(f"{path}: {err}")) from err


def can(cfg: DictConfig, name: Optional[str], what: str) -> bool:
    """Whether backbone `name` can do `what` ("scores_text": exact log-likelihoods of given text;
    "reads_probabilities": next-token distributions), read from its provider's class without
    building it: the one place validation, plan mode and the run learn it from."""
    return getattr(provider_class(backbone_config(cfg, name)), what) is True


def named_backbones(cfg: DictConfig, agents: Mapping[str, Agent]) -> list[tuple[str, str]]:
    """(config key, backbone name) for every role that names a backbone other than the default."""
    named = [(f"agents.{a.name}.backbone", a.backbone) for a in agents.values()]
    named += [("scorer.backbone", cfg.scorer.backbone), ("train.backbone", cfg.train.backbone)]
    return [(key, name) for key, name in named if resolve(cfg, name) != cfg.backbone.name]


def build_backbones(cfg: DictConfig, names: Iterable[Optional[str]]) -> dict[str, LM]:
    """name -> LM, one per distinct backbone among `names` (None: the default), the default first."""
    wanted = dict.fromkeys([cfg.backbone.name, *(resolve(cfg, n) for n in names)])
    return {name: build_lm(backbone_config(cfg, name), cfg.cache_dir, cfg.use_cache) for name in wanted}
