"""How far the root config and the run record reach, counted in the syntax tree: per module of ms, the
reads of the root config (`cfg.X`), and per module of ms/report, the string-keyed reads of run records.

    python experiments/count_config_reads.py [--root .]

tests/test_root_config.py imports it (`root_config_reads`) to hold the root config to the composition root.

Root-config reads. Every module names the root config `cfg`, but many also name a part's own section
`cfg` (a gate's, a retriever's), so a read counts only where that `cfg` is the root: in the function
that binds it (a parameter or an assignment; a closure reads its enclosing function's), some read names
a field only the root schema has (`ms.config.schema.Config`'s fields less every other dataclass's
fields in ms: `cfg.stream`, not `cfg.seed`, which a retriever's section has too), or the binding is
annotated `Config`, or a call in the module hands it a root `cfg`. Every attribute read of that `cfg`
then counts, `cfg.hydra` included, and `cfg.get("key")` as a read of key.

Record reads. In ms/report, a subscript or a `.get` with a string constant read from a dict (`run.fields
["gate"]`, `row.get("answer")`), writes left out, and so are module constants (ALL_CAPS names) and the
environment. `record` counts those on a run's record (its receiver names fields, metrics, record,
config or cell); `rows`, the rest (prediction, decision and writer rows, usage).

Nothing is imported from ms: the script reads source files only, so it runs on any checkout.
"""

from __future__ import annotations

import argparse
import ast
import re
from collections import Counter
from pathlib import Path

ROOT_NAME = "cfg"
ROOT_CLASS = "Config"  # the root schema, in ms/config/schema.py
RECORD_WORDS = re.compile(r"\b(fields|metrics|record|config|cell)\b|_config\b|_record\b")
SKIPPED_RECEIVERS = re.compile(r"^[A-Z][A-Z0-9_]*$|environ$|__dict__$")


def dataclass_fields(tree: ast.Module) -> dict[str, set[str]]:
    """class name -> its annotated fields, for every @dataclass class of a module."""
    found = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and any("dataclass" in ast.unparse(d) for d in node.decorator_list):
            found[node.name] = {
                s.target.id for s in node.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
            }
    return found


def root_only_fields(trees: dict[str, ast.Module]) -> set[str]:
    """The root schema's fields that no config section declares (the dataclasses of ms.config and of each
    part's settings module, which a part may name `cfg`): a read of one is the root's. Hydra's own node
    is composed onto the root only."""
    root: set[str] = set()
    sections: set[str] = set()
    for module, tree in trees.items():
        if not (module.startswith("ms.config") or module.endswith("settings")):
            continue
        for name, fields in dataclass_fields(tree).items():
            if (module, name) == ("ms.config.schema", ROOT_CLASS):
                root = fields
            else:
                sections |= fields
    if not root:
        raise SystemExit(f"no dataclass {ROOT_CLASS} in ms/config/schema.py: the root schema moved")
    return (root - sections) | {"hydra"}


FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def _own_nodes(scope: ast.AST):
    """The nodes of a scope, not those of the functions defined in it."""
    for node in ast.iter_child_nodes(scope):
        yield node
        if not isinstance(node, FUNCTIONS):
            yield from _own_nodes(node)


def _names(target: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}


def _params(node: ast.AST) -> list[str]:
    args = node.args
    return [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]


def _binds(node: ast.AST) -> bool:
    """Whether a function or comprehension binds the root's name itself (a parameter, a target)."""
    if isinstance(node, COMPREHENSIONS):
        return any(ROOT_NAME in _names(g.target) for g in node.generators)
    if ROOT_NAME in _params(node) or isinstance(node, ast.Lambda):
        return ROOT_NAME in _params(node)
    for n in _own_nodes(node):
        if isinstance(n, ast.Assign):
            targets = n.targets
        elif isinstance(n, (ast.AnnAssign, ast.AugAssign, ast.For, ast.NamedExpr)):
            targets = [n.target]
        elif isinstance(n, ast.withitem) and n.optional_vars is not None:
            targets = [n.optional_vars]
        else:
            continue
        if any(ROOT_NAME in _names(t) for t in targets):
            return True
    return False


def _annotated_root(node: ast.AST) -> bool:
    for arg in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs):
        if arg.arg == ROOT_NAME and arg.annotation is not None:
            return ast.unparse(arg.annotation).strip("'\"").split(".")[-1] == ROOT_CLASS
    return False


