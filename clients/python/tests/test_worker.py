"""The Worker in this process: handlers, concurrency, heartbeats, errors,
the job context."""
import threading
import time

import psycopg
import pytest

import pg_wf
from helpers import job_row, wait_for


def effects(conn, queue):
    return conn.execute("SELECT job_id, attempt, key, note FROM wfpy_test.effects"
                        " WHERE queue = %s ORDER BY at", (queue,)).fetchall()


def test_handler_gets_the_job_and_its_result_is_stored(conn, queue, make_worker):
    w = make_worker(name="t1")
    seen = {}

    @w.handler(queue)
    def handle(job):
        seen.update(payload=job.payload, attempt=job.attempt, worker=job.worker_name,
                    same_session=job.conn.execute("SELECT count(*) FROM wf.jobs WHERE queue = %s"
                                                  " AND id = %s AND owner_pid = pg_backend_pid()",
                                                  (job.queue, job.id)).fetchone()[0])
        return {"echo": job.payload["n"] * 2}

    with w:
        job_id = pg_wf.enqueue(conn, queue, {"n": 21})
        outcome = pg_wf.wait_job(conn, queue, job_id, 10)
    assert outcome == ("done", {"echo": 42}, None)
    assert seen == {"payload": {"n": 21}, "attempt": 1, "worker": "t1", "same_session": 1}
    assert job_row(conn, queue, job_id)[4] == "t1"


def test_step_handlers_and_inputs(conn, queue, make_worker):
    w = make_worker()

    @w.handler(queue, step="fetch")
    def fetch(job):
        return {"text": "hello"}

    @w.handler(queue)  # every other step
    def other(job):
        return {"step": job.step, "upper": job.inputs["fetch"]["text"].upper()}

    with w:
        wid = pg_wf.submit(conn, {"queue": queue, "steps": [
            {"name": "fetch"}, {"name": "shout", "after": ["fetch"]}]})
        outcome = pg_wf.wait_workflow(conn, wid, 10)
    assert outcome.ok
    assert outcome.result == {"shout": {"step": "shout", "upper": "HELLO"}}


def test_concurrency_limit_and_one_session_per_job(conn, queue, make_worker):
    w = make_worker()
    lock = threading.Lock()
    running, peak, pids = [0], [0], set()

    @w.handler(queue, concurrency=3)
    def handle(job):
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        pids.add(job.conn.info.backend_pid)
        time.sleep(0.4)
        with lock:
            running[0] -= 1

    ids = pg_wf.enqueue_batch(conn, queue, [{}] * 9)
    start = time.monotonic()
    with w:
        for job_id in ids:
            assert pg_wf.wait_job(conn, queue, job_id, 10).ok
    took = time.monotonic() - start
    assert peak[0] == 3
    assert len(pids) == 3
    assert 1.1 < took < 3.5  # three rounds of three


def test_waiting_claims_wake_at_the_commit(conn, queue, make_worker):
    w = make_worker(claim_wait=30)
    started = []

    @w.handler(queue)
    def handle(job):
        started.append(time.monotonic())

    with w:
        time.sleep(0.3)  # the slot waits in wf_claim now
        t0 = time.monotonic()
        job_id = pg_wf.enqueue(conn, queue)
        assert pg_wf.wait_job(conn, queue, job_id, 10).ok
    assert started[0] - t0 < 0.5  # not the 30 s of the wait: woken by the commit


def test_heartbeats_keep_a_leased_job(conn, queue, make_worker):
    w = make_worker(lease=0.6)
    beats = []

    @w.handler(queue)
    def handle(job):
        time.sleep(2.0)  # more than three leases, without a heartbeat of its own
        beats.append(job.lost)
        return {"ok": True}

    with w:
        job_id = pg_wf.enqueue(conn, queue)
        assert pg_wf.wait_job(conn, queue, job_id, 10).ok
    status, attempt, last_error, *_ = job_row(conn, queue, job_id)
    assert (status, attempt, last_error) == ("done", 1, None)
    assert beats == [False]


