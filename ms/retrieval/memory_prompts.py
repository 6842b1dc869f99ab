"""What the stm_ltm memory policy (ms.retrieval.memory) asks the model, and how it reads the replies:
an importance rating for each admitted pair, and one summary pair for a group of similar ones."""

import re
from typing import Sequence

from ms.llm.base import Message
from ms.pool import Memory

# ---- importance ------------------------------------------------------------------------------

IMPORTANCE_PROMPT = (
    "An AI agent keeps question-answer pairs in memory and shows them to itself as examples when it "
    "answers similar questions later.\n\n"
    "Question: {question}\nAnswer: {answer}\n\n"
    "How important is it to remember this pair, from 0 (not worth keeping) to 1 (essential)? "
    "Reply with one number between 0 and 1 only."
)

_NUMBER = re.compile(
    r"(?<![\w.])(\d+(?:\.\d+)?|\.\d+)\s*(%|/\s*10\b|/\s*100\b|out of 10\b|out of 100\b)?", re.IGNORECASE
)


def parse_importance(text: str | None) -> float | None:
    """The importance in [0, 1] that a reply states, or None. The first number is read; besides a
    plain 0-1 value, "7/10", "70%" and bare 0-10 or 0-100 ratings are scaled down, because small
    models often answer on the scale they have seen most."""
    for match in _NUMBER.finditer(text or ""):
        value, unit = float(match.group(1)), (match.group(2) or "").replace(" ", "").lower()
        if unit in ("%", "/100", "outof100"):
            value /= 100
        elif unit in ("/10", "outof10"):
            value /= 10
        elif 1 < value <= 10:
            value /= 10
        elif 10 < value <= 100:
            value /= 100
        return value if 0 <= value <= 1 else None
    return None


# ---- summaries -------------------------------------------------------------------------------

SUMMARY_SYSTEM = (
    "You merge similar question-answer pairs from an AI agent's memory into a single pair. The agent "
    "will later be shown your pair as a worked example when it answers a new question, so the pair must "
    "read like a real question followed by a complete, high-quality answer to it."
)
SUMMARY_USER = (
    "The {agent} agent answered these similar questions:\n\n{pairs}\n\n"
    "Write one question that covers what these questions ask, and one answer to it that keeps the best, "
    "most specific content of the answers above and has the same form (a poem stays a poem, a plan stays "
    "a plan, a riddle answer stays short). Reply in exactly this format:\n"
    "Question: <the question>\nAnswer: <the answer>"
)
_SUMMARY = re.compile(r"question\s*:\s*(?P<question>.*?)\s*answer\s*:\s*(?P<answer>.*)", re.IGNORECASE | re.DOTALL)
_ANSWER_ONLY = re.compile(r"answer\s*:\s*(?P<answer>.*)", re.IGNORECASE | re.DOTALL)


def summary_prompt(agent: str, group: Sequence[Memory]) -> list[Message]:
    pairs = "\n\n".join(f"Pair {i}\nQuestion: {m.question}\nAnswer: {m.answer}" for i, m in enumerate(group, 1))
    return [
        {"role": "system", "content": SUMMARY_SYSTEM},
        {"role": "user", "content": SUMMARY_USER.format(agent=agent, pairs=pairs)},
    ]


def parse_summary(reply: str, fallback_question: str) -> tuple[str, str] | None:
    """(question, answer) from a summary reply, or None when it holds no answer. A reply that
    skips the requested labels still counts as the answer, to the group's most important question."""
    found = _SUMMARY.search(reply) or _ANSWER_ONLY.search(reply)
    question = found.groupdict().get("question") if found else None
    answer = (found.group("answer") if found else reply).strip()
    if not answer:
        return None
    return (question or "").strip() or fallback_question, answer
