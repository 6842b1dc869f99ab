"""Memory policies: how admitted pairs enter the pool and how retrieval sees them.

`plain`: a pair goes straight into long-term memory, searched by the configured retriever.

`stm_ltm` (MORGAN / Lyfe Agents style): a pair first enters its agent's small short-term store,
with an importance in [0, 1]. Each store is consolidated once it holds `capacity` items or its
oldest item has waited `interval` steps: similar items are summarized by the LLM into one long-term
memory (the originals are kept, marked consolidated, and stay readable by id), the rest move to
long-term memory unchanged. Retrieval adds to the long-term results the short-term items that are
similar enough to the query, or important enough to be pulled in anyway; a reader's access rule
(ms.pool.access) applies to both. What the policy asks the model, and how it reads the replies, is in
ms.retrieval.memory_prompts.
"""

import logging
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from ms.config.fields import require
from ms.config.parts import POLICIES
from ms.config.schema import MemoryConfig
from ms.llm.base import LM
from ms.pool import Memory, Pool
from ms.pool.access import Reader
from ms.retrieval.base import Retriever, memory_text
from ms.retrieval.encoder import Encoder
from ms.retrieval.memory_prompts import IMPORTANCE_PROMPT, parse_importance, parse_summary, summary_prompt
from ms.retrieval.settings import StmLtmConfig, StmLtmSettings

log = logging.getLogger(__name__)


@dataclass
class Consolidation:
    """What one `maybe_consolidate` call did, by memory id."""

    summaries: list[int] = field(default_factory=list)  # new long-term summary memories
    summarized: list[int] = field(default_factory=list)  # originals folded into a summary
    moved: list[int] = field(default_factory=list)  # moved to long-term memory unchanged
    deferred: list[int] = field(default_factory=list)  # left short-term because the LLM call failed


# ---- policies --------------------------------------------------------------------------------


class PlainPolicy:
    """Admitted pairs go straight to long-term memory; nothing to consolidate."""

    uses_encoder = False  # whether it runs an encoder of its own (the run's provenance records it)
    # whether maybe_consolidate can do anything: plan mode counts its summary calls (ms.loop.schedule)
    consolidates = False

    def __init__(self, pool: Pool):
        self.pool = pool

    @classmethod
    def build(cls, cfg: MemoryConfig, pool: Pool, lm: LM, encoder: Callable[[], Encoder]) -> "PlainPolicy":
        return cls(pool)

    def admit(self, items: list[dict[str, Any]], step: int) -> list[int | None]:
        return self.pool.add(items, step)

    def maybe_consolidate(self, step: int) -> Consolidation:
        return Consolidation()

    def wrap(self, retriever: Retriever) -> Retriever:
        return retriever


