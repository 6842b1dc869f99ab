"""The approximate index (retriever.index=ann) as the pool grows: `benchmarks/retrieval.py --index
ann` runs this, as does

    python benchmarks/retrieval_ann.py --sizes 10000,100000,1000000 --json OUT.json

Vectors have neighbourhood structure: a Gaussian mixture in a 32-dimensional subspace of the 384
dimensions, shaped after MiniLM's embeddings of the data's texts (benchmarks/ann_vectors.py says
which and why; on uniform random vectors recall@10 means nothing). Memory i's text is "m<i>", and
a stand-in encoder returns row i of those vectors, so a million memories need no MiniLM encoding.

Each size runs in a fresh process, on a new SQLite pool holding one scope. The pool is filled
with Pool.add in batches of 10,000 (not timed: the stream's own adds are timed below), then one
search encodes every memory (a table look-up here). Fields of the JSON object per size:
  build_s               the HNSW graph built over the whole scope at once (faiss's threads)
  graph_mb              what the graph holds (ScopeGraph.nbytes): its copy of the vectors, links, labels
  rss_build_mb          growth of the process's resident memory over that build
  add_per_s             --stream memories added as the stream adds them, Pool.add in batches of 32,
                        each followed by a search (snapshot catch-up, encoding, graph add, search)
  search_p50_ms, _p99   DenseRetriever.search of one query vector, k=10, at efSearch --ann-ef
  graph_search_p50_ms   the graph alone (ScopeGraph.search), the floor under that
  exact_search_p50_ms   the same retriever searching exactly, for comparison
  recall_at_10          of those searches against the exact top 10 over the scope's vectors
  frontier              per efSearch of --efs: search p50 / p99 and recall@10
  catchup_p50_ms, _p99  the first search after another process added 32 memories to the pool file,
                        timed from when the writer has exited: snapshot sync, encoding, graph add, search
  rebuilds, exact_fallbacks   graph rebuilds after the first build, searches redone exactly (both 0)
  rss_mb                resident memory of the size's process at the end
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from ann_vectors import CLUSTERS, LATENT, NOISE, SPREAD, exact_top, recall_at, structured_vectors
from timing import BATCH, REPO, SCOPE, K, percentile, timed_ms

FILL = 10_000  # memories per Pool.add while filling the pool, one transaction each
NOTE = (
    f"memory vectors: Gaussian mixture, {CLUSTERS} clusters in a {LATENT}-dim subspace of 384, spread "
    f"{SPREAD}, isotropic noise {NOISE}, normalized (benchmarks/ann_vectors.py); queries: fresh draws"
)


def row_items(rows) -> list[dict]:
    return [
        {"scope": SCOPE, "agent": "a", "domain": "d", "question": f"m{i}", "answer": "-", "origin": "seed"}
        for i in rows
    ]


def row_encoder(table: np.ndarray):
    """Stands in for MiniLM: memory text "m<i>\\n..." embeds as row i of `table`."""
    import torch

    class RowEncoder(torch.nn.Module):
        def encode(self, texts, batch_size: int = 64):
            return torch.from_numpy(table[[int(t.split("\n", 1)[0][1:]) for t in texts]])

    return RowEncoder()


def rss_mb() -> float:
    import psutil

    return psutil.Process().memory_info().rss / 2**20


def answered(dense, queries) -> tuple[list[float], np.ndarray]:
    """Per query, one timed DenseRetriever.search; and the rows found, [Q, K]."""
    times, found = [], []
    for query in queries:
        start = time.perf_counter()
        memories = dense.search(query[None], SCOPE, K)[0]
        times.append((time.perf_counter() - start) * 1000)
        found.append([int(m.question[1:]) for m in memories])
    return times, np.array(found)


def measure(size: int, args) -> dict:
    import torch

    from ms.pool import Pool
    from ms.retrieval.dense import DenseRetriever
    from ms.retrieval.settings import ANN_EF

    args.ann_ef = args.ann_ef or ANN_EF

    if args.threads:
        import faiss

        torch.set_num_threads(args.threads)
        faiss.omp_set_num_threads(args.threads)
    extra = args.stream + args.catchups * BATCH  # rows the stream and the other process add later
    table = structured_vectors(size + extra, seed=0)
    queries = torch.from_numpy(structured_vectors(args.queries, seed=1))
    out: dict = {"size": size, "index": "ann", "ann_ef": args.ann_ef}
    with tempfile.TemporaryDirectory() as folder, Pool(Path(folder) / "pool.sqlite") as pool:
        for start in range(0, size, FILL):
            pool.add(row_items(range(start, min(size, start + FILL))), step=0)
        dense = DenseRetriever(pool, row_encoder(table), index="ann", ann_min_size=1, ann_ef=args.ann_ef)
        dense.index(SCOPE)  # every memory encoded: what the build below starts from
        before, start = rss_mb(), time.perf_counter()
        graph = dense.graph(SCOPE)
        out["build_s"] = round(time.perf_counter() - start, 2)
        out["rss_build_mb"] = round(rss_mb() - before, 1)
        out["degree"], out["build_effort"] = graph.degree, graph.build_effort

        start = time.perf_counter()
        for at in range(size, size + args.stream, BATCH):
            pool.add(row_items(range(at, at + BATCH)), step=1)
            dense.search(queries[:1], SCOPE, K)
        out["add_per_s"] = round(args.stream / (time.perf_counter() - start), 1)
        out["graph_mb"] = round(graph.nbytes() / 2**20, 1)

        here = size + args.stream  # rows in the scope from now on
        truth = exact_top(table[:here], queries.numpy(), K)
        frontier = []
        for ef in sorted({args.ann_ef, *(int(e) for e in args.efs.split(","))}):
            graph.set_effort(ef)
            answered(dense, queries[:5])  # warm-up
            times, found = answered(dense, queries)
            frontier.append(
                {
                    "ef": ef,
                    "p50_ms": round(percentile(times, 50), 4),
                    "p99_ms": round(percentile(times, 99), 4),
                    "recall_at_10": round(recall_at(found, truth), 4),
                }
            )
            if ef == args.ann_ef:
                out.update(
                    search_p50_ms=frontier[-1]["p50_ms"],
                    search_p99_ms=frontier[-1]["p99_ms"],
                    recall_at_10=frontier[-1]["recall_at_10"],
                )
        out["frontier"] = frontier
        graph.set_effort(args.ann_ef)
        turn = iter(range(10**9))
        bare = timed_ms(lambda: graph.search(queries[next(turn) % len(queries)][None].numpy(), K), args.queries)
        out["graph_search_p50_ms"] = round(percentile(bare, 50), 4)
        dense.index_kind = "exact"  # the same vectors, searched exactly
        exact = timed_ms(
            lambda: dense.search(queries[next(turn) % len(queries)][None], SCOPE, K), min(args.queries, 50), 2
        )
        out["exact_search_p50_ms"] = round(percentile(exact, 50), 4)
        dense.index_kind = "ann"

        catchups = []
        for n in range(args.catchups):
            rows = range(here + n * BATCH, here + (n + 1) * BATCH)
            writer = (
                f"from ms.pool import Pool\nwith Pool({str(Path(folder) / 'pool.sqlite')!r}) as pool:\n"
                f"    pool.add({row_items(rows)!r}, step=2)\n"
            )
            subprocess.run([sys.executable, "-c", writer], check=True, env={**os.environ, "PYTHONPATH": str(REPO)})
            start = time.perf_counter()
            found = dense.search(torch.from_numpy(table[rows[0]])[None], SCOPE, 1)[0]
            catchups.append((time.perf_counter() - start) * 1000)
            assert int(found[0].question[1:]) == rows[0], "the other process's memory was not found"
        if catchups:
            out.update(
                catchup_p50_ms=round(percentile(catchups, 50), 3), catchup_p99_ms=round(percentile(catchups, 99), 3)
            )
        out["rebuilds"] = graph.builds - 1  # 0: the stream's adds and the catch-ups added, never rebuilt
        out["exact_fallbacks"] = dense.ann_fallbacks  # graph searches that came back short (expected 0)
    out.update(
        rss_mb=round(rss_mb(), 1),
        note=NOTE,
        queries=args.queries,
        torch_threads=torch.get_num_threads(),
        cpus=os.cpu_count(),
        load_average=[round(x, 2) for x in os.getloadavg()],
        machine=platform.machine(),
    )
    return out


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of `--index ann` (benchmarks/retrieval.py adds them to its own)."""
    parser.add_argument("--ann-ef", type=int, help="efSearch of the headline figures (default: retriever.ann_ef's)")
    parser.add_argument(
        "--efs", default="16,32,64,256", help="efSearch values of the recall/latency frontier (--ann-ef is added)"
    )
    parser.add_argument("--stream", type=int, default=2048, help="memories added in batches of 32 to time adds")
    parser.add_argument("--catchups", type=int, default=10, help="writes by another process timed")


