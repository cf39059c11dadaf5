#!/usr/bin/python3
"""A seeded fuzzer of pg_wf's SQL API (run by test/t/019_fuzz.pl).

Several clients (threads, each with its own connection) call every wf_*
function, in and out of explicit transactions (some with a SAVEPOINT and a
ROLLBACK TO, a short statement_timeout or lock_timeout, a SET LOCAL ROLE),
with arguments that are mostly valid -- known queues, the tokens of the
claims they hold, real job and workflow ids -- and otherwise boundary ones:
NULL, '', strings at and past every length limit, 0, -1, INT and BIGINT
limits, intervals of 0, -1 s, 100 and 101 years, infinite timestamps, huge
and deeply nested JSON, wrong JSON shapes, malformed workflow specs and cron
strings, unicode and control characters. A fraction of the calls run as a
non-superuser role (--role) that holds rights on some queues only, so the
42501 paths run too. The functions of 1.6 run the same way: children
started by held claims (the same names again, stale tokens, specs with a
"key"), parents parked on them, fan-outs by wf_complete_with_steps that
name the completing step and the steps it ran after (done), or bad ones
(unknown or unfinished "after", duplicate names, '[]', not an array),
progress near its 8192-byte limit, wf_wait_job and wf_wait_workflow with
timeouts of 100 ms at most (so no client stalls), wf_signal_with_start
with keys shared by all clients (so they race), reserved "wf:" event
names, wf_retry_where and wf_cancel_where with filters and bad statuses,
versions on enqueue, claims and queues. Now and then a client terminates another client's
backend (pg_terminate_backend) or the pg_wf reaper; the killed client
reconnects.

Every call is counted per function, with the SQLSTATE of each error. An
error of class XX (XX000 internal error, corruption) or 58 (system error),
a crash state (57P02, 57P03), an out-of-resources error (class 53), a call
that hung until the safety statement_timeout, or a connection lost that our
own pg_terminate_backend did not cause is "unexpected". The last line of
stdout is one JSON object with the figures.

Reproducing: each client draws from random.Random(seed + client index), so
a seed fixes the sequence of choices each client makes for the same answers
from the server. The answers (which jobs a claim gets, which ids exist) and
the interleaving of clients depend on timing, so a rerun with the same seed
makes the same kinds of calls with the same boundary values, not
necessarily on the same jobs. --trace FILE writes every call (SQL,
arguments cut to 200 characters, outcome) as JSON lines.

Run with Debian's python (psycopg 3): /usr/bin/python3 test/fuzz/fuzz.py
--dsn 'host=... dbname=postgres' --seconds 60 --clients 4 [--seed N]
[--role wf_fuzz_user]. The role's rights (given by 019_fuzz.pl): produce
on fz.*, work on fz.a and fz.b, signal on ev.*, operate on fz.a,
administer on fz.c.
"""

import argparse
import collections
import datetime
import json
import random
import threading
import time
import uuid

import psycopg
import psycopg.types.string

INT32_MAX = 2**31 - 1
INT32_MIN = -(2**31)
INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)

# Queues: the role may produce in fz.*, work in fz.a and fz.b, operate in
# fz.a, administer fz.c; other.q it may not touch.
QUEUES = ["fz.a", "fz.b", "fz.c", "fz.lease", "fz.max", "other.q"]
QUEUE_WEIGHTS = [6, 5, 3, 2, 2, 1]
EVENTS = ["ev.a", "ev.b", "ev.c", "other.e"]
SCHEDULES = ["fz_s1", "fz_s2", "fz_s3"]
STEPS = ["fetch", "summarize", "draft", "publish"]
CAPABILITIES = ["produce", "work", "signal", "operate", "administer"]
DEFAULT_TIMEOUT = "20s"  # a call that runs into it hung: unexpected

# Boundary values, shared by all clients (built once: some are large).
BIG = 1024 * 1024
QUEUE_BOUNDARY = [None, "", " ", "q" * 128, "q" * 129, "é" * 64, "é" * 65, "bad\nq",
                  "bad\x01q", "tab\tq", "del\x7fq", "ü🚀q", "*", "fz.*", "FZ.A",
                  "x" * 100000, "q'; SELECT 1; --"]
LABEL_BOUNDARY = [None, "", " ", "w" * 256, "w" * 257, "é" * 128, "é" * 129, "nl\nw",
                  "ctl\x01w", "🚀" * 64, "🚀" * 65, "quote'\"\\", "x" * 100000]
KEY_BOUNDARY = [None, "", "k" * 512, "k" * 513, "schedule:x", "schedule:fz_s1:0",
                "ctl\x02k", "🔑", "é" * 256, "é" * 257]
INT32_BOUNDARY = [None, 0, -1, 1, INT32_MAX, INT32_MIN, INT32_MAX - 1]
INT64_BOUNDARY = [None, 0, -1, 1, INT64_MAX, INT64_MIN]
INTERVAL_BOUNDARY = [None, "0", "-1 s", "1 us", "1 ms", "100 years", "101 years",
                     "-100 years", "178000000 years", "1 day -25 hours", "1 mon -30 days",
                     "99 years 11 mons 29 days 23:59:59", "-0.5 s", "2 hours"]
TIMESTAMP_BOUNDARY = [None, "infinity", "-infinity", "epoch", "294276-12-31 23:59:59+00",
                      "4714-11-24 00:00:00+00 BC", "2100-01-01", "yesterday", "tomorrow",
                      "1999-12-31 23:59:60"]
UUID_BOUNDARY = [None, "00000000-0000-0000-0000-000000000000",
                 "ffffffff-ffff-ffff-ffff-ffffffffffff"]


def deep_json(depth):
    return "[" * depth + "]" * depth


JSON_BOUNDARY = [None, "{}", "[]", "null", "1", '"s"', "true", "-0", "1e1000",
                 '{"a": 1, "a": 2}', '{"é": "🚀", "ctl": "\\u0001"}', '"\\u0000"',
                 '"\\ud800"', deep_json(1000), deep_json(200000),
                 json.dumps({"big": "x" * (BIG + 100)}),          # past wf.max_payload_size
                 json.dumps({"near": "x" * (BIG - 4096)}),        # just under it
                 json.dumps([{"n": i} for i in range(5000)]),
                 "{bad", ""]
CRON_VALID = ["* * * * *", "*/5 * * * *", "0 0 * * *", "@hourly", "@daily", "@weekly",
              "@monthly", "@yearly", "0 9 * * mon-fri", "0 0 29 2 *", "0 0 1 JAN *",
              "15,45 */2 1-15 * *", "59 23 31 12 *", "0 0 * * 7"]
CRON_BOUNDARY = [None, "", " ", "60 * * * *", "* 24 * * *", "* * 0 * *", "* * 32 * *",
                 "* * * 13 *", "* * * * 8", "*/0 * * * *", "5-1 * * * *",
                 "1,,2 * * * *", "* * * *", "* * * * * *", "0 0 31 2 *", "0 0 30 2 *",
                 "@reboot", "@every 5s", "a b c d e", "🚀 * * * *", "*/99999999999 * * * *",
                 "-1 * * * *", "* " * 5000, "1-2-3 * * * *", "* * * * MON-FRI-SAT"]
BATCH_BOUNDARY = ["[1, 2, \"x\", null, []]", "[null]", json.dumps([{}] * 100001),
                  json.dumps([{"x": "y" * 1000}] * 1100), "[" + "{}," * 3 + "]"]
MANY_IDS = list(range(1, 10002))
DEPENDS_BOUNDARY = [None, [], [None], [-1], [0], [INT64_MAX], [INT64_MIN], MANY_IDS,
                    [1, 1, 1], [1, None]]
ROLES = ["wf_fuzz_other", "-", "wf_owner", "pg_monitor", None, "public"]
CAPABILITY_BOUNDARY = [None, "", "PRODUCE", "bogus", "produce ", "work,signal"]
# 1.6: versions, child names, workflow keys shared by all clients (so that
# wf_signal_with_start and keyed wf_submit race), reserved event names.
VERSIONS = ["v1", "v2", "v3"]
VERSION_BOUNDARY = [None, "", " ", "v" * 256, "v" * 257, "é" * 129, "ctl\x01v", "🚀"]
VERSIONS_BOUNDARY = [None, [], [None], ["v1", None], ["v" * 257], ["x" * 100000], [""],
                     ["v%d" % i for i in range(10000)], ["v1", "v1", "v1"]]
