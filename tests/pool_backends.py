"""The pool's two backends for tests: a throwaway PostgreSQL cluster on 127.0.0.1, and how a test
(or a process it starts) opens the same pool on either backend.

PostgreSQL refuses to run as root, and pytest's tmp_path is unreadable to other users, so under
root the cluster lives in its own 0700 folder under /tmp owned by `nobody`, and initdb and pg_ctl
run as that user. Password authentication is on (scram), with the password given only through
PGPASSWORD, so the tests can check that no message or run file ever shows it.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

PASSWORD = "pw-7Hq2-never-printed"
USER = "ms"
SERVER_OPTIONS = "-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=60"


def postgres_bin() -> Path | None:
    """The folder of initdb and pg_ctl: on PATH, or Debian's versioned folder (newest first)."""
    on_path = shutil.which("initdb")
    if on_path:
        return Path(on_path).parent
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    return Path(found[-1]).parent if found else None


class Cluster:
    """initdb, pg_ctl start/stop and dropping the folder; `dsn(database)` holds no password."""

    def __init__(self, bin_dir: Path, port: int):
        self.bin = bin_dir
        self.port = port
        self.folder = Path(tempfile.mkdtemp(prefix="ms-pg-", dir="/tmp"))  # 0700
        self.owner = "nobody" if os.geteuid() == 0 else None
        if self.owner:
            entry = pwd.getpwnam(self.owner)
            os.chown(self.folder, entry.pw_uid, entry.pw_gid)
        self.data = self.folder / "data"
        password_file = self.folder / "password"
        password_file.write_text(PASSWORD + "\n")
        if self.owner:
            os.chown(password_file, pwd.getpwnam(self.owner).pw_uid, -1)
        self._as_owner("initdb", "-D", str(self.data), "-U", USER, f"--pwfile={password_file}",
                       "--auth=scram-sha-256", "-E", "UTF8", "--no-sync")
        password_file.unlink()

    def _as_owner(self, tool: str, *args: str) -> None:
        command = [str(self.bin / tool), *args]
        if self.owner:
            command = ["runuser", "-u", self.owner, "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"{tool} failed: {done.stdout[-1500:]}{done.stderr[-1500:]}")

    def start(self) -> None:
        self._as_owner("pg_ctl", "-D", str(self.data), "-l", str(self.folder / "server.log"), "-w", "-t", "60",
                       "-o", f"-h 127.0.0.1 -p {self.port} -k {self.folder} {SERVER_OPTIONS}", "start")

    def stop(self) -> None:
        self._as_owner("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")

    def remove(self) -> None:
        try:
            self.stop()
        except RuntimeError:
            pass  # already stopped
        shutil.rmtree(self.folder, ignore_errors=True)

    def dsn(self, database: str = "postgres") -> str:
        return f"host=127.0.0.1 port={self.port} user={USER} dbname={database}"


@dataclass(frozen=True)
class Where:
    """One pool as a picklable value, so a process the test starts opens the same one."""

    backend: str  # sqlite | postgres
    target: str  # the SQLite file, or the PostgreSQL DSN

    def open(self, **kwargs):
        from ms.pool import Pool

        if self.backend == "postgres":
            from ms.pool.postgres_backend import PostgresDatabase

            return Pool(PostgresDatabase(self.target), **kwargs)
        return Pool(self.target, **kwargs)

    def pool_config(self) -> dict:
        """The `pool` settings of a run on this pool."""
        if self.backend == "postgres":
            return {"mode": "domain", "backend": "postgres", "dsn": self.target, "path": None}
        return {"mode": "domain", "backend": "sqlite", "dsn": None, "path": self.target}