def test_heartbeat_tells_a_handler_its_job_was_cancelled(conn, queue, make_worker, caplog):
    w = make_worker(heartbeat_every=0.1)
    stopped = threading.Event()

    @w.handler(queue)
    def handle(job):
        while not job.lost:
            time.sleep(0.02)
        stopped.set()
        job.heartbeat()  # raises JobLost: the worker drops the job

    with w:
        job_id = pg_wf.enqueue(conn, queue)
        wait_for(lambda: job_row(conn, queue, job_id)[0] == "running", what="running")
        assert pg_wf.cancel(conn, queue, job_id)
        assert stopped.wait(5)
        assert pg_wf.wait_job(conn, queue, job_id, 5).status == "cancelled"
    assert "no longer this worker's" in caplog.text


def test_a_completion_refused_in_its_transaction_still_ends_a_cancelled_job(conn, queue, make_worker):
    # A cancel requested while the job runs: wf_complete ends it cancelled and
    # says false, job.transaction() rolls back (that ending too), and the
    # worker ends the attempt, so the job does not stay running.
    w = make_worker(heartbeat_every=60)
    seen = []

    @w.handler(queue)
    def handle(job):
        with psycopg.connect(conn.info.dsn, autocommit=True) as other:
            assert pg_wf.cancel(other, queue, job.id)
        with job.transaction() as tx:
            tx.execute("SELECT 1")
            seen.append(job.complete({"ok": True}))

    with w:
        job_id = pg_wf.enqueue(conn, queue)
        assert pg_wf.wait_job(conn, queue, job_id, 5).status == "cancelled"
    assert seen == []  # complete() rolled the block back


def test_errors_become_wf_fail(conn, queue, make_worker):
    pg_wf.configure_queue(conn, queue, backoff_base="100 ms", backoff_max="100 ms")
    w = make_worker()

    def inner(payload):
        raise ValueError(f"bad input {payload['n']}")

    @w.handler(queue)
    def handle(job):
        if job.payload.get("permanent"):
            raise pg_wf.PermanentError("no such mailbox")
        if job.payload.get("later") and job.attempt == 1:
            raise pg_wf.RetryAfter(1.0, "429 from the API")
        if job.payload.get("later"):
            return "ok"
        inner(job.payload)

    with w:
        flaky = pg_wf.enqueue(conn, queue, {"n": 7}, max_attempts=2)
        permanent = pg_wf.enqueue(conn, queue, {"permanent": True})
        later = pg_wf.enqueue(conn, queue, {"later": True})
        t0 = time.monotonic()
        assert pg_wf.wait_job(conn, queue, later, 10).ok
        assert time.monotonic() - t0 >= 0.9
        assert pg_wf.wait_job(conn, queue, flaky, 10).status == "failed"
        assert pg_wf.wait_job(conn, queue, permanent, 10).status == "failed"
    status, attempt, error, *_ = job_row(conn, queue, flaky)
    assert attempt == 2
    lines = error.split("\n")
    assert lines[0] == "ValueError: bad input 7"
    assert lines[1].startswith("Traceback (most recent call last")
    assert "in handle" in error and "in inner" in error and "pg_wf/worker.py" not in error
    status, attempt, error, *_ = job_row(conn, queue, permanent)
    assert (status, attempt) == ("failed", 1)
    assert error.startswith("PermanentError: no such mailbox")


def test_format_error_trims_the_traceback():
    def recurse(n):
        if n == 0:
            raise RuntimeError("x" * 10_000)
        recurse(n - 1)

    try:
        recurse(50)
    except RuntimeError as e:
        text = pg_wf.format_error(e)
    assert len(text) <= 4000
    try:
        recurse(50)
    except RuntimeError as e:
        e.args = ("deep",)
        text = pg_wf.format_error(e)
    assert text.startswith("RuntimeError: deep\nTraceback (most recent call last, 44 earlier frames")
    assert text.endswith("raise RuntimeError(\"x\" * 10_000)") and text.count("in recurse") >= 3


