"""Which agent each record of a mixed file belongs to: content evidence, decided over the file's
block structure.

The authors' pool and problem files carry no agent field; each holds its agents in contiguous
blocks, one block per agent, in an order that differs from file to file. A record's content gives
evidence for each candidate agent: its similarity to that agent's own test items under the
packaged MiniLM encoder, its script (Chinese or not), an exact copy in one agent's test file, and
softer hints: a question that names one agent's form or topic, an answer with a fixed form's lines.
Content alone misreads a few records at the edges of styles (a riddle about numbers reads like a
math pun; "Mastering yoga for beginners?" sits in the study block). The block structure settles
those, and a record repeated in another file (OnePool repeats the domain folders) adds that file's
verdict.

The model: a file is a sequence of blocks of distinct agents (a finished block is never
re-entered), with a geometric block length whose mean is the file's length over its number of
candidates. A record carries its block's agent, except at a small outlier rate, where it carries
another (the literary problem file opens with one limerick before its Chinese block).
Forward-backward over (current agent, agents used so far) gives each record's exact posterior over
agents; there are K * 2^(K-1) states, so this stays cheap up to the nine agents of one pool.
"""

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

TEMPERATURE = 0.05  # a cosine lead of 0.05 over another agent counts as one nat of evidence
TOP_K = 3  # similarity to an agent: the mean of a record's 3 highest cosines to that agent's test items
# A similarity measured against m test items keeps m / (m + SHRINK) of its distance from the
# record's mean over the candidates: against one or two items it says more about phrasing than
# about the agent.
SHRINK = 2
SCRIPT_NATS = 30.0  # Chinese text decides for wuyanlvshi, and its absence against it
TEST_COPY_NATS = 5.0  # the question is, word for word, a test question of exactly one candidate
FORM_NATS = 3.0  # the question names one candidate's form, or the answer has a fixed form's line count
COPY_FLOOR = 1e-3  # the least weight another file's verdict gives an agent
OUTLIER_RATE = 0.01  # a record that does not carry its block's agent
SURE = 0.9  # below this posterior a decision is listed as unsure
ASSIGN = 0.5  # below this posterior a record is left unassigned


@dataclass
class Decision:
    agent: str | None  # None: unassigned
    p: float  # posterior of the best agent
    runner_up: str | None  # what else it could be: the evidence's own pick, else the second posterior
    runner_up_p: float
    unsure: bool
    why: str  # empty when sure


def similarity_evidence(
    vectors: np.ndarray, test_vectors: dict[str, np.ndarray], candidates: Sequence[str]
) -> np.ndarray:
    """n x K log-evidence from cosine similarity to each candidate's test items (rows of L2-normalized
    vectors). An agent's similarity is shrunk toward the record's mean over the candidates as its test
    items get few (see SHRINK); an agent without test items gets that mean, neither favoured nor
    ruled out."""
    similarity = np.full((len(vectors), len(candidates)), np.nan)
    weights = np.zeros(len(candidates))
    for column, agent in enumerate(candidates):
        tests = test_vectors.get(agent)
        if tests is None or not len(tests):
            continue
        cosines = vectors @ tests.T
        k = min(TOP_K, cosines.shape[1])
        similarity[:, column] = np.sort(cosines, axis=1)[:, -k:].mean(axis=1)
        weights[column] = len(tests) / (len(tests) + SHRINK)
    if np.isnan(similarity).all():
        return np.zeros(similarity.shape)
    mean = np.nanmean(similarity, axis=1, keepdims=True)
    shrunk = weights * np.nan_to_num(similarity, nan=0.0) + (1 - weights) * mean
    return shrunk / TEMPERATURE


