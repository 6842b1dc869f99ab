"""The one interface every backbone implements: batched `generate` and `loglikelihood`.

Subclasses implement `_generate` and, where the backend can score given text, `_loglikelihood`.
This class adds what every provider needs once: the response cache and per-run accounting, kept
per role (what the call was for: see ROLES), so a run can say what each part of the loop cost.

What a backend needs besides the interface lives beside it: its errors (ms.llm.errors), prompts and chats
(ms.llm.messages), the counters per role (ms.llm.accounting) and the engines' packages (ms.llm.engine_packages).
"""

import time
from abc import ABC, abstractmethod
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Sequence

from ms.llm.accounting import OTHER, ROLES, Usage
from ms.llm.cache import ResponseCache, request_key
from ms.llm.errors import BackendError, LoglikelihoodUnsupported
from ms.llm.messages import PAIR_MARKER, Message, Prompt, as_messages, joined_contents, templated  # noqa: F401 (templated: re-exported)
from ms.llm.sampling import sample_params, sample_seed


def cache_key(kind: str, provider: str, model: str, params: dict[str, Any], request: Any) -> str:
    """The response-cache key of one request: what `_cached` looks up, and what plan mode probes."""
    return request_key({"kind": kind, "provider": provider, "model": model, "params": params, "request": request})


def generate_params(max_new_tokens: int, temperature: float, stop: Sequence[str]) -> dict[str, Any]:
    return {"max_new_tokens": max_new_tokens, "temperature": temperature, "stop": list(stop)}


