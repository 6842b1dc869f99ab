"""What the pool asks of a database, so that ms.pool.store holds every query once and the backends
(SQLite, PostgreSQL) only open connections, keep the schema and order the writers."""

from abc import ABC, abstractmethod
from contextlib import AbstractContextManager
from typing import Any, Hashable, Iterable, Iterator, Sequence


class Session(ABC):
    """One transaction's statements. SQL is written with `?` placeholders whatever the backend."""

    @abstractmethod
    def rows(self, sql: str, params: Iterable[Any] = ()) -> list[Sequence[Any]]:
        """The statement's rows, each a sequence in the order the statement names its columns."""

    @abstractmethod
    def run(self, sql: str, params: Iterable[Any] = ()) -> int:
        """Execute one statement; returns how many rows it changed."""

    @abstractmethod
    def run_many(self, sql: str, rows: Iterable[Sequence[Any]]) -> None: ...


class Database(ABC):
    # Subqueries that list the values of one JSON array parameter (written `?`): integers, or texts.
    # One parameter however many values, and no empty `IN ()` for an empty list.
    INTS: str
    TEXTS: str
    # Says which pool this is, in messages and logs; never holds a secret.
    location: str

    # ---- as a registered part (ms.config.parts.POOL_BACKENDS; pool.backend) -----------------------

    @classmethod
    def connect(cls, cfg, default_path) -> "Database":
        """The pool `cfg` (a PoolConfig) names; `default_path`: the run's own pool file, where it has one."""
        raise NotImplementedError(f"{cls.__name__} does not say how it opens from a pool config")

    @classmethod
    def run_files(cls, cfg) -> list[str]:
        """The files of the pool inside the run's folder (a redo removes them): none by default."""
        return []

    @classmethod
    def problems(cls, cfg) -> Iterator[str]:
        """Its settings' problems beyond their declared limits, one line each, before anything opens."""
        return iter(())

    @abstractmethod
    def write(self) -> AbstractContextManager[Session]:
        """One write transaction. Writers are serialized, so ids (and change-log positions) become
        visible in the order they were given: a reader that has seen id n has seen every id below it."""

    @abstractmethod
    def read(self, *, consistent: bool = False) -> AbstractContextManager[Session]:
        """Reads; with `consistent`, every statement sees the same committed state."""

    @abstractmethod
    def change_token(self) -> Hashable:
        """Moves whenever the pool is written, by this process or any other."""

    @abstractmethod
    def close(self) -> None: ...
