"""A response cache shared by processes: one SQLite file, keyed by a hash of the whole request."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from pathlib import Path
from typing import Any


def request_key(payload: dict[str, Any]) -> str:
    """sha256 of a canonical JSON encoding, so equal requests hash equal across processes."""
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class ResponseCache:
    """Maps request keys to JSON values. WAL mode and a busy timeout let several processes
    (parallel sweep cells) read and write one file without 'database is locked' errors."""

    def __init__(self, path: str | Path, timeout_s: float = 60.0):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = sqlite3.connect(self.path, timeout=timeout_s, isolation_level=None,
                                     check_same_thread=False)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.execute(
            "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, value TEXT NOT NULL, created REAL NOT NULL)"
        )

    def get_many(self, keys: list[str]) -> dict[str, Any]:
        found: dict[str, Any] = {}
        for start in range(0, len(keys), 500):  # SQLite caps the number of bound parameters
            chunk = keys[start:start + 500]
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
