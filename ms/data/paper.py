"""Importer for the paper authors' repository (GHupppp/InteractiveMemorySharingLLM).

Layout: one folder per domain ("Literal Creation", "Logic Problem_Solving", "Plan Generation") and
"OnePool", each with a pool file (the seed), a problem file (the stream) and one test file per
agent. Every line is {"messages": [{"role": "user", ...}, {"role": "assistant", ...}]}, with no
agent field. Test files name their agent; pool and problem files hold their folder's agents (OnePool:
all nine) in contiguous blocks, which ms.data.segment reads from content and structure.

The domain folders become OUT/<agent>.jsonl, the data of the Domain-pool runs. OnePool, which
repeats their records in smaller blocks, becomes OUT/onepool/<agent>.jsonl, the data the authors'
Single-pool run read. The paper's split is kept in each record's `split` field (pool = seed,
problem = stream, test = test), and records are kept as published, duplicates included: the
hygiene report beside them says what leaks, and `drop_leaked_tests` writes the clean variant.
"""

import json
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from ms.agents import AGENTS_DIR, DEFAULT_AGENTS, default_agents, domains

from .hygiene import drop_leaked_tests, hygiene_report, normalize, write_hygiene
from .load import (
    CJK,
    SPLITS,
    UNASSIGNED,
    DataError,
    Example,
    json_lines,
    line_numbers,
    load_dir,
    write_dir,
    write_jsonl,
)
from .segment import FORM_NATS, SCRIPT_NATS, TEST_COPY_NATS, MixedFile, decide, similarity_evidence

ONEPOOL = "onepool"  # subfolder of the output for the single-pool files
_FOLDER_DOMAINS = (
    ("liter", "literary"),
    ("logic", "logic"),
    ("plan", "plan"),
    ("onepool", None),
    ("single", None),
    ("total", None),
)
_TEST_ALIASES = {"lvshi": "wuyanlvshi", "wuyan": "wuyanlvshi", "wuyanlvshi": "wuyanlvshi"}
# Words by which a question names its agent's form or topic, and the answer shapes of the fixed
# forms: soft evidence beside the similarity, which matters most where an agent has few test items.
_NAMES = {
    "wuyanlvshi": r"五言|律诗|wuyan|regulated verse",
    "limerick": r"limericks?",
    "sonnet": r"sonnets?",
    "puzzle": r"puzzles?|lateral[- ]thinking",
    "riddle": r"riddles?|what am i",
    "pun": r"puns?|wordplay",
    "study": r"study|studying|learn(?:ing)?|exams?",
    "travel": r"travel|trip|itinerary|vacation|holiday",
    "fitness": r"fitness|workouts?|exercises?",
}
_ANSWER_LINES = {"limerick": 5, "sonnet": 14}


def _folder_domain(name: str) -> tuple[bool, str | None]:
    """(recognized, domain); domain None means the folder mixes all nine agents."""
    key = re.sub(r"[^a-z]", "", name.lower())
    for marker, domain in _FOLDER_DOMAINS:
        if marker in key:
            return True, domain
    return False, None


def _test_agent(stem: str) -> str | None:
    """The agent a file like `punsTest` or `LvshiTest` is for, or None."""
    prefix = re.sub(r"[^a-z]", "", stem.lower())[: -len("test")]
    if prefix in _TEST_ALIASES:
        return _TEST_ALIASES[prefix]
    for candidate in (prefix, prefix[:-1]):  # plural forms: puns, riddles, puzzles
        if candidate in default_agents():
            return candidate
    return None


def _file_role(stem: str) -> str | None:
    low = stem.lower()
    if low.endswith("test"):
        return "test"
    if "pool" in low or "train" in low:  # older versions of the repository called the pool *Train
        return "seed"
    if "problem" in low:
        return "stream"
    return None


@dataclass
class _Source:
    path: Path
    name: str  # path relative to the repository root, as reports show it
    split: str
    group: str  # "" for the domain folders, ONEPOOL for the single-pool folder
    candidates: tuple[str, ...]  # the agents an item of this file may belong to
    agent: str | None = None  # fixed by the file name (test files)
    items: Sequence[tuple[int, str, str]] = ()  # (line, question, answer)