def test_a_stale_completion_is_logged_not_raised(conn, queue, make_worker, caplog):
    w = make_worker(heartbeat_every=30)  # no heartbeat in time to tell it
    done = []

    @w.handler(queue)
    def handle(job):
        if job.payload.get("slow"):
            time.sleep(1.0)  # past its max_run_time: the reaper takes it back
        done.append(job.id)
        return {"attempt": job.attempt}

    with w:
        slow = pg_wf.enqueue(conn, queue, {"slow": True}, max_run_time=0.3, max_attempts=1)
        assert pg_wf.wait_job(conn, queue, slow, 10).status == "failed"
        wait_for(lambda: slow in done, what="the slow handler's end")
        after = pg_wf.enqueue(conn, queue)
        assert pg_wf.wait_job(conn, queue, after, 10).ok  # the worker goes on
    assert "wf_complete refused a stale token" in caplog.text
    assert "timed out" in job_row(conn, queue, slow)[2]


def test_effect_and_completion_in_one_transaction(conn, queue, make_worker):
    w = make_worker(heartbeat_every=30)
    after_block = []

    @w.handler(queue)
    def handle(job):
        if job.payload.get("slow"):
            time.sleep(1.0)  # past max_run_time: its completion will be refused
        with job.transaction() as tx:
            tx.execute("INSERT INTO wfpy_test.effects (queue, job_id, attempt, note)"
                       " VALUES (%s, %s, %s, 'effect')", (job.queue, job.id, job.attempt))
            job.complete({"written": True})
            after_block.append(("in block", job.id))
        after_block.append(("after block", job.id))

    with w:
        fast = pg_wf.enqueue(conn, queue)
        slow = pg_wf.enqueue(conn, queue, {"slow": True}, max_run_time=0.3, max_attempts=1)
        assert pg_wf.wait_job(conn, queue, fast, 10).ok
        assert pg_wf.wait_job(conn, queue, slow, 10).status == "failed"
        wait_for(lambda: ("after block", slow) in after_block, what="the slow handler")
    assert [(r[0], r[1]) for r in effects(conn, queue)] == [(fast, 1)]  # the stale one rolled back
    assert ("in block", slow) not in after_block
    assert job_row(conn, queue, fast)[3] == {"written": True}


def test_idempotency_key_is_stable_across_attempts(conn, queue, make_worker):
    pg_wf.configure_queue(conn, queue, backoff_base="50 ms", backoff_max="50 ms")
    w = make_worker(key_prefix="acme-prod")

    @w.handler(queue)
    def handle(job):
        conn2 = job.conn
        conn2.execute("INSERT INTO wfpy_test.effects (queue, job_id, attempt, key)"
                      " VALUES (%s, %s, %s, %s)", (job.queue, job.id, job.attempt, job.idempotency_key))
        if job.attempt < 3:
            raise ConnectionError("the payment API timed out")

    with w:
        derived = pg_wf.enqueue(conn, queue)
        given = pg_wf.enqueue(conn, queue, idempotency_key="charge-order-42")
        assert pg_wf.wait_job(conn, queue, derived, 10).ok
        assert pg_wf.wait_job(conn, queue, given, 10).ok
    keys = {}
    for job_id, attempt, key, _ in effects(conn, queue):
        keys.setdefault(job_id, set()).add(key)
    assert keys == {derived: {f"acme-prod:{queue}:{derived}"}, given: {"charge-order-42"}}
    assert len(effects(conn, queue)) == 6


def test_checkpoint_runs_once_across_a_retry(conn, queue, make_worker):
    pg_wf.configure_queue(conn, queue, backoff_base="50 ms", backoff_max="50 ms")
    w = make_worker()
    calls = []

    @w.handler(queue)
    def handle(job):
        draft = job.checkpoint("draft", lambda: calls.append(job.attempt) or {"text": "v1"})
        if job.attempt == 1:
            raise TimeoutError("the model timed out after the draft")
        final = job.checkpoint("final", lambda: calls.append(job.attempt) or draft["text"] + "!")
        return {"final": final, "restored": sorted(job.checkpoints)}

    with w:
        job_id = pg_wf.enqueue(conn, queue)
        outcome = pg_wf.wait_job(conn, queue, job_id, 10)
    assert outcome.result == {"final": "v1!", "restored": ["draft", "final"]}
    assert calls == [1, 2]  # draft once (attempt 1), final once (attempt 2)