CHILD_NAMES = ["c0", "c1", "c2", "c3"]
WORKFLOW_KEYS = ["wk0", "wk1", "wk2"]
RESERVED_EVENTS = ["wf:", "wf:children", "wf:child:c0", "wf:x", "wf:" + "x" * 300]
WAIT_TIMEOUTS = ["0", "1 us", "1 ms", "10 ms", "50 ms", "100 ms"]
WAIT_TIMEOUT_BOUNDARY = [None, "-1 s", "-0.5 s", "-100 years", "1 day -25 hours",
                         "1 mon -30 days", "-1 us", "0.1 s"]  # none longer than 100 ms
STATUSES = ["blocked", "pending", "running", "waiting", "failed"]
STATUSES_BOUNDARY = [None, [], [None], ["done"], ["cancelled"], ["bogus"], ["PENDING"],
                     ["pending", "pending"], ["pending", None], [""], ["x" * 100000],
                     STATUSES + ["done", "cancelled"]]
ERROR_CONTAINS = [None, "boom", "boom 1", "BOOM", "oo", "%", "_", "\\", "timed out"]
GRANT_QUEUES = ["fz.a", "fz.*", "*", "other.*", "ev.*", "fz.d", "", None, "**", "a*b",
                "x" * 129, "bad\nq"]


class Lost(Exception):
    """The client's connection is gone."""


class TxEnded(Exception):
    """A statement of an explicit transaction failed: it was rolled back."""


def truncate(value, n=200):
    s = value if isinstance(value, str) else repr(value)
    return s if len(s) <= n else s[:n] + "...(%d)" % len(s)


class Shared:
    def __init__(self, args):
        self.args = args
        self.lock = threading.Lock()
        self.pids = {}              # client index -> backend pid
        self.killed = set()         # backend pids we terminated
        self.next_kill_at = time.monotonic() + 1.0
        self.started = time.monotonic()
        self.stop_at = self.started + args.seconds
        self.long_waits = []        # what the watchdog saw
        self.done = threading.Event()  # the clients have finished
        self.terminated_clients = 0
        self.terminated_reapers = 0
        self.unexpected = []
        self.ids = collections.deque(maxlen=400)        # (queue, id) of jobs seen
        self.tokens = collections.deque(maxlen=400)     # (queue, id, attempt) ever claimed
        self.workflows = collections.deque(maxlen=100)  # workflow ids from wf_submit
        self.dead = collections.deque(maxlen=200)       # (queue, id) failed or cancelled
        self.parents = collections.deque(maxlen=100)    # tokens that started children
        self.trace = open(args.trace, "w", encoding="utf-8") if args.trace else None

    def note_unexpected(self, record):
        with self.lock:
            if len(self.unexpected) < 100:
                self.unexpected.append(record)

    def write_trace(self, record):
        if self.trace:
            line = json.dumps(record, ensure_ascii=True)
            with self.lock:
                self.trace.write(line + "\n")


class Watchdog(threading.Thread):
    """Every second: the sessions of the database (clients, the reaper)
    whose transaction or statement has run for more than 5 s -- their
    state, what they wait for, the pids that block them, their query -- for
    the report: a call that hangs comes with who held it up."""

    QUERY = """
SELECT pid, backend_type, application_name, state,
       round(extract(epoch FROM now() - xact_start)::numeric, 1),
       round(extract(epoch FROM now() - query_start)::numeric, 1),
       wait_event_type || ':' || wait_event, pg_blocking_pids(pid)::text,
       query_start::text, left(query, 300)
  FROM pg_stat_activity
 WHERE datname = current_database() AND pid <> pg_backend_pid()
   AND (now() - xact_start > interval '5 s'
        OR state = 'active' AND now() - query_start > interval '5 s')"""
    COLUMNS = ["pid", "backend_type", "application_name", "state", "xact_s", "query_s",
               "wait", "blocked_by", "query_start", "query"]

    def __init__(self, shared):
        super().__init__(name="fuzz-watchdog", daemon=True)
        self.shared = shared

    def run(self):
        try:
            conn = psycopg.connect(self.shared.args.dsn, autocommit=True,
                                   application_name="wf_fuzz_watchdog")
        except psycopg.Error:
            return
        seen = set()
        while not self.shared.done.wait(1):
            try:
                rows = conn.execute(self.QUERY).fetchall()
            except psycopg.Error:
                continue
            for r in rows:
                rec = dict(zip(self.COLUMNS, [str(v) if v is not None else None for v in r]))
                key = (rec["pid"], rec["query_start"])
                if key in seen or len(self.shared.long_waits) >= 50:
                    continue
                seen.add(key)
                rec["t"] = round(time.monotonic() - self.shared.started, 1)
                with self.shared.lock:
                    self.shared.long_waits.append(rec)
        conn.close()


def fcall(fn, pos, named=()):
    """SELECT * FROM fn(...): positional (value, type) pairs, then named
    (name, value, type) triples; every value a parameter with a cast."""
    parts = ["%%s::%s" % t for _, t in pos] + ["%s => %%s::%s" % (n, t) for n, _, t in named]
    params = [v for v, _ in pos] + [v for _, v, _ in named]
    return "SELECT * FROM %s(%s)" % (fn, ", ".join(parts)), params


