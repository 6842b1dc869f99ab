"""The import structure: no circle among ms's modules, function-level imports included (the layers
contract in pyproject.toml, run by `make test` as `lint-imports`, says which direction each goes;
ARCHITECTURE.md names the layers); none among the scripts of benchmarks/ and experiments/ either, which
also stay small and keep to their own folder. And the report, the loop and plan mode name no registered
option in a comparison or a dict key, and no shared config section holds one option's own settings: each
part owns its settings, and what needs to know about a part asks it (ms.report.common.labels says options in words)."""

from __future__ import annotations

import ast
import dataclasses
import sys
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import grimp
import pytest


def import_circle(package: str) -> list[str] | None:
    """A circle of imports among the package's modules, or None. grimp reads every import
    statement, inside functions too. Every edge counts, a package's `__init__` importing its own
    submodule included: re-exporting a submodule is fine only while the submodule does not import
    its package back (for a constant, say), which would be a loop that starts whichever is first
    imported half-initialised. A submodule's import of `pkg.sub` makes Python import `pkg` first,
    which is not an edge here: only import statements are."""
    graph = grimp.build_graph(package, cache_dir=None)
    edges = {
        m: {i for i in graph.find_modules_directly_imported_by(m) if i.split(".")[0] == package} for m in graph.modules
    }
    try:
        TopologicalSorter(edges).prepare()
    except CycleError as circle:
        return list(circle.args[1])
    return None


def test_no_module_of_ms_takes_part_in_an_import_circle():
    circle = import_circle("ms")
    assert circle is None, f"import circle: {' -> '.join(circle)}"


def _package(tmp_path, monkeypatch, name: str, files: dict[str, str]) -> None:
    for path, text in files.items():
        file = tmp_path / name / path
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))


def _forget(name: str) -> None:
    for module in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
        sys.modules.pop(module, None)


def test_a_circle_through_a_function_level_import_is_found(tmp_path, monkeypatch):
    _package(
        tmp_path,
        monkeypatch,
        "circled",
        {
            "__init__.py": "",
            "low.py": "def f():\n    from circled.high import g\n    return g\n",
            "high.py": "from circled.low import f\n\ndef g():\n    return f\n",
        },
    )
    try:
        assert sorted(set(import_circle("circled"))) == ["circled.high", "circled.low"]
    finally:
        _forget("circled")


def test_a_package_and_its_submodule_importing_each_other_is_found(tmp_path, monkeypatch):
    """The loop ms/retrieval had: the package's __init__ builds through its submodule (inside a
    function) and the submodule takes a constant from the package."""
    _package(
        tmp_path,
        monkeypatch,
        "looped",
        {
            "__init__.py": "LIMIT = 3\n\ndef build():\n    from looped.sub import Thing\n    return Thing()\n",
            "sub.py": "from looped import LIMIT\n\nclass Thing:\n    limit = LIMIT\n",
        },
    )
    try:
        assert sorted(set(import_circle("looped"))) == ["looped", "looped.sub"]
    finally:
        _forget("looped")


def test_a_package_re_exporting_a_submodule_that_does_not_import_it_back_is_no_circle(tmp_path, monkeypatch):
    _package(
        tmp_path,
        monkeypatch,
        "exported",
        {
            "__init__.py": "from exported.sub import Thing\n\n__all__ = ['Thing']\n",
            "sub.py": "from exported.base import LIMIT\n\nclass Thing:\n    limit = LIMIT\n",
            "base.py": "LIMIT = 3\n",
        },
    )
    try:
        assert import_circle("exported") is None
    finally:
        _forget("exported")


# ---- the scripts beside ms: benchmarks/ and experiments/ -------------------------------------------

REPO = Path(__file__).resolve().parent.parent
SCRIPT_FOLDERS = ("benchmarks", "experiments")
# A script beside ms is read whole by whoever runs it: past this, split it (ms's modules keep to the same size).
MAX_SCRIPT_LINES = 350


