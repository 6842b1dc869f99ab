"""The configuration reference, generated from the code so that it cannot drift from it: every config
group and option (the files under conf/, and any other config folder given, as `ms-run --config-dir`
adds one), every setting of the typed schema (ms.config.schema, ms.config.backbone) with its type,
default, declared limits and the comment beside it, and every registered part (ms.config.parts), names
registered in-process or by an installed package's entry point included.

    python -m ms.config.reference > reference.md     # the page the documentation site builds

It reads source files and YAML only: no torch, and nothing of ms above the config layer.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import html
import inspect
import io
import re
import sys
import tokenize
import typing
from pathlib import Path
from typing import Any, Iterator, Optional, Sequence

import yaml

from ms.config import parts
from ms.config.fields import CHECK, Check
from ms.config.options import OWNED, owned
from ms.config.registry import Registry
from ms.config.schema import Config
from ms.config.store import CONF_DIR

MAX_OPTION_LINES = 30  # an option file's body shown in full up to this many lines (rubrics are longer)
REQUIRED = "required"  # a field without a default: its group's option sets it
PACKAGE = re.compile(r"^#\s*@package\s+(\S+)")


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


def _number(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


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
            said.append(f"{sign} {_number(bound)}")
    if check.increasing:
        said.append("strictly increasing")
    if check.nonempty:
        said.append("at least one item")
    return "; ".join(said)


def _docstring(kind: type) -> str:
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
    section = Section(key, kind, " ".join(p for p in (_docstring(kind), comment) if p), [], option)
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
            _walk(kind, group, "", mine, option=f"{group}={option}", shared=shared)
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


# ---- the config groups ------------------------------------------------------------------------------


@dataclasses.dataclass
class Option:
    group: str  # the group's path under the config folder: gate, hydra/callbacks
    name: str
    file: Path
    package: str  # where its keys land: the group's own key, another (scorer), or _global_
    comment: list[str]  # its leading comment's lines, the @package line left out
    body: str  # the file without its leading comment


def _split_header(text: str) -> tuple[Optional[str], list[str], str]:
    """(the @package line's target, the leading comment's lines without their '# ', the rest of the file)."""
    lines = text.splitlines()
    package, comment, start = None, [], len(lines)
    for number, line in enumerate(lines):
        if not line.startswith("#"):
            start = number
            break
        match = PACKAGE.match(line)
        if match:
            package = match.group(1)
        else:
            comment.append(line[2:] if line.startswith("# ") else line[1:])
    while start < len(lines) and not lines[start].strip():
        start += 1
    return package, comment, "\n".join(lines[start:])


def comment_markdown(lines: Sequence[str]) -> list[str]:
    """A file's leading comment as Markdown: its prose as one paragraph, its indented lines (commands,
    examples) as code blocks where they stand."""
    out: list[str] = []
    prose: list[str] = []
    block: list[str] = []
    for line in list(lines) + [""]:
        if line.startswith("  ") and line.strip():
            if prose:
                out += [text(" ".join(prose)), ""]
                prose = []
            block.append(line[2:])
            continue
        if block:
            out += ["```text", *block, "```", ""]
            block = []
        if line.strip():
            prose.append(line.strip())
    if prose:
        out += [text(" ".join(prose)), ""]
    return out


def options(conf_dirs: Sequence[str | Path] = (CONF_DIR,)) -> dict[str, list[Option]]:
    """Every group (a folder of .yaml files below a config folder, at any depth) and its options, from
    each config folder in turn: a later folder adds options, as a --config-dir does."""
    groups: dict[str, dict[str, Option]] = {}
    for conf in map(Path, conf_dirs):
        for file in sorted(conf.rglob("*.yaml")):
            if file.parent == conf:
                continue  # config.yaml, the root
            group = file.parent.relative_to(conf).as_posix()
            package, comment, body = _split_header(file.read_text(encoding="utf-8"))
            groups.setdefault(group, {})[file.stem] = Option(
                group, file.stem, file, package or group.replace("/", "."), comment, body
            )
    return {group: sorted(found.values(), key=lambda o: o.name) for group, found in sorted(groups.items())}


def defaults(conf_dir: str | Path = CONF_DIR) -> dict[str, Optional[str]]:
    """conf/config.yaml's defaults list: group -> its default option, or None."""
    lines = (Path(conf_dir) / "config.yaml").read_text(encoding="utf-8").splitlines()
    chosen: dict[str, Optional[str]] = {}
    for line in lines:
        match = re.match(r"^\s*-\s*([\w/]+)\s*:\s*([\w.\-]+)", line)
        if match:
            chosen[match.group(1)] = None if match.group(2) == "null" else match.group(2)
    return chosen