class Scopes(ast.NodeVisitor):
    """Each attribute read of `cfg`, by the scope that binds that `cfg` (a function, a comprehension, or
    the module), and each call that passes that `cfg` on by name."""

    def __init__(self, tree: ast.Module):
        self.reads: dict[int, list[str]] = {id(tree): []}
        self.calls: dict[int, list[tuple[str, object]]] = {id(tree): []}  # (callee, position or keyword)
        self.functions: dict[str, list[ast.AST]] = {}
        self.roots: set[int] = set()
        self.stack: list[int] = [id(tree)]
        self.visit(tree)

    def _scope(self, node: ast.AST) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            self.functions.setdefault(node.name, []).append(node)
        binds = _binds(node)
        if binds:
            self.reads[id(node)], self.calls[id(node)] = [], []
            if not isinstance(node, COMPREHENSIONS) and _annotated_root(node):
                self.roots.add(id(node))
            self.stack.append(id(node))
        self.generic_visit(node)
        if binds:
            self.stack.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _scope
    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _scope

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if isinstance(node.value, ast.Name) and node.value.id == ROOT_NAME and isinstance(node.ctx, ast.Load):
            self.reads[self.stack[-1]].append(node.attr)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and func.value.id == ROOT_NAME
            and func.attr == "get"
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):  # cfg.get("key"): a read of key
            self.reads[self.stack[-1]].append(str(node.args[0].value))
            for arg in (*node.args, *node.keywords):
                self.visit(arg)
            return
        # f(cfg), self.f(cfg), cls.f(cfg): a method's position counts its self or cls
        name, shift = None, 0
        if isinstance(func, ast.Name):
            name = func.id
        elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in ("self", "cls"):
            name, shift = func.attr, 1
        passed = [(i + shift, a) for i, a in enumerate(node.args)] + [(k.arg, k.value) for k in node.keywords]
        for where, value in passed:
            if name and isinstance(value, ast.Name) and value.id == ROOT_NAME:
                self.calls[self.stack[-1]].append((name, where))
        self.generic_visit(node)

    def root_scopes(self, root_only: set[str]) -> set[int]:
        """The scopes whose `cfg` is the root: annotated so, reading a root-only field, or handed the root's
        `cfg` by a call from a root scope of the same module (a helper of validation, say)."""
        roots = self.roots | {scope for scope, reads in self.reads.items() if root_only & set(reads)}
        while True:
            handed = {
                id(callee)
                for scope in roots
                for name, where in self.calls[scope]
                for callee in self.functions.get(name, [])
                if id(callee) in self.reads and _receives(callee, where)
            }
            if handed <= roots:
                return roots
            roots |= handed


def _receives(function: ast.AST, where: object) -> bool:
    """Whether `function` takes the argument at `where` (a position or a keyword) as `cfg`."""
    if isinstance(where, str):
        return where == ROOT_NAME
    positional = [a.arg for a in (*function.args.posonlyargs, *function.args.args)]
    return where < len(positional) and positional[where] == ROOT_NAME


def root_reads(tree: ast.Module, root_only: set[str]) -> Counter:
    """attribute -> reads of it on the root config, in one module."""
    scopes = Scopes(tree)
    counted: Counter = Counter()
    for scope in scopes.root_scopes(root_only):
        counted.update(scopes.reads[scope])
    return counted


def record_reads(tree: ast.Module) -> Counter:
    """ "record" and "rows" -> the string-keyed dict reads of one module (see the module's note)."""
    counted: Counter = Counter()
    for node in ast.walk(tree):
        receiver = None
        if (
            isinstance(node, ast.Subscript)
            and isinstance(node.ctx, ast.Load)
            and isinstance(node.slice, ast.Constant)
            and isinstance(node.slice.value, str)
        ):
            receiver = node.value
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            receiver = node.func.value
        if receiver is None:
            continue
        said = ast.unparse(receiver)
        if SKIPPED_RECEIVERS.search(said):
            continue
        counted["record" if RECORD_WORDS.search(said) else "rows"] += 1
    return counted


def modules(root: Path) -> dict[str, ast.Module]:
    """module name -> its syntax tree, for every module of ms under `root`."""
    found = {}
    for path in sorted((root / "ms").rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return found


def table(header: tuple[str, ...], rows: list[tuple], total: tuple) -> str:
    """Columns of numbers right-aligned, of words left-aligned, the total below a rule."""
    cells = [header, *[tuple(str(c) for c in row) for row in rows], tuple(str(c) for c in total)]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    numeric = [isinstance(c, int) for c in rows[0]] if rows else [False] * len(header)
    rule = "  ".join("-" * w for w in widths)

    def line(row: tuple[str, ...]) -> str:
        return "  ".join((c.rjust(w) if n else c.ljust(w)) for c, w, n in zip(row, widths, numeric)).rstrip()

    return "\n".join([line(cells[0]), rule, *map(line, cells[1:-1]), rule, line(cells[-1])])


def root_config_reads(trees: dict[str, ast.Module]) -> dict[str, Counter]:
    """module -> attribute -> reads of it on the root config, for every module of `trees` (tests/test_root_config.py
    holds the modules outside the composition root to none)."""
    root_only = root_only_fields(trees)
    return {name: root_reads(tree, root_only) for name, tree in trees.items()}


def report(root: Path) -> str:
    trees = modules(root)
    per_module = root_config_reads(trees)
    config_rows = [
        (name, sum(c.values()), len(c), ", ".join(sorted(c)))
        for name, c in sorted(per_module.items(), key=lambda item: (-sum(item[1].values()), item[0]))
        if c
    ]
    everywhere: Counter = sum(per_module.values(), Counter())
    record_rows = []
    for name, tree in trees.items():
        if name.startswith("ms.report"):
            found = record_reads(tree)
            if found:
                record_rows.append((name, found["record"], found["rows"], found["record"] + found["rows"]))
    record_rows.sort(key=lambda row: (-row[3], row[0]))
    return "\n\n".join(
        [
            "Root-config reads (cfg.X where cfg is the root config), per module of ms",
            table(
                ("module", "reads", "fields", "fields read"),
                config_rows,
                (f"total: {len(config_rows)} modules", sum(everywhere.values()), len(everywhere), ""),
            ),
            "Most-read fields: " + ", ".join(f"{field} {n}" for field, n in everywhere.most_common(12)),
            "String-keyed record reads in ms/report, per module",
            table(
                ("module", "record", "rows", "all"),
                record_rows,
                (
                    f"total: {len(record_rows)} modules",
                    *(sum(row[i] for row in record_rows) for i in (1, 2, 3)),
                ),
            ),
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent, help="the checkout")
    print(report(parser.parse_args().root))


if __name__ == "__main__":
    main()