def test_durable_sleep(conn, queue, make_worker):
    w = make_worker()
    runs = []

    @w.handler(queue)
    def handle(job):
        runs.append(time.monotonic())
        job.sleep(0.6)
        job.sleep(0.3, name="second")
        return {"runs": len(runs)}

    with w:
        job_id = pg_wf.enqueue(conn, queue)
        wait_for(lambda: job_row(conn, queue, job_id)[0] == "pending" and runs, what="the park")
        outcome = pg_wf.wait_job(conn, queue, job_id, 10)
    assert outcome.result == {"runs": 3}
    assert runs[1] - runs[0] >= 0.55 and runs[2] - runs[1] >= 0.25
    status, attempt, *_ = job_row(conn, queue, job_id)
    assert (status, attempt) == ("done", 3)
    assert conn.execute("SELECT max_attempts FROM wf.jobs WHERE queue = %s AND id = %s",
                        (queue, job_id)).fetchone()[0] == 7  # sleeps spend no attempt


def test_events(conn, queue, make_worker):
    w = make_worker()
    runs = []

    @w.handler(queue)
    def handle(job):
        runs.append(job.attempt)
        try:
            approval = job.await_event(job.payload["event"], timeout=job.payload.get("timeout"))
        except pg_wf.EventTimeout:
            return {"approved": False}
        return {"approved_by": approval["by"]}

    with w:
        job_id = pg_wf.enqueue(conn, queue, {"event": f"{queue}:approve"})
        wait_for(lambda: job_row(conn, queue, job_id)[0] == "waiting", what="the wait")
        with conn.transaction():  # a signal in the caller's transaction
            assert pg_wf.signal(conn, f"{queue}:approve", {"by": "ann"}) == 1
        assert pg_wf.wait_job(conn, queue, job_id, 10).result == {"approved_by": "ann"}
        # signalled before the await: the signal is kept, the job goes on at once
        pg_wf.signal(conn, f"{queue}:early", {"by": "bob"})
        early = pg_wf.enqueue(conn, queue, {"event": f"{queue}:early"})
        assert pg_wf.wait_job(conn, queue, early, 10).result == {"approved_by": "bob"}
        late = pg_wf.enqueue(conn, queue, {"event": f"{queue}:never", "timeout": 0.3})
        assert pg_wf.wait_job(conn, queue, late, 10).result == {"approved": False}
    assert runs.count(1) == 3 and runs.count(2) == 3


def test_park_inside_a_transaction_is_refused(conn, queue, make_worker):
    w = make_worker()

    @w.handler(queue)
    def handle(job):
        with job.transaction():
            job.sleep(1)

    with w:
        job_id = pg_wf.enqueue(conn, queue, max_attempts=1)
        outcome = pg_wf.wait_job(conn, queue, job_id, 10)
    assert outcome.status == "failed" and "outside a transaction" in outcome.error


def test_child_workflows(conn, queue, make_worker):
    child_queue = queue + ".child"
    pg_wf.configure_queue(conn, child_queue, max_attempts=1)
    w = make_worker()
    runs = []

    @w.handler(queue)
    def parent(job):
        runs.append(job.attempt)
        for lang in ("de", "fr", "xx"):
            job.start_child(lang, {"queue": child_queue, "steps": [
                {"name": "translate", "payload": {"lang": lang}}]})
        outcomes = job.await_children()
        return {lang: [o.status, o.results.get("translate"), o.error and o.error.split("\n")[0]]
                for lang, o in sorted(outcomes.items())}

    @w.handler(child_queue, concurrency=2)
    def translate(job):
        if job.payload["lang"] == "xx":
            raise pg_wf.PermanentError("no such language")
        return {"text": {"de": "Hallo", "fr": "Bonjour"}[job.payload["lang"]]}

    with w:
        job_id = pg_wf.enqueue(conn, queue)
        outcome = pg_wf.wait_job(conn, queue, job_id, 15)
    assert outcome.result == {"de": ["done", {"text": "Hallo"}, None],
                              "fr": ["done", {"text": "Bonjour"}, None],
                              "xx": ["failed", None, "PermanentError: no such language"]}
    assert runs == [1, 2]
    assert conn.execute("SELECT count(*) FROM wf.workflows WHERE child_of = %s",
                        (job_id,)).fetchone()[0] == 3


