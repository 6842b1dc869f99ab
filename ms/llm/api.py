"""What the chat-completion API providers share: the key from the environment, bounded
concurrency for a batch, and retries with exponential backoff on transient failures."""

from __future__ import annotations

import logging
import os
import random
import time
from abc import abstractmethod
from concurrent.futures import ThreadPoolExecutor

from ms.llm.base import LM, BackendError, Message

log = logging.getLogger(__name__)


def api_key_from_env(variable: str | None, provider: str) -> str:
    """The key is read here and only here; configs hold the variable's name, never its value."""
    if not variable:
        return "not-needed"  # local OpenAI-compatible servers accept any key
    key = os.environ.get(variable, "")
    if not key:
        raise BackendError(f"{provider} backbone needs an API key: set the environment variable {variable} "
                           f"(or point backbone.api_key_env at the variable that holds it)")
    return key


class ChatAPILM(LM):
    def __init__(self, model: str, *, api_key_env: str | None = None, base_url: str | None = None,
                 max_concurrency: int = 4, timeout_s: float = 60.0, max_retries: int = 4,
                 backoff_s: float = 1.0, **kwargs):
        super().__init__(model=model, **kwargs)
        self.base_url = base_url
        self.max_concurrency = max_concurrency
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self._connect(api_key_from_env(api_key_env, self.provider))

    @abstractmethod
    def _connect(self, api_key: str) -> None:
        ...

    @abstractmethod
    def _complete(self, messages: list[Message], max_new_tokens: int, temperature: float,
                  stop: list[str]) -> tuple[str, int, int]:
        """One chat completion: (text, prompt tokens, completion tokens)."""

    @abstractmethod
    def _is_transient(self, error: Exception) -> bool:
        """429, 5xx, timeouts and dropped connections are worth retrying; the rest are not."""

    def _generate(self, chats, *, max_new_tokens, temperature, stop):
        def one(messages):
            return self._with_retries(lambda: self._complete(messages, max_new_tokens, temperature, stop))

        with ThreadPoolExecutor(max_workers=max(1, self.max_concurrency)) as pool:
            results = list(pool.map(one, chats))
        for _, prompt_tokens, completion_tokens in results:
            self.usage.prompt_tokens += prompt_tokens
            self.usage.completion_tokens += completion_tokens
        return [text for text, _, _ in results]

    def _with_retries(self, call):
        for attempt in range(self.max_retries + 1):
            try:
                return call()
            except Exception as error:  # noqa: BLE001 - classified just below
                if not self._is_transient(error):
                    raise BackendError(f"{self.provider} request to {self.base_url or 'default endpoint'} "
                                       f"failed: {error}") from error
                if attempt == self.max_retries:
                    raise BackendError(
                        f"{self.provider} request to {self.base_url or 'default endpoint'} failed after "
                        f"{self.max_retries + 1} attempts: {type(error).__name__}: {error}") from error
                delay = self.backoff_s * 2 ** attempt * (1 + 0.25 * random.random())
                log.warning("%s: %s, retrying in %.1fs (attempt %d of %d)", self.provider,
                            type(error).__name__, delay, attempt + 1, self.max_retries + 1)
                time.sleep(delay)
