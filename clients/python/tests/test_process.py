"""Worker processes: SIGTERM mid-job (graceful shutdown), SIGKILL mid-job
(recovery by the reaper, the job finished exactly once)."""
import os
import signal
import subprocess
import sys
import time

import pytest

import pg_wf
from helpers import job_row, wait_for

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture
def spawn(dsn, tmp_path):
    procs = []

    def start(queue, *args):
        env = dict(os.environ, PG_WF_TEST_DSN=dsn,
                   PYTHONPATH=os.pathsep.join([os.path.dirname(HERE), os.environ.get("PYTHONPATH", "")]))
        log = open(tmp_path / f"worker-{len(procs)}.log", "w+")
        p = subprocess.Popen([sys.executable, os.path.join(HERE, "worker_process.py"), queue]
                             + [str(a) for a in args], env=env, stdout=log, stderr=subprocess.STDOUT)
        p.log = log
        procs.append(p)
        return p

    yield start
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()
        p.log.close()


def output(p):
    p.log.flush()
    p.log.seek(0)
    return p.log.read()


def notes(conn, queue):
    return conn.execute("SELECT job_id, attempt, key, note FROM wfpy_test.effects WHERE queue = %s"
                        " ORDER BY at", (queue,)).fetchall()


def started(conn, queue, job_id, attempt=1):
    return any(r[0] == job_id and r[1] == attempt and r[3] == "start" for r in notes(conn, queue))


def test_sigterm_mid_job_lets_it_finish_and_claims_nothing_more(conn, queue, spawn):
    p = spawn(queue, 10)
    job_id = pg_wf.enqueue(conn, queue, {"seconds": 1.5})
    wait_for(lambda: started(conn, queue, job_id), what="the job's start")
    p.send_signal(signal.SIGTERM)
    time.sleep(0.2)
    later = pg_wf.enqueue(conn, queue, {"seconds": 0})  # after the signal: not claimed
    assert p.wait(10) == 0, output(p)
    status, attempt, error, result, *_ = job_row(conn, queue, job_id)
    assert (status, attempt, error) == ("done", 1, None)
    assert result == {"pid": p.pid, "attempt": 1}
    assert job_row(conn, queue, later)[:2] == ("pending", 0)
    log = output(p)
    assert "received SIGTERM" in log and "stopped" in log and "exits" in log


def test_sigterm_past_the_timeout_gives_the_job_back(conn, queue, spawn):
    p = spawn(queue, 0.5)
    job_id = pg_wf.enqueue(conn, queue, {"seconds": 30, "retry_seconds": 0})
    wait_for(lambda: started(conn, queue, job_id), what="the job's start")
    t0 = time.monotonic()
    p.send_signal(signal.SIGTERM)
    assert p.wait(10) == 0, output(p)
    assert time.monotonic() - t0 < 3
    status, attempt, error, *_ = job_row(conn, queue, job_id)
    assert status == "pending" and attempt == 1 and "shut down" in error
    # retried after the short retry_in, by the next worker
    q = spawn(queue, 10)
    outcome = pg_wf.wait_job(conn, queue, job_id, 15)
    assert outcome.ok and outcome.result == {"pid": q.pid, "attempt": 2}, output(q)
    assert [n for n in notes(conn, queue) if n[3] == "effect"] == [(job_id, 2, str(q.pid), "effect")]
    q.send_signal(signal.SIGINT)
    assert q.wait(10) == 0


def test_a_second_signal_gives_back_at_once(conn, queue, spawn):
    p = spawn(queue, 60)
    job_id = pg_wf.enqueue(conn, queue, {"seconds": 30})
    wait_for(lambda: started(conn, queue, job_id), what="the job's start")
    p.send_signal(signal.SIGINT)
    time.sleep(0.3)
    p.send_signal(signal.SIGINT)
    assert p.wait(5) == 0, output(p)
    assert job_row(conn, queue, job_id)[0] == "pending"
    assert "shut down at once" in job_row(conn, queue, job_id)[2]


def test_sigkill_mid_job_is_recovered_and_finished_once(conn, queue, spawn):
    victim = spawn(queue, 10)
    job_id = pg_wf.enqueue(conn, queue, {"seconds": 30, "retry_seconds": 0.5})
    wait_for(lambda: started(conn, queue, job_id), what="the job's start")
    rescuer = spawn(queue, 10)
    time.sleep(0.3)  # the rescuer waits in its claim
    victim.kill()
    victim.wait()
    outcome = pg_wf.wait_job(conn, queue, job_id, 15)
    assert outcome.ok, output(rescuer)
    assert outcome.result == {"pid": rescuer.pid, "attempt": 2}
    status, attempt, error, *_ = job_row(conn, queue, job_id)
    assert attempt == 2 and error.startswith("worker lost")
    effects = [n for n in notes(conn, queue) if n[3] == "effect"]
    assert effects == [(job_id, 2, str(rescuer.pid), "effect")]  # exactly once
    starts = [n for n in notes(conn, queue) if n[3] == "start"]
    assert [(n[1], n[2]) for n in starts] == [(1, str(victim.pid)), (2, str(rescuer.pid))]
    rescuer.send_signal(signal.SIGTERM)
    assert rescuer.wait(10) == 0
