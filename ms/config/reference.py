"""The configuration reference, generated from the code so that it cannot drift from it: every config
group and option (the files under conf/, those of the config packages installed packages name in the
entry-point group ms.conf, and any other config folder given, as `ms-run --config-dir` adds one), every
setting of the typed schema (ms.config.schema, ms.config.backbone) with its type, default, declared
limits and the comment beside it, and every registered part (ms.config.parts), names registered
in-process or by an installed package's entry point included.

    python -m ms.config.reference > reference.md     # the page the documentation site builds

It reads source files and YAML only: no torch, and nothing of ms above the config layer.

The schema's sections and settings, with their comments, are read in ms.config.schema_reference.
"""

import dataclasses
import html
import re
import sys
from pathlib import Path
from typing import Iterator, Optional, Sequence

import yaml

from ms.config import parts
from ms.config.options import OWNED, chosen_by
from ms.config.registry import Registry, conf_packages
from ms.config.schema_reference import REQUIRED, assignment_comments, docstring, sections
from ms.config.store import CONF_DIR

MAX_OPTION_LINES = 30  # an option file's body shown in full up to this many lines (rubrics are longer)
PACKAGE = re.compile(r"^#\s*@package\s+(\S+)")


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


def installed_conf_dirs() -> list[Path]:
    """The folders of the config packages installed packages name (ms.config.registry.conf_packages), which
    Hydra searches after conf/; one that cannot be imported is left out, as Hydra's search leaves it out."""
    from importlib.resources import files

    found = []
    for package in conf_packages():
        try:
            found.append(Path(str(files(package))))
        except (ModuleNotFoundError, TypeError, ValueError):
            continue
    return found


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


def _selected(group: str, option: Option) -> Optional[tuple[str, str]]:
    """(section, option as spelled) of the registered option whose settings type `option`'s file, where its
    group chooses an owned option: the one its selector names (retriever=dense_frozen's is dense;
    backbone=smollm2's is backbone.provider=hf), else the file's own name; None for none."""
    section = chosen_by(group)
    if section is None:
        return None
    try:
        body = yaml.safe_load(option.body)
    except yaml.YAMLError:
        body = None
    name = body.get(OWNED[section].selector) if isinstance(body, dict) else None
    name = option.name if name is None else str(name)
    return (section, OWNED[section].spelled(section, name)) if name in OWNED[section].registry else None


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
            f" Its settings: [`{selected[0]}` under `{selected[1]}`](#{_anchor(f'settings {selected[1]}')})."
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


def markdown(conf_dirs: Optional[Sequence[str | Path]] = None) -> str:
    """The whole reference page, as Markdown, from `conf_dirs` (conf/ first); by default from conf/ and the
    installed config packages."""
    conf_dirs = [CONF_DIR, *installed_conf_dirs()] if conf_dirs is None else conf_dirs
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
            doc = docstring(section.kind)
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
        "its setting. A package adds names through entry points of the group shown, and their config files",
        "as a package it names in the group `ms.conf`; code that runs ms in-process may call",
        '`register(name, "module:Class")`. Both appear here when the site is built.',
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
    sys.stdout.write(markdown([CONF_DIR, *installed_conf_dirs(), *extra]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
