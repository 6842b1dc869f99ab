"""The rubric gate's decision on one pair (`Decision`: its score, whether it was accepted and why), as
every gate records it, and the run's decisions.jsonl those decisions are appended to."""

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterable, Optional

from ms.config.files import DECISIONS_FILE

READS_OF_A_GRADER = ("probabilities", "text")  # Decision.read where a grader gave the score


@dataclass
class Decision:
    agent: str
    question: str
    answer: str
    score: Optional[float]  # 0-100; None: no score could be read (the pair is rejected, "unscored")
    accepted: bool
    reason: str
    attempts: int  # grader calls made for this pair
    raw: str  # text read: the grader's last reply; probability read: the most likely scores
    rubric: str = ""
    read: str = "text"  # how the score was read: probabilities | text
    mass: Optional[float] = None  # probability read: the probability the reply starts with a score
    # The utility gate's measurement (ms.gates.replay.Utility as a dict); None where no utility was measured.
    utility: Optional[dict] = None
    # gate=rubric_qdep's question-dependence test (ms.gates.question_dependence.Dependence as a dict); None
    # where it was not made.
    question_test: Optional[dict] = None
    genre_test: Optional[dict] = None  # gate=rubric_genre's genre test (ms.gates.genre), likewise

    @property
    def unscored(self) -> bool:
        """Rejected because the rubric gate could read no score (the other gates never grade)."""
        return self.score is None and self.utility is None and self.read in READS_OF_A_GRADER

    def as_dict(self) -> dict:
        """Its fields; a test's only where the test was made, so other gates write the lines they always wrote."""
        out = asdict(self)
        for test in ("question_test", "genre_test"):
            if out[test] is None:
                del out[test]
        return out


def append_decisions(path: str | Path, decisions: Iterable[Decision], extra: Iterable[dict] | None = None) -> Path:
    """Append one JSON line per decision; `path` is the file, or a run folder to hold decisions.jsonl.
    `extra`, one dict per decision, adds the caller's fields (stream step, whether the pool took it)."""
    path = Path(path)
    if path.is_dir():
        path = path / DECISIONS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    decisions = list(decisions)
    extras = list(extra) if extra is not None else [{}] * len(decisions)
    with path.open("a", encoding="utf-8") as f:
        for decision, more in zip(decisions, extras, strict=True):
            f.write(json.dumps({**decision.as_dict(), **more}, ensure_ascii=False) + "\n")
    return path
