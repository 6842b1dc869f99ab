"""The schema's half of the configuration reference: every setting of the typed schema (ms.config.schema,
ms.config.backbone) as sections of settings, with its type, default, declared limits and the comment
beside it in the source, each option's own settings (ms.config.options) included; and the readers of
those comments, which ms.config.reference also uses for the registries. Kept apart from the page
(ms.config.reference: the conf/ files and the Markdown), so each reads one thing; this one reads
source files only.
"""

import ast
import dataclasses
import functools
import inspect
import io
import tokenize
import typing
from pathlib import Path
from typing import Any, Optional

from ms.config.fields import CHECK, Check, number
from ms.config.options import OWNED, owned
from ms.config.schema import Config

REQUIRED = "required"  # a field without a default: its group's option sets it


# ---- comments beside the code ---------------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def _parsed(path: str) -> tuple[list[str], dict[int, str], ast.Module]:
    """A source file's lines, its comments by line number (the text after '#'), and its syntax tree."""
    text = Path(path).read_text(encoding="utf-8")
    comments = {
        token.start[0]: token.string.lstrip("#").strip()
        for token in tokenize.generate_tokens(io.StringIO(text).readline)
        if token.type == tokenize.COMMENT
    }
    return text.splitlines(), comments, ast.parse(text)


def _comment_of(lines: list[str], comments: dict[int, str], node: ast.stmt) -> str:
    """The comment lines directly above a statement and the comments on its own lines, joined."""
    above: list[str] = []
    number = node.lineno - 1
    while number >= 1 and lines[number - 1].strip().startswith("#"):
        above.insert(0, comments.get(number, ""))
        number -= 1
    beside = [
        comments[n]
        for n in range(node.lineno, (node.end_lineno or node.lineno) + 1)
        if n in comments and not lines[n - 1].strip().startswith("#")
    ]
    return " ".join(part for part in above + beside if part and not set(part) <= {"-"})


def field_comments(kind: type) -> dict[str, str]:
    """Each field of dataclass `kind` -> the comment that explains it in its source."""
    lines, comments, tree = _parsed(inspect.getsourcefile(kind))
    found = next(node for node in ast.walk(tree) if isinstance(node, ast.ClassDef) and node.name == kind.__name__)
    return {
        statement.target.id: _comment_of(lines, comments, statement)
        for statement in found.body
        if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name)
    }


def assignment_comments(module: Any) -> dict[str, str]:
    """Each module-level name assigned in `module`'s source -> the comment above or beside it."""
    lines, comments, tree = _parsed(inspect.getsourcefile(module))
    return {
        target.id: _comment_of(lines, comments, statement)
        for statement in tree.body
        if isinstance(statement, ast.Assign)
        for target in statement.targets
        if isinstance(target, ast.Name)
    }


# ---- the schema --------------------------------------------------------------------------------------


@dataclasses.dataclass
class Setting:
    key: str  # dotted, as an override names it: retriever.refresh
    type: str
    default: str
    allowed: str  # choices and bounds, in words; "" where the schema declares none
    comment: str


@dataclasses.dataclass
class Section:
    key: str  # "" for the top level
    kind: type
    comment: str
    settings: list[Setting]
    option: str = ""  # the group's option whose own settings these are (gate=utility's), "" for the schema's


def _dataclass_in(hint: Any) -> Optional[type]:
    """The dataclass a field holds (directly or as Optional[...]), or None."""
    if dataclasses.is_dataclass(hint):
        return hint
    if typing.get_origin(hint) is typing.Union:
        inner = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(inner) == 1 and dataclasses.is_dataclass(inner[0]):
            return inner[0]
    return None


def _type_name(hint: Any) -> str:
    if typing.get_origin(hint) is typing.Union:
        inner = [a for a in typing.get_args(hint) if a is not type(None)]
        return " or ".join(_type_name(a) for a in inner) + (
            " or null" if len(inner) < len(typing.get_args(hint)) else ""
        )
    origin = typing.get_origin(hint)
    if origin is not None:
        return f"{origin.__name__}[{', '.join(_type_name(a) for a in typing.get_args(hint))}]"
    return getattr(hint, "__name__", str(hint))


def _value(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    return str(value)


def _default(f: dataclasses.Field) -> str:
    if f.default_factory is not dataclasses.MISSING:
        return _value(f.default_factory())
    if f.default is dataclasses.MISSING or f.default == "???":
        return REQUIRED
    return _value(f.default)


def allowed(check: Optional[Check]) -> str:
    """A field's declared limits in words: its choices (a registry's names as they are now), bounds,
    and list rules."""
    if check is None:
        return ""
    said = []
    if check.choices is not None:
        said.append("one of " + ", ".join(map(str, check.choices)))
    for attribute, sign in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")):
        bound = getattr(check, attribute)
        if bound is not None:
            said.append(f"{sign} {number(bound)}")
    if check.increasing:
        said.append("strictly increasing")
    if check.nonempty:
        said.append("at least one item")
    return "; ".join(said)


def docstring(kind: type) -> str:
    """A dataclass's own docstring ("" where it has none: dataclasses put their signature there)."""
    doc = inspect.getdoc(kind) or ""
    return "" if doc.startswith(kind.__name__ + "(") else " ".join(doc.split())


def _walk(
    kind: type, key: str, comment: str, found: list[Section], *, option: str = "", shared: frozenset = frozenset()
) -> None:
    """`kind`'s settings as the section `key`, then each nested config's, depth first (`agents` as
    agents.NAME, optional nested configs such as data.hf under their key); `option`'s own settings (its
    comments read up the dataclasses it extends) leave out the `shared` ones of its group's section."""
    hints = typing.get_type_hints(kind)
    notes = field_comments_up(kind) if option else field_comments(kind)
    section = Section(key, kind, " ".join(p for p in (docstring(kind), comment) if p), [], option)
    found.append(section)
    nested = []
    for f in dataclasses.fields(kind):
        if f.name in shared:
            continue
        hint = hints[f.name]
        path = f"{key}.{f.name}" if key else f.name
        inner = _dataclass_in(hint)
        if typing.get_origin(hint) is dict and dataclasses.is_dataclass(typing.get_args(hint)[1]):
            nested.append((typing.get_args(hint)[1], f"{path}.NAME", notes.get(f.name, "")))
        elif inner is not None:
            nested.append((inner, path, notes.get(f.name, "")))
        else:
            section.settings.append(
                Setting(path, _type_name(hint), _default(f), allowed(f.metadata.get(CHECK)), notes.get(f.name, ""))
            )
    for inner, path, note in nested:
        _walk(inner, path, note, found, option=option)


def sections(root: type = Config) -> list[Section]:
    """The schema as sections of settings, depth first (see `_walk`); under Config, each option's own
    settings (ms.config.options) right after the sections of what its group's options share."""
    found: list[Section] = []
    _walk(root, "", "", found)
    if root is Config:
        for group, option, kind in owned():
            mine: list[Section] = []
            shared = frozenset(f.name for f in dataclasses.fields(OWNED[group].shared))
            _walk(kind, group, "", mine, option=OWNED[group].spelled(group, option), shared=shared)
            at = max(i for i, s in enumerate(found) if s.key.split(".")[0] == group)
            found[at + 1 : at + 1] = mine
    return found


def field_comments_up(kind: type) -> dict[str, str]:
    """`field_comments` of `kind` and of the dataclasses it extends, its own first."""
    found: dict[str, str] = {}
    for base in kind.__mro__:
        if dataclasses.is_dataclass(base):
            found = {**field_comments(base), **found}
    return found
