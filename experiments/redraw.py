"""Redraw committed ms-report folders and compare their text files byte for byte.

    python experiments/redraw.py [FOLDER ...] [--keep DIR] [--against DIR] [--code CHECKOUT]

experiments/redraw_manifest.yaml lists each committed results/ folder that ms-report drew, with the
command that drew it. Each listed folder (or each FOLDER named) is drawn again by that command into a
scratch folder, and every text file the redraw writes (claims, summary, tables, sharing, the site's
HTML, scripts and data) is compared with the committed one; PNG and PDF files are not compared, as
matplotlib does not draw them byte-identically across versions. Prints, per folder, `identical` or the
files that differ, and the files the redraw writes that the folder does not hold (some folders keep
only part of what their command writes).

Committed files were drawn by the code of their day, so a difference against them may predate any
change of yours. To prove a change draws the same, redraw before and after it:

    git worktree add /tmp/base HEAD
    python experiments/redraw.py --code /tmp/base --keep /tmp/before    # the code before the change
    python experiments/redraw.py --against /tmp/before                  # the working tree's, after

--against compares two redraws with each other, every text file of either; --keep keeps a redraw
(default: a temporary folder, removed). The runs are read from this checkout's results/ whichever code
draws them. Exit status: 0 when every folder is identical, 1 when some differ, 2 when a drawing failed.
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
MANIFEST = REPO / "experiments" / "redraw_manifest.yaml"
NOT_COMPARED = {".png", ".pdf"}  # images: redrawn, never compared
THROWN_AWAY = "OUT"  # a manifest command's --out that its drawing did not keep (only its site was)
OUTPUTS = ("--out", "--html")
SHOWN = 12  # file names printed per list before "and N more"

# ms-report's main, imported from the checkout named by --code: `python -m` would put the current
# folder (this checkout) first on sys.path, ahead of any PYTHONPATH, and the commands' paths are
# relative to this checkout, so the drawing has to run here with the other code put first.
LAUNCH = "import sys; sys.path.insert(0, sys.argv.pop(1)); from ms.report import main; sys.exit(main(sys.argv[1:]))"


def load_manifest(path: Path = MANIFEST) -> dict[str, list[str]]:
    """folder -> the ms-report arguments that drew it (the command without `ms-report`), checked: each
    command starts with ms-report and writes its folder, as --out or, where --out is OUT, as --html."""
    manifest = {}
    for folder, command in yaml.safe_load(path.read_text()).items():
        words = shlex.split(command)
        if words[0] != "ms-report":
            raise SystemExit(f"{path}: {folder}: not an ms-report command: {command}")
        outputs = outputs_of(words[1:])
        if folder not in outputs.values() or outputs.get("--out") == folder and "--html" in outputs:
            raise SystemExit(f"{path}: {folder}: the command writes {outputs}, not (only) this folder")
        manifest[folder] = words[1:]
    return manifest


def outputs_of(args: list[str]) -> dict[str, str]:
    """The command's output options and their folders: {'--out': ..., '--html': ...} as given."""
    return {flag: args[i + 1] for i, flag in enumerate(args) if flag in OUTPUTS and i + 1 < len(args)}


def scratch_args(args: list[str], scratch: Path) -> tuple[list[str], Path]:
    """The command with each output folder moved under `scratch` (scratch/out, scratch/html), and the
    scratch folder that stands for the committed one: --html's where the command kept only its site."""
    moved, outputs = list(args), outputs_of(args)
    for flag in outputs:
        moved[moved.index(flag) + 1] = str(scratch / flag.lstrip("-"))
    kept = "html" if outputs.get("--out") == THROWN_AWAY else "out"
    return moved, scratch / kept


