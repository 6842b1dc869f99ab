"""The memory core as the pool grows: adding, dense search, query encoding, index refresh and BM25
mining, at each pool size asked for, on a SQLite file or a PostgreSQL server (--backend).

    python benchmarks/retrieval.py --sizes 1000,10000,100000 --json OUT.json
    python benchmarks/retrieval.py --backend postgres [--dsn DSN] --sizes 10000,100000,1000000 --json OUT.json

Each size runs in a fresh process (so its rss_mb is its own) on a new pool (a file, or a database:
see benchmarks/bench_pool.py) holding one scope of that many memories. Their texts are the examples of data/*.jsonl, cycled, each with a variant
number so no two are equal; their dense vectors are SYNTHETIC (random unit vectors, as cheap to
make as to store), so that 100k memories take minutes rather than a day of MiniLM encoding. What a
real encoder costs enters through `encode_s_per_memory` and `query_encode_p50_ms`, both measured
with the packaged MiniLM.

Fields of the JSON object written per size:
  size                  memories in the scope
  add_per_s             memories per second through Pool.add in stream batches of 32, each batch
                        followed by the dense and BM25 indexes catching up (synthetic vectors)
  search_p50_ms, _p99   DenseRetriever.search of one query, query vector given, k=10
  matmul_topk_p50_ms    a bare torch matmul + top-k over the same vectors in the same run: the floor
  query_encode_p50_ms   the packaged MiniLM encoding one question
  refresh_s_per_step    per refresh policy: memories the index re-encodes per training step
                        (counted on this size's index over `--steps` steps, or one whole budget
                        cycle of ceil(size / --refresh-budget) steps) x encode_s_per_memory
  bm25_mine_p50_ms      BM25Retriever.retrieve as memory train mines: a question, top 10, itself excluded
  bm25_reference_mine_p50_ms   the same through rank-bm25 (sizes up to --reference-upto; else null)
  catchup_p50_ms, _p99  after another process commits --catchup-batch memories, this process's next
                        DenseRetriever.index (what a search runs first) taking them in (bench_pool.catch_up)
  unchanged_sync_p50_ms, _p99   the same call with nothing new: what every search pays to learn that
  rss_mb                resident memory of the size's process at the end
  backend, server       sqlite | postgres; for postgres the server's version and commit settings

`--index ann` measures the approximate index (retriever.index=ann) instead, on vectors with
neighbourhood structure: benchmarks/retrieval_ann.py, which lists its own fields.
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

from bench_pool import BACKENDS, bench_target, catch_up, given_dsn, open_pool, server_settings, throwaway_server
from timing import BATCH, REPO, SCOPE, K, percentile, timed_ms

NOTE = (
    "memory embeddings are synthetic random unit vectors (dim 384); memory texts are data/*.jsonl "
    "examples cycled with a variant number; refresh_s_per_step = memories re-encoded per step, counted "
    "on this index, x encode_s_per_memory measured with the packaged MiniLM"
)


def memory_items(size: int) -> list[dict]:
    examples = []
    for path in sorted((REPO / "data").glob("*.jsonl")):
        examples += [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [
        {
            "scope": SCOPE,
            "agent": e["agent"],
            "domain": e["domain"],
            "question": f"{e['question']} ({i})",
            "answer": e["answer"],
            "origin": "seed",
        }
        for i, e in ((i, examples[i % len(examples)]) for i in range(size))
    ]


def synthetic_encoder(dim: int = 384, seed: int = 0):
    """Stands in for the memory encoder: a random unit vector per text, at almost no cost. A torch
    module, so the query_tower policy can copy and freeze it as it does the real one."""
    import torch

    class SyntheticEncoder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.generator = torch.Generator().manual_seed(seed)

        def encode(self, texts, batch_size: int = 64):
            return torch.nn.functional.normalize(torch.randn(len(texts), dim, generator=self.generator), dim=-1)

    return SyntheticEncoder()


def measure(size: int, args) -> dict:
    import psutil
    import torch

    from ms.retrieval.bm25 import BM25Retriever, RankBM25Retriever
    from ms.retrieval.dense import DenseRetriever
    from ms.retrieval.encoder import Encoder
    from ms.retrieval.settings import REFRESH_POLICIES

    if args.threads:
        torch.set_num_threads(args.threads)
    items = memory_items(size)
    out: dict = {"size": size}
    with (
        tempfile.TemporaryDirectory() as folder,
        bench_target(args.backend, args.dsn, folder, size) as target,
        open_pool(args.backend, target) as pool,
    ):
        dense, bm25 = DenseRetriever(pool, synthetic_encoder()), BM25Retriever(pool)
        start = time.perf_counter()
        for i in range(0, size, BATCH):
            pool.add(items[i : i + BATCH], step=i // BATCH)
            dense.index(SCOPE)
            bm25.index(SCOPE)
        out["add_per_s"] = round(size / (time.perf_counter() - start), 1)

        queries = torch.nn.functional.normalize(
            torch.randn(args.queries, 384, generator=torch.Generator().manual_seed(1)), dim=-1
        )
        turn = iter(range(10**9))
        search = timed_ms(lambda: dense.search(queries[next(turn) % len(queries)].unsqueeze(0), SCOPE, K), args.queries)
        vectors = dense.index(SCOPE).vectors[:size]
        bare = timed_ms(lambda: (queries[next(turn) % len(queries)].unsqueeze(0) @ vectors.T).topk(K), args.queries)
        out.update(
            search_p50_ms=round(percentile(search, 50), 4),
            search_p99_ms=round(percentile(search, 99), 4),
            matmul_topk_p50_ms=round(percentile(bare, 50), 4),
        )

        encoder = Encoder()
        questions = [item["question"] for item in items[: args.queries]]
        asked = iter(range(10**9))
        encode = timed_ms(lambda: encoder.encode([questions[next(asked) % len(questions)]]), min(args.queries, 50), 3)
        out["query_encode_p50_ms"] = round(percentile(encode, 50), 2)
        texts = [f"{item['question']}\n{item['answer']}" for item in items[: args.encode_sample]]
        encoder.encode(texts[:8])
        start = time.perf_counter()
        encoder.encode(texts)
        per_memory = (time.perf_counter() - start) / len(texts)
        out["encode_s_per_memory"] = round(per_memory, 5)

        re_encoded, per_step = {}, {}
        for policy in REFRESH_POLICIES:
            stepped = DenseRetriever(
                pool,
                synthetic_encoder(),
                refresh=policy,
                refresh_every=args.refresh_every,
                refresh_budget=args.refresh_budget,
            )
            stepped.index(SCOPE)  # the first encoding is adding, not refreshing
            before = stepped.encoded
            # Count whole refresh cycles: budget re-encodes once every ceil(size / budget) steps.
            steps = max(args.steps, -(-size // args.refresh_budget)) if policy == "budget" else args.steps
            for _ in range(steps):
                stepped.encoder_changed()  # what RetrieverTrainer calls after each step
                stepped.search(queries[:1], SCOPE, K)
            re_encoded[policy] = (stepped.encoded - before) / steps
            per_step[policy] = round(re_encoded[policy] * per_memory, 4)
        out["refresh_s_per_step"] = per_step
        out["refresh_re_encoded_per_step"] = re_encoded
        out["refresh_every"] = args.refresh_every
        out["refresh_budget"] = args.refresh_budget

        memories = pool.memories(SCOPE)[:: max(1, size // args.queries)][: args.queries]
        picked = iter(range(10**9))

        def mine(retriever):
            memory = memories[next(picked) % len(memories)]
            return retriever.retrieve(memory.question, SCOPE, K, exclude=[memory.id])

        out["bm25_mine_p50_ms"] = round(percentile(timed_ms(lambda: mine(bm25), args.queries), 50), 3)
        reference = None
        if size <= args.reference_upto:
            rank_bm25 = RankBM25Retriever(pool)
            mine(rank_bm25)  # builds its index, which the timing leaves out
            reference = round(percentile(timed_ms(lambda: mine(rank_bm25), 20, 1), 50), 3)
        out["bm25_reference_mine_p50_ms"] = reference
        # Last: the other process's memories would change every measurement after it.
        out.update(catch_up(args.backend, target, dense, SCOPE, args.catchup_batch, args.catchup_repeats))
        out.update(backend=args.backend, server=server_settings(target) if args.backend == "postgres" else None)
        out["rss_mb"] = round(psutil.Process().memory_info().rss / 2**20, 1)
    out.update(
        synthetic_embeddings=True,
        note=NOTE,
        queries=args.queries,
        torch_threads=torch.get_num_threads(),
        cpus=os.cpu_count(),
        load_average=[round(x, 2) for x in os.getloadavg()],
        machine=platform.machine(),
    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000", help="comma-separated pool sizes")
    parser.add_argument("--json", type=Path, help="write the list of per-size objects here")
    parser.add_argument("--queries", type=int, default=200, help="timed searches per measurement")
    parser.add_argument("--steps", type=int, default=8, help="training steps counted per refresh policy")
    parser.add_argument("--refresh-every", type=int, default=8, help="n of the every_n policy")
    parser.add_argument(
        "--refresh-budget",
        type=int,
        default=1000,
        help="memories re-encoded per step by the budget policy (retriever.refresh_budget)",
    )
    parser.add_argument("--encode-sample", type=int, default=128, help="memories MiniLM encodes to time it")
    parser.add_argument("--reference-upto", type=int, default=10000, help="largest size timed with rank-bm25")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--backend", choices=BACKENDS, default="sqlite", help="where the pool is (default sqlite)")
    parser.add_argument(
        "--dsn",
        help="postgres: a server where this user may create databases (default: "
        "MS_POOL_DSN; with neither, a throwaway local server)",
    )
    parser.add_argument("--catchup-batch", type=int, default=BATCH, help="memories per write of the other process")
    parser.add_argument("--catchup-repeats", type=int, default=50, help="timed catch-ups per size")
    parser.add_argument("--one-size", type=int, help=argparse.SUPPRESS)  # the per-size child process
    # --index ann: its own measurement and flags, kept in retrieval_ann.py
    import retrieval_ann

    parser.add_argument(
        "--index",
        choices=("exact", "ann"),
        default="exact",
        help="exact: the measurements above; ann: retriever.index=ann (benchmarks/retrieval_ann.py)",
    )
    retrieval_ann.add_arguments(parser)
    args = parser.parse_args()
    if args.index == "ann":
        retrieval_ann.main(args)
        return
    if args.one_size is not None:
        print(json.dumps(measure(args.one_size, args)))
        return
    if args.backend == "postgres" and not given_dsn(args):
        with throwaway_server() as args.dsn:
            run_sizes(args)
    else:
        args.dsn = given_dsn(args)
        run_sizes(args)


def run_sizes(args) -> None:
    results = []
    for size in (int(s) for s in args.sizes.split(",")):
        child = [sys.executable, __file__, "--one-size", str(size)] + [
            f"--{name.replace('_', '-')}={getattr(args, name)}"
            for name in (
                "queries",
                "steps",
                "refresh_every",
                "refresh_budget",
                "encode_sample",
                "reference_upto",
                "threads",
            )
        ]
        child += pool_flags(args)
        done = subprocess.run(
            child,
            capture_output=True,
            text=True,
            env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error"},
        )
        if done.returncode != 0:
            sys.exit(f"size {size} failed:\n{done.stderr[-3000:]}")
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
        row = results[-1]
        print(
            f"{size:>7} memories: add {row['add_per_s']:.0f}/s, search p50 {row['search_p50_ms']:.3f} ms "
            f"(p99 {row['search_p99_ms']:.3f}, bare matmul+topk {row['matmul_topk_p50_ms']:.3f}), "
            f"query encode {row['query_encode_p50_ms']:.1f} ms, BM25 mine {row['bm25_mine_p50_ms']:.2f} ms, "
            f"refresh s/step {row['refresh_s_per_step']}, rss {row['rss_mb']:.0f} MB",
            flush=True,
        )
        print(
            f"{'':>7} {args.backend}: catch-up after another process's write of {row['catchup_batch']} p50 "
            f"{row['catchup_p50_ms']:.2f} ms (p99 {row['catchup_p99_ms']:.2f}), unchanged sync p50 "
            f"{row['unchanged_sync_p50_ms']:.3f} ms",
            flush=True,
        )
    print(f"note: {NOTE}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


def pool_flags(args) -> list[str]:
    """The pool's flags for a size's child process (the DSN names no password: see ms.pool.local_server)."""
    flags = [
        f"--backend={args.backend}",
        f"--catchup-batch={args.catchup_batch}",
        f"--catchup-repeats={args.catchup_repeats}",
    ]
    return flags + ([f"--dsn={args.dsn}"] if args.dsn else [])


if __name__ == "__main__":
    main()
