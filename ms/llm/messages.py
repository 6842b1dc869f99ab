"""Prompts and chats: a prompt is a user message or a whole chat, and a chat becomes the text a model
reads before its answer (its tokenizer's chat template, or its messages joined where it has none)."""

from typing import Sequence, Union

Message = dict[str, str]
PAIR_MARKER = "\x00pair\x00"  # stands for text that differs between prompts; in no template or prompt
Prompt = Union[str, list[Message]]  # a user message, or a full chat


def as_messages(prompt: Prompt) -> list[Message]:
    return [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt)


def joined_contents(messages: Sequence[Message]) -> str:
    """A chat as text for a model with no chat template: its messages' contents, one a line."""
    return "\n".join(m["content"] for m in messages) + "\n"


def templated(tokenizer, prompt: Prompt) -> str:
    """A chat as the tokenizer's chat template renders it before the answer (joined where it has none)."""
    if tokenizer is None or not tokenizer.chat_template:
        return joined_contents(as_messages(prompt))
    return tokenizer.apply_chat_template(as_messages(prompt), tokenize=False, add_generation_prompt=True)