def imported_names(source: str) -> set[str]:
    """The top-level names of every module the source imports, inside functions too."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def script_circle(folder: Path) -> list[str] | None:
    """A circle of imports among a folder's scripts (each run with its own folder on sys.path, so a
    sibling is imported by its bare name), or None."""
    scripts = {path.stem: path for path in folder.glob("*.py")}
    edges = {name: imported_names(path.read_text(encoding="utf-8")) & scripts.keys() for name, path in scripts.items()}
    try:
        TopologicalSorter(edges).prepare()
    except CycleError as circle:
        return list(circle.args[1])
    return None


@pytest.mark.parametrize("folder", SCRIPT_FOLDERS)
def test_no_script_beside_ms_takes_part_in_an_import_circle(folder):
    circle = script_circle(REPO / folder)
    assert circle is None, f"import circle in {folder}/: {' -> '.join(circle)}"


def test_a_circle_among_scripts_is_found_through_a_function_level_import(tmp_path):
    (tmp_path / "low.py").write_text("def f():\n    import high\n    return high\n")
    (tmp_path / "high.py").write_text("from low import f\n")
    (tmp_path / "other.py").write_text("import json\nfrom low import f\n")
    assert sorted(set(script_circle(tmp_path))) == ["high", "low"]
    (tmp_path / "low.py").write_text("def f():\n    return 1\n")
    assert script_circle(tmp_path) is None


@pytest.mark.parametrize("folder", SCRIPT_FOLDERS)
def test_scripts_beside_ms_stay_small_and_import_neither_each_other_nor_the_tests(folder):
    others = {p.stem for f in SCRIPT_FOLDERS if f != folder for p in (REPO / f).glob("*.py")}
    for path in sorted((REPO / folder).glob("*.py")):
        text = path.read_text(encoding="utf-8")
        assert len(text.splitlines()) <= MAX_SCRIPT_LINES, f"{folder}/{path.name}: split it"
        # benchmarks may compose a run's config as the tests do (tests/conftest.py); nothing else of theirs
        crossed = imported_names(text) & (others | {p.stem for p in (REPO / "tests").glob("test_*.py")})
        assert not crossed, f"{folder}/{path.name} imports {', '.join(sorted(crossed))} from another folder"


# ---- the report, the loop and plan mode ask the parts, never their names ----------------------------

# What names no registered option: each asks the part (its class's attributes and classmethods: Gate.files_read,
# LM.runs_locally, UtilitySettings.probes_of) or its settings, and the report says options through its table of
# labels (ms.report.common.labels).
ASKING = ("report", "loop", "plan")


def option_names() -> set[str]:
    """Every option of every registry (ms.config.parts)."""
    from ms.config import parts

    return {name for kind in parts.__all__ for name in getattr(parts, kind)}


def spelled_options(source: str, names: set[str]) -> list[tuple[int, str]]:
    """(line, name) of each string constant equal to an option's name that the source compares with
    (==, !=, in, ... also among a tuple, list or set compared with), matches in a case, or uses as a
    dict key (a literal's, or dict(name=...)'s). A call's argument is no option: a role (ms.llm.base.ROLES,
    what a call is for) is spelled as the plan's rows and `acting_as` take it, and `utility` is a role as
    well as a gate; a comparison or a key with an option's spelling is read as the option, whatever it meant."""

    def named(node) -> list[ast.Constant]:
        elements = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
        return [e for e in elements if isinstance(e, ast.Constant) and e.value in names]

    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            found += [(c.lineno, c.value) for operand in (node.left, *node.comparators) for c in named(operand)]
        elif isinstance(node, ast.Dict):
            found += [(c.lineno, c.value) for key in node.keys if key is not None for c in named(key)]
        elif isinstance(node, ast.MatchValue):
            found += [(c.lineno, c.value) for c in named(node.value)]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict":
            found += [(node.lineno, k.arg) for k in node.keywords if k.arg in names]
    return found


