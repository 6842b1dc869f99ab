"""Question-answer datasets: loading and validating them, their splits, importers and hygiene."""

from ms.config.schema import DataConfig, HFDataConfig

from .hf import load_hf
from .hygiene import drop_leaked_tests, format_hygiene, hygiene_report, write_hygiene
from .load import DataError, Example, form_problem, json_lines, line_numbers, load_dir, load_jsonl, write_dir
from .paper import import_paper
from .splits import load_splits, split_examples, with_splits

__all__ = [
    "DataConfig",
    "DataError",
    "Example",
    "HFDataConfig",
    "drop_leaked_tests",
    "form_problem",
    "format_hygiene",
    "hygiene_report",
    "import_paper",
    "json_lines",
    "line_numbers",
    "load_dir",
    "load_hf",
    "load_jsonl",
    "load_splits",
    "split_examples",
    "with_splits",
    "write_dir",
    "write_hygiene",
]
