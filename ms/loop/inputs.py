"""What a run reads beyond its settings and its data's examples, by content: the rubric files its gate
grades with, the access rule's file, the decisions a matched random gate copies, the weight files of
every model it loads, and the code that runs it.

Each is known by a label that does not depend on the machine ("rubric literary", "model smollm2:
model.safetensors"), so a run made here and resumed elsewhere compares the same things. A file's
SHA-256 is kept with its size and modification time: a resume whose file has the same path, size and
time reuses the recorded hash rather than reading 100-500 MB of weights again.
"""

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from ms.config.parts import GATES, METRICS, POLICIES, RETRIEVERS
from ms.llm.local import file_sha256, resolve_dtype
from ms.retrieval.settings import DenseSettings

PACKAGE_DIR = Path(__file__).resolve().parents[1]
# The code a run executes: the package less what only reads finished runs (report) or plans them (plan).
NOT_RUN_CODE = ("report", "plan")
CODE_SUFFIXES = (".py", ".yaml")
CODE_KEY = "code (the ms package's source)"
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".gguf", ".pt", ".pth")


def code_sha256(package: Optional[Path] = None) -> str:
    """SHA-256 of the source a run executes (`package`, by default this one), file by file in path
    order: a dirty tree is covered too, which a commit is not."""
    package = package or PACKAGE_DIR
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*")):
        relative = path.relative_to(package)
        if (
            path.suffix in CODE_SUFFIXES
            and path.is_file()
            and relative.parts[0] not in NOT_RUN_CODE
            and "__pycache__" not in relative.parts
        ):
            digest.update(relative.as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


@dataclass(frozen=True)
class InputSettings:
    """What of a run's settings decides the backbones it loads and the files it reads beside its settings:
    the sections of the parts that read files, and the few root settings among them. Its cell identity
    (ms.loop.cell) takes it from the root config."""

    agents: Mapping  # `agents`: name -> entry
    running: Optional[Sequence[str]]  # data.agents: the agents that run (None: every one configured)
    backbone: Any  # the default backbone's section
    grader: Optional[str]  # scorer.backbone (None: the default)
    labeller: Optional[str]  # train.backbone (None: the default)
    pool_mode: str  # which rubric grades an agent's pairs (pool=single: the Single pool's)
    gate: Any  # the gate's section
    stream: Any  # the stream's section (best-of-n grades with the rubrics too)
    access: Any  # the access rule's section
    retriever: Any  # the retriever's section
    memory: Any  # the memory policy's section
    evaluation: Any  # the eval section


def test_retriever_name(retriever) -> Optional[str]:
    """The retriever the test questions use where it differs from the stream's (`retriever.at_test`, of
    the retriever's section), as the retrieval package names it."""
    from ms.retrieval import at_test_retriever

    return at_test_retriever(retriever.at_test)


def encoder_models(retriever, memory, evaluation, metrics: list[str]) -> dict[str, Optional[str]]:
    """role -> the transformers encoder a run with the `retriever`, `memory` and `eval` sections and
    `metrics` runs (None: the packaged MiniLM)."""
    test_name = test_retriever_name(retriever)
    uses_encoder = (
        RETRIEVERS.load(retriever.name).uses_encoder
        or (test_name is not None and RETRIEVERS.load(test_name).uses_encoder)
        or POLICIES.load(memory.policy).uses_encoder
    )
    encoders = {"retriever": DenseSettings.encoder_of(retriever)} if uses_encoder else {}
    for name in metrics:
        encoders.update(METRICS.load(name).encoders(evaluation))
    return encoders


def local_folder(source: str) -> Optional[Path]:
    """A model's folder: the source itself, or a hub name's copy in the local hub cache (never
    downloaded: a name with no local copy gives None)."""
    if Path(source).exists():
        return Path(source)
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(source, local_files_only=True))
    except Exception:  # not a hub name, or not in the cache: the hashes are unknown, the run goes on
        return None


def weight_files(source: str, weight_file: Optional[str] = None) -> dict[str, Path]:
    """file name -> path of a model's weights: the one file named, or every weight file of the
    folder; empty where the files cannot be found."""
    folder = local_folder(source)
    if folder is None:
        return {}
    if weight_file:
        files = [folder / weight_file]
    elif folder.is_file():
        files, folder = [folder], folder.parent
    else:
        files = sorted(p for p in folder.rglob("*") if p.suffix in WEIGHT_SUFFIXES and p.is_file())
    return {str(f.relative_to(folder)): f for f in files}


