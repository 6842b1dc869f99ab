import multiprocessing
import time
from dataclasses import asdict

import pytest

from ms.pool import SCHEMA_VERSION, Memory, Pool, scope_for


def item(question="Write a limerick about a cat.", answer="There once was a cat...", **overrides):
    base = dict(
        scope="literary", agent="limerick", domain="literary", question=question, answer=answer, origin="stream"
    )
    return base | overrides


@pytest.fixture
def pool(where):
    """A fresh pool on each backend (conftest.where)."""
    with where.open() as p:
        yield p


def test_same_content_twice_is_one_row(pool):
    first = pool.add([item()], step=1)
    assert first[0] is not None
    assert pool.add([item()], step=2) == [None]
    assert pool.add([item(question="another"), item(question="another")], step=3)[1] is None
    assert pool.count() == 2


def test_whitespace_only_differences_dedupe(pool):
    pool.add([item(question="Write a limerick  about a cat.", answer="line one\nline two")], step=1)
    again = item(question="  Write a limerick about\ta cat. ", answer="line one \n\n line two\n")
    assert pool.add([again], step=2) == [None]
    assert pool.count() == 1


def test_same_content_in_two_scopes_is_two_rows(pool):
    ids = pool.add([item(scope="literary"), item(scope="single")], step=1)
    assert None not in ids
    assert pool.count("literary") == pool.count("single") == 1


def test_memories_lists_only_its_own_scope(pool):
    pool.add([item(question=f"q{i}", scope=scope) for i, scope in enumerate(["literary", "logic", "literary"])], step=1)
    assert [m.question for m in pool.memories("literary")] == ["q0", "q2"]
    assert [m.question for m in pool.memories("logic")] == ["q1"]
    assert pool.ids("logic") == [pool.memories("logic")[0].id]
    assert pool.scopes() == ["literary", "logic"]


def test_scope_for_both_modes_and_a_bad_one():
    assert scope_for("plan", "domain") == "plan"
    assert scope_for("plan", "single") == "single"
    with pytest.raises(ValueError, match="domain, single"):
        scope_for("plan", "shared")


WORKERS, ADDS, SHARED_EVERY = 4, 1000, 10  # every 10th add is content all four processes add


def _add_one_at_a_time(where, worker, barrier, shared_won):
    with where.open() as pool:
        barrier.wait()  # write at the same moment as the other processes
        won = 0
        for i in range(ADDS):
            if i % SHARED_EVERY == 0:  # the same content, added by every worker at about the same time
                won += pool.add([item(question=f"shared question {i}", agent=worker)], step=i) != [None]
            else:
                assert pool.add([item(question=f"{worker} question {i}", agent=worker)], step=i) != [None]
        shared_won.put(won)


def test_four_processes_adding_at_once_lose_and_duplicate_nothing(where):
    ctx = multiprocessing.get_context("spawn")
    barrier, shared_won = ctx.Barrier(WORKERS), ctx.Queue()
    names = [f"w{n}" for n in range(WORKERS)]
    workers = [ctx.Process(target=_add_one_at_a_time, args=(where, name, barrier, shared_won)) for name in names]
    for w in workers:
        w.start()
    won = [shared_won.get(timeout=300) for _ in workers]
    for w in workers:
        w.join(timeout=60)
    assert [w.exitcode for w in workers] == [0] * WORKERS
    shared = ADDS // SHARED_EVERY
    assert sum(won) == shared  # each shared content was new to exactly one of the processes
    with where.open() as pool:
        memories = pool.memories("literary")
    questions = sorted(m.question for m in memories)
    expected = sorted(
        [f"shared question {i}" for i in range(0, ADDS, SHARED_EVERY)]
        + [f"{w} question {i}" for w in names for i in range(ADDS) if i % SHARED_EVERY]
    )
    assert questions == expected  # nothing lost, nothing twice
    assert len(memories) == WORKERS * (ADDS - shared) + shared


