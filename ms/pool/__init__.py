"""The shared memory pool: prompt-answer pairs that several agents, threads and processes read and
grow together, in one SQLite file (processes on one machine) or a PostgreSQL database (processes on
several machines); `open_pool` picks the one a run's config names.

A *scope* is the pool an agent shares: its domain name under the Domain-pool, or "single" under the
Single-pool. One pool can hold every scope, and `(scope, content_hash)` is unique, so adding a memory
that is already there is a no-op instead of a duplicate that would skew retrieval and training.
"""

from ms.config.files import POOL_FILENAME
from ms.pool.records import ORIGINS, Memory, normalize_space, scope_for
from ms.pool.schema import SCHEMA_VERSION, PoolFileError
from ms.pool.store import Pool, open_pool

__all__ = [
    "ORIGINS",
    "POOL_FILENAME",
    "SCHEMA_VERSION",
    "Memory",
    "Pool",
    "PoolFileError",
    "normalize_space",
    "open_pool",
    "scope_for",
]