class Client(threading.Thread):
    def __init__(self, idx, shared):
        super().__init__(name="fuzz-%d" % idx, daemon=True)
        self.idx = idx
        self.shared = shared
        self.args = shared.args
        self.rng = random.Random(self.args.seed + idx)
        # Kill decisions depend on the clock: their own stream, so that they
        # do not shift the arguments' one.
        self.krng = random.Random("%d/kill/%d" % (self.args.seed, idx))
        self.conn = None
        self.pid = None
        self.held = []              # tokens this session claimed and holds
        self.awaited = collections.deque(maxlen=50)  # events this client's jobs await
        self.steps = {}             # held token -> (workflow_id, step_name, done input names)
        self.tx_enqueued = []       # (queue, id) enqueued by the open transaction
        self.stats = collections.defaultdict(
            lambda: {"calls": 0, "errors": collections.Counter(),
                     "outcomes": collections.Counter()})
        self.control_errors = collections.Counter()
        self.tx = collections.Counter()
        self.role_calls = 0
        self.reconnects = 0
        self.losses_ours = 0
        self.losses_unexpected = 0
        self.slowest = 0.0
        self.recent = collections.deque(maxlen=20)
        self.in_tx = False
        self.as_role = False
        self.short_timeout = False  # a statement_timeout shorter than the default is set
        self.seq = 0
        self.bad_p = 0.0

    # ------------------------------------------------------------ connection

    def connect(self):
        delay = 0.05
        while True:
            try:
                self.conn = psycopg.connect(self.args.dsn, autocommit=True,
                                            application_name="wf_fuzz_%d" % self.idx)
                # JSON comes back as text: a payload nested 1,000 deep is
                # beyond Python's json module, and nothing here reads it.
                for t in ("json", "jsonb"):
                    self.conn.adapters.register_loader(t, psycopg.types.string.TextLoader)
                self.conn.execute("SET statement_timeout = '%s'" % DEFAULT_TIMEOUT)
                break
            except psycopg.OperationalError:
                if time.monotonic() > self.shared.stop_at + 30:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 1.0)
        self.pid = self.conn.info.backend_pid
        with self.shared.lock:
            self.shared.pids[self.idx] = self.pid
        self.in_tx = self.as_role = self.short_timeout = False

    def lost(self, e, what):
        """The connection is gone: ours (a pg_terminate_backend) or not."""
        with self.shared.lock:
            ours = self.pid in self.shared.killed
        if ours:
            self.losses_ours += 1
        else:
            self.losses_unexpected += 1
            self.shared.note_unexpected({
                "kind": "connection lost", "client": self.idx, "pid": self.pid,
                "during": what, "sqlstate": getattr(e, "sqlstate", None),
                "message": truncate(str(e), 500), "recent": list(self.recent)})
        try:
            self.conn.close()
        except Exception:
            pass
        # Its claims are the reaper's now; their tokens stay for stale calls.
        self.held = []
        raise Lost()

    def is_lost(self, e):
        return (self.conn.broken or self.conn.closed
                or getattr(e, "sqlstate", None) in ("57P01", "57P02", "57P03")
                or isinstance(e, psycopg.OperationalError) and e.sqlstate is None)

    def control(self, sql):
        """BEGIN, COMMIT, SET ...: True if it ran."""
        record = {"t": round(time.monotonic() - self.shared.started, 3), "c": self.idx,
                  "sql": sql}
        try:
            self.conn.execute(sql)
            record["out"] = "ok"
            return True
        except psycopg.Error as e:
            record["out"] = e.sqlstate or "connection_lost"
            if self.is_lost(e):
                self.lost(e, sql)
            self.control_errors["%s: %s" % (sql.split()[0], e.sqlstate)] += 1
            return False
        finally:
            self.shared.write_trace(record)

    # ----------------------------------------------------------------- calls

    def call(self, fn, sql, params):
        """Runs one wf_* call; returns (rows, columns) or None on an error."""
        st = self.stats[fn]
        st["calls"] += 1
        self.seq += 1
        t0 = time.monotonic()
        record = {"t": round(t0 - self.shared.started, 3), "c": self.idx, "n": self.seq,
                  "fn": fn, "sql": sql,
                  "args": [truncate(p) for p in params], "tx": self.in_tx,
                  "role": self.as_role}
        try:
            cur = self.conn.execute(sql, params)
            rows = cur.fetchall() if cur.description else []
            cols = [d.name for d in cur.description] if cur.description else []
        except psycopg.Error as e:
            took = time.monotonic() - t0
            self.slowest = max(self.slowest, took)
            record["took"] = round(took, 3)
            if self.is_lost(e):
                st["errors"][e.sqlstate or "connection_lost"] += 1
                record["out"] = e.sqlstate or "connection_lost"
                self.recent.append(record)
                self.shared.write_trace(record)
                self.lost(e, sql)
            code = e.sqlstate or "client:" + type(e).__name__
            st["errors"][code] += 1
            record["out"] = code
            record["msg"] = truncate(str(e), 300)
            self.recent.append(record)
            self.shared.write_trace(record)
            hung = code == "57014" and not self.short_timeout
            if (code[:2] in ("XX", "58", "53") or code in ("57P02", "57P03") or hung
                    or code.startswith("client:")):
                self.shared.note_unexpected({
                    "kind": "hang" if hung else "error", "client": self.idx, "function": fn,
                    "sqlstate": code, "message": truncate(str(e), 1000),
                    "diag": {"context": truncate(e.diag.context or "", 500),
                             "source": "%s:%s %s" % (e.diag.source_file, e.diag.source_line,
                                                      e.diag.source_function)},
                    "sql": sql, "args": record["args"], "in_tx": self.in_tx,
                    "as_role": self.as_role, "took_s": round(took, 3),
                    "recent": list(self.recent)})
            return None
        took = time.monotonic() - t0
        self.slowest = max(self.slowest, took)
        st["outcomes"][self.outcome(rows, cols)] += 1
        record["out"] = "ok"
        record["took"] = round(took, 3)
        self.recent.append(record)
        self.shared.write_trace(record)
        return rows, cols

    @staticmethod
    def outcome(rows, cols):
        if len(cols) == 1 and len(rows) == 1:
            v = rows[0][0]
            if v == "":
                return "void"
            if v is None or isinstance(v, (bool, str)):
                return str(v) if not isinstance(v, str) or len(v) < 20 else "text"
            if isinstance(v, int):
                return "0" if v == 0 else ">0"
            return "value"
        if "id" in cols:
            n = sum(1 for r in rows if r[cols.index("id")] is not None)
            jobs = "jobs=0" if n == 0 else "jobs=1" if n == 1 else "jobs>1"
            if "completed" in cols:
                return "completed=%s,%s" % (rows[0][cols.index("completed")] if rows else None, jobs)
            return jobs
        return "rows=%d" % min(len(rows), 2)

    # ------------------------------------------------------- argument makers

    def maybe(self, p=0.5):
        return self.rng.random() < p

    def pick(self, valid, boundary):
        """A valid value (a callable), or a boundary one while bad_p says so."""
        if self.rng.random() < self.bad_p:
            return self.rng.choice(boundary)
        return valid()

    def queue(self):
        return self.pick(lambda: self.rng.choices(QUEUES, QUEUE_WEIGHTS)[0], QUEUE_BOUNDARY)

    def label(self, pool):
        return self.pick(lambda: self.rng.choice(pool), LABEL_BOUNDARY)

    def payload(self):
        return self.pick(lambda: json.dumps({"n": self.rng.randrange(10**6), "c": self.idx}),
                         JSON_BOUNDARY)

    def interval(self, valid):
        return self.pick(lambda: self.rng.choice(valid), INTERVAL_BOUNDARY)

    def int32(self, lo, hi):
        return self.pick(lambda: self.rng.randint(lo, hi), INT32_BOUNDARY)

    def timestamp(self):
        def near():
            t = datetime.datetime.now(datetime.timezone.utc)
            return (t + datetime.timedelta(seconds=self.rng.uniform(-5, 3))).isoformat()
        return self.pick(near, TIMESTAMP_BOUNDARY)

    def known_id(self):
        """(queue, id) of a job seen, or a made-up one."""
        if self.shared.ids and self.rng.random() < 0.9:
            try:
                return self.rng.choice(self.shared.ids)
            except IndexError:
                pass
        return (self.rng.choice(QUEUES), self.rng.randint(1, 1000))

    def token(self):
        """(queue, id, attempt): mostly one this session holds."""
        r = self.rng.random()
        if self.held and r < 0.85:
            t = self.rng.choice(self.held)
        elif self.shared.tokens and r < 0.95:
            try:
                t = self.rng.choice(self.shared.tokens)   # another's, or stale
            except IndexError:
                t = ("fz.a", 1, 1)
        else:
            q, i = self.known_id()
            t = (q, i, self.rng.randint(0, 3))
        if self.rng.random() < self.bad_p:
            which = self.rng.randrange(3)
            t = list(t)
            t[which] = self.rng.choice([QUEUE_BOUNDARY, INT64_BOUNDARY, INT32_BOUNDARY][which])
            t = tuple(t)
        return t

    def forget(self, token):
        self.steps.pop(token, None)
        try:
            self.held.remove(token)
        except ValueError:
            pass

    def note_claims(self, result):
        if result is None:
            return
        rows, cols = result
        if "id" not in cols:
            return
        i_id, i_att, i_q = cols.index("id"), cols.index("attempt"), cols.index("queue")
        i_wf, i_step, i_in = cols.index("workflow_id"), cols.index("step_name"), cols.index("inputs")
        for r in rows:
            if r[i_id] is None:
                continue
            t = (r[i_q], r[i_id], r[i_att])
            self.held.append(t)
            self.shared.tokens.append(t)
            if r[i_wf] is not None:
                # The steps it ran after are done: their results are its inputs.
                done = []
                if r[i_in] is not None and len(r[i_in]) < 100000:
                    try:
                        inputs = json.loads(r[i_in])
                        if isinstance(inputs, dict):
                            done = list(inputs)
                    except (ValueError, RecursionError):
                        pass
                self.steps[t] = (str(r[i_wf]), r[i_step] if r[i_step] is not None
                                 else str(r[i_id]), done)
        if len(self.held) > 600:       # the rest stays claimed until the session ends
            for t in self.held[:100]:
                self.steps.pop(t, None)
            del self.held[:100]

    def note_ids(self, queue, result):
        if result is None or queue not in QUEUES:
            return
        for r in result[0]:
            if r[0] is not None:
                self.shared.ids.append((queue, r[0]))
                if self.in_tx:
                    self.tx_enqueued.append((queue, r[0]))

    def version(self):
        return self.pick(lambda: self.rng.choice(VERSIONS), VERSION_BOUNDARY)

    # --------------------------------------------------------- the functions

    def f_enqueue(self):
        q = self.queue()
        named = []
        if self.maybe(0.6):
            named.append(("payload", self.payload(), "jsonb"))
        if self.maybe(0.2):
            named.append(("run_at", self.timestamp(), "timestamptz"))
        if self.maybe(0.3):
            named.append(("priority", self.int32(-5, 5), "int"))
        if self.maybe(0.2):
            named.append(("max_attempts", self.int32(1, 5), "int"))
        if self.maybe(0.15):
            named.append(("idempotency_key",
                          self.pick(lambda: "k%d" % self.rng.randrange(30), KEY_BOUNDARY), "text"))
        if self.maybe(0.1):
            wf = self.rng.choice(self.shared.workflows) if self.shared.workflows else None
            named.append(("workflow_id", self.pick(lambda: wf, UUID_BOUNDARY), "uuid"))
        if self.maybe(0.15):
            named.append(("step_name", self.label(STEPS), "text"))
        if self.maybe(0.25):
            named.append(("depends_on", self.pick(
                lambda: [self.known_id()[1] for _ in range(self.rng.randint(1, 3))],
                DEPENDS_BOUNDARY), "bigint[]"))
        if self.maybe(0.2):
            named.append(("version", self.version(), "text"))
        sql, params = fcall("wf_enqueue", [(q, "text")], named)
        self.note_ids(q, self.call("wf_enqueue", sql, params))

    def f_enqueue_batch(self):
        q = self.queue()
        def payloads():
            n = self.rng.choice([1, 2, 5, 20, 100])
            return json.dumps([{"b": i, "c": self.idx} for i in range(n)])
        p = self.pick(payloads, JSON_BOUNDARY + BATCH_BOUNDARY)
        sql, params = fcall("wf_enqueue_batch", [(q, "text"), (p, "jsonb")])
        self.note_ids(q, self.call("wf_enqueue_batch", sql, params))

    def claim_args(self, with_wait):
        named = []
        if self.maybe(0.3):
            named.append(("worker", self.label(["w1", "w2", "wörker"]), "text"))
        if self.maybe(0.5):
            named.append(("max_jobs", self.pick(
                lambda: self.rng.choice([1, 1, 2, 3, 5, 10, 50]),
                INT32_BOUNDARY + [10000, 10001]), "int"))
        if self.maybe(0.2):
            named.append(("lease", self.interval(["200 ms", "1 s", "5 s", "1 hour", "100 years"]),
                          "interval"))
        wait = None
        if with_wait and self.maybe(0.3):
            wait = self.pick(lambda: self.rng.choice(["0", "1 ms", "20 ms", "100 ms", "300 ms"]),
                             INTERVAL_BOUNDARY)
            named.append(("wait", wait, "interval"))
        if self.maybe(0.25):
            named.append(("versions", self.pick(
                lambda: self.rng.choice([["v1"], ["v2"], ["v1", "v2"], VERSIONS]),
                VERSIONS_BOUNDARY), "text[]"))
        return named, wait

    def with_short_timeout(self, fn, sql, params):
        """A call that may wait long (a wait of 100 years): under a short
        statement_timeout (57014 then is the expected end)."""
        if self.in_tx:
            self.control("SET LOCAL statement_timeout = '300ms'")
            self.short_timeout = True
            return self.call(fn, sql, params)
        self.control("SET statement_timeout = '300ms'")
        self.short_timeout = True
        try:
            return self.call(fn, sql, params)
        finally:
            self.short_timeout = False
            if not self.conn.closed:
                self.control("SET statement_timeout = '%s'" % DEFAULT_TIMEOUT)

    def f_claim(self):
        q = self.queue()
        named, wait = self.claim_args(True)
        sql, params = fcall("wf_claim", [(q, "text")], named)
        small = wait in (None, "0", "1 ms", "20 ms", "100 ms", "300 ms", "1 us", "-1 s",
                         "101 years", "-100 years", "178000000 years", "1 day -25 hours",
                         "1 mon -30 days", "-0.5 s")
        if small:
            res = self.call("wf_claim", sql, params)
        else:
            res = self.with_short_timeout("wf_claim", sql, params)
        self.note_claims(res)

    def f_complete_and_claim(self):
        t = self.token()
        named, _ = self.claim_args(False)
        if self.maybe(0.5):
            named.insert(0, ("result", self.payload(), "jsonb"))
        sql, params = fcall("wf_complete_and_claim",
                            [(t[0], "text"), (t[1], "bigint"), (t[2], "int")], named)
        res = self.call("wf_complete_and_claim", sql, params)
        if res is not None:
            self.forget(t)
            self.note_claims(res)

    def f_heartbeat(self):
        t = self.token()
        named = []
        if self.maybe(0.3):
            named.append(("extend", self.interval(["1 s", "1 minute", "100 years"]), "interval"))
        sql, params = fcall("wf_heartbeat", [(t[0], "text"), (t[1], "bigint"), (t[2], "int")],
                            named)
        res = self.call("wf_heartbeat", sql, params)
        if res is not None and res[0] and res[0][0][0] is False and self.maybe():
            self.forget(t)       # else it is completed or failed later (cancel requested)

    def f_complete(self):
        t = self.token()
        named = [("result", self.payload(), "jsonb")] if self.maybe(0.6) else []
        sql, params = fcall("wf_complete", [(t[0], "text"), (t[1], "bigint"), (t[2], "int")],
                            named)
        if self.call("wf_complete", sql, params) is not None:
            self.forget(t)

    def f_complete_many(self):
        if self.held and self.rng.random() > self.bad_p:
            q = self.rng.choice(self.held)[0]
            mine = [t for t in self.held if t[0] == q]
            chosen = self.rng.sample(mine, self.rng.randint(1, len(mine)))
            ids = [t[1] for t in chosen]
            attempts = [t[2] for t in chosen]
        else:
            chosen = []
            q = self.queue()
            ids, attempts = self.rng.choice([
                (None, None), ([], []), ([1], None), ([1, 2], [1]), ([None], [1]), ([1], [None]),
                (MANY_IDS, [1] * 10001), ([INT64_MAX, INT64_MIN], [INT32_MAX, 0]),
                ([self.known_id()[1]] * 3, [1, 1, 1]), ([-1], [-1])])
        named = []
        if self.maybe(0.4):
            n = len(ids) if ids else 1
            named.append(("results", self.pick(
                lambda: [json.dumps({"r": i}) for i in range(n)],
                [None, [], [None] * n, ["{}"] * (n + 1), ["[]"], ['"x"' * 1]]), "jsonb[]"))
        sql, params = fcall("wf_complete_many",
                            [(q, "text"), (ids, "bigint[]"), (attempts, "int[]")], named)
        if self.call("wf_complete_many", sql, params) is not None:
            for t in chosen:
                self.forget(t)

    def f_fail(self):
        t = self.token()
        err = self.pick(lambda: "boom %d" % self.rng.randrange(100),
                        [None, "", "e" * (BIG + 10), "ctl\x01", "🚀", "x" * 100000])
        named = []
        if self.maybe(0.4):
            named.append(("retry_in", self.interval(["0", "10 ms", "200 ms", "1 s", "1 hour"]),
                          "interval"))
        if self.maybe(0.3):
            named.append(("permanent", self.pick(lambda: self.maybe(0.3), [None]), "boolean"))
        sql, params = fcall("wf_fail", [(t[0], "text"), (t[1], "bigint"), (t[2], "int"),
                                        (err, "text")], named)
        res = self.call("wf_fail", sql, params)
        if res is not None:
            self.forget(t)
            if res[0] and res[0][0][0] in ("failed", "cancelled"):
                self.shared.dead.append(t[:2])

    def operate_target(self):
        q, i = self.known_id()
        if self.rng.random() < self.bad_p:
            if self.maybe():
                q = self.rng.choice(QUEUE_BOUNDARY)
            else:
                i = self.rng.choice(INT64_BOUNDARY)
        return q, i

    def f_retry(self):
        q, i = self.operate_target()
        if self.shared.dead and self.rng.random() < 0.6:
            try:
                q, i = self.rng.choice(self.shared.dead)
            except IndexError:
                pass
        sql, params = fcall("wf_retry", [(q, "text"), (i, "bigint")])
        self.call("wf_retry", sql, params)

    def f_cancel(self):
        q, i = self.operate_target()
        sql, params = fcall("wf_cancel", [(q, "text"), (i, "bigint")])
        res = self.call("wf_cancel", sql, params)
        if res is not None and res[0] and res[0][0][0] is True:
            self.shared.dead.append((q, i))

    def f_sweep(self):
        self.call("wf_sweep", "SELECT * FROM wf_sweep()", [])

    def f_recover_lost_claims(self):
        self.call("wf_recover_lost_claims", "SELECT * FROM wf_recover_lost_claims()", [])

    def f_configure_queue(self):
        q = self.queue()
        named = []
        if self.maybe(0.3):
            named.append(("max_attempts", self.int32(1, 8), "int"))
        if self.maybe(0.2):
            named.append(("backoff_base", self.interval(["10 ms", "100 ms", "1 s"]), "interval"))
        if self.maybe(0.2):
            named.append(("backoff_max", self.interval(["1 s", "10 s", "1 hour"]), "interval"))
        if self.maybe(0.3):
            named.append(("lease", self.interval(["0", "300 ms", "2 s", "1 hour"]), "interval"))
        if self.maybe(0.3):
            named.append(("max_running", self.int32(1, 4), "int"))
        if self.maybe(0.3):
            # Paused mostly briefly: the next configure of the queue unpauses it.
            named.append(("paused", self.pick(lambda: self.maybe(0.15), [None]), "boolean"))
        if self.maybe(0.15):
            # '' removes the queue's default version again.
            named.append(("version", self.pick(lambda: self.rng.choice(VERSIONS + ["", ""]),
                                               VERSION_BOUNDARY), "text"))
        sql, params = fcall("wf_configure_queue", [(q, "text")], named)
        self.call("wf_configure_queue", sql, params)

    def valid_spec(self):
        rng = self.rng
        n = rng.randint(1, 6)
        names = ["s%d" % i for i in range(n)]
        steps = []
        for i, name in enumerate(names):
            s = {"name": name}
            if rng.random() < 0.4:
                s["queue"] = rng.choices(QUEUES, QUEUE_WEIGHTS)[0]
            if i and rng.random() < 0.7:
                s["after"] = rng.sample(names[:i], rng.randint(1, min(i, 3)))
            if rng.random() < 0.3:
                s["payload"] = {"i": i}
            if rng.random() < 0.2:
                s["max_attempts"] = rng.randint(1, 5)
            if rng.random() < 0.2:
                s["priority"] = rng.randint(-5, 5)
            if rng.random() < 0.1:
                t = datetime.datetime.now(datetime.timezone.utc)
                s["run_at"] = (t + datetime.timedelta(seconds=rng.uniform(-5, 3))).isoformat()
            steps.append(s)
            if rng.random() < 0.1:
                s["version"] = rng.choice(VERSIONS)
        spec = {"name": "flow%d" % rng.randrange(50), "steps": steps}
        if rng.random() < 0.95:
            spec["queue"] = rng.choices(QUEUES, QUEUE_WEIGHTS)[0]
        if rng.random() < 0.1:
            spec["version"] = rng.choice(VERSIONS)
        if rng.random() < 0.1:
            spec["key"] = rng.choice(WORKFLOW_KEYS)   # shared: racing submits
        return spec

    def bad_spec(self):
        rng = self.rng
        spec = self.valid_spec()
        steps = spec["steps"]
        s = rng.choice(steps)
        kind = rng.randrange(24)
        if kind == 0:
            s["afterr"] = ["s0"]
        elif kind == 1:
            spec["unknown"] = 1
        elif kind == 2:
            steps.append(dict(steps[0]))                      # duplicate name
        elif kind == 3:
            s["after"] = ["nope"]
        elif kind == 4:
            steps.append({"name": "c1", "after": ["c2"]})
            steps.append({"name": "c2", "after": ["c1"]})     # a cycle
        elif kind == 5:
            s["after"] = [s["name"]]                          # itself
        elif kind == 6:
            s["name"] = rng.choice([5, None, "", "n" * 257, "é" * 129, "ctl\x01", [], {}])
        elif kind == 7:
            s["after"] = rng.choice(["s0", [1], {}, None, [None], [""]])
        elif kind == 8:
            spec["steps"] = rng.choice([{}, [], None, "x", 1, [1], [[]], [None]])
        elif kind == 9:
            del spec["steps"]
        elif kind == 10:
            return rng.choice(["[]", "null", "1", '"s"', "true", "{}", deep_json(100000)])
        elif kind == 11:
            s["queue"] = rng.choice(["", "q" * 129, "bad\nq", 5, None, [], "ü🚀"])
        elif kind == 12:
            spec.pop("queue", None)
            for st in steps:
                st.pop("queue", None)                         # no queue at all
        elif kind == 13:
            s["run_at"] = rng.choice(["not a date", "infinity", "-infinity", 12, None,
                                      "294277-01-01T00:00:00Z", "2026-13-01", ""])
        elif kind == 14:
            s["payload"] = "x" * (BIG + 10)
        elif kind == 15:
            s["max_attempts"] = rng.choice([0, -1, INT32_MAX + 1, 1.5, "3", None, INT32_MAX])
        elif kind == 16:
            s["priority"] = rng.choice([INT32_MAX + 1, INT32_MIN - 1, "x", 1.5, None, INT32_MAX])
        elif kind == 17:
            if rng.random() < 0.1:
                spec["steps"] = [{"name": "s%d" % i} for i in range(100001)]
            else:
                spec["steps"] = [{"name": "s%d" % i, "after": ["s%d" % (i - 1)] if i else []}
                                 for i in range(rng.choice([200, 1000]))]
        elif kind == 18:
            spec["name"] = rng.choice([5, None, "", "x" * 100000, [], "ctl\x01"])
        elif kind == 19:
            s["payload"] = json.loads(deep_json(500))
        elif kind == 20:
            spec["queue"] = rng.choice(["", None, 5, "q" * 129])
        elif kind == 21:
            spec["key"] = rng.choice(["", None, 5, [], "k" * 257, "k" * 100000, "ctl\x01"])
        elif kind == 22:
            (s if rng.random() < 0.5 else spec)["version"] = rng.choice(
                ["", None, 5, [], {}, "v" * 257, "ctl\x01"])
        else:
            s["after"] = ["s%d" % i for i in range(len(steps))] * 3  # repeats, incl. itself
        return json.dumps(spec)

    def f_submit(self):
        if self.rng.random() < max(self.bad_p, 0.15):
            spec = self.bad_spec()
        else:
            spec = json.dumps(self.valid_spec())
        sql, params = fcall("wf_submit", [(spec, "jsonb")])
        res = self.call("wf_submit", sql, params)
        if res is not None and res[0] and res[0][0][0] is not None:
            self.shared.workflows.append(str(res[0][0][0]))

    def workflow_id(self):
        def known():
            if self.shared.workflows and self.rng.random() < 0.9:
                try:
                    return self.rng.choice(self.shared.workflows)
                except IndexError:
                    pass
            return str(uuid.UUID(int=self.rng.getrandbits(128)))
        return self.pick(known, UUID_BOUNDARY)

    def f_workflow(self):
        sql, params = fcall("wf_workflow", [(self.workflow_id(), "uuid")])
        self.call("wf_workflow", sql, params)

    def f_cancel_workflow(self):
        sql, params = fcall("wf_cancel_workflow", [(self.workflow_id(), "uuid")])
        self.call("wf_cancel_workflow", sql, params)

    def f_checkpoint(self):
        t = self.token()
        named = [("output", self.payload(), "jsonb")] if self.maybe(0.7) else []
        sql, params = fcall("wf_checkpoint", [(t[0], "text"), (t[1], "bigint"), (t[2], "int"),
                                              (self.label(STEPS), "text")], named)
        self.call("wf_checkpoint", sql, params)

    def f_snooze(self):
        t = self.token()
        delay = self.interval(["0", "0", "10 ms", "200 ms", "1 s"])
        sql, params = fcall("wf_snooze", [(t[0], "text"), (t[1], "bigint"), (t[2], "int"),
                                          (delay, "interval")])
        if self.call("wf_snooze", sql, params) is not None:
            self.forget(t)

    def f_await_event(self):
        t = self.token()
        named = []
        if self.maybe(0.6):
            named.append(("timeout", self.interval(["0", "50 ms", "500 ms", "2 s", "100 years"]),
                          "interval"))
        # Mostly a fresh event (the job waits), else one of the few kept
        # names (often signalled already: the job goes on at once).
        event = self.pick(lambda: "ev.n%d" % self.rng.randrange(500 + self.seq)
                          if self.maybe(0.8) else self.rng.choice(EVENTS),
                          LABEL_BOUNDARY + RESERVED_EVENTS)
        sql, params = fcall("wf_await_event", [(t[0], "text"), (t[1], "bigint"), (t[2], "int"),
                                               (event, "text")], named)
        if self.call("wf_await_event", sql, params) is not None:
            self.forget(t)
            self.awaited.append(event)

    def f_signal(self):
        named = [("payload", self.payload(), "jsonb")] if self.maybe(0.6) else []
        def event():
            if self.awaited and self.maybe(0.6):
                return self.rng.choice(self.awaited)
            return ("ev.n%d" % self.rng.randrange(500 + self.seq) if self.maybe(0.5)
                    else self.rng.choice(EVENTS))
        sql, params = fcall("wf_signal", [(self.pick(event, LABEL_BOUNDARY + RESERVED_EVENTS),
                                           "text")], named)
        self.call("wf_signal", sql, params)

    def f_schedule(self):
        cron = self.pick(lambda: self.rng.choice(CRON_VALID), CRON_BOUNDARY)
        pos = [(self.label(SCHEDULES), "text"), (cron, "text"), (self.queue(), "text")]
        named = [("payload", self.payload(), "jsonb")] if self.maybe(0.5) else []
        sql, params = fcall("wf_schedule", pos, named)
        self.call("wf_schedule", sql, params)

    def f_unschedule(self):
        sql, params = fcall("wf_unschedule", [(self.label(SCHEDULES), "text")])
        self.call("wf_unschedule", sql, params)

    # ------------------------------------------------ workflows 2 (1.6)

    def step_token(self):
        """A held token of a workflow step (with what is known of it), else
        any token; boundary values as token() puts them."""
        mine = [t for t in self.held if t in self.steps]
        if mine and self.rng.random() < 0.8:
            t = self.rng.choice(mine)
            info = self.steps[t]
            if self.rng.random() < self.bad_p:
                t = self.token()
            return t, info
        return self.token(), None

    def child_spec(self):
        rng = self.rng
        r = rng.random()
        if r < max(self.bad_p, 0.1):
            return self.bad_spec()
        if r < 0.15:
            spec = self.valid_spec()
            spec["key"] = rng.choice(WORKFLOW_KEYS)    # a child has no key: 22023
            return json.dumps(spec)
        if r < 0.6:
            # A single job child: one step.
            step = {"name": "only"}
            if rng.random() < 0.3:
                step["payload"] = {"c": self.idx}
            if rng.random() < 0.2:
                step["version"] = rng.choice(VERSIONS)
            return json.dumps({"queue": rng.choices(QUEUES, QUEUE_WEIGHTS)[0], "steps": [step]})
        spec = self.valid_spec()
        spec.pop("key", None)
        return json.dumps(spec)

    def f_start_child(self):
        # Mostly a held token (often a parent already: the same names again
        # return the same child), else another's or a stale one.
        if self.shared.parents and self.rng.random() < 0.3:
            try:
                t = self.rng.choice(self.shared.parents)
            except IndexError:
                t = self.token()
        else:
            t = self.token()
        name = self.label(CHILD_NAMES)
        sql, params = fcall("wf_start_child", [(t[0], "text"), (t[1], "bigint"), (t[2], "int"),
                                               (name, "text"), (self.child_spec(), "jsonb")])
        res = self.call("wf_start_child", sql, params)
        if res is not None and res[0] and res[0][0][0] is not None:
            self.shared.parents.append(t)
            self.shared.workflows.append(str(res[0][0][0]))

    def f_await_children(self):
        parents = [t for t in self.held if t in self.shared.parents]
        t = (self.rng.choice(parents) if parents and self.rng.random() < 0.7 else self.token())
        named = []
        if self.maybe(0.5):
            named.append(("timeout", self.interval(["0", "50 ms", "500 ms", "2 s", "100 years"]),
                          "interval"))
        sql, params = fcall("wf_await_children", [(t[0], "text"), (t[1], "bigint"),
                                                  (t[2], "int")], named)
        if self.call("wf_await_children", sql, params) is not None:
            self.forget(t)

    def added_steps(self, info):
        """wf_complete_with_steps' steps: a valid fan-out after the
        completing step (and the steps it ran after, done), or a bad one."""
        rng = self.rng
        me, done = (info[1], info[2]) if info else ("s0", [])
        base = "f%d_%d_" % (self.idx, self.seq)
        n = rng.choice([0, 1, 2, 3, 5])
        steps = []
        for i in range(n):
            st = {"name": base + str(i)}
            after = [me] if rng.random() < 0.8 else []
            if done and rng.random() < 0.3:
                after.append(rng.choice(done))
            if i and rng.random() < 0.3:
                after.append(base + str(rng.randrange(i)))
            if after or rng.random() < 0.5:
                st["after"] = after
            if rng.random() < 0.3:
                st["queue"] = rng.choices(QUEUES, QUEUE_WEIGHTS)[0]
            if rng.random() < 0.3:
                st["payload"] = {"i": i}
            if rng.random() < 0.1:
                st["version"] = rng.choice(VERSIONS)
            steps.append(st)
        if n > 1 and rng.random() < 0.5:
            steps.append({"name": base + "join", "after": [st["name"] for st in steps]})
        if rng.random() >= max(self.bad_p, 0.15):
            return json.dumps(steps)
        kind = rng.randrange(14)
        if kind == 0:
            return rng.choice(["{}", "null", "1", '"s"', "true", '{"name": "x"}', "{bad", ""])
        if kind == 1:
            return None
        if kind == 2:
            return "[]"
        if kind == 3:   # after an existing step that is (most likely) not done
            others = ["s%d" % i for i in range(6) if "s%d" % i != me and "s%d" % i not in done]
            steps.append({"name": base + "u", "after": [rng.choice(others)]})
        elif kind == 4:
            steps.append({"name": base + "n", "after": ["nope"]})
        elif kind == 5:  # duplicate names among the new steps
            steps += [{"name": base + "d"}, {"name": base + "d", "after": [me]}]
        elif kind == 6:  # an existing name again: this step's, or one it ran after
            steps.append({"name": rng.choice([me] + done)})
        elif kind == 7:  # a cycle, itself
            steps += [{"name": base + "c1", "after": [base + "c2"]},
                      {"name": base + "c2", "after": [base + "c1"]}]
        elif kind == 8:
            steps.append({"name": base + "s", "after": [base + "s"]})
        elif kind == 9:
            steps.append(rng.choice([{"name": 5}, {"name": ""}, {"name": "n" * 257}, {},
                                     {"name": base + "x", "after": "s0"},
                                     {"name": base + "x", "bogus": 1},
                                     {"name": base + "x", "queue": rng.choice(QUEUE_BOUNDARY)},
                                     {"name": base + "x", "version": ""},
                                     {"name": base + "x", "key": "k"},
                                     {"name": base + "x", "payload": "x" * (BIG + 10)},
                                     1, None, [], "s"]))
        elif kind == 10:
            steps = [{"name": base + str(i), "after": [base + str(i - 1)] if i else [me]}
                     for i in range(rng.choice([200, 1000]))]
        elif kind == 11:
            steps = [{"name": base + str(i)} for i in range(rng.choice([10001, 100001]))]
        elif kind == 12:
            steps.append({"name": base + "r", "after": [me, me, me]})
        else:
            return json.dumps({"steps": steps})
        return json.dumps(steps)

    def f_complete_with_steps(self):
        t, info = self.step_token()
        result = self.payload() if self.maybe(0.6) else None
        sql, params = fcall("wf_complete_with_steps",
                            [(t[0], "text"), (t[1], "bigint"), (t[2], "int"),
                             (result, "jsonb"), (self.added_steps(info), "jsonb")])
        if self.call("wf_complete_with_steps", sql, params) is not None:
            self.forget(t)

    def progress_value(self):
        rng = self.rng
        r = rng.random()
        if r < 0.5:
            return json.dumps({"done": rng.randrange(100), "of": 100})
        if r < 0.85 or rng.random() >= self.bad_p:
            # Near the 8192-byte limit (the jsonb's size), on both sides.
            return json.dumps({"p": "x" * rng.randint(8150, 8200)})
        return rng.choice(JSON_BOUNDARY + [json.dumps({"p": "é" * 4090}),
                                           json.dumps(list(range(1000)))])

    def f_progress(self):
        t = self.token()
        sql, params = fcall("wf_progress", [(t[0], "text"), (t[1], "bigint"), (t[2], "int"),
                                            (self.progress_value(), "jsonb")])
        self.call("wf_progress", sql, params)

    def wait_timeout(self):
        # Short ones only (a client waits at most 100 ms); NULL is 22004.
        return self.pick(lambda: self.rng.choice(WAIT_TIMEOUTS), WAIT_TIMEOUT_BOUNDARY)

    def f_wait_job(self):
        if self.tx_enqueued and self.rng.random() < 0.5:
            q, i = self.rng.choice(self.tx_enqueued)  # its own transaction's: 55000
        else:
            q, i = self.operate_target()
        sql, params = fcall("wf_wait_job", [(q, "text"), (i, "bigint"),
                                            (self.wait_timeout(), "interval")])
        self.call("wf_wait_job", sql, params)

    def f_wait_workflow(self):
        sql, params = fcall("wf_wait_workflow", [(self.workflow_id(), "uuid"),
                                                 (self.wait_timeout(), "interval")])
        self.call("wf_wait_workflow", sql, params)

    def f_signal_with_start(self):
        rng = self.rng
        if rng.random() < max(self.bad_p, 0.1):
            if rng.random() < 0.3:
                spec = self.bad_spec()
            else:
                spec = self.valid_spec()
                if rng.random() < 0.5:
                    spec.pop("key", None)                     # no key: 22023
                else:
                    spec["key"] = rng.choice(KEY_BOUNDARY + [5, [], {}])
                spec = json.dumps(spec)
        else:
            spec = self.valid_spec()
            spec["key"] = rng.choice(WORKFLOW_KEYS)           # shared: the clients race
            spec = json.dumps(spec)
        def event():
            if self.awaited and self.maybe(0.4):
                return rng.choice(self.awaited)
            return rng.choice(EVENTS + ["ev.sw%d" % rng.randrange(5)])
        named = [("payload", self.payload(), "jsonb")] if self.maybe(0.5) else []
        sql, params = fcall("wf_signal_with_start",
                            [(spec, "jsonb"),
                             (self.pick(event, LABEL_BOUNDARY + RESERVED_EVENTS), "text")],
                            named)
        res = self.call("wf_signal_with_start", sql, params)
        if res is not None and res[0] and res[0][0][0] is not None:
            self.shared.workflows.append(str(res[0][0][0]))

    def where_args(self):
        """(queue, named) of wf_retry_where / wf_cancel_where: mostly ids
        of jobs seen in the queue, an error text, a small max_jobs."""
        rng = self.rng
        q = self.queue()
        named = []
        if self.maybe(0.6):
            def ids():
                pool = [i for qq, i in list(self.shared.dead) + list(self.shared.ids)[-100:]
                        if qq == q]
                if not pool or rng.random() < 0.1:
                    return [rng.randint(1, 1000)]
                return rng.sample(pool, min(len(pool), rng.randint(1, 5)))
            named.append(("ids", self.pick(ids, DEPENDS_BOUNDARY), "bigint[]"))
        if self.maybe(0.4):
            named.append(("error_contains", self.pick(lambda: rng.choice(ERROR_CONTAINS),
                                                      LABEL_BOUNDARY), "text"))
        has_ids = any(name == "ids" for name, _, _ in named)
        if has_ids and self.maybe(0.6):
            named.append(("max_jobs", self.pick(lambda: rng.choice([1, 2, 5, 50, 1000]),
                                                INT32_BOUNDARY + [10000, 10001, 1000000]),
                          "int"))
        elif not has_ids:
            # A bulk action over a whole queue holds every row it acts on
            # until its transaction ends, and the reaper skips a held job:
            # thousands of them for seconds would be a legitimately late
            # recovery, not a bug. Without ids, few jobs at a time (or a
            # boundary value that is refused before anything is touched).
            named.append(("max_jobs", self.pick(lambda: rng.choice([1, 2, 5, 50]),
                                                [0, -1, -2147483648, None]), "int"))
        return q, named

    def f_retry_where(self):
        q, named = self.where_args()
        sql, params = fcall("wf_retry_where", [(q, "text")], named)
        self.call("wf_retry_where", sql, params)

    def f_cancel_where(self):
        q, named = self.where_args()
        if self.maybe(0.6) or not named:
            named.append(("statuses", self.pick(
                lambda: self.rng.sample(STATUSES, self.rng.randint(1, 3)), STATUSES_BOUNDARY),
                "text[]"))
        sql, params = fcall("wf_cancel_where", [(q, "text")], named)
        self.call("wf_cancel_where", sql, params)

    def f_enable_schedule(self):
        enabled = self.pick(lambda: self.maybe(0.6), [None])
        sql, params = fcall("wf_enable_schedule", [(self.label(SCHEDULES), "text"),
                                                   (enabled, "boolean")])
        self.call("wf_enable_schedule", sql, params)

    def grant_args(self):
        rng = self.rng
        if rng.random() < self.bad_p:
            role = rng.choice(ROLES)
            cap = rng.choice(CAPABILITIES + CAPABILITY_BOUNDARY)
            queues = rng.choice(GRANT_QUEUES)
        elif rng.random() < 0.3 and self.args.role:
            # The fuzzing role's own rights change only where it holds none
            # from the test (fz.d, ev.zz): its 42501s stay what they were.
            role = self.args.role
            cap = rng.choice(CAPABILITIES)
            queues = rng.choice(["fz.d", "ev.zz", "fz.d*"])
        else:
            role = "wf_fuzz_other"
            cap = rng.choice(CAPABILITIES)
            queues = rng.choice(["fz.a", "fz.*", "*", "other.*", "ev.*", "fz.c"])
        return [(role, "regrole"), (cap, "text"), (queues, "text")]

    def f_grant(self):
        sql, params = fcall("wf_grant", self.grant_args())
        self.call("wf_grant", sql, params)

    def f_revoke(self):
        sql, params = fcall("wf_revoke", self.grant_args())
        self.call("wf_revoke", sql, params)

    FUNCTIONS = [
        ("wf_enqueue", f_enqueue, 12), ("wf_enqueue_batch", f_enqueue_batch, 3),
        ("wf_claim", f_claim, 12), ("wf_complete_and_claim", f_complete_and_claim, 5),
        ("wf_heartbeat", f_heartbeat, 4), ("wf_complete", f_complete, 9),
        ("wf_complete_many", f_complete_many, 3), ("wf_fail", f_fail, 5),
        ("wf_retry", f_retry, 3), ("wf_cancel", f_cancel, 2.5), ("wf_sweep", f_sweep, 1),
        ("wf_recover_lost_claims", f_recover_lost_claims, 0.5),
        ("wf_configure_queue", f_configure_queue, 1.5), ("wf_submit", f_submit, 4),
        ("wf_workflow", f_workflow, 2), ("wf_cancel_workflow", f_cancel_workflow, 1),
        ("wf_checkpoint", f_checkpoint, 3), ("wf_snooze", f_snooze, 3),
        ("wf_await_event", f_await_event, 3), ("wf_signal", f_signal, 3),
        ("wf_schedule", f_schedule, 1), ("wf_unschedule", f_unschedule, 0.7),
        ("wf_grant", f_grant, 1), ("wf_revoke", f_revoke, 1),
        ("wf_start_child", f_start_child, 3), ("wf_await_children", f_await_children, 2),
        ("wf_complete_with_steps", f_complete_with_steps, 4), ("wf_progress", f_progress, 2),
        ("wf_wait_job", f_wait_job, 1.5), ("wf_wait_workflow", f_wait_workflow, 1),
        ("wf_signal_with_start", f_signal_with_start, 2),
        ("wf_retry_where", f_retry_where, 1), ("wf_cancel_where", f_cancel_where, 0.7),
        ("wf_enable_schedule", f_enable_schedule, 0.7),
    ]
    FUNCTION_WEIGHTS = [w for _, _, w in FUNCTIONS]

    def one_call(self):
        """One random wf_* call; False if it raised an error."""
        # Most calls are clean; the rest put boundary values in some arguments.
        self.bad_p = 0.0 if self.rng.random() < 0.7 else 0.35
        if self.as_role:
            self.role_calls += 1
        name, fn, _ = self.rng.choices(self.FUNCTIONS, self.FUNCTION_WEIGHTS)[0]
        before = sum(self.stats[name]["errors"].values())
        fn(self)
        return sum(self.stats[name]["errors"].values()) == before

    # -------------------------------------------------------- transactions

    def tx_control(self, sql):
        """A statement of an open transaction; when it fails, the
        transaction is rolled back and ends (TxEnded)."""
        if not self.control(sql):
            self.control("ROLLBACK")
            self.tx["rollback_after_error"] += 1
            raise TxEnded()

    def transaction(self):
        rng = self.rng
        r = rng.random()
        begin = ("BEGIN ISOLATION LEVEL REPEATABLE READ" if r < 0.05 else
                 "BEGIN READ ONLY" if r < 0.08 else "BEGIN")
        self.tx_enqueued = []
        if not self.control(begin):
            return
        self.in_tx = True
        try:
            if rng.random() < 0.15:
                self.tx_control("SET LOCAL statement_timeout = '%s'"
                                % rng.choice(["20ms", "100ms", "1s"]))
                self.short_timeout = True
            if rng.random() < 0.15:
                self.tx_control("SET LOCAL lock_timeout = '%s'"
                                % rng.choice(["1ms", "10ms", "200ms"]))
            if rng.random() < 0.1:
                self.tx_control("SET LOCAL wf.default_lease = '%s'"
                                % rng.choice(["300ms", "5s", "0", "100 years", "101 years", "-1"]))
            if self.args.role and rng.random() < self.args.role_fraction:
                self.tx_control("SET LOCAL ROLE %s" % self.args.role)
                self.as_role = True
            savepoint = False
            for _ in range(rng.randint(2, 6)):
                if not savepoint and rng.random() < 0.2:
                    self.tx_control("SAVEPOINT fz")
                    savepoint = True
                    self.tx["savepoint"] += 1
                ok = self.one_call()
                if not ok:
                    if savepoint:
                        self.tx_control("ROLLBACK TO SAVEPOINT fz")
                        self.tx["rollback_to_savepoint_after_error"] += 1
                        continue
                    self.control("ROLLBACK")
                    self.tx["rollback_after_error"] += 1
                    return
                if savepoint and rng.random() < 0.2:
                    if rng.random() < 0.5:
                        self.tx_control("ROLLBACK TO SAVEPOINT fz")
                        self.tx["rollback_to_savepoint"] += 1
                    else:
                        self.tx_control("RELEASE SAVEPOINT fz")
                        savepoint = False
            if rng.random() < 0.7:
                if self.control("COMMIT"):
                    self.tx["commit"] += 1
            else:
                self.control("ROLLBACK")
                self.tx["rollback"] += 1
        except TxEnded:
            pass
        finally:
            self.in_tx = self.as_role = self.short_timeout = False
            self.tx_enqueued = []

    def single(self):
        if self.args.role and self.rng.random() < self.args.role_fraction:
            if not self.control("SET ROLE %s" % self.args.role):
                return
            self.as_role = True
            try:
                self.one_call()
            finally:
                self.as_role = False
                if not self.conn.closed:
                    self.control("RESET ROLE")
        else:
            self.one_call()

    # ---------------------------------------------------------- terminations

    def maybe_terminate(self):
        now = time.monotonic()
        if now < self.shared.next_kill_at:
            return
        with self.shared.lock:
            if now < self.shared.next_kill_at:
                return
            self.shared.next_kill_at = now + self.krng.uniform(0.5, 3.0)
            others = [p for i, p in self.shared.pids.items() if i != self.idx]
            victim = self.krng.choice(others) if others and self.krng.random() < 0.9 else None
            if victim is not None:
                self.shared.killed.add(victim)   # before the kill: the victim may notice at once
        try:
            if victim is None:
                r = self.conn.execute(
                    "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity"
                    " WHERE backend_type = 'pg_wf reaper' AND datname = current_database()"
                ).fetchone()[0]
                with self.shared.lock:
                    self.shared.terminated_reapers += r
            else:
                r = self.conn.execute("SELECT pg_terminate_backend(%s)", [victim]).fetchone()[0]
                if r:
                    with self.shared.lock:
                        self.shared.terminated_clients += 1
        except psycopg.Error as e:
            if self.is_lost(e):
                self.lost(e, "pg_terminate_backend")
            self.control_errors["terminate: %s" % e.sqlstate] += 1

    # ------------------------------------------------------------------ loop

    def run(self):
        try:
            self.connect()
            while time.monotonic() < self.shared.stop_at:
                try:
                    self.maybe_terminate()
                    if self.rng.random() < 0.15:
                        self.transaction()
                    else:
                        self.single()
                except Lost:
                    self.reconnects += 1
                    self.connect()
                except psycopg.Error:
                    raise
                except Exception as e:   # the fuzzer's own mistake: say so, go on
                    self.shared.note_unexpected({"kind": "fuzzer exception", "client": self.idx,
                                                 "message": truncate(repr(e), 1000),
                                                 "recent": list(self.recent)})
                    try:
                        self.conn.close()
                    except Exception:
                        pass
                    self.connect()
        except Exception as e:  # a bug of the fuzzer, or no server: say so
            self.shared.note_unexpected({"kind": "fuzzer exception", "client": self.idx,
                                         "message": truncate(repr(e), 1000),
                                         "recent": list(self.recent)})
        finally:
            try:
                if self.conn is not None:
                    self.conn.close()
            except Exception:
                pass


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dsn", required=True)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--role", default=None, help="a non-superuser role to SET ROLE to")
    ap.add_argument("--role-fraction", type=float, default=0.15)
    ap.add_argument("--trace", default=None, help="write every call to this file (JSON lines)")
    args = ap.parse_args()
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(2**31)
    print("fuzz: seed %d, %g s, %d clients" % (args.seed, args.seconds, args.clients), flush=True)

    # Two queues with settings from the start: a lease short enough to
    # expire while its holder lives, and a running limit.
    with psycopg.connect(args.dsn, autocommit=True) as setup:
        setup.execute("SELECT wf_configure_queue('fz.lease', lease => '300 ms')")
        setup.execute("SELECT wf_configure_queue('fz.max', max_running => 2)")

    shared = Shared(args)
    started = time.monotonic()
    clients = [Client(i, shared) for i in range(args.clients)]
    watchdog = Watchdog(shared)
    watchdog.start()
    for c in clients:
        c.start()
    for c in clients:
        c.join(args.seconds + 120)
    shared.done.set()
    watchdog.join(30)
    stuck = [c.idx for c in clients if c.is_alive()]
    for i in stuck:
        shared.note_unexpected({"kind": "client did not finish", "client": i})
    elapsed = time.monotonic() - started
    if shared.trace:
        shared.trace.close()

    functions = {}
    for name, _, _ in Client.FUNCTIONS:
        calls = 0
        errors = collections.Counter()
        outcomes = collections.Counter()
        for c in clients:
            st = c.stats.get(name)
            if st:
                calls += st["calls"]
                errors.update(st["errors"])
                outcomes.update(st["outcomes"])
        functions[name] = {"calls": calls, "errors": dict(sorted(errors.items())),
                           "outcomes": dict(sorted(outcomes.items()))}
    def total(attr):
        return sum(getattr(c, attr) for c in clients)
    tx = collections.Counter()
    control_errors = collections.Counter()
    for c in clients:
        tx.update(c.tx)
        control_errors.update(c.control_errors)
    report = {
        "seed": args.seed, "seconds": round(elapsed, 1), "clients": args.clients,
        "calls": sum(f["calls"] for f in functions.values()),
        "errors": sum(sum(f["errors"].values()) for f in functions.values()),
        "functions": functions,
        "terminated": {"clients": shared.terminated_clients, "reapers": shared.terminated_reapers},
        "connections_lost": {"ours": total("losses_ours"), "unexpected": total("losses_unexpected")},
        "reconnects": total("reconnects"), "calls_as_role": total("role_calls"),
        "transactions": dict(sorted(tx.items())),
        "control_errors": dict(sorted(control_errors.items())),
        "slowest_call_s": round(max(c.slowest for c in clients), 3),
        "long_running": shared.long_waits,
        "unexpected": shared.unexpected,
    }
    print(json.dumps(report, ensure_ascii=True), flush=True)


if __name__ == "__main__":
    main()
