"""The dashboard's data layer: every read goes through pg_wf's public views
(wf.queue_stats, wf.jobs, wf.workflows, wf.schedules, wf.metrics) and
wf_workflow(); every action through a wf_* function. Nothing here reads a
wf table: the views already filter by the connecting role's rights, and the
functions check them (42501), so the dashboard can run as any role.
"""

from __future__ import annotations

import contextlib
import datetime
import logging
import queue as queue_mod
import threading
import time
from typing import Any, Iterator

import psycopg
from psycopg import sql
from psycopg.rows import dict_row

log = logging.getLogger("pg_wf.dashboard")

STATUSES = ("blocked", "pending", "running", "waiting", "done", "failed", "cancelled")
# What a bulk action can act on (the server narrows it again, job by job).
RETRYABLE = ("failed", "cancelled")
CANCELLABLE = ("blocked", "pending", "running", "waiting", "failed")
MAX_BULK = 10000
MAX_PAGE = 500
MAX_CHILD_GRAPHS = 40


class Pool:
    """A few autocommit connections shared by the server's threads."""

    def __init__(self, dsn: str, size: int = 4, statement_timeout_ms: int = 15000):
        self.dsn = dsn
        self.statement_timeout_ms = statement_timeout_ms
        self._idle: "queue_mod.LifoQueue[psycopg.Connection]" = queue_mod.LifoQueue()
        self._slots = threading.BoundedSemaphore(size)
        self._closed = False

    def _connect(self) -> psycopg.Connection:
        params = psycopg.conninfo.conninfo_to_dict(self.dsn)
        params.setdefault("application_name", "pg_wf dashboard")
        conn = psycopg.connect(autocommit=True, row_factory=dict_row, **params)
        conn.execute(sql.SQL("SET statement_timeout = {}").format(
            sql.Literal(f"{int(self.statement_timeout_ms)}ms")))
        return conn

    @contextlib.contextmanager
    def connection(self) -> Iterator[psycopg.Connection]:
        self._slots.acquire()
        conn = None
        try:
            try:
                conn = self._idle.get_nowait()
            except queue_mod.Empty:
                conn = self._connect()
            yield conn
        finally:
            if conn is not None:
                if conn.closed or conn.broken or self._closed:
                    conn.close()
                else:
                    self._idle.put(conn)
            self._slots.release()

    def close(self) -> None:
        self._closed = True
        while True:
            try:
                self._idle.get_nowait().close()
            except queue_mod.Empty:
                break


