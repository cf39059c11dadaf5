"""Producer calls: in the caller's transaction, arguments, waits."""
import datetime
import uuid

import psycopg
import pytest

import pg_wf
from helpers import job_row


def count(conn, queue):
    return conn.execute("SELECT count(*) FROM wf.jobs WHERE queue = %s", (queue,)).fetchone()[0]


def test_enqueue_joins_the_callers_transaction(conn, queue):
    with pytest.raises(RuntimeError):
        with conn.transaction():
            conn.execute("CREATE TEMP TABLE orders (id int)")
            pg_wf.enqueue(conn, queue, {"order": 1})
            raise RuntimeError("the business transaction fails")
    assert count(conn, queue) == 0
    with conn.transaction():
        job_id = pg_wf.enqueue(conn, queue, {"order": 2})
    assert count(conn, queue) == 1
    assert conn.execute("SELECT payload FROM wf.jobs WHERE queue = %s AND id = %s",
                        (queue, job_id)).fetchone()[0] == {"order": 2}


def test_enqueue_on_a_cursor_and_a_non_autocommit_connection(dsn, queue):
    with psycopg.connect(dsn) as c:  # psycopg's default: a transaction until commit
        with c.cursor() as cur:
            pg_wf.enqueue(cur, queue)
        c.rollback()
        pg_wf.enqueue(c, queue, {"kept": True})
        c.commit()
        assert count(c, queue) == 1


def test_enqueue_arguments(conn, queue):
    later = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1)
    a = pg_wf.enqueue(conn, queue, {"n": 1}, idempotency_key="welcome-1", priority=5,
                      max_attempts=2, key="tenant-a", max_run_time=30)
    assert pg_wf.enqueue(conn, queue, {"n": 1}, idempotency_key="welcome-1") == a
    with pytest.raises(psycopg.errors.UniqueViolation):
        pg_wf.enqueue(conn, queue, {"n": 2}, idempotency_key="welcome-1")
    b = pg_wf.enqueue(conn, queue, run_at=later, depends_on=[a], max_run_time="5 minutes")
    d1 = pg_wf.enqueue(conn, queue, {"rev": 1}, dedup_key="d", run_at=later)
    d2 = pg_wf.enqueue(conn, queue, {"rev": 2}, dedup_key="d", on_duplicate="replace", run_at=later)
    assert d1 == d2
    rows = dict((r[0], r[1:]) for r in conn.execute(
        "SELECT id, status, priority, max_attempts, key, payload, max_run_time"
        "  FROM wf.jobs WHERE queue = %s", (queue,)))
    assert rows[a][:4] == ("pending", 5, 2, "tenant-a")
    assert rows[a][5] == datetime.timedelta(seconds=30)
    assert rows[b][0] == "blocked" and rows[b][4] == {}
    assert rows[b][5] == datetime.timedelta(minutes=5)
    assert rows[d1][4] == {"rev": 2}


def test_enqueue_batch(conn, queue):
    ids = pg_wf.enqueue_batch(conn, queue, [{"n": 1}, {"n": 2}, {"n": 3}], keys=["a", None, "b"])
    assert len(ids) == 3 and ids == sorted(ids)
    keys = [r[0] for r in conn.execute("SELECT key FROM wf.jobs WHERE queue = %s ORDER BY id",
                                       (queue,))]
    assert keys == ["a", None, "b"]


def test_submit_and_signal_join_the_callers_transaction(conn, queue):
    spec = {"name": "t", "queue": queue, "steps": [{"name": "a"}, {"name": "b", "after": ["a"]}]}
    with pytest.raises(ZeroDivisionError):
        with conn.transaction():
            pg_wf.submit(conn, spec)
            1 / 0
    assert count(conn, queue) == 0
    wid = pg_wf.submit(conn, spec)
    assert isinstance(wid, uuid.UUID)
    assert pg_wf.workflow(conn, wid)["counts"]["steps"] == 2
    assert pg_wf.signal(conn, f"{queue}:nobody-waits", {"x": 1}) == 0
    assert pg_wf.cancel_workflow(conn, wid) == 2