def draw(args: list[str], scratch: Path, code: Path) -> tuple[Path | None, str]:
    """Run ms-report with `args` into `scratch`, from this checkout, importing ms from `code`; the
    folder that stands for the committed one, or None and the end of what it printed when it failed."""
    moved, kept = scratch_args(args, scratch)
    shutil.rmtree(scratch, ignore_errors=True)  # a kept redraw drawn again: no file of the last one stays
    scratch.mkdir(parents=True)
    done = subprocess.run(
        [sys.executable, "-c", LAUNCH, str(code), *moved], cwd=REPO, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        return None, "\n".join((done.stdout + done.stderr).strip().splitlines()[-5:])
    return kept, ""


def text_files(folder: Path) -> set[str]:
    """Every file under `folder` but images, as paths relative to it."""
    if not folder.is_dir():
        return set()
    return {
        str(f.relative_to(folder)) for f in folder.rglob("*") if f.is_file() and f.suffix.lower() not in NOT_COMPARED
    }


def compare(new: Path, old: Path, every_file: bool) -> dict[str, list[str]]:
    """What differs between a redraw (`new`) and `old`: `differ` (both hold it, other bytes), `not kept`
    (the redraw writes it, `old` does not hold it) and, where `every_file` (two redraws, so every file
    of either counts), `gone` (`old` holds it, the redraw no longer writes it)."""
    drawn, held = text_files(new), text_files(old)
    found = {
        "differ": sorted(f for f in drawn & held if (new / f).read_bytes() != (old / f).read_bytes()),
        "not kept": sorted(drawn - held),
    }
    if every_file:
        found["gone"] = sorted(held - drawn)
    found["compared"] = sorted(drawn & held)
    return found


def listed(names: list[str]) -> str:
    more = f", and {len(names) - SHOWN} more" if len(names) > SHOWN else ""
    return ", ".join(names[:SHOWN]) + more


def verdict(folder: str, found: dict[str, list[str]], against: Path | None) -> tuple[str, bool]:
    """One folder's line(s), and whether it is identical."""
    other = "the earlier redraw" if against else "the committed files"
    n = len(found["compared"])
    differs = found["differ"] or found.get("gone") or (against and found["not kept"])
    if not differs:
        line = f"{folder}: identical ({n} text files)"
        if found["not kept"]:
            line += f"; drawn but not committed here: {listed(found['not kept'])}"
        return line, True
    lines = [f"{folder}: DIFFERS from {other} ({len(found['differ'])} of {n} files)"]
    if found["differ"]:
        lines.append(f"  differ: {listed(found['differ'])}")
    if against and found["not kept"]:
        lines.append(f"  only in this redraw: {listed(found['not kept'])}")
    elif found["not kept"]:
        lines.append(f"  drawn but not committed here: {listed(found['not kept'])}")
    if found.get("gone"):
        lines.append(f"  only in the earlier redraw: {listed(found['gone'])}")
    return "\n".join(lines), False


def slot(folder: str) -> str:
    """A folder's scratch name: flat, so that redrawing a folder never clears a nested one's (its site)."""
    return folder.replace("/", "+")


def redraw(folders: list[str], manifest: dict[str, list[str]], keep: Path, against: Path | None, code: Path) -> int:
    """Redraw each folder under `keep`, compare, print; the exit status (module docstring)."""
    status = 0
    for folder in folders:
        if against is not None and not (against / slot(folder)).is_dir():
            print(f"{folder}: not in {against} (redraw it there first)")
            status = max(status, 2)
            continue
        drawn, failure = draw(manifest[folder], keep / slot(folder), code)
        if drawn is None:
            print(f"{folder}: the drawing FAILED:\n  " + failure.replace("\n", "\n  "))
            status = 2
            continue
        if against is None:
            found = compare(drawn, REPO / folder, every_file=False)
        else:
            found = compare(drawn, against / slot(folder) / drawn.name, every_file=True)
        line, same = verdict(folder, found, against)
        print(line, flush=True)
        status = max(status, 0 if same else 1)
    return status


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="*", metavar="FOLDER", help="manifest folders to redraw (default: all)")
    parser.add_argument("--manifest", type=Path, default=MANIFEST, help="default: %(default)s")
    parser.add_argument("--keep", type=Path, help="keep the redraw here (default: a temporary folder, removed)")
    parser.add_argument("--against", type=Path, help="compare with the redraw kept here, not the committed files")
    parser.add_argument("--code", type=Path, default=REPO, help="the checkout whose ms draws (default: this one)")
    args = parser.parse_args(argv)
    manifest = load_manifest(args.manifest)
    folders = [f.rstrip("/") for f in args.folders] or list(manifest)
    unknown = [f for f in folders if f not in manifest]
    if unknown:
        parser.error(f"not in {args.manifest}: {', '.join(unknown)}")
    against = args.against.resolve() if args.against is not None else None
    if against is None:
        print(
            "Compared with the committed files, which were drawn by the code of their day: a difference can "
            "predate the working tree's change (to prove a change, redraw before and after it: --keep, --against).",
            flush=True,
        )
    if args.keep is not None and args.against is not None and args.keep.resolve() == args.against.resolve():
        parser.error("--keep and --against name one folder: the redraw would replace what it is compared with")
    if args.keep is not None:
        return redraw(folders, manifest, args.keep.resolve(), against, args.code.resolve())
    with tempfile.TemporaryDirectory(prefix="redraw-") as scratch:
        return redraw(folders, manifest, Path(scratch), against, args.code.resolve())


if __name__ == "__main__":
    sys.exit(main())
