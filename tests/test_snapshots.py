"""Scope snapshots: retrievers hold a scope in memory and catch up with the pool file by new ids and
the change log, so they see other processes' writes at once and agree with a full read."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch
from conftest import REPO

from ms.pool import Pool
from ms.retrieval.bm25 import BM25Retriever
from ms.retrieval.dense import DenseRetriever
from ms.retrieval.random import RandomRetriever

VOLCANO = ("What do volcanoes erupt?", "Molten rock called magma, which becomes lava at the surface.")


def data_items(scopes: tuple[str, ...] | None = None) -> list[dict]:
    """Every example of data/*.jsonl as a seed memory in its domain's scope."""
    items = []
    for path in sorted((REPO / "data").glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            if scopes is None or row["domain"] in scopes:
                items.append(
                    {
                        "scope": row["domain"],
                        "agent": row["agent"],
                        "domain": row["domain"],
                        "question": row["question"],
                        "answer": row["answer"],
                        "origin": "seed",
                    }
                )
    return items


def full_read(pool: Pool, scope: str):
    """What every search read before snapshots: the scope's searchable memories, from SQLite."""
    return pool.memories(scope, tier="long", include_consolidated=False)


def other_process(where, code: str) -> None:
    """Run `code` in a separate Python process with `pool` open on the same pool."""
    script = (
        f"from pool_backends import Where\npool = Where{(where.backend, where.target)!r}.open()\n"
        + textwrap.dedent(code)
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "tests")])}
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.fixture(scope="module")
def encoder():
    from ms.retrieval.encoder import Encoder

    return Encoder()


@pytest.fixture
def logic_pool(tmp_path):
    """A quarter of the logic domain's examples: enough for rankings to mean something, few enough
    to encode quickly on a CPU."""
    with Pool(tmp_path / "pool.sqlite") as pool:
        pool.add(data_items(("logic",))[::4], step=0)
        yield pool


def test_a_second_process_adds_and_the_first_retrieves_it_at_once(where, encoder):
    logic_pool = where.open()
    logic_pool.add(data_items(("logic",))[::4], step=0)
    dense, bm25 = DenseRetriever(logic_pool, encoder), BM25Retriever(logic_pool)
    for retriever in (dense, bm25):  # both hold the scope in memory before the other process writes
        assert retriever.retrieve(VOLCANO[0], "logic", 1)[0].question != VOLCANO[0]
    encoded = dense.encoded
    other_process(
        where,
        f"""
        pool.add([{{"scope": "logic", "agent": "riddle", "domain": "logic", "question": {VOLCANO[0]!r},
                    "answer": {VOLCANO[1]!r}, "origin": "stream"}}], step=1)
    """,
    )
    for retriever in (dense, bm25):
        assert retriever.retrieve(VOLCANO[0], "logic", 1)[0].question == VOLCANO[0]
    assert dense.encoded == encoded + 1  # the new memory alone was encoded

    # The other process's updates and deletes reach the snapshot too.
    volcano_id = logic_pool.version("logic")
    other_process(where, f"pool.set_fields({volcano_id}, consolidated=True)")
    for retriever in (dense, bm25):
        assert volcano_id not in [m.id for m in retriever.retrieve(VOLCANO[0], "logic", 3)]
    other_process(where, f"pool.set_fields({volcano_id}, consolidated=False)")
    assert dense.retrieve(VOLCANO[0], "logic", 1)[0].id == volcano_id
    other_process(
        where,
        f"""
        with pool._db.write() as db:
            db.run("DELETE FROM memories WHERE id = ?", ({volcano_id},))
    """,
    )
    for retriever in (dense, bm25):
        assert volcano_id not in [m.id for m in retriever.retrieve(VOLCANO[0], "logic", 3)]
    assert dense.encoded == encoded + 1  # none of this re-encoded anything
    logic_pool.close()


def test_snapshot_equals_a_full_read_through_every_kind_of_write(where):
    with where.open() as pool, where.open() as writer:  # two connections, as two processes would have
        writer.add(data_items(), step=0)
        random = RandomRetriever(pool)
        scopes = pool.scopes()

        def agree():
            for scope in scopes:
                assert random.searchable(scope) == full_read(pool, scope), scope

        agree()
        ids = writer.ids("plan")
        writer.set_fields(ids[0], tier="short")
        writer.set_fields(ids[1], consolidated=True)
        writer.set_fields(ids[2], importance=0.9)
        writer.mark_retrieved(ids[3:10], step=4)
        writer.add(
            [
                {
                    "scope": "plan",
                    "agent": "travel",
                    "domain": "plan",
                    "question": "Pack for Oslo?",
                    "answer": "Layers and a rain jacket.",
                    "origin": "stream",
                    "tier": "short",
                }
            ],
            step=5,
        )
        agree()
        writer.set_fields(writer.version("plan"), tier="long")
        with writer._db.write() as db:
            db.run("DELETE FROM memories WHERE id = ?", (ids[4],))
        pool.mark_retrieved(ids[20:25], step=6)  # the snapshot's own connection writes too
        agree()


def test_dense_search_on_snapshots_equals_the_full_read_search(logic_pool, encoder):
    dense = DenseRetriever(logic_pool, encoder)
    queries = [row["question"] for row in data_items(("logic",))[1::16]] + ["a joke about bread"]

    # The retriever before snapshots: vectors cached by memory id, and a full read of the scope
    # stacked into a matrix for every search.
    first = full_read(logic_pool, "logic")
    cache = dict(zip((m.id for m in first), encoder.encode([f"{m.question}\n{m.answer}" for m in first])))

    def reference(k: int) -> list[list[int]]:
        memories = full_read(logic_pool, "logic")
        vectors = torch.stack([cache[m.id] for m in memories])
        top = (encoder.encode(queries) @ vectors.T).topk(k, dim=-1).indices.tolist()
        return [[memories[i].id for i in row] for row in top]

    def ids(found) -> list[list[int]]:
        return [[m.id for m in row] for row in found]

    assert ids(dense.retrieve_batch(queries, "logic", 5)) == reference(5)
    memories, cosines = dense.similarities(queries, "logic")
    assert [m.id for m in memories] == [m.id for m in full_read(logic_pool, "logic")]
    assert cosines.shape == (len(queries), len(memories))
    # Memories leave the searchable set (consolidated, moved to short-term) without any re-encoding.
    encoded = dense.encoded
    for memory_id in ids(dense.retrieve_batch(queries, "logic", 2))[0]:
        logic_pool.set_fields(memory_id, consolidated=True)
    logic_pool.set_fields(logic_pool.ids("logic")[7], tier="short")
    assert ids(dense.retrieve_batch(queries, "logic", 5)) == reference(5)
    assert dense.encoded == encoded


def test_query_vectors_are_encoded_once_per_encoder_version(logic_pool, encoder):
    dense = DenseRetriever(logic_pool, encoder)
    questions = ["What has keys but opens no locks?", "Why did the bread rise?"]
    calls = []
    original = encoder.encode

    def counting(texts, *args, **kwargs):
        calls.append(list(texts))
        return original(texts, *args, **kwargs)

    encoder.encode = counting
    try:
        dense.retrieve_batch(questions, "logic", 3)  # the scope's memories, then the two questions
        before = len(calls)
        for _ in range(4):  # the same test questions at four more fills
            dense.retrieve_batch(questions, "logic", 3)
        assert len(calls) == before
        first = dense.query_vectors(questions)
        dense.encoder_changed()
        dense.retrieve_batch(questions, "logic", 3)
        assert questions in calls[before:]  # a new version encodes them again
        assert torch.allclose(first, dense.query_vectors(questions), atol=1e-5)  # same weights here
    finally:
        del encoder.encode


def test_a_search_between_writes_reads_nothing_but_the_change_token(where, monkeypatch):
    from ms.retrieval.snapshot import snapshot

    with where.open() as pool, where.open() as writer:
        writer.add(data_items(("logic",))[:20], step=0)
        reads = []
        changes = pool.changes
        pool.changes = lambda *args: reads.append(args) or changes(*args)
        snapshot(pool, "logic")
        assert len(reads) == 1
        statements = []
        if where.backend == "postgres":  # SQLite's token is read from the open file, with no statement
            from ms.pool.postgres_backend import PostgresSession

            execute = PostgresSession._execute
            monkeypatch.setattr(PostgresSession, "_execute", lambda self, *a: statements.append(a) or execute(self, *a))
        for _ in range(5):  # no write in between: only the token is read, one statement each
            snapshot(pool, "logic")
        assert len(reads) == 1 and len(statements) == (5 if where.backend == "postgres" else 0)
        monkeypatch.undo()
        writer.set_fields(writer.ids("logic")[0], tier="short")  # another connection's write is seen next time
        assert len(snapshot(pool, "logic").searchable_memories()) == 19 and len(reads) == 2