def test_wait_job_times_out_with_the_status_then(conn, queue):
    job_id = pg_wf.enqueue(conn, queue, {"n": 1})
    outcome = pg_wf.wait_job(conn, queue, job_id, 0.1)
    assert outcome == ("pending", None, None)
    assert not outcome.finished and not outcome.ok
    assert pg_wf.cancel(conn, queue, job_id)
    assert pg_wf.wait_job(conn, queue, job_id, datetime.timedelta(seconds=1)).status == "cancelled"
    assert pg_wf.retry(conn, queue, job_id)
    assert job_row(conn, queue, job_id)[0] == "pending"


def test_configure_queue(conn, queue):
    pg_wf.configure_queue(conn, queue, max_attempts=3, backoff_base="200 ms", lease=2.5,
                          paused=True)
    job_id = pg_wf.enqueue(conn, queue)
    assert conn.execute("SELECT max_attempts FROM wf.jobs WHERE queue = %s AND id = %s",
                        (queue, job_id)).fetchone()[0] == 3
    assert conn.execute("SELECT count(*) FROM wf_claim(%s)", (queue,)).fetchone()[0] == 0  # paused
    pg_wf.configure_queue(conn, queue, paused=False)
    assert conn.execute("SELECT count(*) FROM wf_claim(%s)", (queue,)).fetchone()[0] == 1
    with pytest.raises(TypeError):
        pg_wf.configure_queue(conn, queue, max_attemps=3)


def test_schedule(conn, queue):
    name = f"{queue}:nightly"
    assert pg_wf.schedule(conn, name, "30 2 * * *", queue, {"kind": "nightly"}).minute == 30
    assert pg_wf.unschedule(conn, name) is True
    assert pg_wf.unschedule(conn, name) is False


def test_bulk_retry_and_cancel(conn, queue):
    ids = pg_wf.enqueue_batch(conn, queue, [{"n": n} for n in range(4)])
    rows = conn.execute("SELECT id, attempt FROM wf_claim(%s, max_jobs => 4)", (queue,)).fetchall()
    for job_id, attempt in rows:
        conn.execute("SELECT wf_fail(%s, %s, %s, %s, permanent => true)",
                     (queue, job_id, attempt, "SMTP 550" if job_id % 2 else "timeout"))
    assert pg_wf.retry_where(conn, queue, error_contains="smtp") == 2
    assert pg_wf.cancel_where(conn, queue, statuses=["failed"]) == 2
    assert pg_wf.cancel_where(conn, queue, ids=ids[:1]) in (0, 1)
    statuses = sorted(r[0] for r in conn.execute("SELECT status FROM wf.jobs WHERE queue = %s",
                                                 (queue,)))
    assert statuses.count("cancelled") >= 2 and len(statuses) == 4


def test_enable_schedule(conn, queue):
    name = f"{queue}:hourly"
    pg_wf.schedule(conn, name, "@hourly", queue)
    assert pg_wf.enable_schedule(conn, name, False) is True
    assert conn.execute("SELECT enabled FROM wf.schedules WHERE name = %s", (name,)).fetchone()[0] is False
    assert pg_wf.enable_schedule(conn, name) is True
    assert pg_wf.enable_schedule(conn, name + ":none", True) is False
    pg_wf.unschedule(conn, name)


def test_producer_calls_on_an_async_connection(dsn, queue):
    import asyncio

    async def main():
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as aconn:
            async with aconn.transaction():
                job_id = await pg_wf.enqueue(aconn, queue, {"n": 1}, priority=3)
                batch = await pg_wf.enqueue_batch(aconn, queue, [{}, {}])
            await pg_wf.configure_queue(aconn, queue, max_attempts=2)
            wid = await pg_wf.submit(aconn, {"queue": queue, "steps": [{"name": "a"}]})
            async with aconn.cursor() as cur:
                outcome = await pg_wf.wait_job(cur, queue, job_id, 0.05)
            return job_id, batch, wid, outcome, await pg_wf.wait_workflow(aconn, wid, 0.05)

    job_id, batch, wid, outcome, wf_outcome = asyncio.run(main())
    assert isinstance(job_id, int) and len(batch) == 2 and isinstance(wid, uuid.UUID)
    assert outcome == ("pending", None, None) and wf_outcome.status == "running"
