"""What the chat-completion API providers share: the key from the environment, bounded
concurrency for a batch, and retries (tenacity) on transient failures and on 2xx replies that are
no usable chat completion.

The official clients' own retries stay off: openai's caps Retry-After at a fixed 60 s, neither
retries a malformed 2xx reply, and each logs and counts attempts its own way. One tenacity policy
here treats both providers alike and counts every retry in `usage.retries`.
"""

import logging
import os
import threading
from abc import abstractmethod
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import Any

import tenacity

from ms.common.errors import one_line
from ms.llm.base import LM, BackendError, Message

log = logging.getLogger(__name__)


class UnusableReply(Exception):
    """A 2xx reply that is not a usable chat completion: not JSON, no choices, or no message content.
    Overloaded servers and proxies send these now and then, so they are retried like a 503."""


def api_key_from_env(variable: str | None, provider: str) -> str:
    """The key is read here and only here; configs hold the variable's name, never its value."""
    if not variable:
        return "not-needed"  # local OpenAI-compatible servers accept any key
    key = os.environ.get(variable, "")
    if not key:
        raise BackendError(
            f"{provider} backbone needs an API key: set the environment variable {variable} "
            f"(or point backbone.api_key_env at the variable that holds it)"
        )
    return key


def retry_after_s(error: BaseException) -> float | None:
    """The wait a failed reply's Retry-After header asks for, in seconds (it may give seconds or an
    HTTP date), or None when there is no such header."""
    headers = getattr(error, "headers", None)  # mistralai's errors
    if headers is None:
        headers = getattr(getattr(error, "response", None), "headers", None)  # openai's status errors
    value = headers.get("retry-after") if headers is not None else None
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, (when - datetime.now(timezone.utc)).total_seconds())


def reply_text(response: Any) -> tuple[str, int, int]:
    """(text, prompt tokens, completion tokens) of a chat completion, or UnusableReply saying what is missing."""
    if isinstance(response, (str, bytes)):  # openai hands back the raw body when it is not JSON
        raise UnusableReply(f"the reply is not JSON: {one_line(str(response), 80)!r}")
    choices = getattr(response, "choices", None)
    if not choices:
        raise UnusableReply("the reply has no choices")
    content = getattr(getattr(choices[0], "message", None), "content", None)
    if isinstance(content, list):  # mistralai may return content as a list of chunks
        content = "".join(getattr(chunk, "text", None) or "" for chunk in content)
    if not isinstance(content, str):  # None, or mistralai's Unset
        raise UnusableReply("the reply's first choice has no message content")
    usage = getattr(response, "usage", None)
    return content, getattr(usage, "prompt_tokens", None) or 0, getattr(usage, "completion_tokens", None) or 0


def describe(error: BaseException) -> str:
    if isinstance(error, UnusableReply):
        return f"no usable chat completion came back: {error}"
    return f"{type(error).__name__}: {one_line(str(error))}"


