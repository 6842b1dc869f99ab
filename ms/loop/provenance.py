"""What a run's numbers depend on beyond its config, recorded in metrics.json as `provenance`: the
code's git commit (and whether the tree had uncommitted changes), the package versions that do the
arithmetic, the SHA-256 of every model file, and each backbone's engine and batch size (scores can
shift with batch size: lm-evaluation-harness issues #704, #1645).

Nothing here may fail a run: a field that cannot be read is recorded as None.
"""

import platform
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any, Mapping, Optional

from ms.llm.local import file_sha256, resolve_dtype
from ms.loop.inputs import encoder_source, weight_files

SOURCE_DIR = Path(__file__).resolve().parent
# The packages whose versions change the numbers; the engines are recorded only where installed.
CORE_PACKAGES = ("torch", "transformers")
ENGINE_PACKAGES = ("llama-cpp-python", "ctranslate2")

MAX_CHANGED = 50  # the changed paths recorded; a tree with more is recorded as its first 50 and a count


def git_state(folder: Path = SOURCE_DIR) -> dict[str, Any]:
    """The commit checked out where the package's source lies, whether tracked or untracked (not
    ignored) files differ from it, and which (`git status --porcelain` lines, so a dirty run says what
    differed: an output folder left in the tree, or code); all None outside a git checkout or without git."""

    def git(*args: str) -> Optional[str]:
        try:
            done = subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    status = git("status", "--porcelain") if commit else None
    if status is None:
        return {"commit": commit.strip() if commit else None, "dirty": None, "changed": None}
    changed = [line for line in status.splitlines() if line.strip()]
    if len(changed) > MAX_CHANGED:
        changed = [*changed[:MAX_CHANGED], f"... and {len(changed) - MAX_CHANGED} more"]
    return {"commit": commit.strip(), "dirty": bool(changed), "changed": changed}


def package_versions() -> dict[str, Optional[str]]:
    versions: dict[str, Optional[str]] = {"python": platform.python_version()}
    for name in (*CORE_PACKAGES, *ENGINE_PACKAGES):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            if name in CORE_PACKAGES:
                versions[name] = None
    return versions


def hashes(files: Mapping[str, Path]) -> Optional[dict[str, str]]:
    """file name -> SHA-256; None where there are none or one cannot be read."""
    try:
        return {name: file_sha256(path) for name, path in files.items()} or None
    except OSError:
        return None


def backbone_record(backbone) -> dict[str, Any]:
    """One backbone's engine, batch size and weight hashes. The engine is `backbone.engine` where its
    provider has one (hf); an API backbone runs on its provider and has no batch size.
    Weights are hashed where its provider runs them on this machine (LM.local_weights)."""
    from ms.llm import provider_class

    engine = getattr(backbone, "engine", None) or backbone.provider
    out: dict[str, Any] = {
        "provider": backbone.provider,
        "engine": engine,
        "batch_size": getattr(backbone, "batch_size", None),
        "model": backbone.model,
        "sha256": None,
    }
    provider = provider_class(backbone)
    local = provider.local_weights(backbone)
    if provider.runs_locally:  # backbone.dtype is read by a model in this process
        out["dtype"] = resolve_dtype(backbone.dtype, backbone.device)  # auto resolved: the type that ran
    if local is not None:
        source, weight_file = local
        out["model"] = f"{source}::{weight_file}" if weight_file else source
        package = getattr(backbone, "gguf_package", None)
        out["sha256"] = hashes(weight_files(source, weight_file)) or chunked_hash(package)
    return out


def chunked_hash(package: Optional[str]) -> Optional[dict[str, str]]:
    """A chunked GGUF package's file and the SHA-256 it is assembled to: ms.llm.gguf_chunks checks
    the assembled file against it before using it, so it is the hash of the weights the run read."""
    from ms.llm.gguf_chunks import chunked_package

    module = chunked_package(package) if package else None
    return {module.MODEL_NAME: module.EXPECTED_SHA256} if module else None


def encoder_record(model: Optional[str]) -> dict[str, Any]:
    """A transformers encoder's weight hashes."""
    source = encoder_source(model)
    return {"model": source or model, "sha256": hashes(weight_files(source)) if source else None}


def provenance(backbones: Mapping[str, Any], encoders: Mapping[str, Optional[str]], micro_batch: int) -> dict:
    """The record: `backbones` maps each backbone name the run uses to its config, `encoders` each
    role that runs a transformers encoder (retriever, bertscore) to its model (None: the packaged one)."""
    return {
        **git_state(),
        "versions": package_versions(),
        "backbones": {name: backbone_record(b) for name, b in backbones.items()},
        "encoders": {role: encoder_record(model) for role, model in encoders.items()},
        "micro_batch": micro_batch,
    }
