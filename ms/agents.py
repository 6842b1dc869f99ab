"""The nine domain agents: what each is asked to do, and how it prompts its backbone."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from ms.llm.base import Message


@dataclass(frozen=True)
class Agent:
    name: str
    domain: str
    instruction: str  # sent as the system message


DOMAINS: dict[str, tuple[str, ...]] = {
    "literary": ("wuyanlvshi", "limerick", "sonnet"),
    "logic": ("puzzle", "riddle", "pun"),
    "plan": ("study", "travel", "fitness"),
}

_INSTRUCTIONS = {
    "wuyanlvshi": "You write classical Chinese five-character regulated verse (五言律诗): exactly eight lines "
                  "of five characters, even lines rhyming, the middle two couplets parallel. Reply with the poem only.",
    "limerick": "You write limericks: five lines rhyming AABBA, lines three and four shorter, with a funny "
                "twist in the last line. Reply with the limerick only.",
    "sonnet": "You write sonnets: fourteen lines in iambic pentameter, Shakespearean (ABAB CDCD EFEF GG) or "
              "Petrarchan (ABBAABBA then CDECDE), with a clear turn. Reply with the sonnet only.",
    "puzzle": "You solve lateral-thinking and logic puzzles. Give the solution, then briefly explain why it works.",
    "riddle": "You solve riddles. Name the answer, then briefly show how each clue fits.",
    "pun": "You are a pun expert. Write the requested pun, or explain the wordplay of a given pun, concisely.",
    "study": "You write concrete study plans that fit the learner's time, level and goal: sessions, topics, "
             "breaks and review, ending with a one-line rationale.",
    "travel": "You write concrete travel itineraries that fit the traveller's budget, dates and interests: "
              "transport, lodging and day-by-day activities, ending with a one-line rationale.",
    "fitness": "You write safe, concrete fitness plans that fit the person's level, time and limits: workouts, "
               "rest days, progression and nutrition notes, ending with a one-line rationale.",
}

AGENTS: dict[str, Agent] = {
    name: Agent(name=name, domain=domain, instruction=_INSTRUCTIONS[name])
    for domain, names in DOMAINS.items() for name in names
}


def get_agent(name: str) -> Agent:
    try:
        return AGENTS[name]
    except KeyError:
        raise KeyError(f"unknown agent '{name}'; the agents are: {', '.join(AGENTS)}") from None


@dataclass(frozen=True)
class PromptTemplate:
    """How retrieved memories become in-context examples (the paper's `Q->A | ... | instruction: X`)."""

    example: str
    separator: str
    with_examples: str
    zero_shot: str
    system: bool = True  # send the agent's instruction as a system message before the prompt

    def render(self, query: str, memories: Sequence[Mapping[str, str]] = ()) -> str:
        if not memories:
            return self.zero_shot.format(query=query)
        examples = self.separator.join(self.example.format(question=m["question"], answer=m["answer"])
                                       for m in memories)
        return self.with_examples.format(examples=examples, query=query)


def chat(agent: Agent, user_prompt: str, system: bool = True) -> list[Message]:
    """The agent's chat; without `system`, the user prompt alone, as the authors' code sent it."""
    return ([{"role": "system", "content": agent.instruction}] if system else []) + [
        {"role": "user", "content": user_prompt}]
