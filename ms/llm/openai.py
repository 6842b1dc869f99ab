"""Chat completions through the official `openai` client (OpenAI, or any compatible server); with
backbone.prompt_logprobs=echo, also exact scores from a server's prompt log-probs."""

import json
import logging
import math
from dataclasses import dataclass
from functools import cached_property, partial
from typing import Callable, Optional

from ms.common.errors import one_line
from ms.llm.api import ChatAPILM, UnusableReply, describe, reply_text
from ms.llm.base import BackendError, Prompt, templated
from ms.llm.options import OptionPaths

log = logging.getLogger(__name__)


class OpenAILM(ChatAPILM):
    provider = "openai"

    @classmethod
    def for_backbone(cls, backbone) -> type["OpenAILM"]:
        """With backbone.prompt_logprobs=echo, EchoLogprobsLM: a class of its own, so that what it can
        do stays readable from the class."""
        return EchoLogprobsLM if getattr(backbone, "prompt_logprobs", "none") == "echo" else cls

    def _connect(self, api_key: str) -> None:
        import openai

        self._errors = openai
        # The client's own retries are off: ours (ms.llm.api) count and log every attempt the same way for all
        # providers, and also retry 2xx replies that hold no usable completion.
        self.client = openai.OpenAI(api_key=api_key, base_url=self.base_url, timeout=self.timeout_s, max_retries=0)

    def _complete(self, messages, max_new_tokens, temperature, stop):
        try:
            response = self.client.chat.completions.create(**self._request(messages, max_new_tokens, temperature, stop))
        except json.JSONDecodeError as error:  # a 2xx reply that says it is JSON but is not
            raise UnusableReply(f"the reply is not JSON ({error})") from error
        return reply_text(response)

    def _is_transient(self, error: Exception) -> bool:
        e = self._errors
        if isinstance(error, (e.APITimeoutError, e.APIConnectionError, e.RateLimitError)):
            return True
        return isinstance(error, e.APIStatusError) and error.status_code >= 500


# ---- exact scores from a server's prompt log-probs (backbone.prompt_logprobs=echo) ------------

TOP_LOGPROBS = 20  # next-token alternatives asked for at a position: vLLM's default cap (--max-logprobs)
REFUSALS = (400, 404, 405, 422)  # how servers answer a request or endpoint they do not support


@dataclass(frozen=True)
class Scored:
    """One token of a completions reply with log-probs."""

    text: str  # as the server spells it
    logprob: Optional[float]  # log P(token | the tokens before it); None for a prompt's first token
    top: Optional[dict[str, float]]  # the most likely tokens at its position, by text


def spelling(tokens: list[Scored], text: str) -> Optional[list[Scored]]:
    """The last tokens, whose texts end with `text`: `text`'s own tokens, where the first may also
    hold the end of what comes before it (the server tokenizes the joined text, so a token can
    span the boundary). None when they do not spell `text`."""
    spelled, start = "", len(tokens)
    while len(spelled) < len(text) and start > 0:
        start -= 1
        spelled = tokens[start].text + spelled
    return tokens[start:] if text and spelled.endswith(text) else None


def served_template(model: str):
    """The tokenizer whose chat template renders an echo server's chat_context: backbone.model's,
    when it names one transformers can load (vLLM serves models by their hub name), else None."""
    try:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(model)
    except (OSError, ValueError) as error:
        log.warning(
            "%s: backbone.model '%s' names no tokenizer (%s); scored contexts join the chat's "
            "messages without the server's chat template",
            EchoLogprobsLM.setting,
            model,
            one_line(str(error)),
        )
        return None
    if not tokenizer.chat_template:
        log.warning(
            "%s: the tokenizer of '%s' has no chat template; scored contexts join the chat's messages",
            EchoLogprobsLM.setting,
            model,
        )
        return None
    return tokenizer