def main(args) -> None:
    results = []
    for size in (int(s) for s in args.sizes.split(",")):
        child = [sys.executable, __file__, "--one-size", str(size)] + [
            f"--{name.replace('_', '-')}={getattr(args, name)}"
            for name in ("queries", "threads", "ann_ef", "efs", "stream", "catchups")
            if getattr(args, name) is not None
        ]
        done = subprocess.run(child, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
        if done.returncode != 0:
            sys.exit(f"size {size} failed:\n{done.stderr[-3000:]}")
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
        row = results[-1]
        print(
            f"{size:>8} memories, ann ef {row['ann_ef']}: search p50 {row['search_p50_ms']:.3f} ms "
            f"(p99 {row['search_p99_ms']:.3f}; graph alone {row['graph_search_p50_ms']:.3f}; exact "
            f"{row['exact_search_p50_ms']:.2f}), recall@10 {row['recall_at_10']:.4f}, build {row['build_s']} s, "
            f"graph {row['graph_mb']:.0f} MB, add {row['add_per_s']:.0f}/s, catch-up p50 "
            f"{row.get('catchup_p50_ms', float('nan')):.2f} ms, rss {row['rss_mb']:.0f} MB",
            flush=True,
        )
        print(
            "          frontier: "
            + "; ".join(
                f"ef {p['ef']}: {p['p50_ms']:.3f} ms, recall {p['recall_at_10']:.4f}" for p in row.get("frontier", [])
            ),
            flush=True,
        )
    print(f"note: {NOTE}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000", help="comma-separated pool sizes")
    parser.add_argument("--json", type=Path, help="write the list of per-size objects here")
    parser.add_argument("--queries", type=int, default=200, help="timed searches per measurement")
    parser.add_argument("--threads", type=int, default=0, help="torch and faiss threads (0: their defaults)")
    parser.add_argument("--one-size", type=int, help=argparse.SUPPRESS)  # the per-size child process
    add_arguments(parser)
    parsed = parser.parse_args()
    if parsed.one_size is not None:
        print(json.dumps(measure(parsed.one_size, parsed)))
    else:
        main(parsed)