class StmLtmPolicy:
    """`encoder` measures similarity for short-term retrieval and for grouping. Keep it frozen: the
    thresholds are cosines of that encoder and lose their meaning if its weights move."""

    uses_encoder = True
    consolidates = True

    def __init__(self, pool: Pool, lm: LM, encoder: Encoder, cfg: StmLtmConfig | None = None):
        self.cfg = cfg = cfg or StmLtmConfig()
        require(cfg, StmLtmConfig, "memory.stm_ltm")
        self.pool, self.lm, self.encoder = pool, lm, encoder

    @classmethod
    def build(cls, cfg: StmLtmSettings, pool: Pool, lm: LM, encoder: Callable[[], Encoder]) -> "StmLtmPolicy":
        return cls(pool, lm, encoder(), cfg.stm_ltm)

    # ---- admission ---------------------------------------------------------------------------

    def admit(self, items: list[dict[str, Any]], step: int) -> list[int | None]:
        """Add `items` (as for Pool.add) to their agents' short-term stores, each with an importance:
        the one given, else the rubric score / 100, else the LLM's rating."""
        items = [dict(item, tier="short") for item in items]
        for item in items:
            if item.get("importance") is None and item.get("score") is not None:
                item["importance"] = float(item["score"]) / 100.0
        unrated = [item for item in items if item.get("importance") is None]
        for item, value in zip(unrated, self.rate(unrated)):
            item["importance"] = value
        return self.pool.add(items, step)

    def rate(self, items: Sequence[dict[str, Any]]) -> list[float]:
        """LLM importance of each (question, answer) item, in [0, 1]."""
        if not items:
            return []
        prompts = [IMPORTANCE_PROMPT.format(question=i["question"], answer=i["answer"]) for i in items]
        try:
            with self.lm.acting_as("importance"):
                replies = self.lm.generate(prompts, max_new_tokens=self.cfg.importance_tokens, temperature=0.0)
        except Exception as error:  # a rating is not worth losing the memory over
            log.warning(
                "importance rating failed (%s); using %g for %d items", error, self.cfg.default_importance, len(items)
            )
            return [self.cfg.default_importance] * len(items)
        values = [parse_importance(r) for r in replies]
        return [self.cfg.default_importance if v is None else v for v in values]

    # ---- consolidation -----------------------------------------------------------------------

    def due(self, step: int) -> dict[tuple[str, str], list[Memory]]:
        """The short-term stores, by (scope, agent), that are full or whose oldest item has waited
        `interval` steps. Read from the pool, so a failed consolidation is simply due again."""
        stores: dict[tuple[str, str], list[Memory]] = {}
        for scope in self.pool.scopes():
            # A retired item leaves its store: summarized, its content would come back in the summary.
            for m in self.pool.memories(scope, tier="short", include_consolidated=False, include_retired=False):
                stores.setdefault((scope, m.agent), []).append(m)
        return {
            key: items
            for key, items in stores.items()
            if len(items) >= self.cfg.capacity or step - min(m.added_step for m in items) >= self.cfg.interval
        }

    def group(self, items: Sequence[Memory]) -> list[list[Memory]]:
        """Greedy complete-linkage groups: an item joins the first group it is similar to in full,
        so a group never chains together items that are unlike each other."""
        if len(items) < 2:
            return [list(items)]
        embeddings = self.encoder.encode([memory_text(m) for m in items])
        similar = (embeddings @ embeddings.T) >= self.cfg.group_similarity
        groups: list[list[int]] = []
        for i in range(len(items)):
            home = next((g for g in groups if all(similar[i, j] for j in g)), None)
            if home is None:
                groups.append([i])
            else:
                home.append(i)
        return [[items[i] for i in g] for g in groups]

    def consolidation_groups(self, items: Sequence[Memory]) -> list[list[Memory]]:
        """The groups a due store is consolidated in. With `keep_above`, an item that has shown its
        worth as an example stays one item, so it moves to long-term memory as it is; the rest are
        grouped lowest measured utility first, unmeasured last."""
        limit = self.cfg.keep_above
        if limit is None:
            return self.group(items)
        kept = [m for m in items if m.utility is not None and m.utility > limit]
        rest = sorted((m for m in items if m not in kept), key=lambda m: (m.utility is None, m.utility or 0.0))
        return [[m] for m in kept] + (self.group(rest) if rest else [])

    def maybe_consolidate(self, step: int) -> Consolidation:
        done = Consolidation()
        due = self.due(step)
        groups = [(scope, agent, g) for (scope, agent), items in due.items() for g in self.consolidation_groups(items)]
        to_summarize = [(scope, agent, g) for scope, agent, g in groups if len(g) > 1]
        try:
            with self.lm.acting_as("summarize"):
                prompts = [summary_prompt(agent, g) for _, agent, g in to_summarize]
                most = self.cfg.summary_tokens
                replies = self.lm.generate(prompts, max_new_tokens=most, temperature=0.0) if prompts else []
        except Exception as error:
            # Nothing has changed yet, so the stores stay as they are and are due again next step.
            done.deferred = [m.id for items in due.values() for m in items]
            log.warning(
                "consolidation deferred: summary call failed (%s); %d short-term items wait for the next step",
                error,
                len(done.deferred),
            )
            return done
        for (scope, agent, group), reply in zip(to_summarize, replies):
            summary_id = self._store_summary(scope, agent, group, reply, step)
            if summary_id is None:
                self._move(group, done)
                continue
            for m in group:
                self.pool.set_fields(m.id, tier="long", consolidated=True)
            done.summaries.append(summary_id)
            done.summarized += [m.id for m in group]
        for _, _, group in groups:
            if len(group) == 1:
                self._move(group, done)
        return done

    def _store_summary(self, scope: str, agent: str, group: list[Memory], reply: str, step: int) -> int | None:
        """Add the summary of `group` as one long-term memory; None when the reply is unusable or the
        same pair is already in the scope (the group then moves to long-term memory unchanged)."""
        importance = [m.importance_or(self.cfg.default_importance) for m in group]
        lead = group[importance.index(max(importance))]
        parsed = parse_summary(reply, fallback_question=lead.question)
        if parsed is None:
            log.warning(
                "summary of %d %s items had no answer; moving them to long-term memory as they are", len(group), agent
            )
            return None
        question, answer = parsed
        # A summary stands for all its sources, so it is as important as the most important of them.
        [summary_id] = self.pool.add(
            [
                {
                    "scope": scope,
                    "agent": agent,
                    "domain": lead.domain,
                    "question": question,
                    "answer": answer,
                    "origin": "summary",
                    "importance": max(importance),
                    "tier": "long",
                    "sources": [m.id for m in group],
                    "backbone": self.lm.name,  # the summarizer wrote it
                }
            ],
            step,
        )
        return summary_id

    def _move(self, group: list[Memory], done: Consolidation) -> None:
        for m in group:
            self.pool.set_fields(m.id, tier="long")
        done.moved += [m.id for m in group]

    # ---- retrieval ---------------------------------------------------------------------------

    def short_term(self, queries: Sequence[str], scope: str, reader: Reader | None = None) -> list[list[Memory]]:
        """Per query, the scope's short-term items that qualify, best first, of those `reader` may
        retrieve. An item qualifies by cosine >= threshold, or by importance > importance_override
        at any cosine; an item pulled in by importance ranks by its importance where that beats its
        cosine, so an urgent memory is not buried under merely similar ones."""
        items = [
            m
            for m in self.pool.memories(scope, tier="short", include_consolidated=False, include_retired=False)
            if reader is None or reader.allows(m)
        ]
        if not items:
            return [[] for _ in queries]
        cosines = self.encoder.encode(list(queries)) @ self.encoder.encode([memory_text(m) for m in items]).T
        importance = [m.importance_or(self.cfg.default_importance) for m in items]
        found = []
        for row in cosines.tolist():
            relevance = [max(c, imp) if imp > self.cfg.importance_override else c for c, imp in zip(row, importance)]
            keep = [
                i for i, c in enumerate(row) if c >= self.cfg.threshold or importance[i] > self.cfg.importance_override
            ]
            keep.sort(key=lambda i: -relevance[i])
            found.append([items[i] for i in keep])
        return found

    def wrap(self, retriever: Retriever) -> Retriever:
        return StmLtmRetriever(retriever, self)