def _find_sources(root: Path) -> tuple[list[_Source], list[str]]:
    """Every recognized file, domain folders before OnePool, and what was skipped."""
    sources, skipped, recognized = [], [], []
    agents = default_agents()  # the paper's nine
    by_domain = domains(agents)
    for folder in sorted(f for f in root.iterdir() if f.is_dir() and not f.name.startswith(".")):
        known, domain = _folder_domain(folder.name)
        if known:
            recognized.append((domain is None, folder.name, folder, domain))
        else:
            skipped.append(f"{folder.name}/ (not a domain folder)")
    for single, _, folder, domain in sorted(recognized):
        if not single and domain not in by_domain:
            raise DataError(f"{folder}: the domain '{domain}' has no agents in {AGENTS_DIR / DEFAULT_AGENTS}.yaml")
        for path in sorted(p for p in folder.iterdir() if p.suffix.lower() == ".jsonl"):
            role = _file_role(path.stem)
            agent = _test_agent(path.stem) if role == "test" else None
            if role is None or (role == "test" and agent is None):
                skipped.append(f"{folder.name}/{path.name} (not a pool, problem or <agent>Test file)")
                continue
            candidates = tuple(agents) if single else by_domain[domain]
            name = path.relative_to(root).as_posix()
            sources.append(_Source(path, name, role, ONEPOOL if single else "", candidates, agent))
    if not sources:
        raise DataError(f"{root}: no pool, problem or test files in any domain folder")
    return sources, skipped


def _read_messages(path: Path, split: str) -> list[tuple[int, str, str]]:
    """(line number, question, answer) per line; an answer is required except in stream files."""
    items = []
    for where, number, record in json_lines(path):
        try:
            by_role = {m["role"]: m["content"] for m in record["messages"]}
        except (KeyError, TypeError) as err:
            raise DataError(
                f'{where}: malformed line, expected {{"messages": [{{"role", "content"}}, '
                f"...]}} ({type(err).__name__}: {err})"
            ) from None
        question, answer = by_role.get("user"), by_role.get("assistant", "")
        if not isinstance(question, str) or not question.strip():
            raise DataError(f"{where}: no user message with the question")
        if not isinstance(answer, str) or (split != "stream" and not answer.strip()):
            raise DataError(f"{where}: no assistant message with the answer")
        items.append((number, question.strip(), answer.strip()))
    return items


def _encode(encoder, texts: list[str]) -> dict[str, np.ndarray]:
    """Vectors of the distinct texts, encoded shortest first so batches carry little padding
    (OnePool repeats the domain folders, so about half the texts are repeats)."""
    distinct = sorted(set(texts), key=len)
    return dict(zip(distinct, encoder.encode(distinct).numpy()))


def _evidence(mixed: list[_Source], tests: list[_Source], encoder) -> list[MixedFile]:
    """Content evidence for every record of every mixed file (see ms.data.segment)."""
    test_texts: dict[str, list[str]] = {}
    test_questions: dict[str, set[str]] = {}
    for source in tests:
        texts = test_texts.setdefault(source.agent, [])
        for _, q, a in source.items:
            if f"{q}\n{a}" not in texts:  # OnePool's test files repeat the domain folders'
                texts.append(f"{q}\n{a}")
            test_questions.setdefault(source.agent, set()).add(normalize(q))
    vector = _encode(
        encoder,
        [t for texts in test_texts.values() for t in texts]
        + [f"{q}\n{a}" for source in mixed for _, q, a in source.items],
    )
    test_vectors = {agent: np.stack([vector[t] for t in texts]) for agent, texts in test_texts.items()}
    files = []
    for source in mixed:
        vectors = np.stack([vector[f"{q}\n{a}"] for _, q, a in source.items])
        evidence = similarity_evidence(vectors, test_vectors, source.candidates)
        for row, (_, q, a) in enumerate(source.items):
            if "wuyanlvshi" in source.candidates:
                column = source.candidates.index("wuyanlvshi")
                evidence[row, column] += SCRIPT_NATS if CJK.search(q + a) else -SCRIPT_NATS
            owners = [c for c in source.candidates if normalize(q) in test_questions.get(c, ())]
            if len(owners) == 1:
                evidence[row, source.candidates.index(owners[0])] += TEST_COPY_NATS
            named = [c for c in source.candidates if re.search(rf"\b(?:{_NAMES[c]})\b", q, re.IGNORECASE)]
            if len(named) == 1:
                evidence[row, source.candidates.index(named[0])] += FORM_NATS
            lines = len([line for line in a.splitlines() if line.strip()])
            for agent, count in _ANSWER_LINES.items():
                if agent in source.candidates and lines == count:
                    evidence[row, source.candidates.index(agent)] += FORM_NATS
        files.append(MixedFile(source.name, source.candidates, [normalize(q) for _, q, _ in source.items], evidence))
    return files