def test_mark_retrieved_sets_step_and_time(pool):
    a, b = pool.add([item(question="a"), item(question="b")], step=1)
    before = time.time()
    pool.mark_retrieved([a], step=7)
    marked, untouched = pool.get([a, b])
    assert marked.last_retrieved_step == 7 and marked.last_retrieved_at >= before
    assert untouched.last_retrieved_step is None and untouched.last_retrieved_at is None
    with pytest.raises(KeyError, match="999"):
        pool.mark_retrieved([b, 999], step=8)
    assert pool.get([b])[0].last_retrieved_step is None  # the failed call changed nothing


def test_version_grows_with_adds(pool):
    assert pool.version("literary") == 0
    (first,) = pool.add([item(question="a")], step=1)
    assert pool.version("literary") == first
    pool.add([item(question="elsewhere", scope="logic")], step=2)
    pool.add([item(question="a")], step=3)  # already present
    assert pool.version("literary") == first
    (second,) = pool.add([item(question="b")], step=4)
    assert pool.version("literary") == second > first


def test_get_preserves_order_and_names_unknown_ids(pool):
    ids = pool.add([item(question=q) for q in "abc"], step=1)
    order = [ids[2], ids[0], ids[1]]
    assert [m.id for m in pool.get(order)] == order
    assert [m.question for m in pool.get(order)] == ["c", "a", "b"]
    with pytest.raises(KeyError, match="12345"):
        pool.get([ids[0], 12345])


@pytest.mark.parametrize("key", ["scope", "agent", "domain", "question", "answer", "origin"])
@pytest.mark.parametrize("value", [None, "", "   "])
def test_missing_or_empty_required_key_is_named(pool, key, value):
    bad = item()
    if value is None:
        del bad[key]
    else:
        bad[key] = value
    with pytest.raises(ValueError, match=repr(key)):
        pool.add([item(question="fine"), bad], step=1)
    assert pool.count() == 0  # nothing from the batch went in


def test_reopening_the_pool_keeps_the_data(where):
    with where.open() as pool:
        (first,) = pool.add([item(score=80.0, sources=[3, 4])], step=1)
        saved = pool.get([first])
    with where.open() as pool:
        assert pool.get([first]) == saved
        assert pool.add([item()], step=2) == [None]
        assert pool.add([item(question="new")], step=2)[0] > first


def test_set_fields_changes_only_mutable_columns(pool):
    short, long_ = pool.add([item(question="s", tier="short"), item(question="l")], step=1)
    assert [m.id for m in pool.memories("literary", tier="short")] == [short]
    pool.set_fields(long_, consolidated=True, importance=0.25)
    assert [m.id for m in pool.memories("literary", include_consolidated=False)] == [short]
    assert pool.get([long_])[0].importance == 0.25
    with pytest.raises(ValueError, match="answer"):
        pool.set_fields(short, answer="rewritten")
    with pytest.raises(ValueError, match="importance"):
        pool.set_fields(short, importance=1.5)
    with pytest.raises(KeyError):
        pool.set_fields(999, tier="long")


def test_memory_round_trips_every_field(pool):
    (mid,) = pool.add([item(score=72.5, importance=0.4, origin="summary", sources=[1, 2])], step=5)
    memory = pool.get([mid])[0]
    assert isinstance(memory, Memory)
    d = asdict(memory)
    assert (d["score"], d["importance"], d["origin"], d["sources"]) == (72.5, 0.4, "summary", [1, 2])
    assert (d["added_step"], d["tier"], d["consolidated"]) == (5, "long", False)
    assert pool.count_by("origin") == {"summary": 1}


# ---- runs: every memory records the run that admitted it (issue 12) ------------------------------


def items(tag: str, n: int, **overrides) -> list[dict]:
    return [item(question=f"{tag} question {i}", answer=f"{tag} answer {i}", **overrides) for i in range(n)]


def test_removed_ids_are_never_given_again(where):
    with where.open(run_id="first") as pool:
        ids = pool.add(items("first", 3), step=1)
        assert pool.forget_run("first") == 3
    with where.open(run_id="second") as pool:
        [new] = pool.add(items("second", 1), step=1)
    assert new > max(ids)  # a reader that held the old ids cannot mistake a new memory for one


