"""A worker process for the tests that signal and kill workers:
python3 worker_process.py QUEUE [SHUTDOWN_TIMEOUT]  (DSN in PG_WF_TEST_DSN).

Each job: notes its start in wfpy_test.effects ('start'), works
payload["seconds"] (on a later attempt payload["retry_seconds"], default 0)
in small sleeps, then writes its side effect ('effect')
and completes in one transaction."""
import logging
import os
import sys
import time

import pg_wf

queue = sys.argv[1]
shutdown_timeout = float(sys.argv[2]) if len(sys.argv) > 2 else 10.0
logging.basicConfig(level=logging.DEBUG, stream=sys.stderr,
                    format="%(asctime)s %(process)d %(name)s %(levelname)s %(message)s")
logging.getLogger("psycopg").setLevel(logging.WARNING)

worker = pg_wf.Worker(os.environ["PG_WF_TEST_DSN"], name=f"proc-{os.getpid()}", claim_wait=5,
                      shutdown_timeout=shutdown_timeout, shutdown_retry_in=0.2,
                      heartbeat_every=0.5)


@worker.handler(queue)
def work(job):
    job.conn.execute("INSERT INTO wfpy_test.effects (queue, job_id, attempt, key, note)"
                     " VALUES (%s, %s, %s, %s, 'start')",
                     (job.queue, job.id, job.attempt, str(os.getpid())))
    seconds = job.payload.get("seconds", 0) if job.attempt == 1 else job.payload.get("retry_seconds", 0)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        time.sleep(0.02)
    with job.transaction() as tx:
        tx.execute("INSERT INTO wfpy_test.effects (queue, job_id, attempt, key, note)"
                   " VALUES (%s, %s, %s, %s, 'effect')",
                   (job.queue, job.id, job.attempt, str(os.getpid())))
        job.complete({"pid": os.getpid(), "attempt": job.attempt})


worker.run()
logging.getLogger("worker_process").info("exits")