def import_paper(src: str | Path, out: str | Path, drop_leaked: str | Path | None = None, encoder=None) -> dict:
    """Convert the authors' repository at `src` into `out` (see the module docstring), with
    `out/unassigned.jsonl`, `out/import_report.json` and a hygiene report per data folder; with
    `drop_leaked`, also the clean variant there. Returns the import report."""
    root, out = Path(src), Path(out)
    if not root.is_dir():
        raise DataError(f"{root}: no such folder")
    sources, skipped = _find_sources(root)
    for source in sources:
        source.items = _read_messages(source.path, source.split)
    mixed = [s for s in sources if s.agent is None and len(s.candidates) > 1]
    if encoder is None and mixed:
        from ms.retrieval.encoder import Encoder

        # The first 128 tokens of a record decide as 256 did on the authors' files, at half the cost.
        encoder = Encoder(device="cpu", max_length=128)
    decisions = decide(_evidence(mixed, [s for s in sources if s.agent], encoder)) if mixed else []
    decided = {id(s): d for s, d in zip(mixed, decisions)}

    data: dict[str, dict[str, list[Example]]] = {"": {}, ONEPOOL: {}}
    numbering: Counter = Counter()
    files, unsure, unassigned = {}, [], []
    for source in sources:
        row = files[source.name] = {
            "split": source.split,
            "records": len(source.items),
            "assigned": Counter(),
            "unsure": 0,
            "unassigned": 0,
        }
        labels: list[tuple[int, str | None]] = []
        for index, (line, question, answer) in enumerate(source.items):
            agent = source.agent or source.candidates[0]
            if id(source) in decided:
                d = decided[id(source)][index]
                agent = d.agent
                if d.unsure:
                    row["unsure" if agent else "unassigned"] += 1
                    (unsure if agent else unassigned).append(
                        {
                            "file": source.name,
                            "line": line,
                            "agent": agent,
                            "p": round(d.p, 3),
                            "runner_up": d.runner_up,
                            "runner_up_p": round(d.runner_up_p, 3),
                            "why": d.why,
                            **({} if agent else {"split": source.split, "question": question, "answer": answer}),
                        }
                    )
                labels.append((line, agent))
                if agent is None:
                    continue
            row["assigned"][agent] += 1
            numbering[source.group, agent, source.split] += 1
            number = numbering[source.group, agent, source.split]
            example_id = f"{agent}-paper{'-' + source.group if source.group else ''}-{source.split}-{number:03d}"
            example = Example(example_id, agent, default_agents()[agent].domain, question, answer, source.split)
            data[source.group].setdefault(agent, []).append(example)
        row["assigned"] = dict(row["assigned"])
        if labels:
            row["blocks"] = _runs(labels)

    report = {
        "source": str(root),
        "files": files,
        "counts": _counts(data[""]),
        "onepool_counts": _counts(data[ONEPOOL]),
        "total": sum(len(v) for group in data.values() for v in group.values()),
        "unsure": unsure,
        "unassigned": len(unassigned),
        "skipped_files": skipped,
        "copies_agree": _copies_agree(data),
        "hygiene": {},
    }
    out.mkdir(parents=True, exist_ok=True)
    write_jsonl(out / f"{UNASSIGNED}.jsonl", unassigned)
    for group, by_agent in data.items():
        if not by_agent:
            continue
        folder = out / group
        write_dir(folder, by_agent)
        load_dir(folder, list(by_agent))  # what we wrote must pass the loader's own schema checks
        hygiene = hygiene_report(by_agent, line_numbers(folder))
        write_hygiene(hygiene, folder)
        report["hygiene"][group or "."] = hygiene
        if drop_leaked is not None:
            clean = Path(drop_leaked) / group
            write_dir(clean, drop_leaked_tests(by_agent, hygiene))
            write_hygiene(hygiene_report(load_dir(clean), line_numbers(clean)), clean)
    summary = {k: v for k, v in report.items() if k != "hygiene"}
    (out / "import_report.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return report


def _runs(labels: list[tuple[int, str | None]]) -> list[list]:
    """[agent, first line, last line] for each run of one agent (None: unassigned) down a file."""
    runs: list[list] = []
    for line, agent in labels:
        if runs and runs[-1][0] == agent:
            runs[-1][2] = line
        else:
            runs.append([agent, line, line])
    return runs


def _counts(by_agent: dict[str, list[Example]]) -> dict[str, dict[str, int]]:
    return {
        agent: {split: sum(e.split == split for e in by_agent.get(agent, [])) for split in SPLITS}
        for agent in default_agents()
        if agent in by_agent
    }


def _copies_agree(data: dict[str, dict[str, list[Example]]]) -> dict[str, int]:
    """OnePool records that repeat a domain-folder record (same question and split), and how many
    of them went to the same agent: a check that the two folders' blocks were read alike."""
    domain = {(normalize(e.question), e.split): e.agent for v in data[""].values() for e in v}
    pairs = [
        (domain[key], e.agent)
        for v in data[ONEPOOL].values()
        for e in v
        if (key := (normalize(e.question), e.split)) in domain
    ]
    return {"copies": len(pairs), "same_agent": sum(a == b for a, b in pairs)}