def block_posteriors(evidence: np.ndarray, outlier_rate: float = OUTLIER_RATE) -> np.ndarray:
    """n x K posterior of each record's agent, given n x K log-evidence (any per-row offset)."""
    n, k = evidence.shape
    if k == 1:
        return np.ones((n, 1))
    likelihood = np.exp(evidence - evidence.max(axis=1, keepdims=True))
    others = (likelihood.sum(axis=1, keepdims=True) - likelihood) / (k - 1)
    emit = np.log((1 - outlier_rate) * likelihood + outlier_rate * others)  # p(record | block agent)

    masks = 1 << k
    used = np.array([[(mask >> a) & 1 for a in range(k)] for mask in range(masks)], dtype=bool)
    left = k - used.sum(axis=1)  # agents not yet used
    switch_rate = min(0.5, (k - 1) / max(n - 1, 1))  # k blocks: k - 1 switches over n - 1 steps
    stay = np.where(left > 0, math.log(1 - switch_rate), 0.0)
    with np.errstate(divide="ignore"):
        switch = np.where(left > 0, np.log(switch_rate / np.maximum(left, 1)), -np.inf)
    enter = [np.nonzero(used[:, a])[0] for a in range(k)]  # masks holding a, entered from mask - a
    outside = [np.nonzero(~used[:, a])[0] for a in range(k)]

    forward = np.full((n, masks, k), -np.inf)
    for a in range(k):
        forward[0, 1 << a, a] = emit[0, a] - math.log(k)
    for t in range(1, n):
        prev = forward[t - 1]
        leave = np.logaddexp.reduce(prev, axis=1) + switch
        cur = prev + stay[:, None]
        for a in range(k):
            cur[enter[a], a] = np.logaddexp(cur[enter[a], a], leave[enter[a] ^ (1 << a)])
        forward[t] = np.where(used, cur + emit[t], -np.inf)
    backward = np.full((n, masks, k), -np.inf)
    backward[-1] = np.where(used, 0.0, -np.inf)
    for t in range(n - 2, -1, -1):
        ahead = backward[t + 1] + emit[t + 1]
        cur = ahead + stay[:, None]
        for b in range(k):
            to_b = switch[outside[b]] + ahead[outside[b] | (1 << b), b]
            cur[outside[b]] = np.logaddexp(cur[outside[b]], to_b[:, None])
        backward[t] = np.where(used, cur, -np.inf)

    block = np.logaddexp.reduce(forward + backward, axis=1)
    block = np.exp(block - np.logaddexp.reduce(block, axis=1, keepdims=True))
    # A record's own agent: its block's agent, or (an outlier) another one its content supports.
    posterior = np.zeros((n, k))
    for a in range(k):
        weights = np.full(k, outlier_rate / (k - 1))
        weights[a] = 1 - outlier_rate
        given_block = likelihood * weights
        posterior += block[:, [a]] * given_block / given_block.sum(axis=1, keepdims=True)
    return posterior


@dataclass
class MixedFile:
    """One pool or problem file: its candidate agents, its records' questions (normalized, to find
    copies in other files) and their n x K content evidence."""

    name: str
    candidates: tuple[str, ...]
    questions: list[str]
    evidence: np.ndarray


def decide(files: Sequence[MixedFile]) -> list[list[Decision]]:
    """Decisions for every record of every file. A first pass reads each file on its own; the second
    adds, to a record with copies in other files, those files' first-pass verdicts."""
    first = [block_posteriors(f.evidence) for f in files]
    copies: dict[str, list[tuple[int, int]]] = {}
    for i, f in enumerate(files):
        for row, question in enumerate(f.questions):
            copies.setdefault(question, []).append((i, row))
    decisions = []
    for i, f in enumerate(files):
        evidence = f.evidence.copy()
        for row, question in enumerate(f.questions):
            for j, other_row in copies[question]:
                if j == i:
                    continue
                theirs = dict(zip(files[j].candidates, first[j][other_row]))
                evidence[row] += np.log([max(theirs.get(a, 0.0), COPY_FLOOR) for a in f.candidates])
        posterior = block_posteriors(evidence)
        decisions.append([_decision(f.candidates, p, e) for p, e in zip(posterior, evidence)])
    return decisions


def _decision(candidates: Sequence[str], posterior: np.ndarray, evidence: np.ndarray) -> Decision:
    order = np.argsort(-posterior, kind="stable")
    best, p = candidates[order[0]], float(posterior[order[0]])
    if len(candidates) == 1:
        return Decision(best, p, None, 0.0, False, "")
    pick = candidates[int(np.argmax(evidence))]
    if evidence.max() > evidence[order[0]] + 1e-9:  # the block structure overrode what the content says
        runner_up, why = pick, f"content points to {pick}, its block to {best}"
    else:
        runner_up = candidates[order[1]]
        why = f"posterior {p:.2f} < {SURE}" if p < SURE else ""
    runner_up_p = float(posterior[candidates.index(runner_up)])
    if p < ASSIGN:
        return Decision(None, p, runner_up, runner_up_p, True, f"posterior {p:.2f} < {ASSIGN}: left unassigned")
    return Decision(best, p, runner_up, runner_up_p, bool(why), why)