def test_fan_out_with_add_steps(conn, queue, make_worker):
    w = make_worker()

    @w.handler(queue, step="split", concurrency=2)
    def split(job):
        job.add_steps([{"name": f"page-{n}", "after": ["split"], "payload": {"n": n}}
                       for n in (1, 2, 3)]
                      + [{"name": "join", "after": ["page-1", "page-2", "page-3"]}])
        return {"pages": 3}

    @w.handler(queue, step="join")
    def join(job):
        return {"total": sum(v["words"] for v in job.inputs.values())}

    @w.handler(queue)
    def page(job):
        return {"words": 10 * job.payload["n"]}

    with w:
        wid = pg_wf.submit(conn, {"queue": queue, "steps": [{"name": "split"}]})
        outcome = pg_wf.wait_workflow(conn, wid, 15)
    assert outcome.status == "done"
    assert outcome.result == {"join": {"total": 60}}
    assert pg_wf.workflow(conn, wid)["counts"]["steps"] == 5


def test_progress(conn, queue, make_worker):
    w = make_worker()
    go = threading.Event()

    @w.handler(queue)
    def handle(job):
        job.progress({"done": 1, "of": 2})
        go.wait(5)
        job.progress({"done": 2, "of": 2})

    with w:
        job_id = pg_wf.enqueue(conn, queue)
        wait_for(lambda: job_row(conn, queue, job_id)[5] == {"done": 1, "of": 2}, what="progress")
        go.set()
        assert pg_wf.wait_job(conn, queue, job_id, 10).ok
    assert job_row(conn, queue, job_id)[5] == {"done": 2, "of": 2}


def test_versions(conn, queue, make_worker):
    old = pg_wf.enqueue(conn, queue, version="v1")
    new = pg_wf.enqueue(conn, queue, version="v2")
    w = make_worker(versions="v2")
    ran = []

    @w.handler(queue)
    def handle(job):
        ran.append(job.id)

    with w:
        assert pg_wf.wait_job(conn, queue, new, 10).ok
        assert pg_wf.wait_job(conn, queue, old, 0.5).status == "pending"
    w1 = make_worker(versions=["v1", "v0"])
    w1.register(queue, lambda job: ran.append(job.id))
    with w1:
        assert pg_wf.wait_job(conn, queue, old, 10).ok
    assert ran == [new, old]


def test_signal_with_start_and_wait_workflow(conn, queue, make_worker):
    w = make_worker()

    @w.handler(queue)
    def cart(job):
        items = job.await_event(f"{queue}:checkout")
        return {"checked_out": items}

    spec = {"key": f"{queue}:cart-7", "queue": queue, "steps": [{"name": "cart"}]}
    first = pg_wf.signal_with_start(conn, spec, f"{queue}:item", {"sku": "A-1"})
    again = pg_wf.signal_with_start(conn, spec, f"{queue}:item", {"sku": "B-2"})
    assert first == again
    with w:
        assert pg_wf.wait_workflow(conn, first, 0.3).status == "running"
        pg_wf.signal(conn, f"{queue}:checkout", ["A-1", "B-2"])
        outcome = pg_wf.wait_workflow(conn, first, 10)
    assert outcome.ok and outcome.result == {"cart": {"checked_out": ["A-1", "B-2"]}}


def test_no_handler_for_a_step_fails_the_job(conn, queue, make_worker):
    w = make_worker()
    w.register(queue, lambda job: None, step="known")
    with w:
        job_id = pg_wf.enqueue(conn, queue, step_name="unknown", max_attempts=1)
        outcome = pg_wf.wait_job(conn, queue, job_id, 10)
    assert outcome.status == "failed" and "no handler for step 'unknown'" in outcome.error


