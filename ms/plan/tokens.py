"""How plan mode counts tokens before any tokenizer loads: 4 characters a token, 1 a CJK character,
and a few per chat message for the template around it."""

import re

CHARS_PER_TOKEN = 4.0
PER_MESSAGE = 4  # chat-template tokens around each message
_WIDE = re.compile(r"[\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef]")  # CJK: about a token each


def tokens(text: str) -> float:
    wide = len(_WIDE.findall(text))
    return wide + (len(text) - wide) / CHARS_PER_TOKEN
