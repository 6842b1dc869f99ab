"""Where a transformers causal LM's weights are (a hub name, a local folder, or a GGUF file, also one a
package ships whole or in chunks) and what response-cache keys call the model: found without loading
anything, so plan mode and a run's provenance can ask too."""

from pathlib import Path

from ms.llm.base import BackendError
from ms.llm.gguf_chunks import assembled_gguf, chunked_package
from ms.llm.local import package_dir


def model_source(model: str | None, gguf_file: str | None, gguf_package: str | None) -> tuple[str, str | None]:
    """Where the weights are (hub name, folder, or the folder of a package that ships a GGUF file)
    and the GGUF file there, if any; found without loading anything. A package that ships its file
    in chunks gives the name of the whole file, which `assembled_gguf` makes elsewhere."""
    if gguf_package:
        folder = package_dir(gguf_package)
        if gguf_file is None:
            found = sorted(folder.rglob("*.gguf"))
            chunked = None if found else chunked_package(gguf_package)
            if chunked is not None:
                return str(folder), chunked.MODEL_NAME
            if not found:
                raise FileNotFoundError(f"no .gguf file inside package '{gguf_package}' ({folder})")
            gguf_file = str(found[0].relative_to(folder))
        return str(folder), gguf_file
    if model:
        return model, gguf_file
    raise ValueError("backbone needs `model` (hub name or folder) or `gguf_package`")


def whole_gguf(
    source: str, gguf_file: str | None, gguf_package: str | None, models_dir: str | Path | None
) -> tuple[str, str | None]:
    """`model_source`'s answer, where a package ships its GGUF file in chunks or parts the whole
    file in `models_dir`, assembled there on first use (ms.llm.gguf_chunks)."""
    if not (gguf_package and gguf_file) or (Path(source) / gguf_file).exists():
        return source, gguf_file
    if not models_dir:
        raise BackendError(
            f"package '{gguf_package}' ships its GGUF file in chunks, which are "
            "assembled into a models_dir (build_lm gives one)"
        )
    assembled = assembled_gguf(gguf_package, Path(models_dir))
    return str(assembled.parent), assembled.name


def model_id(source: str, gguf_file: str | None, prompt_format: str = "chat", dtype: str = "float32") -> str:
    """The model's name in response-cache keys. A chat's reply depends on how it is rendered, so a
    format other than the chat template names itself (chat keys stay as they always were); so does a
    float type other than float32 (`dtype`, resolved), whose scores differ, so that a bfloat16 run on a
    warm cache never replays float32 replies."""
    name = f"{source}::{gguf_file}" if gguf_file else source
    name = name if prompt_format == "chat" else f"{name}#format={prompt_format}"
    return name if dtype == "float32" else f"{name}#dtype={dtype}"


def engine_model_id(model: str, engine: str) -> str:
    """The model as generate's cache keys name it: hf keeps the bare id (existing caches still
    hit); another engine's greedy text can differ from hf's, so its replies get keys of their own."""
    return model if engine == "hf" else f"{model}#engine={engine}"