# ---- the registries ---------------------------------------------------------------------------------


def registries() -> list[tuple[str, Registry, str]]:
    """(the name in ms.config.parts, the registry, the comment above it), in the module's order."""
    notes = assignment_comments(parts)
    return [(name, value, notes.get(name, "")) for name, value in vars(parts).items() if isinstance(value, Registry)]


# ---- the page ---------------------------------------------------------------------------------------


def text(words: str) -> str:
    """Prose from a comment, safe in a Markdown table cell: code spans kept as they are; elsewhere
    HTML characters escaped, and '*' and '|' made literal."""
    pieces = re.split(r"(`[^`]*`)", words)
    out = []
    for piece in pieces:
        if piece.startswith("`") and piece.endswith("`") and len(piece) > 1:
            out.append(piece.replace("|", "\\|"))
        else:
            out.append(html.escape(piece, quote=False).replace("*", "\\*").replace("|", "\\|").replace("_", "\\_"))
    return "".join(out)


def code(value: str) -> str:
    return "`" + value.replace("`", "'") + "`" if value else ""


def _anchor(words: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", words.lower()).strip("-")


def _selected(group: str, option: Option) -> Optional[str]:
    """The registered option whose settings type `option`'s file, where its group's options own theirs: the
    one its selector names (retriever=dense_frozen's is dense), else the file's own name; None for none."""
    if group not in OWNED:
        return None
    try:
        body = yaml.safe_load(option.body)
    except yaml.YAMLError:
        body = None
    name = body.get(OWNED[group].selector) if isinstance(body, dict) else None
    name = option.name if name is None else str(name)
    return name if name in OWNED[group].registry else None


def _group_section(
    group: str, found: list[Option], default: Optional[str], conf_root: Path, schema_keys: set[str]
) -> Iterator[str]:
    chosen = default
    yield f"### `{group}` {{#group-{_anchor(group)}}}"
    yield ""
    said = [f"Options: {', '.join(f'`{o.name}`' for o in found)}."]
    said.append(f"Default: `{group}={chosen}`." if chosen else "Default: none (a command names one, or none is used).")
    package = found[0].package if found else group
    if package == "_global_":
        said.append("Its options are `# @package _global_`: each may set keys anywhere in the config.")
    elif package in schema_keys:
        said.append(f"Its options set the keys of [`{package}`](#{_anchor('settings ' + package)}).")
    yield " ".join(said)
    yield ""
    for option in found:
        mark = " (default)" if option.name == chosen else ""
        try:
            where = code("conf/" + option.file.relative_to(conf_root).as_posix())
        except ValueError:
            where = f"{code(option.group + '/' + option.file.name)}, from another config folder"
        yield f"#### `{group}={option.name}`{mark} {{#{_anchor(group + ' ' + option.name)} .option}}"
        yield ""
        yield from comment_markdown(option.comment) if option.comment else ["No comment in its file.", ""]
        selected = _selected(group, option)
        yield f"File: {where}." + (
            f" Its settings: [`{group}` under `{group}={selected}`](#{_anchor(f'settings {group}={selected}')})."
            if selected is not None
            else ""
        )
        yield ""
        body = option.body.splitlines()
        if body:
            shown = body[:MAX_OPTION_LINES]
            yield "```yaml"
            yield from shown
            if len(body) > len(shown):
                yield f"# ... {len(body) - len(shown)} more lines in the file"
            yield "```"
            yield ""


def markdown(conf_dirs: Sequence[str | Path] = (CONF_DIR,)) -> str:
    """The whole reference page, as Markdown."""
    conf_root = Path(conf_dirs[0])
    found = options(conf_dirs)
    chosen = defaults(conf_root)
    schema = sections()
    schema_keys = {s.key for s in schema}
    out = [
        "# Configuration reference",
        "",
        "Generated from the code each time the site is built (`ms/config/reference.py`): the config groups",
        "from the files under `conf/`, the settings from the typed schema (`ms/config/schema.py`,",
        "`ms/config/backbone.py`) with the comment beside each field, and the parts from their registries",
        "(`ms/config/parts.py`). `ms-run --help` prints the same groups and the composed values;",
        "`ms-run --cfg job` prints the config a command composes.",
        "",
        "An override names a group's option (`gate=utility`) or a setting (`gate.probes=5`); a key the",
        "schema does not declare is refused before anything runs, with the nearest name.",
        "",
        "## Config groups",
        "",
        "`conf/config.yaml` is one defaults list; each group below picks one of its files. An `experiment`",
        "comes after the groups and overrides them; `protocol` comes after `experiment`, and `grader` last.",
        "",
    ]
    for group, listed in found.items():
        out.extend(_group_section(group, listed, chosen.get(group), conf_root, schema_keys))
    out += [
        "## Settings",
        "",
        "Every key of the schema. *Allowed* is what is checked before a run starts (ms-run's one-line",
        "errors); a setting whose default is *required* gets its value from its group's option.",
        "",
    ]
    for section in schema:
        title = f"`{section.key}`" if section.key else "Top level"
        group, _, inner = section.key.partition(".")  # inner: a subsection of an option's own (retriever.composite)
        if section.option:
            title += f" under `{section.option}`"
        anchor = " ".join(
            filter(None, ("settings", section.option or section.key or "top level", inner * bool(section.option)))
        )
        out.append(f"### {title} {{#{_anchor(anchor)}}}")
        out.append("")
        setters = [group for group, listed in found.items() if listed and listed[0].package == section.key]
        if section.option and not inner:
            # its own settings: those of this section, or of one nested in it (memory=stm_ltm's memory.stm_ltm)
            owns = section.settings or any(s.option == section.option and s.key != section.key for s in schema)
            has = "Its settings besides" if owns else "It has no setting besides"
            out += [
                (text(section.comment) + " " if section.comment else "")
                + f"{has} those every option shares ([`{group}`](#{_anchor('settings ' + group)})); any other key"
                + f" is refused under `{section.option}`.",
                "",
            ]
        elif setters:
            # A group's section: its options are listed from its files, never from a comment that names them.
            doc = _docstring(section.kind)
            by = "; ".join(f"[`{g}`](#group-{_anchor(g)}) ({', '.join(o.name for o in found[g])})" for g in setters)
            out += [(text(doc) + " " if doc else "") + f"Set by the group {by}, and by overrides.", ""]
        elif section.comment:
            out += [text(section.comment), ""]
        if section.settings:
            out += ["| key | type | default | allowed | what it does |", "|---|---|---|---|---|"]
            out += [
                f"| `{s.key}` | {text(s.type)} | {'*required*' if s.default == REQUIRED else code(s.default)} | {text(s.allowed)} | {text(s.comment)} |"
                for s in section.settings
            ]
            out.append("")
    out += [
        "## Registered parts",
        "",
        "Each kind of part is a registry of names (`ms/config/parts.py`); the names are the choices of",
        "its setting. A package adds names through entry points of the group shown; code that runs ms",
        'in-process may call `register(name, "module:Class")`. Both appear here when the site is built.',
        "",
    ]
    for name, registry, comment in registries():
        out.append(f"### {registry.kind} {{#part-{_anchor(registry.kind)}}}")
        out.append("")
        out.append(f"`{name}`, chosen by `{registry.key}`; entry-point group `{registry.group}`. " + text(comment))
        out.append("")
        out += ["| name | implementation |", "|---|---|"]
        out += [f"| `{part}` | `{registry.target(part)}` |" for part in registry.names()]
        out.append("")
    return "\n".join(out) + "\n"


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Print the page; extra arguments are further config folders (as ms-run's --config-dir)."""
    extra = list(argv if argv is not None else sys.argv[1:])
    sys.stdout.write(markdown([CONF_DIR, *extra]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
