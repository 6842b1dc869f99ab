"""retriever.index=ann: the HNSW graph (ms.retrieval.ann) agrees with exact search, stays out of
small scopes, follows the pool's snapshots (another process's writes, rows that stop being
searchable, a retrained encoder) and never crosses scopes. Vectors are structured (a Gaussian
mixture in a low-dimensional subspace, as benchmarks/ann_vectors.py explains), since on uniform
random vectors every neighbour is about as near as any other and recall means nothing."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch
from conftest import REPO

from ms.pool import Pool
from ms.retrieval.dense import DenseRetriever

pytest.importorskip("faiss")  # the `test` extra installs it; ms itself runs without it

DIM, K = 64, 10


def structured(n: int, seed: int) -> np.ndarray:
    """Unit vectors from a 12-cluster Gaussian mixture in an 8-dimensional subspace, plus a little
    noise; the mixture's shape is fixed, `seed` draws the points."""
    shape, draw = np.random.default_rng(99), np.random.default_rng(seed)
    basis, centres = np.linalg.qr(shape.standard_normal((DIM, 8)))[0], shape.standard_normal((12, 8))
    z = centres[draw.integers(0, 12, n)] + 0.8 * draw.standard_normal((n, 8))
    x = z @ basis.T + 0.05 * draw.standard_normal((n, DIM))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


class TableEncoder(torch.nn.Module):
    """Maps the memory text "m<i>\\n..." to row i of `table`: memory vectors chosen by the test.
    Setting `table` again is what retraining the encoder does to every vector."""

    def __init__(self, table: np.ndarray):
        super().__init__()
        self.table = table

    def encode(self, texts, batch_size: int = 64):
        rows = [int(t.split("\n", 1)[0][1:]) for t in texts]
        return torch.from_numpy(self.table[rows])


def items(rows, scope: str = "s") -> list[dict]:
    return [
        {"scope": scope, "agent": "a", "domain": "d", "question": f"m{i}", "answer": "x", "origin": "seed"}
        for i in rows
    ]


def row_of(memory) -> int:
    return int(memory.question[1:])


def recall(found: list[list], truth: list[list]) -> float:
    return float(np.mean([len({row_of(m) for m in f} & {row_of(m) for m in t}) / K for f, t in zip(found, truth)]))


@pytest.fixture
def pool(tmp_path):
    with Pool(tmp_path / "pool.sqlite") as opened:
        yield opened


def test_ann_top10_matches_exact_on_structured_vectors(pool, monkeypatch):
    table = structured(10_000, seed=0)
    pool.add(items(range(len(table))), step=0)
    queries = torch.from_numpy(structured(100, seed=1))
    exact = DenseRetriever(pool, TableEncoder(table)).search(queries, "s", K)
    ann = DenseRetriever(pool, TableEncoder(table), index="ann", ann_min_size=1000)
    # Were the exact path taken after all, this would fail: the ANN path has no full matrix product.
    monkeypatch.setattr(DenseRetriever, "_cosines", lambda *a: pytest.fail("exact search in an ANN scope"))
    found = ann.search(queries, "s", K)
    assert ann.graph("s") is not None and len(ann.graph("s")) == len(table)
    assert ann.graph("s").nbytes() > table.nbytes  # its own copy of the vectors, and the links
    assert recall(found, exact) >= 0.95
    # Each list is best first by the exact cosine, as the exact path orders it.
    for query, row in zip(queries, found):
        cosines = [float(torch.from_numpy(table[row_of(m)]) @ query) for m in row]
        assert all(a >= b - 1e-6 for a, b in zip(cosines, cosines[1:]))


def test_a_scope_below_the_threshold_is_searched_exactly(pool, monkeypatch):
    table = structured(3001, seed=0)
    pool.add(items(range(2000)), step=0)
    queries = torch.from_numpy(structured(20, seed=1))
    ann = DenseRetriever(pool, TableEncoder(table), index="ann", ann_min_size=2500)
    exact = DenseRetriever(pool, TableEncoder(table))
    assert ann.search(queries, "s", K) == exact.search(queries, "s", K)  # exactly: same memories, same order
    assert ann.graph("s") is None and ann.index("s").graph is None  # no graph was even made
    # Memory 0, encoded by the exact searches, leaves long-term memory before the graph exists.
    first = pool.memories("s")[0]
    pool.set_fields(first.id, tier="short")
    pool.add(items(range(2000, 3001)), step=1)  # the scope passes the threshold
    monkeypatch.setattr(DenseRetriever, "_cosines", lambda *a: pytest.fail("exact search in an ANN scope"))
    ann.search(queries, "s", K)
    assert len(ann.graph("s")) == 3000  # the graph holds searchable memories only
    pool.set_fields(first.id, tier="long")  # back, with the vector it already had: no new encoding
    assert ann.search(torch.from_numpy(table[:1]), "s", 1)[0][0].id == first.id


def test_another_writers_rows_appear_in_the_next_ann_search(pool, tmp_path):
    base, queries = structured(4000, seed=0), structured(5, seed=1)
    table = np.concatenate([base, queries])  # rows 4000.. are the queries themselves: each its own top hit
    pool.add(items(range(4000)), step=0)
    ann = DenseRetriever(pool, TableEncoder(table), index="ann", ann_min_size=1000)
    asked = torch.from_numpy(queries)
    assert all(row_of(found[0]) < 4000 for found in ann.search(asked, "s", K))
    graph = ann.graph("s")
    script = textwrap.dedent(f"""
        from ms.pool import Pool
        with Pool({str(tmp_path / "pool.sqlite")!r}) as pool:
            pool.add({items(range(4000, 4005))!r}, step=1)
    """)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert [row_of(found[0]) for found in ann.search(asked, "s", K)] == list(range(4000, 4005))
    assert ann.graph("s") is graph and graph.builds == 1 and graph.added == 4005  # added, not rebuilt


