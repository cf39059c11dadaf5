"""Helpers shared by the tests."""
import time


def wait_for(predicate, timeout=10.0, interval=0.02, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def job_row(conn, queue, job_id):
    return conn.execute("SELECT status, attempt, last_error, result, worker, progress"
                        "  FROM wf.jobs WHERE queue = %s AND id = %s", (queue, job_id)).fetchone()
