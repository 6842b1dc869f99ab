"""The import structure: no circle among ms's modules, function-level imports included (the layers
contract in pyproject.toml, run by `make test` as `lint-imports`, says which direction each goes)."""

from __future__ import annotations

import sys
from graphlib import CycleError, TopologicalSorter

import grimp


def import_circle(package: str) -> list[str] | None:
    """A circle of imports among the package's modules, or None. grimp reads every import
    statement, inside functions too. A package importing its own submodules to re-export them is
    left out: a submodule's import of its package would otherwise always close a loop."""
    graph = grimp.build_graph(package, cache_dir=None)
    edges = {m: {i for i in graph.find_modules_directly_imported_by(m)
                 if i.split(".")[0] == package and not i.startswith(m + ".")} for m in graph.modules}
    try:
        TopologicalSorter(edges).prepare()
    except CycleError as circle:
        return list(circle.args[1])
    return None


def test_no_module_of_ms_takes_part_in_an_import_circle():
    circle = import_circle("ms")
    assert circle is None, f"import circle: {' -> '.join(circle)}"


def test_a_circle_through_a_function_level_import_is_found(tmp_path, monkeypatch):
    package = tmp_path / "circled"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "low.py").write_text("def f():\n    from circled.high import g\n    return g\n")
    (package / "high.py").write_text("from circled.low import f\n\ndef g():\n    return f\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        assert sorted(set(import_circle("circled"))) == ["circled.high", "circled.low"]
    finally:
        sys.modules.pop("circled", None)