class LM(ABC):
    provider: str = "?"
    scores_text: bool = False  # whether `loglikelihood` works (token log-probs of given text)
    reads_probabilities: bool = False  # whether `option_probabilities` works (next-token distributions)
    runs_locally: bool = False  # whether the model runs in this process (its time is this machine's)

    def __init__(
        self,
        model: str,
        cache: ResponseCache | None = None,
        max_new_tokens: int = 128,
        temperature: float = 0.0,
        stop: Sequence[str] = (),
    ):
        self.model = model
        self.cache = cache
        self.name = model  # the backbone config's name, set by build_lm
        self.price = None  # the backbone config's price (per million tokens), set by build_lm
        self.usage_by_role: dict[str, Usage] = {}
        self.role = OTHER
        self.defaults = {"max_new_tokens": max_new_tokens, "temperature": temperature, "stop": list(stop)}
        self._advance: Callable[[int], None] = lambda n: None  # see `reporting`
        self._reported = 0  # requests of the current backend call that `_answered` reported

    # ---- accounting -------------------------------------------------------------------------

    @property
    def usage(self) -> Usage:
        """The current role's counters: providers add to `self.usage` and need not know roles."""
        return self.usage_by_role.setdefault(self.role, Usage())

    @contextmanager
    def acting_as(self, role: str) -> Iterator["LM"]:
        """Count the calls made inside the block under `role` (roles nest: the inner one counts)."""
        if role not in ROLES:
            raise ValueError(f"unknown LM role '{role}'; the roles are: {', '.join(ROLES)}")
        outer, self.role = self.role, role
        try:
            yield self
        finally:
            self.role = outer

    @contextmanager
    def reporting(self, advance: Callable[[int], None]) -> Iterator["LM"]:
        """Inside the block, `advance(n)` is called as n requests are answered: cache hits at once,
        the rest batch by batch where the provider reports its batches (`_answered`), else when its
        call returns. A progress bar over one long call moves with the work."""
        outer, self._advance = self._advance, advance
        try:
            yield self
        finally:
            self._advance = outer

    def _answered(self, n: int) -> None:
        """For providers: n more requests of the current backend call are done."""
        self._reported += n
        self._advance(n)

    @property
    def cache_model(self) -> str:
        """The model as response-cache keys name it: two LMs share cached replies only where it is equal."""
        return self.model

    def _key_model(self, kind: str) -> str:
        """The model as the cache keys of `kind` calls name it (a provider may split by kind)."""
        return self.cache_model

    # ---- public API -------------------------------------------------------------------------

    def generate(
        self,
        prompts: Sequence[Prompt],
        *,
        max_new_tokens: int | None = None,
        temperature: float | None = None,
        stop: Sequence[str] | None = None,
    ) -> list[str]:
        params = generate_params(
            self.defaults["max_new_tokens"] if max_new_tokens is None else max_new_tokens,
            self.defaults["temperature"] if temperature is None else temperature,
            self.defaults["stop"] if stop is None else stop,
        )
        chats = [as_messages(p) for p in prompts]
        # Only greedy output is a function of the request, so only greedy output is cached.
        cacheable = self.cache is not None and params["temperature"] == 0
        return self._cached("generate", chats, params, cacheable, lambda todo: self._generate(todo, **params))

    def sample(
        self,
        prompts: Sequence[Prompt],
        n: int,
        *,
        temperature: float,
        seed: int,
        max_new_tokens: int | None = None,
        stop: Sequence[str] | None = None,
    ) -> list[list[str]]:
        """n replies to each prompt, sampled at `temperature` (> 0). Sample i of a prompt is drawn with its
        own random stream, seeded by (prompt, seed, i) (`sample_seed`), so it does not depend on the other
        requests of the call; and it is cached under (prompt, seed, i), so a resumed run, a control and a
        re-run on a warm cache see the same samples. All n x len(prompts) requests go as one backend call."""
        if temperature <= 0:
            raise ValueError(f"sampling needs a temperature above 0, got {temperature}")
        params = generate_params(
            self.defaults["max_new_tokens"] if max_new_tokens is None else max_new_tokens,
            temperature,
            self.defaults["stop"] if stop is None else stop,
        )
        chats = [as_messages(p) for p in prompts]
        requests = [(chat, i) for chat in chats for i in range(n)]
        keys = [
            cache_key("generate", self.provider, self._key_model("generate"), sample_params(params, seed, i), chat)
            for chat, i in requests
        ]
        replies = self._cached(
            "generate",
            requests,
            params,
            self.cache is not None,
            lambda todo: self._sample([c for c, _ in todo], [sample_seed(c, seed, i) for c, i in todo], **params),
            keys=keys,
        )
        return [replies[j * n : (j + 1) * n] for j in range(len(chats))]

    def loglikelihood(self, contexts: Sequence[str], continuations: Sequence[str]) -> list[tuple[float, int]]:
        """Teacher-forced (sum of log-probs, number of tokens) of each continuation given its context."""
        if len(contexts) != len(continuations):
            raise ValueError(f"{len(contexts)} contexts but {len(continuations)} continuations")
        pairs = [[c, x] for c, x in zip(contexts, continuations)]
        results = self._cached(
            "loglikelihood",
            pairs,
            {},
            self.cache is not None,
            lambda todo: self._loglikelihood([p[0] for p in todo], [p[1] for p in todo]),
        )
        return [(float(s), int(n)) for s, n in results]

    def option_probabilities(
        self, prompts: Sequence[Prompt], options: Sequence[str], shared_prefixes: Sequence[str] = ()
    ) -> list[list[float]]:
        """For each prompt, the probability that the model's reply begins with each option and
        with no longer option: P("8") excludes replies that go on to "85" when "85" is an option.
        Nothing is decoded; the options' probabilities sum to at most 1 (the rest of the mass is
        on replies that start with no option). `shared_prefixes`: texts that prompts' chat contexts
        begin with, whose work a backend may keep for later calls; a hint only, so the
        probabilities and the cache key are the same without it."""
        chats = [as_messages(p) for p in prompts]
        options, shared_prefixes = list(options), list(shared_prefixes)
        return self._cached(
            "options",
            chats,
            {"options": options},
            self.cache is not None,
            lambda todo: self._option_probabilities(todo, options, shared_prefixes),
        )

    def chat_context(self, prompt: Prompt) -> str:
        """The text the model sees before its answer to `prompt`, for scoring an answer with
        `loglikelihood`. Plain concatenation unless a provider knows its chat template."""
        return joined_contents(as_messages(prompt))

    @classmethod
    def context_renderer(cls, backbone) -> Callable[[Prompt], str]:
        """`chat_context` of this provider's LM for `backbone` (a BackboneConfig), without building
        it or loading any weights: plan mode renders scored requests with it to find them in the
        response cache. A provider with a chat template loads only its tokenizer."""
        return lambda prompt: joined_contents(as_messages(prompt))

    # ---- the provider as a registered part (ms.config.parts.PROVIDERS) -------------------------

    @classmethod
    def for_backbone(cls, backbone) -> type["LM"]:
        """The class that runs `backbone` (a BackboneConfig): a provider may pick a variant by a
        setting, whose capabilities (`scores_text`, ...) then stay readable from the class."""
        return cls

    @classmethod
    def build(cls, backbone, **common: Any) -> "LM":
        """The LM for `backbone`; `common`: cache, max_new_tokens, temperature and stop (ms.llm.build_lm)."""
        raise NotImplementedError(f"provider '{cls.provider}' does not say how it is built from a backbone config")

    @classmethod
    def cache_model_of(cls, backbone, kind: str) -> str:
        """The model as the response-cache keys of `kind` calls on `backbone` name it (`_key_model`),
        without building it: plan mode looks requests up with it."""
        return backbone.model

    @classmethod
    def local_weights(cls, backbone) -> tuple[str, str | None] | None:
        """(source, weight file) of a model whose weights lie on this machine, for the run's
        provenance; None for a model served elsewhere (or files not found)."""
        return None

    def chat_context_before(self, prompt: Prompt, marker: str = PAIR_MARKER) -> str:
        """The chat context up to the first `marker`: the text that every prompt differing from this
        one only where the markers stand begins with, however the chat template wraps it."""
        context = self.chat_context(prompt)
        return context[: context.index(marker)]

    # ---- provider hooks ---------------------------------------------------------------------

    @abstractmethod
    def _generate(
        self, chats: list[list[Message]], *, max_new_tokens: int, temperature: float, stop: list[str]
    ) -> list[str]: ...

    def _sample(
        self, chats: list[list[Message]], seeds: list[int], *, max_new_tokens: int, temperature: float, stop: list[str]
    ) -> list[str]:
        """One sampled reply per chat, drawn with its own seed. A provider that cannot seed its sampling
        (an API's) draws as `_generate` does: the same prompt may then get other samples from a fresh
        cache, though a warm one still replays the first."""
        return self._generate(chats, max_new_tokens=max_new_tokens, temperature=temperature, stop=stop)

    def _loglikelihood(self, contexts: list[str], continuations: list[str]) -> list[tuple[float, int]]:
        raise LoglikelihoodUnsupported(
            f"provider '{self.provider}' cannot score given text (no token log-probs); "
            "use the verbalized probability method instead"
        )

    def _option_probabilities(
        self, chats: list[list[Message]], options: list[str], shared_prefixes: Sequence[str] = ()
    ) -> list[list[float]]:
        raise BackendError(f"provider '{self.provider}' exposes no token probabilities; read replies as text")

    # ---- internals --------------------------------------------------------------------------

    def _cached(
        self, kind: str, requests: list[Any], params: dict[str, Any], cacheable: bool, compute, keys=None
    ) -> list[Any]:
        """`compute` the requests the cache does not hold (their `keys`, where given, else made from `params`
        and each request), and keep what it returns."""
        if keys is None:
            keys = [cache_key(kind, self.provider, self._key_model(kind), params, r) for r in requests]
        found = self.cache.get_many(keys) if cacheable else {}
        if cacheable:
            # A request repeated within one call is computed once; its repeats count as cache hits,
            # as they would in the next call (the utility gate's probes share their baseline prompts).
            first = {k: i for i, k in reversed(list(enumerate(keys))) if k not in found}
            todo = sorted(first.values())
        else:
            todo = [i for i, k in enumerate(keys) if k not in found]
        hits = len(keys) - len(todo)
        self.usage.cache_hits += hits
        self.usage.cache_misses += len(todo) if cacheable else 0
        if hits:
            self._advance(hits)
        if todo:
            started = time.perf_counter()
            self._reported = 0
            fresh = compute([requests[i] for i in todo])
            if unreported := len(todo) - self._reported:
                self._advance(unreported)
            self.usage.backend_seconds += time.perf_counter() - started
            self.usage.calls += len(todo)
            new = {keys[i]: value for i, value in zip(todo, fresh)}
            if cacheable:
                self.cache.put_many(new)
            found.update(new)
        return [found[k] for k in keys]
