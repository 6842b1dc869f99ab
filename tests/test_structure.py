"""The import structure: no circle among ms's modules, function-level imports included (the layers
contract in pyproject.toml, run by `make test` as `lint-imports`, says which direction each goes;
ARCHITECTURE.md names the layers)."""

from __future__ import annotations

import sys
from graphlib import CycleError, TopologicalSorter

import grimp


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
