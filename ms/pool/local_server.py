"""A PostgreSQL server on this machine for a shared pool, run as an unprivileged user: what the pool
tests, benchmarks/retrieval.py --backend postgres and a multi-process run (experiment=sharing_postgres)
start.

    python -m ms.pool.local_server start FOLDER [--port PORT] [--database NAME]
    python -m ms.pool.local_server stop FOLDER

`start` creates the server in FOLDER the first time and starts it, creates the database if missing,
and prints `export MS_POOL_DSN='...'` on stdout (so `eval "$(... start FOLDER)"` sets it); everything
else goes to stderr. The server listens on 127.0.0.1 only, with password authentication (scram).
The password is random and lives only in FOLDER/pgpass (mode 0600), which the DSN names with libpq's
`passfile` key: no password is ever printed, put in a DSN or written into a run file.

PostgreSQL refuses to run as root, so under root the server's files belong to `nobody` and initdb
and pg_ctl run as that user; FOLDER must then lie where `nobody` can reach it (e.g. under /tmp).
"""

import argparse
import glob
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import sys
from pathlib import Path

USER = "ms"  # the server's superuser, which the pool connects as
DEFAULT_DATABASE = "ms"


def postgres_bin() -> Path | None:
    """The folder of initdb and pg_ctl: on PATH, or Debian's versioned folder (newest first)."""
    on_path = shutil.which("initdb")
    if on_path:
        return Path(on_path).parent
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    return Path(found[-1]).parent if found else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    """One server's folder (data/, server.log, its socket): initdb, pg_ctl start/stop, removal.
    `dsn(database)` holds no password."""

    def __init__(self, folder: Path, port: int, bin_dir: Path | None = None, options: str = ""):
        self.folder = Path(folder)
        self.port = port
        self.bin = bin_dir or postgres_bin()
        if self.bin is None:
            raise RuntimeError(
                "no PostgreSQL server binaries (initdb): install Debian's postgresql (`make postgres-server`)"
            )
        self.options = options  # extra server settings (`-c name=value ...`), e.g. the tests' fsync=off
        self.owner = "nobody" if os.geteuid() == 0 else None
        self.data = self.folder / "data"

    def initdb(self, password: str) -> None:
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._give_to_owner(self.folder)
        # initdb reads the password from a file; it is removed at once, the server keeps only its hash.
        password_file = self.folder / "initdb-password"
        password_file.write_text(password + "\n")
        self._give_to_owner(password_file)
        try:
            self._as_owner(
                "initdb",
                "-D",
                str(self.data),
                "-U",
                USER,
                f"--pwfile={password_file}",
                "--auth=scram-sha-256",
                "-E",
                "UTF8",
                "--no-sync",
            )
        finally:
            password_file.unlink(missing_ok=True)

    def _give_to_owner(self, path: Path) -> None:
        if self.owner:
            entry = pwd.getpwnam(self.owner)
            os.chown(path, entry.pw_uid, entry.pw_gid)

    def _as_owner(self, tool: str, *args: str, ok: tuple[int, ...] = (0,)) -> int:
        command = [str(self.bin / tool), *args]
        if self.owner:
            command = ["runuser", "-u", self.owner, "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
        if done.returncode not in ok:
            raise RuntimeError(f"{tool} failed: {done.stdout[-1500:]}{done.stderr[-1500:]}")
        return done.returncode

    def running(self) -> bool:
        # pg_ctl status: 0 running, 3 not running
        return self._as_owner("pg_ctl", "-D", str(self.data), "status", ok=(0, 3)) == 0

    def start(self) -> None:
        self._as_owner(
            "pg_ctl",
            "-D",
            str(self.data),
            "-l",
            str(self.folder / "server.log"),
            "-w",
            "-t",
            "60",
            "-o",
            f"-h 127.0.0.1 -p {self.port} -k {self.folder} {self.options}",
            "start",
        )

    def stop(self) -> None:
        self._as_owner("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")

    def remove(self) -> None:
        try:
            self.stop()
        except RuntimeError:
            pass  # already stopped
        shutil.rmtree(self.folder, ignore_errors=True)

    def dsn(self, database: str = "postgres", passfile: Path | None = None) -> str:
        tail = f" passfile={passfile}" if passfile else ""
        return f"host=127.0.0.1 port={self.port} user={USER} dbname={database}{tail}"


# ---- the command line: a server that outlives the command, for runs to share -----------------------


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def create(folder: Path, port: int | None = None, options: str = "") -> Cluster:
    """A new server in `folder` (not started) whose random password only FOLDER/pgpass holds; its
    `dsn(database, passfile(cluster))` connects without a password anywhere else."""
    cluster = Cluster(folder, port or free_port(), options=options)
    password = secrets.token_urlsafe(24)
    cluster.initdb(password)
    (folder / "port").write_text(f"{cluster.port}\n")
    # Written by (and readable only by) whoever runs ms; libpq ignores a pgpass others can read.
    passfile(cluster).touch(mode=0o600)
    passfile(cluster).write_text(f"127.0.0.1:{cluster.port}:*:{USER}:{password}\n")
    return cluster


def passfile(cluster: Cluster) -> Path:
    return cluster.folder / "pgpass"


def start(folder: Path, port: int | None, database: str) -> str:
    """Start (creating if new) the server in `folder` and its `database`; returns the DSN."""
    import psycopg  # the postgres extra: pip install 'ms[postgres]'

    folder = folder.resolve()
    if (folder / "data" / "PG_VERSION").is_file():
        cluster = Cluster(folder, int((folder / "port").read_text()))
        if port is not None and port != cluster.port:
            raise SystemExit(f"{folder} serves on port {cluster.port}; drop --port, or use another folder")
    else:
        cluster = create(folder, port)
        _say(f"created a PostgreSQL server in {folder} (password in {passfile(cluster)}, mode 0600)")
    if cluster.running():
        _say(f"the server in {folder} is already running on 127.0.0.1:{cluster.port}")
    else:
        cluster.start()
        _say(f"started the server in {folder} on 127.0.0.1:{cluster.port} (log: {folder / 'server.log'})")
    with psycopg.connect(cluster.dsn("postgres", passfile(cluster)), autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (database,)).fetchone():
            # A pool already there is shared with the runs that wrote it: a new experiment wants a new name.
            _say(
                f"database {database} already exists: runs on it share what it holds (--database NAME for a fresh one)"
            )
        else:
            conn.execute(f'CREATE DATABASE "{database}"')
            _say(f"created database {database}")
    _say(f"stop it with: python -m ms.pool.local_server stop {folder}")
    return cluster.dsn(database, passfile(cluster))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ms.pool.local_server", description="A local PostgreSQL server for pool/backend=postgres."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("start", help="create (the first time) and start the server; print MS_POOL_DSN")
    up.add_argument("folder", type=Path)
    up.add_argument("--port", type=int, help="the port to listen on when created (default: a free one)")
    up.add_argument("--database", default=DEFAULT_DATABASE, help=f"the pool's database (default {DEFAULT_DATABASE})")
    down = sub.add_parser("stop", help="stop the server (its folder stays: start it again, or delete it)")
    down.add_argument("folder", type=Path)
    args = parser.parse_args(argv)
    try:
        if args.command == "start":
            print(f"export MS_POOL_DSN='{start(args.folder, args.port, args.database)}'")
        else:
            Cluster(args.folder.resolve(), int((args.folder / "port").read_text())).stop()
            _say(f"stopped the server in {args.folder}")
    except (RuntimeError, OSError) as error:
        _say(f"local_server: error: {' '.join(str(error).split())}")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
