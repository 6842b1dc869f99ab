"""The incremental BM25 index against rank-bm25, the reference it replaces for mining and the
bm25 baseline, on the test data (data/*.jsonl), through adds, consolidation and deletion."""

from __future__ import annotations

import numpy as np
import pytest
from test_snapshots import data_items

from ms.pool import Pool
from ms.retrieval.base import tokenize
from ms.retrieval.bm25 import BM25Retriever, InvertedIndex, RankBM25Retriever, top_positions


def ranked_ids(retriever, query: str, scope: str, exclude=()) -> list[int]:
    return [m.id for m in retriever.retrieve(query, scope, 10, exclude=exclude)]


@pytest.fixture
def pool(tmp_path):
    with Pool(tmp_path / "pool.sqlite") as p:
        yield p


def test_incremental_bm25_agrees_with_rank_bm25_on_the_test_data(pool):
    pool.add(data_items(), step=0)
    fast, reference = BM25Retriever(pool), RankBM25Retriever(pool)
    for scope in pool.scopes():
        for memory in pool.memories(scope):
            # How memory train mines: the new pair's question, never the pair itself.
            assert ranked_ids(fast, memory.question, scope, [memory.id]) == ranked_ids(
                reference, memory.question, scope, [memory.id]
            ), memory.question
        for memory in pool.memories(scope)[::8]:  # long queries: whole answers
            assert ranked_ids(fast, memory.answer, scope) == ranked_ids(reference, memory.answer, scope)
        # Not just the same rankings: the same scores, to the last bit.
        query = pool.memories(scope)[0].question
        snap, index = fast.index(scope)
        memories, expected = reference.scores(query, scope)
        assert np.array_equal(index.scores(tokenize(query))[[snap.positions[m.id] for m in memories]], expected)


def test_incremental_bm25_follows_adds_and_removals_without_rebuilding(pool, monkeypatch):
    items = data_items(("literary",))  # limericks, sonnets and Chinese poems (CJK tokens)
    fast, reference = BM25Retriever(pool), RankBM25Retriever(pool)
    queries = [items[i]["question"] for i in (3, 70, 150)] + ["a cat in the rain", "月 山"]
    tokenized = []  # positions, each time a memory's tokens go into the index
    activate = InvertedIndex.activate
    monkeypatch.setattr(
        InvertedIndex,
        "activate",
        lambda index, position, terms=None: (
            terms is None or tokenized.append(position),
            activate(index, position, terms),
        ),
    )

    def agree():
        for query in queries:
            assert ranked_ids(fast, query, "literary") == ranked_ids(reference, query, "literary"), query

    for start in range(0, 60, 6):  # the pool grows a few memories at a time
        pool.add(items[start : start + 6], step=start)
        agree()
    assert tokenized == list(range(60))  # each memory indexed once, when it came: no rebuilds
    ids = pool.ids("literary")
    pool.set_fields(ids[2], consolidated=True)  # folded into a summary: leaves the statistics
    pool.set_fields(ids[5], tier="short")
    pool.add(items[60:63], step=61)
    agree()
    pool.set_fields(ids[5], tier="long")  # back in, from the postings it kept
    with pool._db.write() as db:  # a removal no ms code makes: another writer's, seen through the change log
        db.run("DELETE FROM memories WHERE id = ?", (ids[9],))
    agree()
    assert tokenized == list(range(63))  # the memory that came back kept its postings


def test_equal_scores_keep_pool_order_as_a_stable_sort_does():
    scores = np.array([1.0, 3.0, 3.0, 0.0, 3.0, -np.inf, 2.0])
    assert top_positions(scores, 2).tolist() == [1, 2]
    assert top_positions(scores, 4).tolist() == [1, 2, 4, 6]
    assert top_positions(scores, 10).tolist() == [1, 2, 4, 6, 0, 3]  # never a position scored -inf
    assert top_positions(np.full(3, -np.inf), 2).tolist() == []