class ChatAPILM(LM):
    # The backbone settings `build` hands the constructor, each under its own name.
    SETTINGS = "api_key_env base_url max_concurrency timeout_s max_retries backoff_s max_retry_wait_s".split()

    def __init__(
        self,
        model: str,
        *,
        api_key_env: str | None = None,
        base_url: str | None = None,
        max_concurrency: int = 4,
        timeout_s: float = 60.0,
        max_retries: int = 4,
        backoff_s: float = 1.0,
        max_retry_wait_s: float = 60.0,
        **kwargs,
    ):
        super().__init__(model=model, **kwargs)
        self.base_url = base_url
        self.max_concurrency = max_concurrency
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.max_retry_wait_s = max_retry_wait_s
        # Exponential backoff from backoff_s with up to 25% jitter, so parallel requests spread out.
        self._backoff = tenacity.wait_exponential(multiplier=backoff_s, max=max_retry_wait_s) + tenacity.wait_random(
            0, 0.25 * backoff_s
        )
        self._usage_lock = threading.Lock()
        self._connect(api_key_from_env(api_key_env, self.provider))

    @classmethod
    def build(cls, backbone, **common) -> "ChatAPILM":
        return cls(backbone.model, **{key: getattr(backbone, key) for key in cls.SETTINGS}, **common)

    @classmethod
    def cache_model_of(cls, backbone, kind: str) -> str:
        return f"{backbone.model}@{backbone.base_url}" if backbone.base_url else backbone.model  # as cache_model

    @property
    def endpoint(self) -> str:
        return self.base_url or "default endpoint"

    @property
    def cache_model(self) -> str:
        # Servers name their models freely ("local"), so two servers' replies must not share cache
        # entries: a server's address is part of its key. The provider's own endpoint keeps the bare name.
        return self.model if self.base_url is None else f"{self.model}@{self.base_url}"

    @abstractmethod
    def _connect(self, api_key: str) -> None: ...

    @abstractmethod
    def _complete(
        self, messages: list[Message], max_new_tokens: int, temperature: float, stop: list[str]
    ) -> tuple[str, int, int]:
        """One chat completion: (text, prompt tokens, completion tokens); UnusableReply when the
        2xx reply holds none."""

    def _request(self, messages: list[Message], max_new_tokens: int, temperature: float, stop: list[str]) -> dict:
        """The arguments of one chat completion request, as both clients name them."""
        return dict(
            model=self.model, messages=messages, max_tokens=max_new_tokens, temperature=temperature, stop=stop or None
        )

    @abstractmethod
    def _is_transient(self, error: Exception) -> bool:
        """429, 5xx, timeouts and dropped connections are worth retrying; the rest are not."""

    def _retryable(self, error: BaseException) -> bool:
        return isinstance(error, UnusableReply) or (isinstance(error, Exception) and self._is_transient(error))

    def _each(self, one, jobs: list) -> list:
        """`one(job)` for every job, up to max_concurrency at once, in order."""
        with ThreadPoolExecutor(max_workers=max(1, self.max_concurrency)) as pool:
            return list(pool.map(one, jobs))

    def _generate(self, chats, *, max_new_tokens, temperature, stop):
        def one(messages):
            return self._with_retries(lambda: self._complete(messages, max_new_tokens, temperature, stop))

        results = self._each(one, chats)
        for _, prompt_tokens, completion_tokens in results:
            self.usage.prompt_tokens += prompt_tokens
            self.usage.completion_tokens += completion_tokens
        return [text for text, _, _ in results]

    def _wait(self, state: tenacity.RetryCallState) -> float:
        """Retry-After when the reply has one, else exponential backoff; never above max_retry_wait_s."""
        asked = retry_after_s(state.outcome.exception())
        return self._backoff(state) if asked is None else min(asked, self.max_retry_wait_s)

    def _before_retry(self, state: tenacity.RetryCallState) -> None:
        error = state.outcome.exception()
        asked = retry_after_s(error)
        with self._usage_lock:
            self.usage.retries += 1
        note = "" if asked is None else f", as Retry-After asked ({asked:.1f}s, at most {self.max_retry_wait_s:g}s)"
        log.warning(
            "%s: %s, retrying in %.1fs%s (attempt %d of %d)",
            self.provider,
            describe(error),
            state.next_action.sleep,
            note,
            state.attempt_number,
            self.max_retries + 1,
        )

    def _with_retries(self, call):
        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception(self._retryable),
            stop=tenacity.stop_after_attempt(self.max_retries + 1),
            wait=self._wait,
            before_sleep=self._before_retry,
            reraise=True,
        )
        try:
            return retrying(call)
        except Exception as error:  # noqa: BLE001 - every failure becomes one BackendError naming the endpoint
            if not self._retryable(error):
                raise BackendError(f"{self.provider} request to {self.endpoint} failed: {describe(error)}") from error
            attempts = retrying.statistics.get("attempt_number", self.max_retries + 1)
            raise BackendError(
                f"{self.provider} request to {self.endpoint} failed after {attempts} attempts: {describe(error)}. "
                f"Check the endpoint (backbone.base_url) and its status; backbone.max_retries, backbone.timeout_s "
                f"and backbone.max_retry_wait_s give a slow or busy one more time"
            ) from error