class Store:
    """Queries and actions. Reads retry once on a connection that broke
    (a restarted server); actions never run twice."""

    def __init__(self, pool: Pool):
        self.pool = pool
        self._schema_lock = threading.Lock()
        self._schema: dict[str, Any] | None = None
        self._schema_at = 0.0
        self._cache: dict[str, tuple[float, Any]] = {}
        self._cache_lock = threading.Lock()

    # -- plumbing ---------------------------------------------------------

    def _read(self, fn):
        for attempt in (1, 2):
            try:
                with self.pool.connection() as conn:
                    return fn(conn)
            except psycopg.OperationalError:
                if attempt == 2:
                    raise
                log.info("connection lost, reading again on a new one")

    def _cached(self, key: str, ttl: float, fn):
        """fn's answer, shared for ttl seconds by every page that polls
        (wf.queue_stats and the charts read every job of the visible queues)."""
        with self._cache_lock:
            hit = self._cache.get(key)
            if hit and time.monotonic() - hit[0] < ttl:
                return hit[1]
        value = fn()
        with self._cache_lock:
            self._cache[key] = (time.monotonic(), value)
        return value

    def _act(self, fn):
        try:
            with self.pool.connection() as conn:
                return fn(conn)
        finally:
            with self._cache_lock:
                self._cache.clear()  # what an action changed shows at the next poll

    def schema(self) -> dict[str, Any]:
        """What this server's pg_wf offers (checked once a minute): the
        schema of the wf_* functions, and the optional 1.6 additions."""
        with self._schema_lock:
            if self._schema is not None and time.monotonic() - self._schema_at < 60:
                return self._schema

        def probe(conn):
            row = conn.execute(
                "SELECT n.nspname AS schema, e.extversion AS version"
                "  FROM pg_catalog.pg_extension e"
                "  JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace"
                " WHERE e.extname = 'pg_wf'").fetchone()
            if row is None:
                raise psycopg.errors.UndefinedObject("the extension pg_wf is not installed in this database")
            funcs = {r["proname"] for r in conn.execute(
                "SELECT p.proname FROM pg_catalog.pg_proc p"
                " WHERE p.pronamespace = (SELECT oid FROM pg_catalog.pg_namespace WHERE nspname = %s)"
                "   AND p.proname IN ('wf_retry_where', 'wf_cancel_where', 'wf_enable_schedule')",
                [row["schema"]]).fetchall()}
            metrics = conn.execute("SELECT to_regclass('wf.metrics') IS NOT NULL AS ok").fetchone()["ok"]
            who = conn.execute(
                "SELECT current_user AS role, r.rolsuper AS superuser, current_database() AS database,"
                "       current_setting('server_version') AS server_version"
                "  FROM pg_catalog.pg_roles r WHERE r.rolname = current_user").fetchone()
            return {"schema": row["schema"], "version": row["version"], "functions": sorted(funcs),
                    "metrics": metrics, **who}

        s = self._read(probe)
        with self._schema_lock:
            self._schema, self._schema_at = s, time.monotonic()
        return s

    def _fn(self, name: str) -> sql.Composed:
        return sql.SQL("{}.{}").format(sql.Identifier(self.schema()["schema"]), sql.Identifier(name))

    # -- reads ------------------------------------------------------------

    def queues(self) -> dict[str, Any]:
        has_metrics = self.schema()["metrics"]

        def q(conn):
            stats = conn.execute("SELECT * FROM wf.queue_stats ORDER BY queue").fetchall()
            for r in stats:
                age = r.get("oldest_ready_age")
                r["oldest_ready_age_seconds"] = age.total_seconds() if age is not None else None
                # which columns are intervals (they go out as seconds): the page prints them as times
                r["_intervals"] = [k for k, v in r.items() if isinstance(v, datetime.timedelta)]
            metrics = {}
            if has_metrics:
                metrics = {r["queue"]: r for r in conn.execute("SELECT * FROM wf.metrics").fetchall()}
            now_row = conn.execute(
                "SELECT now() AS now, extract(epoch FROM date_trunc('minute', now()))::bigint AS minute"
            ).fetchone()
            return {"now": now_row["now"], "minute": now_row["minute"], "queues": stats,
                    "metrics": metrics, "has_metrics": has_metrics}

        def chart(conn):
            # Jobs finished per minute over the last hour, from wf.jobs.
            buckets = conn.execute(
                "SELECT queue, extract(epoch FROM date_trunc('minute', finished_at))::bigint AS minute,"
                "       count(*) FILTER (WHERE status = 'done') AS done,"
                "       count(*) FILTER (WHERE status = 'failed') AS failed,"
                "       count(*) FILTER (WHERE status = 'cancelled') AS cancelled"
                "  FROM wf.jobs"
                " WHERE finished_at >= date_trunc('minute', now()) - interval '59 minutes'"
                " GROUP BY 1, 2 ORDER BY 1, 2").fetchall()
            series: dict[str, list] = {}
            for b in buckets:
                series.setdefault(b["queue"], []).append(
                    [b["minute"], b["done"], b["failed"], b["cancelled"]])
            return series

        out = dict(self._cached("queues", 2, lambda: self._read(q)))
        out["series"] = self._cached("series", 10, lambda: self._read(chart))
        return out

    @staticmethod
    def _job_filter(f: dict[str, Any]) -> tuple[sql.Composable, dict[str, Any]]:
        conds = [sql.SQL("true")]
        params: dict[str, Any] = {}
        if f.get("queue"):
            conds.append(sql.SQL("queue = %(queue)s"))
            params["queue"] = f["queue"]
        if f.get("status"):
            if f["status"] not in STATUSES:
                raise BadRequest(f"unknown status {f['status']!r}")
            conds.append(sql.SQL("status = %(status)s"))
            params["status"] = f["status"]
        if f.get("q"):
            # As wf_retry_where / wf_cancel_where match: case-insensitive, no wildcards.
            conds.append(sql.SQL("strpos(lower(last_error), lower(%(q)s)) > 0"))
            params["q"] = f["q"]
        if f.get("workflow"):
            conds.append(sql.SQL("workflow_id = %(workflow)s::uuid"))
            params["workflow"] = f["workflow"]
        return sql.SQL(" AND ").join(conds), params

    def jobs(self, f: dict[str, Any]) -> dict[str, Any]:
        where, params = self._job_filter(f)
        params["limit"] = max(1, min(int(f.get("limit") or 100), MAX_PAGE))
        params["offset"] = max(0, int(f.get("offset") or 0))
        params["cap"] = MAX_BULK + 1

        def q(conn):
            rows = conn.execute(sql.SQL(
                "SELECT id, queue, status, attempt, max_attempts, priority, step_name, workflow_id, key,"
                "       left(last_error, 400) AS last_error, created_at, run_at, started_at, finished_at,"
                "       worker, waiting_for, cancel_requested"
                "  FROM wf.jobs WHERE {} ORDER BY id DESC LIMIT %(limit)s OFFSET %(offset)s").format(where),
                params).fetchall()
            total = conn.execute(sql.SQL(
                "SELECT count(*) AS n FROM (SELECT 1 FROM wf.jobs WHERE {} LIMIT %(cap)s) s").format(where),
                params).fetchone()["n"]
            queues = [r["queue"] for r in conn.execute("SELECT queue FROM wf.queue_stats ORDER BY queue")]
            return {"jobs": rows, "total": total, "total_capped": total > MAX_BULK,
                    "limit": params["limit"], "offset": params["offset"], "queues": queues}

        return self._read(q)

    def job(self, queue: str, job_id: int) -> dict[str, Any]:
        def q(conn):
            row = conn.execute("SELECT * FROM wf.jobs WHERE queue = %s AND id = %s",
                               [queue, job_id]).fetchone()
            if row is None:
                raise NotFound(f"no job {job_id} in queue {queue!r} (or not visible to this role)")
            for k in ("max_run_time",):
                if row.get(k) is not None:
                    row[k] = row[k].total_seconds()
            return {"job": row, "now": conn.execute("SELECT now() AS now").fetchone()["now"]}

        return self._read(q)

    def workflows(self, f: dict[str, Any]) -> dict[str, Any]:
        conds = [sql.SQL("true")]
        params: dict[str, Any] = {"limit": max(1, min(int(f.get("limit") or 200), MAX_PAGE))}
        if f.get("status"):
            conds.append(sql.SQL("status = %(status)s"))
            params["status"] = f["status"]
        if f.get("q"):
            conds.append(sql.SQL("(strpos(lower(name), lower(%(q)s)) > 0 OR strpos(lower(key), lower(%(q)s)) > 0"
                                 " OR workflow_id::text = lower(%(q)s))"))
            params["q"] = f["q"]
        if not f.get("children"):
            conds.append(sql.SQL("child_of IS NULL"))

        def q(conn):
            rows = conn.execute(sql.SQL(
                "SELECT * FROM wf.workflows WHERE {} ORDER BY started_at DESC NULLS LAST, workflow_id"
                " LIMIT %(limit)s").format(sql.SQL(" AND ").join(conds)), params).fetchall()
            return {"workflows": rows, "now": conn.execute("SELECT now() AS now").fetchone()["now"]}

        return self._read(q)

    def workflow(self, workflow_id: str, depth: int = 3) -> dict[str, Any]:
        """wf_workflow() of the workflow, of its child workflows (to `depth`
        levels, at most MAX_CHILD_GRAPHS), and the job its parent step is."""
        fn = self._fn("wf_workflow")

        def q(conn):
            def describe(wid):
                return conn.execute(sql.SQL("SELECT {}(%s::uuid) AS w").format(fn), [wid]).fetchone()["w"]

            main = describe(workflow_id)
            children: dict[str, Any] = {}
            frontier = [main]
            for _ in range(depth):
                nxt = []
                for w in frontier:
                    for step in w.get("steps") or []:
                        for c in step.get("children") or []:
                            cid = c.get("workflow_id")
                            if cid and cid not in children and len(children) < MAX_CHILD_GRAPHS:
                                try:
                                    children[cid] = describe(cid)
                                except (psycopg.errors.UndefinedObject, psycopg.errors.InsufficientPrivilege):
                                    continue  # gone (retention) meanwhile, or in queues this role may not operate
                                nxt.append(children[cid])
                frontier = nxt
            parent = None
            if main.get("child_of") is not None:
                parent = conn.execute(
                    "SELECT id, queue, step_name, workflow_id, status FROM wf.jobs WHERE id = %s LIMIT 1",
                    [main["child_of"]]).fetchone()
            now = conn.execute("SELECT now() AS now").fetchone()["now"]
            return {"workflow": main, "children": children, "parent": parent, "now": now}

        return self._read(q)

    def schedules(self) -> dict[str, Any]:
        def q(conn):
            rows = conn.execute("SELECT * FROM wf.schedules ORDER BY name").fetchall()
            return {"schedules": rows, "now": conn.execute("SELECT now() AS now").fetchone()["now"],
                    "can_enable": "wf_enable_schedule" in self.schema()["functions"]}

        return self._read(q)

    def metrics_rows(self) -> tuple[list[dict], list[dict]]:
        has_metrics = self.schema()["metrics"]

        def q(conn):
            stats = conn.execute("SELECT * FROM wf.queue_stats ORDER BY queue").fetchall()
            metrics = conn.execute("SELECT * FROM wf.metrics ORDER BY queue").fetchall() if has_metrics else []
            return stats, metrics

        return self._read(q)

    # -- actions ----------------------------------------------------------

    def _scalar(self, query: sql.Composable, params) -> Any:
        def a(conn):
            row = conn.execute(query, params).fetchone()
            return next(iter(row.values())) if row else None
        return self._act(a)

    def retry(self, queue: str, job_id: int) -> bool:
        return self._scalar(sql.SQL("SELECT {}(%s, %s::bigint)").format(self._fn("wf_retry")), [queue, job_id])

    def cancel(self, queue: str, job_id: int) -> bool:
        return self._scalar(sql.SQL("SELECT {}(%s, %s::bigint)").format(self._fn("wf_cancel")), [queue, job_id])

    def cancel_workflow(self, workflow_id: str) -> int:
        return self._scalar(sql.SQL("SELECT {}(%s::uuid)").format(self._fn("wf_cancel_workflow")),
                            [workflow_id])

    def set_paused(self, queue: str, paused: bool) -> None:
        self._scalar(sql.SQL("SELECT {}(%s, paused => %s)").format(self._fn("wf_configure_queue")),
                     [queue, bool(paused)])

    def enable_schedule(self, name: str, enabled: bool) -> bool:
        return self._scalar(sql.SQL("SELECT {}(%s, %s)").format(self._fn("wf_enable_schedule")),
                            [name, bool(enabled)])

    def bulk(self, action: str, f: dict[str, Any]) -> int:
        """Retries or cancels the jobs of the filtered set, in one statement:
        the set's ids per queue go to wf_retry_where / wf_cancel_where, which
        check each job (and the role's right on each queue) again."""
        where, params = self._job_filter(f)
        params["max"] = max(1, min(int(f.get("max") or MAX_BULK), MAX_BULK))
        params["q"] = f.get("q") or None
        if action == "retry":
            statuses = [s for s in RETRYABLE if not f.get("status") or s == f["status"]]
            call = sql.SQL("{}(queue, ids => array_agg(id), error_contains => %(q)s,"
                           " max_jobs => count(*)::int)").format(self._fn("wf_retry_where"))
        elif action == "cancel":
            statuses = [s for s in CANCELLABLE if not f.get("status") or s == f["status"]]
            params["statuses"] = [f["status"]] if f.get("status") else None
            call = sql.SQL("{}(queue, ids => array_agg(id), error_contains => %(q)s,"
                           " statuses => %(statuses)s::text[], max_jobs => count(*)::int)").format(
                self._fn("wf_cancel_where"))
        else:
            raise BadRequest(f"unknown bulk action {action!r}")
        if not statuses:
            return 0
        params["states"] = statuses
        query = sql.SQL(
            "SELECT coalesce(sum(n), 0)::int AS n FROM ("
            " SELECT {call} AS n FROM ("
            "  SELECT queue, id FROM wf.jobs WHERE {where} AND status = ANY (%(states)s::text[])"
            "   ORDER BY id LIMIT %(max)s) s"
            " GROUP BY queue) t").format(call=call, where=where)
        return self._scalar(query, params)


class BadRequest(Exception):
    pass


class NotFound(Exception):
    pass

