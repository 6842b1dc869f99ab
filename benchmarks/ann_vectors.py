"""Unit vectors with neighbourhood structure, for measuring approximate search.

Uniform random unit vectors in 384 dimensions are all about equally far apart (cosines near 0,
standard deviation 0.05), so "the" ten nearest are an accident of noise and recall@10 measures
nothing real. Real sentence embeddings are clustered by topic and locally low-dimensional. These
vectors are a Gaussian mixture (CLUSTERS = 50 centres) in a LATENT = 32-dimensional subspace (a
random orthonormal basis), with a little isotropic noise in all 384 dimensions, then normalized:

    z = centre[c] + spread * N(0, I_latent),  c uniform over `clusters`
    x = normalize(basis @ z + noise * N(0, I_384))

The defaults were chosen to look like the packaged MiniLM's embeddings of this repository's 586
data texts, compared at the same count (`python benchmarks/ann_vectors.py` prints both): mean
cosine to the 1st / 10th nearest neighbour 0.72 / 0.53 here against 0.61 / 0.50 real; standard
deviation of a random pair's cosine 0.19 against 0.16; TwoNN intrinsic dimension 16 against 20
(uniform random vectors: 0.16 / 0.11, 0.05, 110). What they do not copy: the real embeddings
share a common direction (a random pair's mean cosine is 0.13 real, 0.02 here) and have a long
tail of small principal directions (90% of the variance takes 26 components here, 132 real).
A Gaussian mixture rather than noisy copies of the 586 real embeddings: at 1M vectors that would
be 1,700 copies of each text, whose neighbours among themselves are again isotropic noise, the
uniform case in miniature.

Queries are fresh draws from the same mixture (a separate seed), so none is in the index.
"""

from __future__ import annotations

import numpy as np

DIM = 384
LATENT, CLUSTERS, SPREAD, NOISE = 32, 50, 0.8, 0.05
CHUNK = 100_000  # rows generated at once, so 1M vectors never need a second full-size float64 copy


def structured_vectors(n: int, seed: int = 0, shape_seed: int = 1234) -> np.ndarray:
    """[n, DIM] float32 unit vectors; `shape_seed` fixes the mixture (basis and centres) so that
    memories and queries drawn with different `seed`s come from the same distribution."""
    shape = np.random.default_rng(shape_seed)
    basis = np.linalg.qr(shape.standard_normal((DIM, LATENT)))[0]
    centres = shape.standard_normal((CLUSTERS, LATENT))
    draw = np.random.default_rng(seed)
    out = np.empty((n, DIM), dtype=np.float32)
    for start in range(0, n, CHUNK):
        rows = min(CHUNK, n - start)
        z = centres[draw.integers(0, CLUSTERS, rows)] + SPREAD * draw.standard_normal((rows, LATENT))
        x = z @ basis.T + NOISE * draw.standard_normal((rows, DIM))
        out[start : start + rows] = x / np.linalg.norm(x, axis=1, keepdims=True)
    return out


def exact_top(vectors: np.ndarray, queries: np.ndarray, k: int) -> np.ndarray:
    """[Q, k] row numbers of the k largest inner products per query, best first (the reference)."""
    found = np.empty((len(queries), k), dtype=np.int64)
    for start in range(0, len(queries), 64):
        scores = queries[start : start + 64] @ vectors.T
        top = np.argpartition(-scores, k, axis=1)[:, :k]
        order = np.argsort(-np.take_along_axis(scores, top, axis=1), axis=1)
        found[start : start + 64] = np.take_along_axis(top, order, axis=1)
    return found


def recall_at(found: np.ndarray, truth: np.ndarray) -> float:
    """Mean over queries of |found row ∩ true top-k| / k."""
    k = truth.shape[1]
    return float(np.mean([len(set(f[:k].tolist()) & set(t.tolist())) / k for f, t in zip(found, truth)]))


def profile(vectors: np.ndarray) -> str:
    """The neighbourhood statistics the docstring compares, for unit vectors (a few thousand at most)."""
    v = vectors.astype(np.float64)
    sims = v @ v.T
    np.fill_diagonal(sims, -2.0)
    nearest = -np.sort(-sims, axis=1)
    pairs = sims[np.triu_indices(len(v), 1)]
    variance = np.linalg.svd(v - v.mean(0), compute_uv=False) ** 2
    components = int(np.searchsorted(np.cumsum(variance) / variance.sum(), 0.9)) + 1
    # TwoNN (Facco et al. 2017): the ratio of 2nd to 1st neighbour distance is Pareto(dimension).
    distance = np.sqrt(np.maximum(2 - 2 * nearest[:, :2], 1e-12))
    two_nn = len(v) / np.log(distance[:, 1] / distance[:, 0]).sum()
    return (
        f"nn1 {nearest[:, 0].mean():.3f}  nn10 {nearest[:, 9].mean():.3f}  random pair {pairs.mean():.3f} "
        f"(sd {pairs.std():.3f})  components for 90% variance {components}  TwoNN dimension {two_nn:.1f}"
    )


if __name__ == "__main__":
    import json
    from pathlib import Path

    from ms.retrieval.encoder import Encoder

    lines = [
        line
        for path in sorted((Path(__file__).parent.parent / "data").glob("*.jsonl"))
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    texts = [f"{e['question']}\n{e['answer']}" for e in map(json.loads, lines)]
    real = Encoder().encode(texts).numpy()
    uniform = np.random.default_rng(0).standard_normal(real.shape)
    print(f"MiniLM, {len(texts)} data texts: {profile(real)}")
    print(f"structured_vectors({len(texts)}):   {profile(structured_vectors(len(texts)))}")
    print(f"uniform random:              {profile(uniform / np.linalg.norm(uniform, axis=1, keepdims=True))}")