def test_ann_never_returns_another_scope_or_an_unsearchable_memory(pool):
    table = structured(6000, seed=0)
    # Two scopes drawn from one mixture, interleaved, so a graph shared by both would mix them.
    pool.add(items(range(0, 6000, 2), "a") + items(range(1, 6000, 2), "b"), step=0)
    queries = torch.from_numpy(structured(50, seed=1))
    ann = DenseRetriever(pool, TableEncoder(table), index="ann", ann_min_size=1000)
    exact = DenseRetriever(pool, TableEncoder(table))
    for scope, parity in (("a", 0), ("b", 1)):
        found = ann.search(queries, scope, K)
        assert all(len(row) == K and all(row_of(m) % 2 == parity for m in row) for row in found)
        assert recall(found, exact.search(queries, scope, K)) >= 0.95  # and searched with its own vectors
    # Fold the current top 3 of every query into summaries, or delete them: none may come back.
    gone = {m.id for row in ann.search(queries, "a", 3) for m in row}
    for i, memory_id in enumerate(sorted(gone)):
        pool.set_fields(memory_id, **({"consolidated": True} if i % 2 else {"tier": "short"}))
    found = ann.search(queries, "a", K)
    assert all(len(row) == K for row in found) and not gone & {m.id for row in found for m in row}
    assert recall(found, exact.search(queries, "a", K)) >= 0.95
    back = sorted(gone)[0]  # tier short -> long: searchable again, and found again
    pool.set_fields(back, tier="long")
    hit = torch.from_numpy(table[row_of(pool.get([back])[0])])[None]
    assert ann.search(hit, "a", 1)[0][0].id == back


def test_a_walk_that_comes_back_short_is_searched_exactly(pool, monkeypatch):
    from ms.retrieval.ann import ScopeGraph

    table = structured(3000, seed=0)
    pool.add(items(range(len(table))), step=0)
    queries = torch.from_numpy(structured(10, seed=1))
    ann = DenseRetriever(pool, TableEncoder(table), index="ann", ann_min_size=1000)
    walk = ScopeGraph.search
    # As a walk through a mostly filtered graph can: fewer than asked, here 3 of 10.
    monkeypatch.setattr(
        ScopeGraph,
        "search",
        lambda self, queries, take, visible=None: [r[:3] for r in walk(self, queries, take, visible)],
    )
    assert ann.search(queries, "s", K) == DenseRetriever(pool, TableEncoder(table)).search(queries, "s", K)
    assert ann.ann_fallbacks == len(queries)


def test_a_retrained_encoder_rebuilds_the_graph(pool):
    table = structured(4000, seed=0)
    pool.add(items(range(len(table))), step=0)
    encoder = TableEncoder(table)
    ann = DenseRetriever(pool, encoder, refresh="full", index="ann", ann_min_size=1000)
    queries = torch.from_numpy(structured(50, seed=1))
    ann.search(queries, "s", K)
    first = ann.graph("s")
    # Training moves every vector: memory i now embeds where memory perm[i] did, so neighbourhoods
    # in the old graph say nothing about the new vectors.
    encoder.table = table[np.random.default_rng(2).permutation(len(table))]
    ann.encoder_changed()
    found = ann.search(queries, "s", K)
    assert ann.graph("s").builds == first.builds == 2
    assert recall(found, DenseRetriever(pool, TableEncoder(encoder.table)).search(queries, "s", K)) >= 0.95


def test_without_faiss_index_ann_is_one_line_user_error(pool, monkeypatch):
    from conftest import compose_config

    from ms.common.errors import UserError
    from ms.loop.validation import problems
    from ms.retrieval import ann, build_retriever
    from ms.retrieval.settings import DenseSettings

    monkeypatch.setitem(sys.modules, "faiss", None)  # what an import of a missing module meets
    monkeypatch.setattr(ann.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(UserError) as raised:
        build_retriever(DenseSettings(index="ann"), pool)
    assert "\n" not in str(raised.value) and "pip install 'ms[ann]'" in str(raised.value)
    # ms-run says so before it opens anything; with index=exact faiss is never asked for.
    assert [line for line in problems(compose_config(["retriever.index=ann"])) if "faiss" in line] == [
        f"invalid setting retriever.index=ann: {ann.NO_FAISS}"
    ]
    assert not problems(compose_config([]))


def test_the_config_offers_exact_and_ann():
    from conftest import compose_config

    from ms.loop.validation import problems

    cfg = compose_config(["retriever.index=ann", "retriever.ann_min_size=100", "retriever.ann_ef=32"])
    assert (cfg.retriever.index, cfg.retriever.ann_min_size, cfg.retriever.ann_ef) == ("ann", 100, 32)
    assert compose_config([]).retriever.index == "exact"
    bad = compose_config(["retriever.index=hnsw", "retriever.ann_min_size=0", "retriever.ann_ef=0"])
    named = {line.split("=")[0].split()[-1] for line in problems(bad)}  # "invalid setting KEY=VALUE: why"
    assert {"retriever.index", "retriever.ann_min_size", "retriever.ann_ef"} <= named
