#!/usr/bin/python3
"""Runs one ```python block of README.md as a reader would run it, for
test/t/020_readme.pl (run with /usr/bin/python3, which has psycopg 3).

    run_block.py BLOCK_FILE

BLOCK_FILE holds the block's code after as many empty lines as come before
it in README.md, so that errors and tracebacks name README.md's lines. The
block runs as the module __main__ with the two names the README leaves to
its reader:
  send_email(payload)  returns the message id "m-<payload's to>"; for an
                       address beginning with "flaky" it raises once
                       (SMTP 451), so the worker's wf_fail path runs too;
  the table `sent`     which the test creates (message_id text).
libpq's environment (PGHOST, PGPORT) points the block's "dbname=app" at the
test's node.

A worker loops forever, so a watcher thread stops the process: it runs the
query README_DONE_SQL (one boolean) every 20 ms on its own connection and
exits 0 once it is true, or 1 after README_TIMEOUT seconds (default 20). An
exception out of the block exits 2.
"""
import os
import sys
import threading
import time
import traceback

import psycopg

path = sys.argv[1]
with open(path, encoding="utf-8") as f:
    source = f.read()
done_sql = os.environ["README_DONE_SQL"]
timeout = float(os.environ.get("README_TIMEOUT", "20"))

failed_once = set()


def send_email(payload):
    to = payload["to"]
    if to.startswith("flaky") and to not in failed_once:
        failed_once.add(to)
        raise RuntimeError("SMTP 451 try later")
    return "m-" + to


def watch():
    deadline = time.monotonic() + timeout
    try:
        with psycopg.connect("dbname=app", autocommit=True) as conn:
            while time.monotonic() < deadline:
                if conn.execute(done_sql).fetchone()[0]:
                    print("done", flush=True)
                    os._exit(0)
                time.sleep(0.02)
    except Exception:
        traceback.print_exc()
    print(f"not done after {timeout} s: {done_sql}", file=sys.stderr, flush=True)
    os._exit(1)


watcher = threading.Thread(target=watch, daemon=True)
watcher.start()
code = compile(source, "README.md", "exec")
try:
    exec(code, {"__name__": "__main__", "send_email": send_email})
except BaseException:
    traceback.print_exc()
    sys.stderr.flush()
    os._exit(2)
# A block that ends by itself (a producer): wait for its work to be done.
watcher.join()
