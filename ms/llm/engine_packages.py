"""The packages the generation engines run on (llama-cpp-python, ctranslate2): imported on first use,
and where one is not installed, a one-line answer that names the setting and how to install it."""

from typing import Optional

from ms.llm.errors import BackendError

# llama-cpp-python builds from source; a build for the build machine's own CPU crashed on CPUs with AMX
# units, so the hint gives the flags the Makefile builds with (README, "Set-up").
LLAMA_BUILD = 'CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON" pip install --no-cache-dir'
ENGINE_PACKAGES = {"llamacpp": ("llama_cpp", "llama-cpp-python>=0.3"), "ct2": ("ctranslate2", "ctranslate2>=4")}


def engine_package(engine: str):
    """The package the generation engine `engine` (llamacpp, ct2) runs on, imported on first use; where it
    is not installed, a one-line answer that names the setting, not a traceback."""
    import importlib

    module, pip = ENGINE_PACKAGES[engine]
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise BackendError(engine_missing(engine, pip)) from error


def engine_missing(engine: str, pip: str) -> str:
    install = f"{LLAMA_BUILD} '{pip}'" if pip.startswith("llama-cpp") else f"pip install '{pip}'"
    return (
        f"backbone.engine={engine} needs {pip.split('>')[0]}, which is not installed "
        f"({install}, or set backbone.engine=hf)"
    )


def engine_problem(engine: str) -> Optional[str]:
    """Why `engine` cannot run here (its package is missing), found without importing it; None if it can."""
    import importlib.util

    module, pip = ENGINE_PACKAGES.get(engine.split("-")[0], (None, ""))
    if module is None or importlib.util.find_spec(module) is not None:
        return None
    return engine_missing(engine, pip)