class EchoLogprobsLM(OpenAILM):
    """An OpenAI-compatible server whose legacy /completions endpoint echoes the prompt with each
    token's log-prob (`echo` with `logprobs`): llama-cpp-python's server does, and so does vLLM.

    `loglikelihood` sends context + continuation and sums the log-probs of the continuation's
    tokens, found by their text from the end of the prompt: the reply's text offsets cannot place
    the boundary, as llama-cpp-python counts them without the special tokens' text.
    `option_probabilities` reads the TOP_LOGPROBS most likely next tokens after the chat and after
    each proper prefix of an option, from one-token completions without echo: llama-cpp-python
    computes an echo's log-probs in Python, about 0.2 s per prompt token on two cores.
    """

    scores_text = True
    reads_probabilities = True
    setting = "backbone.prompt_logprobs=echo"
    # What validation offers an openai backbone that cannot do what this class can (ms.llm.offered_variant).
    offer = setting + ", on a server that returns prompt log-probs"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._paths: dict[str, tuple[str, ...]] = {}  # each option's tokens, by text

    # ---- prompt formatting ------------------------------------------------------------------

    @cached_property
    def _template(self):
        return served_template(self.model)

    def chat_context(self, prompt: Prompt) -> str:
        return templated(self._template, prompt)

    @classmethod
    def context_renderer(cls, backbone) -> Callable[[Prompt], str]:
        return partial(templated, served_template(backbone.model))

    # ---- scoring ----------------------------------------------------------------------------

    def _loglikelihood(self, contexts, continuations):
        return self._each(lambda pair: self._score(*pair), list(zip(contexts, continuations)))

    def _score(self, context: str, continuation: str) -> tuple[float, int]:
        if not continuation:
            raise ValueError(f"empty continuation for context {context[:60]!r}")
        span = spelling(self._echo(context + continuation), continuation)
        if span is None:
            raise self._misread(f"the tokens it echoes do not spell the continuation {continuation[:60]!r}")
        if any(t.logprob is None for t in span):
            raise ValueError(
                f"context {context[:60]!r} is empty or merges into the continuation's first token; "
                "a server gives the first token of a prompt no log-prob"
            )
        return sum(t.logprob for t in span), len(span)

    def _option_probabilities(self, chats, options, shared_prefixes=()):
        # No request can ask a server to keep a prefix; its own prompt cache may reuse one.
        missing = [o for o in dict.fromkeys(options) if o not in self._paths]
        self._paths.update(zip(missing, self._each(self._token_path, missing)))
        paths = OptionPaths([self._paths[o] for o in options])
        contexts = [self.chat_context(chat) for chat in chats]
        jobs = [(c, prefix) for c in contexts for prefix in paths.prefixes]
        found = dict(
            zip(
                jobs,
                self._each(lambda job: self._next_tokens(job[0] + "".join(job[1]), paths.extensions[job[1]]), jobs),
            )
        )
        # A token outside the server's TOP_LOGPROBS alternatives counts as probability 0.
        return [paths.probabilities(lambda prefix, token: found[c, prefix].get(token, -math.inf)) for c in contexts]

    def _token_path(self, option: str) -> tuple[str, ...]:
        """The option's tokens, as the server tokenizes it alone (hf tokenizes options alone too)."""
        _, tokens, _ = self._completion(option, echo=True, logprobs=0)
        # The first run of tokens that spells the option: a server may echo a BOS token before it.
        for start in range(len(tokens)):
            spelled, end = "", start
            while len(spelled) < len(option) and end < len(tokens):
                spelled, end = spelled + tokens[end].text, end + 1
            if spelled == option and tokens[start].text:
                return tuple(t.text for t in tokens[start:end])
        raise self._misread(f"the tokens it echoes for the option {option!r} do not spell it")

    def _next_tokens(self, prompt: str, wanted: set[str]) -> dict[str, float]:
        """The most likely next tokens after `prompt`, with their log-probs, by text."""
        _, tokens, _ = self._completion(prompt, echo=False, logprobs=TOP_LOGPROBS)
        if not tokens:
            # llama-cpp-python sends no log-probs when the greedy next token ends the reply. A
            # grammar that admits only the wanted tokens keeps it from ending there; the grammar
            # acts on sampling only, so the log-probs it sends are the model's own.
            grammar = "root ::= " + " | ".join(json.dumps(t, ensure_ascii=False) for t in sorted(wanted))
            _, tokens, _ = self._completion(prompt, echo=False, logprobs=TOP_LOGPROBS, extra={"grammar": grammar})
        if not tokens:
            raise self._misread("it sends no log-probs where the greedy next token ends the reply")
        if not tokens[0].top:
            raise self._unsupported("gives no top log-probs of a completion's tokens")
        return tokens[0].top

    # ---- requests ---------------------------------------------------------------------------

    def _echo(self, prompt: str) -> list[Scored]:
        """The prompt's tokens with their log-probs, without the token generated after them."""
        text, tokens, n_generated = self._completion(prompt, echo=True, logprobs=0)
        if not text.startswith(prompt):
            raise self._unsupported("does not echo the prompt")
        generated = text[len(prompt) :]
        if n_generated is None:
            n_generated = 1 if generated else 0
        # llama-cpp-python (0.3) pairs each token with the next position's log-prob when the prompt
        # does not begin with the model's BOS token, and its list then lacks the generated token.
        if generated and (not tokens or tokens[-1].text != generated):
            raise self._misread(
                "its log-probs are shifted against the prompt's tokens (llama-cpp-python's server "
                "does this when a prompt does not begin with the model's BOS token)"
            )
        return tokens[: len(tokens) - n_generated]

    def _completion(
        self, prompt: str, *, echo: bool, logprobs: int, extra: Optional[dict] = None
    ) -> tuple[str, list[Scored], Optional[int]]:
        """(text, tokens with log-probs, generated tokens) of a one-token greedy completion."""

        def call():
            try:
                response = self.client.completions.create(
                    model=self.model,
                    prompt=prompt,
                    echo=echo,
                    logprobs=logprobs,
                    max_tokens=1,
                    temperature=0,
                    extra_body=extra,
                )
            except json.JSONDecodeError as error:
                raise UnusableReply(f"the reply is not JSON ({error})") from error
            if isinstance(response, (str, bytes)) or not getattr(response, "choices", None):
                raise UnusableReply("the reply is no completion")
            return response

        try:
            response = self._with_retries(call)
        except BackendError as error:
            cause = error.__cause__
            if isinstance(cause, self._errors.APIStatusError) and cause.status_code in REFUSALS:
                raise self._unsupported(f"refused the request ({describe(cause)})") from error
            raise
        usage = response.usage
        with self._usage_lock:
            self.usage.prompt_tokens += getattr(usage, "prompt_tokens", None) or 0
            self.usage.completion_tokens += getattr(usage, "completion_tokens", None) or 0
        choice = response.choices[0]
        found = choice.logprobs
        if found is None or found.tokens is None or found.token_logprobs is None:
            raise self._unsupported("sent no log-probs")
        tops = found.top_logprobs or [None] * len(found.tokens)
        tokens = [Scored(t, lp, top) for t, lp, top in zip(found.tokens, found.token_logprobs, tops)]
        return choice.text or "", tokens, getattr(usage, "completion_tokens", None)

    def _unsupported(self, what: str) -> BackendError:
        return BackendError(
            f"{self.setting} needs a server whose /completions endpoint returns token log-probs "
            f"(echo, logprobs), but {self.endpoint} {what}; set backbone.prompt_logprobs=none "
            "to score with the verbalized fallback instead"
        )

    def _misread(self, what: str) -> BackendError:
        return BackendError(f"{self.setting}: cannot read scores from {self.endpoint}: {what}")