def test_stop_gives_back_a_job_that_does_not_finish(conn, queue, make_worker, caplog):
    w = make_worker(shutdown_timeout=0.5, shutdown_retry_in=0.2)
    release = threading.Event()

    @w.handler(queue)
    def handle(job):
        release.wait(10)

    w.start()
    job_id = pg_wf.enqueue(conn, queue)
    wait_for(lambda: job_row(conn, queue, job_id)[0] == "running", what="running")
    t0 = time.monotonic()
    w.stop()
    assert w.join(5)
    assert time.monotonic() - t0 < 2
    status, attempt, error, *_ = job_row(conn, queue, job_id)
    assert status == "pending" and attempt == 1 and "shut down" in error
    release.set()
    w2 = make_worker()
    w2.register(queue, lambda job: {"attempt": job.attempt})
    with w2:
        assert pg_wf.wait_job(conn, queue, job_id, 10).result == {"attempt": 2}
    assert "given back" in caplog.text


def test_worker_reconnects_after_its_sessions_end(conn, queue, make_worker):
    w = make_worker(name=f"rc-{queue[-8:]}", claim_wait=30)
    w.register(queue, lambda job: {"attempt": job.attempt})
    with w:
        first = pg_wf.enqueue(conn, queue)
        assert pg_wf.wait_job(conn, queue, first, 10).ok
        ended = conn.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                             " WHERE application_name LIKE %s", (f"pg_wf {w.name}%",)).fetchone()[0]
        assert ended == 2  # the slot waiting in its claim, and the control connection
        second = pg_wf.enqueue(conn, queue)
        assert pg_wf.wait_job(conn, queue, second, 10).ok


def test_a_worker_role_without_superuser_rights(dsn, conn, queue, make_worker, caplog):
    role = "wfpy_worker"
    conn.execute(f"DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{role}')"
                 f" THEN CREATE ROLE {role}; END IF; END $$")
    conn.execute("SELECT wf_grant(%s, 'work', %s), wf_grant(%s, 'produce', %s)",
                 (role, queue + "*", role, queue + "*"))

    def connect():
        c = psycopg.connect(dsn, autocommit=True)
        c.execute(f"SET ROLE {role}")
        return c

    w = make_worker(connect=connect, lease=1)

    @w.handler(queue)
    def parent(job):
        job.progress({"step": 1})
        job.checkpoint("a", lambda: 1)
        job.start_child("c", {"queue": queue + ".child", "steps": [{"name": "x"}]})
        return {"children": {k: o.status for k, o in job.await_children().items()}}

    w.register(queue + ".child", lambda job: "ok")
    with w:
        job_id = pg_wf.enqueue(conn, queue)
        outcome = pg_wf.wait_job(conn, queue, job_id, 10)
    assert outcome.result == {"children": {"c": "done"}}, outcome
    other = f"elsewhere.{queue}"
    w2 = make_worker(connect=connect, claim_wait=0.2)
    w2.register(other, lambda job: None)
    with w2:  # no right to work there: the claims fail, logged, the worker stays up
        time.sleep(0.5)
    assert "permission denied to work in queue" in caplog.text


def test_a_completion_rolled_back_with_its_block_is_not_taken_for_done(conn, queue, make_worker):
    pg_wf.configure_queue(conn, queue, backoff_base="50 ms", backoff_max="50 ms")
    w = make_worker()

    @w.handler(queue)
    def handle(job):
        with pytest.raises(RuntimeError, match="inside a transaction of your own"):
            with job.conn.transaction():
                job.complete("not like this")
        with job.transaction() as tx:
            job.complete({"attempt": job.attempt})
            if job.attempt == 1:  # the block fails: the completion is undone with it
                tx.execute("SELECT 1 / 0")

    with w:
        job_id = pg_wf.enqueue(conn, queue)
        outcome = pg_wf.wait_job(conn, queue, job_id, 10)
    assert outcome.result == {"attempt": 2}
    assert outcome.error.startswith("DivisionByZero: division by zero")
