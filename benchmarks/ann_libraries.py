"""Which HNSW library the approximate index should keep: faiss-cpu, hnswlib and usearch on the
same structured vectors (benchmarks/ann_vectors.py), same graph settings, one process each.

    python benchmarks/ann_libraries.py --size 100000 --json OUT.json

Per library: `build_s` (bulk add of the first 90% of the vectors, --build-threads threads),
`add_per_s` (the last 10% in batches of 32, as the stream adds memories, one thread), `rss_mb`
(growth of the process's resident memory over building; malloc reuses freed pages, so only a
rough figure), `index_mb` (the index serialized: vectors, graph and labels),
and per search effort (ef): one-query search p50 / p99 in ms (one thread) and recall@10 against
exact inner-product search. Needs `pip install faiss-cpu hnswlib usearch`.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from ann_vectors import exact_top, recall_at, structured_vectors

LIBRARIES = ("faiss", "hnswlib", "usearch")
BATCH = 32


class Faiss:
    def __init__(self, dim, capacity, m, ef_construction):
        import faiss

        self.faiss = faiss
        self.index = faiss.IndexIDMap(faiss.IndexHNSWFlat(dim, m, faiss.METRIC_INNER_PRODUCT))
        self.hnsw = faiss.downcast_index(self.index.index).hnsw
        self.hnsw.efConstruction = ef_construction

    def threads(self, n):
        self.faiss.omp_set_num_threads(n)

    def add(self, labels, vectors):
        self.index.add_with_ids(vectors, labels)

    def bytes(self):
        return len(self.faiss.serialize_index(self.index))

    def search(self, query, k, ef):
        self.hnsw.efSearch = ef
        return self.index.search(query, k)[1][0]


class Hnswlib:
    def __init__(self, dim, capacity, m, ef_construction):
        import hnswlib

        self.index = hnswlib.Index(space="ip", dim=dim)
        self.index.init_index(max_elements=capacity, M=m, ef_construction=ef_construction)

    def threads(self, n):
        self.index.set_num_threads(n)

    def add(self, labels, vectors):
        self.index.add_items(vectors, labels)

    def bytes(self):
        return self.index.index_file_size()

    def search(self, query, k, ef):
        self.index.set_ef(max(ef, k))
        return self.index.knn_query(query, k)[0][0]


class Usearch:
    def __init__(self, dim, capacity, m, ef_construction):
        from usearch.index import Index

        self.index = Index(ndim=dim, metric="ip", dtype="f32", connectivity=m, expansion_add=ef_construction)
        self.n = 1

    def threads(self, n):
        self.n = n

    def add(self, labels, vectors):
        self.index.add(labels, vectors, threads=self.n)

    def bytes(self):
        return self.index.serialized_length

    def search(self, query, k, ef):
        self.index.expansion_search = ef
        return self.index.search(query[0], k, threads=self.n).keys  # one vector: one Matches


def rss_mb() -> float:
    import psutil

    return psutil.Process().memory_info().rss / 2**20


def measure(library: str, args) -> dict:
    vectors = structured_vectors(args.size, seed=0)
    queries = structured_vectors(args.queries, seed=1)
    truth = exact_top(vectors, queries, 10)
    labels = np.arange(args.size, dtype=np.int64)
    bulk = int(args.size * 0.9)
    before = rss_mb()
    index = {"faiss": Faiss, "hnswlib": Hnswlib, "usearch": Usearch}[library](
        vectors.shape[1], args.size, args.m, args.ef_construction
    )
    index.threads(args.build_threads)
    start = time.perf_counter()
    index.add(labels[:bulk], vectors[:bulk])
    out = {
        "library": library,
        "size": args.size,
        "m": args.m,
        "ef_construction": args.ef_construction,
        "build_s": round(time.perf_counter() - start, 2),
    }
    index.threads(1)
    start = time.perf_counter()
    for i in range(bulk, args.size, BATCH):
        index.add(labels[i : i + BATCH], vectors[i : i + BATCH])
    out["add_per_s"] = round((args.size - bulk) / (time.perf_counter() - start), 1)
    out["rss_mb"] = round(rss_mb() - before, 1)
    out["index_mb"] = round(index.bytes() / 2**20, 1)  # serialized: vectors, graph and labels
    frontier = []
    for ef in (int(e) for e in args.efs.split(",")):
        found, times = [], []
        for q in queries[:5]:
            index.search(q[None], 10, ef)  # warm up
        for q in queries:
            start = time.perf_counter()
            found.append(np.asarray(index.search(q[None], 10, ef), dtype=np.int64))
            times.append((time.perf_counter() - start) * 1000)
        frontier.append(
            {
                "ef": ef,
                "p50_ms": round(float(np.percentile(times, 50)), 4),
                "p99_ms": round(float(np.percentile(times, 99)), 4),
                "recall_at_10": round(recall_at(np.stack(found), truth), 4),
            }
        )
    out["frontier"] = frontier
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("--m", type=int, default=16, help="graph degree (hnswlib M, usearch connectivity)")
    parser.add_argument("--ef-construction", type=int, default=128)
    parser.add_argument("--efs", default="16,32,64,128,256", help="search efforts of the frontier")
    parser.add_argument("--build-threads", type=int, default=2)
    parser.add_argument("--libraries", default=",".join(LIBRARIES))
    parser.add_argument("--json", type=Path)
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(args.one, args)))
        return
    rows = []
    for library in args.libraries.split(","):
        child = [sys.executable, __file__, "--one", library] + [
            f"--{name.replace('_', '-')}={getattr(args, name)}"
            for name in ("size", "queries", "m", "ef_construction", "efs", "build_threads")
        ]
        done = subprocess.run(child, capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"{library} failed:\n{done.stderr[-3000:]}")
        rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
        row = rows[-1]
        print(
            f"{library}: build {row['build_s']} s, add {row['add_per_s']:.0f}/s, rss +{row['rss_mb']:.0f} MB, index {row['index_mb']:.0f} MB; "
            + "; ".join(
                f"ef {f['ef']}: p50 {f['p50_ms']:.3f} ms p99 {f['p99_ms']:.3f} recall {f['recall_at_10']:.4f}"
                for f in row["frontier"]
            ),
            flush=True,
        )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