class StmLtmRetriever(Retriever):
    """Short-term qualifiers first (the agent's working memory, in `StmLtmPolicy.short_term`'s
    order), then the inner retriever's long-term results, without repeats, cut to k."""

    def __init__(self, inner: Retriever, policy: StmLtmPolicy):
        super().__init__(inner.pool)
        self.inner, self.policy = inner, policy

    def state(self, scope: str) -> dict[str, int]:
        return self.inner.state(scope)

    def retrieve(
        self, query: str, scope: str, k: int, exclude: Sequence[int] = (), reader: Reader | None = None
    ) -> list[Memory]:
        if k <= 0:
            return []
        banned = set(exclude)
        short = [m for m in self.policy.short_term([query], scope, reader)[0] if m.id not in banned]
        return _merge(short, self.inner.retrieve(query, scope, k, exclude, reader), k)

    def retrieve_batch(
        self, queries: Sequence[str], scope: str, k: int, reader: Reader | None = None
    ) -> list[list[Memory]]:
        if k <= 0:
            return [[] for _ in queries]
        shorts = self.policy.short_term(queries, scope, reader)
        longs = self.inner.retrieve_batch(queries, scope, k, reader)
        return [_merge(short, long, k) for short, long in zip(shorts, longs)]


def _merge(short: list[Memory], long: list[Memory], k: int) -> list[Memory]:
    merged: dict[int, Memory] = {}
    for m in short + long:
        merged.setdefault(m.id, m)
    return list(merged.values())[:k]


def build_policy(cfg: MemoryConfig, pool: Pool, lm: LM, encoder: Callable[[], Encoder]) -> PlainPolicy | StmLtmPolicy:
    """The policy memory.policy names (ms.config.parts.POLICIES); `encoder` is called only when the
    policy needs one. An unknown name is a ValueError (UnknownPart) listing the choices."""
    return POLICIES.load(cfg.policy).build(cfg, pool, lm, encoder)