def spelled_in(root: Path, names: set[str]) -> dict[tuple[str, str], list[int]]:
    """(file, option) -> its lines, for every option spelled in the asking packages under `root`/ms."""
    found: dict[tuple[str, str], list[int]] = {}
    for package in ASKING:
        for path in sorted((root / "ms" / package).rglob("*.py")):
            for line, name in spelled_options(path.read_text(encoding="utf-8"), names):
                found.setdefault((path.relative_to(root).as_posix(), name), []).append(line)
    return found


def test_the_report_the_loop_and_plan_mode_compare_no_field_with_an_option_name():
    """No if-chain on option names, no dict keyed by them in ms/report, ms/loop or ms/plan: each asks the
    part, so a new option is one module and a table line, and a run is compared by its cell record."""
    found = [
        f"{file}:{','.join(map(str, lines))}: {name!r}"
        for (file, name), lines in spelled_in(REPO, option_names()).items()
    ]
    assert not found, "an option spelled out (ask the part, or say it through ms.report.common.labels): " + "; ".join(
        found
    )


def test_spelled_options_are_found_where_they_hide():
    names = {"rubric", "dense", "open"}
    source = (
        'if gate == "rubric":\n    pass\n'
        'x = name in ("bm25", "dense")\n'
        'y = {"open": 1, "other": 2}\n'
        "z = dict(rubric=1)\n"
        'match gate:\n    case "rubric":\n        pass\n'
        'ok = {"rubric"}\nlabel = Label("dense", "dense retriever")\nw = gate.startswith("open")\n'
    )
    assert spelled_options(source, names) == [(1, "rubric"), (3, "dense"), (4, "open"), (5, "rubric"), (7, "rubric")]


def test_options_spelled_in_the_loop_and_plan_mode_are_found(tmp_path):
    files = {
        "ms/loop/inputs.py": 'if "rubric" in gate.checked_by and b.provider == "hf":\n    pass\n',
        "ms/plan/planner.py": 'exact = policy == "plain"\nrows = {"hf": 1}\nrow("utility", name)\n',  # a role
        "ms/retrieval/dense.py": 'if name == "dense":\n    pass\n',  # a part may name its own options
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert spelled_in(tmp_path, {"rubric", "hf", "plain", "utility", "dense"}) == {
        ("ms/loop/inputs.py", "rubric"): [1],
        ("ms/loop/inputs.py", "hf"): [1],
        ("ms/plan/planner.py", "plain"): [1],
        ("ms/plan/planner.py", "hf"): [2],
    }


def shared_sections() -> dict[type, set[str]]:
    """Each section of the root config that a registry's setting lies in (`backbone` for
    backbone.provider and backbone.engine) -> the options chosen there."""
    from typing import get_type_hints

    from ms.config import parts
    from ms.config.schema import Config

    sections: dict[type, set[str]] = {}
    for kind in parts.__all__:
        registry = getattr(parts, kind)
        sections.setdefault(get_type_hints(Config)[registry.key.split(".")[0]], set()).update(registry)
    return sections


def option_specific(section: type, names: set[str]) -> set[str]:
    """The options `section`'s class names a field after (memory.stm_ltm) or compares with in its rules."""
    import inspect
    import textwrap

    source = textwrap.dedent(inspect.getsource(section))
    [body] = ast.parse(source).body
    fields = {s.target.id for s in body.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}
    return (fields & names) | {name for _, name in spelled_options(source, names)}


def test_no_shared_section_holds_one_option_s_settings():
    found = {
        (section.__name__, o) for section, names in shared_sections().items() for o in option_specific(section, names)
    }
    assert not found, f"settings of one option in a shared section: {sorted(found)}"


def test_option_specific_settings_are_found_in_a_shared_section():
    @dataclasses.dataclass
    class Shared:
        name: str = "plain"
        stm_ltm: int = 0  # a field named after an option

        def problems(self):
            if self.name != "composite":
                yield "stm_ltm", "read by one option"

    assert option_specific(Shared, {"plain", "stm_ltm", "composite"}) == {"stm_ltm", "composite"}
