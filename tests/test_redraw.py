"""experiments/redraw.py: its manifest names committed ms-report folders, and it redraws two of them,
telling an identical redraw from one whose text files differ."""

import importlib.util
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("redraw", REPO / "experiments" / "redraw.py")
redraw = importlib.util.module_from_spec(spec)
sys.modules["redraw"] = redraw
spec.loader.exec_module(redraw)

# Two small folders: a report drawn with --out, and a site drawn with --html where --out was thrown away.
TWO = ["results/table2_offline", "results/table2_offline/site"]


def test_the_manifest_names_folders_that_hold_a_report_and_commands_whose_roots_exist():
    manifest = redraw.load_manifest()
    assert set(TWO) <= set(manifest)
    for folder, args in manifest.items():
        assert (REPO / folder).is_dir(), folder
        held = {p.name for p in (REPO / folder).iterdir()}
        assert held & {"summary.md", "sharing", "index.html"}, folder  # some keep only sharing/
        roots = args[: min(args.index(flag) for flag in redraw.OUTPUTS if flag in args)]
        assert roots and all((REPO / root).is_dir() for root in roots), folder


def test_a_command_that_does_not_write_its_folder_is_refused(tmp_path):
    manifest = tmp_path / "manifest.yaml"
    manifest.write_text("results/a: ms-report results/a/runs --out results/b\n")
    with pytest.raises(SystemExit, match="results/a"):
        redraw.load_manifest(manifest)


def test_outputs_move_to_scratch_and_the_kept_one_stands_for_the_folder(tmp_path):
    args = ["results/x/runs", "--out", "OUT", "--metric", "P", "--html", "results/x/site"]
    moved, kept = redraw.scratch_args(args, tmp_path)
    assert moved == [
        "results/x/runs",
        "--out",
        str(tmp_path / "out"),
        "--metric",
        "P",
        "--html",
        str(tmp_path / "html"),
    ]
    assert kept == tmp_path / "html"
    assert redraw.scratch_args(["results/x/runs", "--out", "results/x"], tmp_path)[1] == tmp_path / "out"


def test_two_redraws_agree_and_a_changed_or_missing_file_is_named(tmp_path, capsys):
    """Four drawings, each a fresh interpreter: both folders against the committed files; the report
    again against that redraw; the site again against it after one of its files was changed and one
    removed there, which are then the only two differences named."""
    before, after = tmp_path / "before", tmp_path / "after"
    assert redraw.main([*TWO, "--keep", str(before)]) in (0, 1)  # against the committed files: either
    said = capsys.readouterr().out
    assert all(f"{folder}: " in said for folder in TWO)
    assert "drawn by the code of their day" in said

    assert redraw.main([TWO[0], "--keep", str(after), "--against", str(before)]) == 0
    assert capsys.readouterr().out.count(f"{TWO[0]}: identical") == 1

    site = before / redraw.slot(TWO[1]) / "html"
    (site / "assets" / "style.css").write_text("changed\n")
    (site / "index.html").unlink()
    assert redraw.main([TWO[1], "--against", str(before)]) == 1
    said = capsys.readouterr().out.splitlines()
    assert said[0].startswith(f"{TWO[1]}: DIFFERS from the earlier redraw (1 of ")
    assert said[1:] == ["  differ: assets/style.css", "  only in this redraw: index.html"]


def test_images_are_not_compared(tmp_path):
    new, old = tmp_path / "new", tmp_path / "old"
    for folder, image, text in ((new, b"one", "same"), (old, b"two", "same")):
        folder.mkdir()
        (folder / "figure.png").write_bytes(image)
        (folder / "table.md").write_text(text)
    found = redraw.compare(new, old, every_file=True)
    assert found["compared"] == ["table.md"] and not found["differ"]
