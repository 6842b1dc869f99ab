"""How an in-process backbone turns a chat into the text its model reads (`backbone.prompt_format`).

chat: the tokenizer's chat template, for instruction-tuned models (SmolLM2-135M-Instruct).
plain: a few-shot completion text for base models, which never saw chat turns (Gemma 3 270M):
the system text, a blank line, the user text, then an answer cue on a line of its own. The cue
ends in a newline, so an answer scored after it tokenizes as it would inside the text (no leading
space to merge into its first token), and a base model's reply stops at a blank line or the next
cue, since nothing else ends it.

Every input built from messages goes through one format: generation, `chat_context` (scored
contexts: ref_logprob, labels, the utility gate), the gate's score probabilities and the rubric
prefix the gate keeps its work on.
"""

from abc import ABC, abstractmethod
from typing import Sequence

from ms.llm.base import BackendError, Message, templated
from ms.llm.settings import PROMPT_FORMATS

ANSWER_CUE = "Answer:"


class PromptFormat(ABC):
    name: str
    stop: tuple[str, ...] = ()  # where a reply ends besides the model's end-of-text token

    @abstractmethod
    def render(self, messages: Sequence[Message]) -> str:
        """The text before the model's reply to the last message."""

    @property
    @abstractmethod
    def adds_special_tokens(self) -> bool:
        """Whether encoding the rendered text adds the tokenizer's special tokens (its BOS): a chat
        template writes them itself, plain text needs them added."""


class ChatFormat(PromptFormat):
    name = "chat"

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer

    def render(self, messages: Sequence[Message]) -> str:
        return templated(self.tokenizer, list(messages))

    @property
    def adds_special_tokens(self) -> bool:
        return not self.tokenizer.chat_template


class PlainFormat(PromptFormat):
    name = "plain"
    # Not "\nAnswer:": a summary reply itself reads "Question: ...\nAnswer: ..." (ms.retrieval.memory_prompts).
    stop = ("\n\n", "\nQuestion:")

    def render(self, messages: Sequence[Message]) -> str:
        parts = []
        for message in messages:
            if message["role"] == "user":
                parts.append(f"{message['content']}\n{ANSWER_CUE}\n")
            else:  # system text, or an earlier reply (the gate's re-ask keeps it), then a blank line
                parts.append(f"{message['content']}\n\n")
        return "".join(parts)

    @property
    def adds_special_tokens(self) -> bool:
        return True


def prompt_format(name: str, tokenizer) -> PromptFormat:
    if name == "chat":
        return ChatFormat(tokenizer)
    if name == "plain":
        return PlainFormat()
    raise BackendError(f"unknown backbone.prompt_format '{name}'; choose one of {', '.join(PROMPT_FORMATS)}")