def model_files(backbone) -> dict[str, Path]:
    """The weight files of a backbone its provider runs on this machine (LM.local_weights); empty for a
    model served elsewhere."""
    from ms.llm import provider_class

    local = provider_class(backbone).local_weights(backbone)
    return weight_files(*local) if local is not None else {}


def encoder_source(model: Optional[str]) -> Optional[str]:
    """A transformers encoder's folder or hub name; model None is the packaged all-MiniLM-L6-v2 (None
    where that package is missing)."""
    from ms.retrieval.encoder import packaged_model_dir

    try:
        return model or str(packaged_model_dir())
    except FileNotFoundError:
        return None


def encoder_files(model: Optional[str]) -> dict[str, Path]:
    source = encoder_source(model)
    return weight_files(source) if source else {}


def running_agents(settings: InputSettings) -> dict:
    from ms.agents import agents_from

    configured = agents_from(settings.agents)
    return {name: configured[name] for name in (settings.running or configured) if name in configured}


def backbones_used(settings: InputSettings) -> dict[str, Any]:
    """name -> config of every backbone the run loads: its agents', the grader's, the labeller's."""
    from ms.llm.backbones import Backbones

    catalog = Backbones(settings.backbone)  # a backbone's config does not depend on where responses are cached
    names = {
        catalog.resolve(n)
        for n in [*(a.backbone for a in running_agents(settings).values()), settings.grader, settings.labeller]
    }
    return {name: catalog.config(name) for name in sorted(names)}


def dtypes(settings: InputSettings) -> dict[str, str]:
    """name -> the float type each local transformers backbone resolves to here (backbone.dtype auto
    is float16 on a GPU, float32 on a CPU: the same settings, other numbers)."""
    from ms.llm import provider_class

    # backbone.dtype is read where the model runs in this process (LM.runs_locally), by transformers
    return {
        name: resolve_dtype(b.dtype, b.device)
        for name, b in backbones_used(settings).items()
        if provider_class(b).runs_locally
    }


def files_read(settings: InputSettings) -> dict[str, Path]:
    """label -> each file the run reads outside its settings."""
    from ms.gates.scorer import rubric_path, rubric_ref

    agents = running_agents(settings)
    files: dict[str, Path] = {}
    gate = GATES.load(settings.gate.name)
    stream, evaluation = settings.stream, settings.evaluation
    best_of_grades = stream.get("best_of", 1) > 1 and stream.get("select") == "grader"  # grades with them too
    if gate.grades_with_rubrics() or best_of_grades:
        for ref in sorted({rubric_ref(agent, settings.pool_mode) for agent in agents.values()}):
            files[f"rubric {Path(ref).stem}"] = rubric_path(ref)
    if settings.access.get("file"):
        files["access.file"] = Path(settings.access.file)
    files.update(gate.files_read(settings.gate))  # the gate's own settings name them (gate.match)
    for name, backbone in backbones_used(settings).items():
        for file_name, path in model_files(backbone).items():
            files[f"model {name}: {file_name}"] = path
    measured = list(evaluation.metrics) if evaluation.get("enabled", True) else []  # a stream-only run measures nothing
    for role, model in sorted(encoder_models(settings.retriever, settings.memory, evaluation, measured).items()):
        for file_name, path in encoder_files(model).items():
            files[f"encoder {role}: {file_name}"] = path
    return files


def fingerprint(path: Path, known: Optional[Mapping[str, Any]] = None) -> dict[str, Any]:
    """A file's SHA-256 with the size and time it had (None where it cannot be read); `known`, a
    record of the same file, gives the hash without reading while path, size and time agree."""
    try:
        stat = path.stat()
    except OSError:
        return {"path": str(path), "sha256": None}
    here = {"path": str(path.resolve()), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
    if known and all(known.get(k) == v for k, v in here.items()) and known.get("sha256"):
        return {**here, "sha256": known["sha256"]}
    try:
        return {**here, "sha256": file_sha256(path)}
    except OSError:
        return {**here, "sha256": None}


def inputs_record(
    settings: InputSettings, known: Optional[Mapping[str, Mapping[str, Any]]] = None
) -> dict[str, dict[str, Any]]:
    """label -> fingerprint of every file the run reads outside its settings (`known`: an earlier
    record whose hashes may be reused)."""
    known = known or {}
    return {label: fingerprint(path, known.get(label)) for label, path in files_read(settings).items()}


def changed_inputs(wanted: Mapping[str, Mapping[str, Any]], found: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Labels whose content differs, or that one side reads and the other does not."""
    keys = wanted.keys() | found.keys()
    return sorted(k for k in keys if (wanted.get(k) or {}).get("sha256") != (found.get(k) or {}).get("sha256"))
