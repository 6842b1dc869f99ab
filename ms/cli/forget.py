"""`ms-data forget`: take a writer agent's memories, or a run's, out of a pool (a SQLite file or a
PostgreSQL database), never its seeds unless told, and leave an audit record in the pool."""

import argparse
import os
import shlex
from pathlib import Path

from ms.common.errors import UserError


def _open(args: argparse.Namespace):
    """The pool the arguments name: a pool file or a run folder holding one, or the PostgreSQL
    database of --dsn / $MS_POOL_DSN."""
    from ms.config.files import POOL_FILENAME
    from ms.config.parts import POOL_BACKENDS
    from ms.config.schema import POOL_DSN_ENV
    from ms.pool import Pool

    if args.postgres:
        dsn = args.dsn or os.environ.get(POOL_DSN_ENV)
        if not dsn:
            raise UserError(f"forget --postgres: give the database by --dsn or the environment variable {POOL_DSN_ENV}")
        return Pool(POOL_BACKENDS.load("postgres")(dsn))
    if args.pool is None:
        raise UserError("forget: name a pool file (or a run folder that holds one), or --postgres")
    path = Path(args.pool)
    if path.is_dir():
        path = path / POOL_FILENAME
    if not path.is_file():
        raise UserError(
            f"{args.pool}: no such pool file (a run's pool is <run folder>/{POOL_FILENAME}, or its pool.path)"
        )
    return Pool(path)


def _run_id(value: str, pool) -> str:
    """A run's id in the pool: the id itself, or a run folder (its run_id file), or the folder the
    pool's runs table records for it."""
    from ms.config.files import RUN_ID_FILE

    runs = pool.runs()
    if value in runs:
        return value
    folder = Path(value)
    if (folder / RUN_ID_FILE).is_file():
        return (folder / RUN_ID_FILE).read_text(encoding="utf-8").strip()
    by_label = [run_id for run_id, label in runs.items() if label and Path(label).resolve() == folder.resolve()]
    if by_label:
        return by_label[0]
    listed = ", ".join(f"{r} ({label})" if label else r for r, label in runs.items()) or "none"
    raise UserError(f"forget --run {value}: no run of that id or folder in {pool.location}; its runs: {listed}")


def _print_history(pool) -> None:
    import time

    records = pool.removals()
    print(f"{pool.location}: {len(records)} removal(s) recorded")
    for r in records:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r["removed_at"]))
        where = f" in scope {r['scope']}" if r["scope"] else ""
        seeds = ", seeds included" if r["with_seeds"] else ""
        print(
            f"  #{r['id']} {when}: {r['removed']} memories of {r['kind']} {r['target']}{where}{seeds}; "
            f"{r['unfolded']} unfolded; by: {r['command']}"
        )


def forget_cmd(args: argparse.Namespace) -> int:
    from ms.retrieval.snapshot import snapshot

    with _open(args) as pool:
        if args.history:
            _print_history(pool)
            return 0
        if (args.agent is None) == (args.run is None):
            raise UserError("forget: name exactly one of --agent NAME and --run RUN")
        kind, target = ("agent", args.agent) if args.agent is not None else ("run", _run_id(args.run, pool))
        if kind == "agent" and target not in pool.count_by("agent"):
            agents = ", ".join(map(str, pool.count_by("agent"))) or "none"
            raise UserError(
                f"forget --agent {target}: no memories of that agent in {pool.location}; its agents: {agents}"
            )
        command = shlex.join(["ms-data", *args.command_line])
        done = pool.forget(
            kind, target, scope=args.scope, with_seeds=args.with_seeds, command=command, dry_run=args.dry_run
        )
        verb = "would remove" if args.dry_run else "removed"
        where = f" in scope {args.scope}" if args.scope else ""
        print(f"{pool.location}: {verb} {done.removed} memories of {kind} {target}{where}")
        if done.counts:
            width = max(len("scope"), *(len(s) for s, _ in done.counts))
            print(f"  {'scope':<{width}}  {'origin':<8} {'memories':>8}")
            for (scope, origin), n in done.counts.items():
                print(f"  {scope:<{width}}  {origin:<8} {n:>8}")
        if done.kept_seeds:
            print(
                f"  {done.kept_seeds} seed memories of {kind} {target} {'would stay' if args.dry_run else 'stay'} "
                f"(--with-seeds removes them too)"
            )
        if done.unfolded:
            print(f"  {done.unfolded} memories that a removed summary had folded in are searchable again")
        if args.dry_run:
            print("  dry run: nothing was changed and nothing recorded")
            return 0
        if done.record_id is not None:
            print(
                f"  audit record #{done.record_id} in the pool's removals table (ms-data forget --history lists them)"
            )
        # Every process's scope snapshots drop the removed memories at their next search, through the
        # pool's change log; here, a fresh read of each scope touched confirms they are gone.
        for scope in sorted({s for s, _ in done.counts}):
            snap = snapshot(pool, scope)
            left = [i for i in done.ids if i in snap.positions and snap.memories[snap.positions[i]] is not None]
            if left:  # the transaction committed, so this would be a bug in the pool, not the user's doing
                raise RuntimeError(f"memories {left[:10]} are still in scope {scope} after their removal")
            print(f"  scope {scope}: {snap.searchable_count} searchable memories now")
        print(
            "  the fine-tuned retriever of a run that trained on them keeps what it learned from them "
            '(README, "Forgetting a writer")'
        )
    return 0


def add_forget(commands) -> None:
    forget = commands.add_parser(
        "forget",
        help="remove a writer agent's memories, or a run's, from a pool (seeds "
        "only with --with-seeds), with an audit record in the pool",
    )
    forget.add_argument(
        "pool", nargs="?", help="a pool file, or a run folder holding pool.sqlite (not with --postgres)"
    )
    forget.add_argument(
        "--postgres",
        action="store_true",
        help="the pool is a PostgreSQL database: --dsn, or the environment variable MS_POOL_DSN",
    )
    forget.add_argument("--dsn", help="with --postgres: a libpq connection string without a password (PGPASSWORD)")
    who = forget.add_mutually_exclusive_group()
    who.add_argument("--agent", help="remove the memories this agent wrote (its seeds count as its own)")
    who.add_argument("--run", help="remove the memories this run admitted: its run id, or its run folder")
    forget.add_argument("--scope", help="only in this scope (a domain, or single)")
    forget.add_argument("--with-seeds", action="store_true", help="remove the target's seed memories too")
    forget.add_argument("--dry-run", action="store_true", help="print what would be removed, change nothing")
    forget.add_argument("--history", action="store_true", help="list the removals recorded in the pool, remove nothing")
    forget.set_defaults(handler=forget_cmd)
