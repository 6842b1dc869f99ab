"""A response cache shared by processes: one SQLite file, keyed by a hash of the whole request."""

import hashlib
import json
import sqlite3
import time
from pathlib import Path
from typing import Any

from ms.common.errors import UserError

CACHE_FILENAME = "responses.sqlite"  # inside cache_dir


class CacheFileError(UserError):
    """The response cache file cannot be opened or is damaged."""


def damaged_cache_message(path: Path, reason: object) -> str:
    return (
        f"the response cache {path} is damaged ({reason}). Deleting it is safe: it only saves model "
        f"replies, which are asked again (delete {path} and any -wal/-shm file beside it)"
    )


def request_key(payload: dict[str, Any]) -> str:
    """sha256 of a canonical JSON encoding, so equal requests hash equal across processes."""
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class ResponseCache:
    """Maps request keys to JSON values. WAL mode and a busy timeout let several processes
    (parallel sweep cells) read and write one file without 'database is locked' errors."""

    def __init__(self, path: str | Path, timeout_s: float = 60.0):
        self.path = Path(path)
        try:
            self._open(timeout_s)
        except (OSError, sqlite3.DatabaseError) as error:
            if isinstance(error, sqlite3.DatabaseError) and not isinstance(error, sqlite3.OperationalError):
                raise CacheFileError(damaged_cache_message(self.path, error)) from error
            raise CacheFileError(
                f"cannot open the response cache {self.path} ({error}): make cache_dir writable, "
                f"set cache_dir to another folder, or turn the cache off with use_cache=false"
            ) from error

    def _open(self, timeout_s: float) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        deadline = time.monotonic() + timeout_s
        while True:
            self._conn = sqlite3.connect(self.path, timeout=timeout_s, isolation_level=None, check_same_thread=False)
            try:
                self._conn.execute("PRAGMA journal_mode=WAL")
                self._conn.execute("PRAGMA synchronous=NORMAL")
                self._conn.execute(
                    "CREATE TABLE IF NOT EXISTS responses "
                    "(key TEXT PRIMARY KEY, value TEXT NOT NULL, created REAL NOT NULL)"
                )
                return
            except sqlite3.OperationalError as error:
                self._conn.close()
                # Two processes opening the file at once after a writer was killed (a resumed
                # parallel sweep) can be told "database is locked" at once, without SQLite's busy
                # timeout, while one of them recovers the WAL: wait for it, as the timeout would.
                if "locked" not in str(error) or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def get_many(self, keys: list[str]) -> dict[str, Any]:
        found: dict[str, Any] = {}
        for start in range(0, len(keys), 500):  # SQLite caps the number of bound parameters
            chunk = keys[start : start + 500]
            marks = ",".join("?" * len(chunk))
            rows = self._conn.execute(f"SELECT key, value FROM responses WHERE key IN ({marks})", chunk)
            found.update((k, json.loads(v)) for k, v in rows)
        return found

    def put_many(self, items: dict[str, Any]) -> None:
        if not items:
            return
        now = time.time()
        rows = [(k, json.dumps(v, ensure_ascii=False), now) for k, v in items.items()]
        with self._conn:  # one transaction per batch
            self._conn.execute("BEGIN IMMEDIATE")
            self._conn.executemany("INSERT OR REPLACE INTO responses VALUES (?, ?, ?)", rows)

    def close(self) -> None:
        self._conn.close()