def test_forget_run_keeps_seeds_and_other_runs(where):
    with where.open(run_id="a") as a:
        a.add(items("seed", 2, origin="seed") + items("a", 2), step=1)
    with where.open(run_id="b") as b:
        b.add(items("b", 1), step=1)
        assert b.forget_run("a") == 2
        assert b.tally(["run_id", "origin"]) == {("a", "seed"): 2, ("b", "stream"): 1}


def test_forgetting_a_summary_restores_the_other_runs_memories_it_folded_in(where):
    with where.open(run_id="b") as b:
        folded = b.add(items("b", 2, tier="short"), step=1)
    with where.open(run_id="a") as a:  # a's stm_ltm consolidates b's short-term items
        [summary] = a.add([item(question="summary", answer="both", origin="summary", sources=folded)], step=2)
        for memory_id in folded:
            a.set_fields(memory_id, tier="long", consolidated=True)
        assert a.forget_run("a") == 1
        assert [(m.tier, m.consolidated) for m in a.get(folded)] == [("long", False)] * 2
        with pytest.raises(KeyError):
            a.get([summary])


def test_pool_stats_counts_per_run_scope_agent_and_origin(tmp_path, capsys):
    from ms.cli.data import main as ms_data
    from ms.common.errors import USER_ERROR_EXIT

    path = tmp_path / "p.sqlite"
    with Pool(path, run_id="run-1", run_label="outputs/one") as pool:
        pool.add(items("seed", 4, origin="seed") + items("one", 2), step=0)
    with Pool(path, run_id="run-2", run_label="outputs/two") as pool:
        pool.add(items("two", 3, agent="sonnet"), step=1)
    assert ms_data(["pool-stats", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"{path}: 9 memories, 2 run(s)"
    rows = {line.split()[0]: line.split()[1:] for line in out[1:] if line.strip() and not line.startswith("by ")}
    assert rows["run-1"] == ["outputs/one", "4", "2", "6"] and rows["run-2"] == ["outputs/two", "0", "3", "3"]
    assert rows["literary"] == ["4", "5", "9"]
    assert rows["limerick"] == ["4", "2", "6"] and rows["sonnet"] == ["0", "3", "3"]
    assert ms_data(["pool-stats", str(tmp_path / "missing.sqlite")]) == USER_ERROR_EXIT


def test_a_schema_1_pool_is_migrated_in_place(tmp_path):
    import sqlite3

    path = tmp_path / "old.sqlite"
    with sqlite3.connect(path) as old:  # the schema-1 table, as files written before run ids have it
        old.execute("""CREATE TABLE memories (id INTEGER PRIMARY KEY, scope TEXT NOT NULL, agent TEXT NOT NULL,
            domain TEXT NOT NULL, question TEXT NOT NULL, answer TEXT NOT NULL, score REAL, importance REAL,
            origin TEXT NOT NULL, added_step INTEGER NOT NULL, added_at REAL NOT NULL, last_retrieved_step INTEGER,
            last_retrieved_at REAL, content_hash TEXT NOT NULL, tier TEXT NOT NULL DEFAULT 'long',
            consolidated INTEGER NOT NULL DEFAULT 0, sources TEXT, UNIQUE (scope, content_hash))""")
        old.execute(
            "INSERT INTO memories (id, scope, agent, domain, question, answer, origin, added_step, added_at,"
            " content_hash) VALUES (7, 'logic', 'pun', 'logic', 'q', 'a', 'seed', 0, 0, 'h')"
        )
        old.execute("PRAGMA user_version = 1")
    with Pool(path, run_id="new") as pool:
        [kept] = pool.get([7])
        assert (kept.question, kept.run_id, kept.backbone) == ("q", None, None)
        [added] = pool.add(items("new", 1), step=1)
        assert added > 7 and pool.get([added])[0].run_id == "new"
    with sqlite3.connect(path) as check:
        assert check.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 6


def test_the_change_log_keeps_one_row_per_memory_and_readers_behind_still_see_every_change(tmp_path):
    import sqlite3

    path = tmp_path / "pool.sqlite"
    with Pool(path) as pool:
        a, b, c = pool.add([item(question=q) for q in "abc"], step=1)
        start = pool.changes("literary", c, 0).last_change
        for step in range(2, 50):
            pool.mark_retrieved([a, b], step=step)
        pool.set_fields(c, importance=0.9)
        behind = pool.changes("literary", c, start)
        assert sorted(m.id for m in behind.changed) == [a, b, c]
        caught_up = pool.changes("literary", c, behind.last_change)
        assert caught_up.changed == [] and caught_up.last_change == behind.last_change
        pool.set_fields(c, importance=0.8)  # c's is the log's newest row: the change needs a newer seq
        again = pool.changes("literary", c, behind.last_change)
        assert [m.id for m in again.changed] == [c]
    log = sqlite3.connect(path)
    assert log.execute("SELECT count(*) FROM memory_changes").fetchone()[0] == 3
    # A file whose log kept every change (written before the log was pruned) is pruned when opened.
    log.executemany("INSERT INTO memory_changes (memory_id, scope) VALUES (?, 'literary')", [(a,)] * 5)
    log.commit()
    log.close()
    with Pool(path) as pool:
        assert [m.id for m in pool.changes("literary", c, again.last_change).changed] == [a]
    log = sqlite3.connect(path)
    assert log.execute("SELECT count(*) FROM memory_changes").fetchone()[0] == 3
    log.close()


def _set_schema(where, version: int, *statements: str) -> None:
    """Write an older or newer pool's state, as ms of another version would have left it."""
    if where.backend == "sqlite":
        import sqlite3

        with sqlite3.connect(where.target) as db:
            for statement in statements:
                db.execute(statement)
            db.execute(f"PRAGMA user_version = {version}")
        return
    import psycopg

    with psycopg.connect(where.target, autocommit=True) as db:
        for statement in statements:
            db.execute(statement)
        db.execute(f"UPDATE pool_state SET schema_version = {version}")


def _schema_of(where) -> int:
    if where.backend == "sqlite":
        import sqlite3

        with sqlite3.connect(where.target) as db:
            return db.execute("PRAGMA user_version").fetchone()[0]
    import psycopg

    with psycopg.connect(where.target) as db:
        return db.execute("SELECT schema_version FROM pool_state").fetchone()[0]


def test_a_schema_3_pool_gains_the_utility_columns_in_place(where):
    with where.open() as pool:
        [kept] = pool.add([item()], step=1)
    # SQLite before 3.35 cannot drop columns; this one can, and so a schema-3 table is rebuilt here.
    _set_schema(
        where,
        3,
        "ALTER TABLE memories DROP COLUMN utility",
        "ALTER TABLE memories DROP COLUMN utility_n",
        "ALTER TABLE memories DROP COLUMN retired_step",
    )
    with where.open() as pool:
        assert (pool.get([kept])[0].utility, pool.get([kept])[0].utility_n) == (None, 0)
        pool.record_utility({kept: [0.5, 1.5]})
        assert pool.get([kept])[0].utility == 1.0
        assert pool.add([item(question="new")], step=2)[0] > kept
    assert _schema_of(where) == SCHEMA_VERSION


def test_a_pool_of_a_newer_schema_is_refused_by_name(where):
    from ms.pool import PoolFileError

    with where.open() as pool:
        pool.add([item()], step=1)
    _set_schema(where, SCHEMA_VERSION + 1)
    with pytest.raises(PoolFileError, match=f"holds schema {SCHEMA_VERSION + 1}, which this version of ms cannot read"):
        where.open()


def test_a_servers_error_is_one_line_with_the_password_masked(monkeypatch):
    from ms.pool.postgres_backend import failure_line

    monkeypatch.setenv("PGPASSWORD", "s3cret")
    assert failure_line(RuntimeError("auth failed\nfor password s3cret")) == "auth failed for password ***"
    monkeypatch.delenv("PGPASSWORD")
    assert failure_line(RuntimeError()) == "RuntimeError"
