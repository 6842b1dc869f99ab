"""The one stand-in LM of the unit tests: a real `ms.llm.LM` (so the response cache, the per-role
accounting and progress reporting are the real ones) whose backend is a script.

    FakeLM({"piano": "0.8"}, default="0.1")        replies by prompt substring, else the default
    FakeLM({...}, retry={...})                     a second try (a chat that goes on after its reply) reads `retry`
    FakeLM(default="ok", fail=True)                raises BackendError while `fail` is set
    FakeLM(probabilities={"80": 0.3})              a fixed next-token distribution over options
    FakeLM(scores=lambda context, text: (lp, n))   scores given text (`loglikelihood`)
    FakeLM(samples=lambda chat, seed: reply)       samples (`LM.sample`): each reply from its chat and its seed

What reached it is recorded: `chats` (every chat sent to generate, in order), `batches` (the size
of each generate call), `scored` (every (context, continuation) pair sent to loglikelihood) and
`sampled` (every (chat, seed) a sample was drawn for).
A reply counts one token per word, as a provider reports its tokens. A prompt that no key matches,
with no default, and any prompt that two keys match, fail the test rather than pass it by accident.
"""

from __future__ import annotations

from typing import Callable, Mapping, Optional, Sequence

from ms.llm.base import LM, BackendError, Message


def prompt_text(chat: Sequence[Message]) -> str:
    """What the keys are looked for in: every message's content, one a line."""
    return "\n".join(m["content"] for m in chat)


class FakeLM(LM):
    provider = "fake"

    def __init__(
        self,
        replies: Optional[Mapping[str, str]] = None,
        default: Optional[str] = None,
        *,
        retry: Optional[Mapping[str, str]] = None,
        fail: bool | BaseException = False,
        probabilities: Optional[Mapping[str | int, float]] = None,
        scores: Optional[Callable[[str, str], tuple[float, int]]] = None,
        samples: Optional[Callable[[list[Message], int], str]] = None,
        model: str = "fake",
        provider: Optional[str] = None,
        **lm_options,
    ):
        """`replies`: prompt substring -> reply; `default`: the reply where no key matches (None: such
        a prompt fails the test); `retry`: the same for second tries, falling back to `replies`;
        `fail`: True (or the exception to raise) makes every backend call fail until it is cleared;
        `probabilities`: option -> probability, for `option_probabilities` (options not named get 0);
        `scores`: (context, continuation) -> (sum of log-probs, tokens), for `loglikelihood`;
        `samples`: (chat, seed) -> reply, for `sample` (None: a sample is the chat's `replies` reply).
        `provider`, `model` and `lm_options` (cache, max_new_tokens, temperature, stop) as an LM's."""
        super().__init__(model, **lm_options)
        if provider is not None:
            self.provider = provider
        self.replies, self.default, self.retry = dict(replies or {}), default, dict(retry or {})
        self.fail = fail
        self.probabilities = None if probabilities is None else {str(k): v for k, v in probabilities.items()}
        self.reads_probabilities = probabilities is not None
        self.scores = scores
        self.scores_text = scores is not None
        self.chats: list[list[Message]] = []
        self.batches: list[int] = []
        self.scored: list[tuple[str, str]] = []
        self.samples = samples
        self.sampled: list[tuple[list[Message], int]] = []
        self._given: list[tuple[list[Message], str]] = []  # (chat, reply): to tell a second try

    # ---- the script ---------------------------------------------------------------------------

    def reply_to(self, chat: list[Message]) -> str:
        first = self._first_try(chat)
        if first is not None and self.retry:
            found = self._lookup(self.retry, prompt_text(first), None)
            if found is not None:
                return found
        if not self.replies and self.default is None:
            raise AssertionError("FakeLM was given no replies: this test must not decode")
        return self._lookup(self.replies, prompt_text(first or chat), self.default, required=True)

    def _first_try(self, chat: list[Message]) -> Optional[list[Message]]:
        """The earlier chat this one asks again (it goes on after this LM's reply to it), else None."""
        for earlier, reply in self._given:
            n = len(earlier)
            if len(chat) > n + 1 and chat[:n] == earlier and chat[n] == {"role": "assistant", "content": reply}:
                return earlier
        return None

    @staticmethod
    def _lookup(mapping: Mapping[str, str], text: str, default: Optional[str], required: bool = False):
        keys = [key for key in mapping if key in text]
        if len(keys) > 1:
            raise AssertionError(f"FakeLM: keys {keys} all match the prompt {text[-200:]!r}")
        if keys:
            return mapping[keys[0]]
        if default is None and required:
            raise AssertionError(f"FakeLM: no reply for the prompt {text[-200:]!r}")
        return default

    def _check(self) -> None:
        if self.fail:
            raise self.fail if isinstance(self.fail, BaseException) else BackendError("backend unavailable")

    # ---- the provider hooks -----------------------------------------------------------------

    def _generate(self, chats, *, max_new_tokens, temperature, stop):
        self.chats += chats
        self.batches.append(len(chats))
        self._check()
        replies = [self.reply_to(chat) for chat in chats]
        self._given += zip(chats, replies)
        self.usage.prompt_tokens += sum(len(m["content"].split()) for chat in chats for m in chat)
        self.usage.completion_tokens += sum(len(r.split()) for r in replies)
        return replies

    def _sample(self, chats, seeds, *, max_new_tokens, temperature, stop):
        if self.samples is None:
            return super()._sample(chats, seeds, max_new_tokens=max_new_tokens, temperature=temperature, stop=stop)
        self.sampled += zip(chats, seeds)
        self._check()
        return [self.samples(chat, seed) for chat, seed in zip(chats, seeds)]

    def _loglikelihood(self, contexts, continuations):
        if self.scores is None:
            return super()._loglikelihood(contexts, continuations)
        self.scored += zip(contexts, continuations)
        self._check()
        return [self.scores(c, x) for c, x in zip(contexts, continuations)]

    def _option_probabilities(self, chats, options, shared_prefixes=()):
        if self.probabilities is None:
            return super()._option_probabilities(chats, options, shared_prefixes)
        self.chats += chats
        self._check()
        return [[self.probabilities.get(o, 0.0) for o in options] for _ in chats]
