"""The dashboard's HTTP server: one static page, a JSON API over pg_wf's
views and wf_* functions, and /metrics. Standard library only, plus psycopg.

Safety, minimal and on purpose:
- binds to 127.0.0.1 unless told otherwise; there is no login, so whoever
  reaches the port acts with the rights of the role in the DSN;
- actions are POST only, with a JSON body and the header X-CSRF-Token set to
  a random token of this process, which only the served page knows;
- on a loopback address, the Host header must name that address (a DNS
  rebinding page cannot read the API), and a POST's Origin must be the page's.
"""

from __future__ import annotations

import datetime
import decimal
import hmac
import http.server
import ipaddress
import json
import logging
import mimetypes
import secrets
import socketserver
import threading
import uuid
from importlib import resources
from typing import Any, Callable
from urllib.parse import parse_qs, urlsplit

import psycopg

from . import metrics as prom
from .db import BadRequest, NotFound, Pool, Store

log = logging.getLogger("pg_wf.dashboard")

STATIC_FILES = {"app.js", "app.css", "favicon.svg"}
MAX_BODY = 64 * 1024


def _default(o: Any) -> Any:
    if isinstance(o, (datetime.datetime, datetime.date, datetime.time)):
        return o.isoformat()
    if isinstance(o, datetime.timedelta):
        return o.total_seconds()
    if isinstance(o, decimal.Decimal):
        return float(o)
    if isinstance(o, uuid.UUID):
        return str(o)
    if isinstance(o, (bytes, memoryview)):
        return bytes(o).hex()
    if isinstance(o, (set, frozenset)):
        return sorted(o)
    return str(o)


def to_json(data: Any) -> bytes:
    return json.dumps(data, default=_default, separators=(",", ":")).encode()


def _static(name: str) -> bytes:
    return resources.files(__package__).joinpath("static", name).read_bytes()


def is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def http_status_for(sqlstate: str | None) -> int:
    if not sqlstate:
        return 500
    if sqlstate == "42501":
        return 403
    if sqlstate in ("42704", "42883", "42P01"):
        return 404
    if sqlstate.startswith("22") or sqlstate.startswith("23"):
        return 400
    if sqlstate in ("55000", "40P01", "40001", "55P03"):
        return 409
    if sqlstate == "57014":
        return 504
    return 500


class Dashboard:
    def __init__(self, dsn: str, host: str = "127.0.0.1", port: int = 8089, pool_size: int = 4,
                 allowed_hosts: list[str] | None = None):
        self.store = Store(Pool(dsn, size=pool_size))
        self.csrf_token = secrets.token_urlsafe(32)
        self.host = host
        self.port = port
        self.extra_hosts = [h.lower() for h in (allowed_hosts or [])]
        self.httpd: socketserver.TCPServer | None = None

    # The names a browser may use for this server in its Host header.
    def host_allowed(self, host_header: str | None) -> bool:
        if host_header is None:
            return False
        host = host_header.strip().lower()
        if host in self.extra_hosts:
            return True
        if not is_loopback(self.host):
            return True  # listening on the network: the operator chose who reaches it
        port = str(self.httpd.server_address[1]) if self.httpd else str(self.port)
        names = {"localhost", "127.0.0.1", "[::1]", f"[{self.host}]" if ":" in self.host else self.host}
        return any(host == f"{n}:{port}" or (port == "80" and host == n) for n in names)

    def make_server(self) -> socketserver.TCPServer:
        dash = self

        class Handler(_Handler):
            dashboard = dash

        family = http.server.ThreadingHTTPServer
        if ":" in self.host:
            class V6(http.server.ThreadingHTTPServer):
                address_family = __import__("socket").AF_INET6
            family = V6
        self.httpd = family((self.host, self.port), Handler)
        self.httpd.daemon_threads = True
        return self.httpd

    def serve_forever(self) -> None:
        httpd = self.httpd or self.make_server()
        try:
            httpd.serve_forever(poll_interval=0.25)
        finally:
            httpd.server_close()
            self.store.pool.close()

    def start_in_thread(self) -> threading.Thread:
        self.httpd or self.make_server()
        t = threading.Thread(target=self.serve_forever, name="pg_wf-dashboard", daemon=True)
        t.start()
        return t

    def shutdown(self) -> None:
        if self.httpd:
            self.httpd.shutdown()

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2] if self.httpd else (self.host, self.port)
        return f"http://{host if ':' not in host else '[' + host + ']'}:{port}/"


class _Handler(http.server.BaseHTTPRequestHandler):
    dashboard: Dashboard
    server_version = "pg_wf-dashboard"
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt: str, *args: Any) -> None:  # through logging, not stderr
        log.debug("%s %s", self.address_string(), fmt % args)

    # -- responses ---------------------------------------------------------

    def _send(self, status: int, body: bytes, ctype: str, extra: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("X-Frame-Options", "DENY")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("Content-Security-Policy",
                         "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
                         "img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; "
                         "base-uri 'none'; form-action 'none'")
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, status: int, data: Any) -> None:
        self._send(status, to_json(data), "application/json; charset=utf-8")

    def _error(self, status: int, message: str, **more: Any) -> None:
        self._json(status, {"error": message, **more})

    # -- dispatch ------------------------------------------------------------

    def do_HEAD(self) -> None:
        self.do_GET()

    def do_GET(self) -> None:
        self._dispatch(GET_ROUTES)

    def do_POST(self) -> None:
        self._dispatch(POST_ROUTES)

    def _dispatch(self, routes: dict[str, Callable]) -> None:
        url = urlsplit(self.path)
        self.query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        try:
            if not self.dashboard.host_allowed(self.headers.get("Host")):
                return self._error(421, "unexpected Host header (start with --allow-host to accept it)")
            handler = routes.get(url.path)
            if handler is None and self.command in ("GET", "HEAD") and url.path.startswith("/static/"):
                return self._static_file(url.path[len("/static/"):])
            if handler is None:
                other = POST_ROUTES if routes is GET_ROUTES else GET_ROUTES
                if url.path in other:
                    return self._error(405, f"use {'POST' if other is POST_ROUTES else 'GET'} for {url.path}")
                return self._error(404, f"no such page: {url.path}")
            if self.command == "POST":
                self.body = self._read_post()
                if self.body is None:
                    return
            handler(self)
        except psycopg.Error as e:
            diag = e.diag
            sqlstate = getattr(e, "sqlstate", None)
            msg = diag.message_primary or str(e).strip()
            status = http_status_for(sqlstate)
            if isinstance(e, psycopg.OperationalError) and not sqlstate:
                status = 503
            log.info("%s %s: %s (%s)", self.command, url.path, msg, sqlstate)
            self._error(status, msg, sqlstate=sqlstate, detail=diag.message_detail, hint=diag.message_hint)
        except BadRequest as e:
            self._error(400, str(e))
        except NotFound as e:
            self._error(404, str(e))
        except (ValueError, KeyError, TypeError) as e:
            self._error(400, f"bad request: {e}")
        except (BrokenPipeError, ConnectionResetError):
            pass
        except Exception as e:  # noqa: BLE001 - report, keep serving
            log.exception("%s %s failed", self.command, url.path)
            self._error(500, f"{type(e).__name__}: {e}")

    def _read_post(self) -> dict[str, Any] | None:
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            self._error(413, "request too large")
            return None
        raw = self.rfile.read(length) if length else b""
        token = self.headers.get("X-CSRF-Token") or ""
        if not hmac.compare_digest(token.encode(), self.dashboard.csrf_token.encode()):
            self._error(403, "missing or wrong CSRF token: reload the page")
            return None
        origin = self.headers.get("Origin")
        if origin is not None and origin != "null":
            if urlsplit(origin).netloc.lower() != (self.headers.get("Host") or "").lower():
                self._error(403, "cross-origin request refused")
                return None
        ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        if ctype != "application/json":
            self._error(415, "send application/json")
            return None
        body = json.loads(raw or b"{}")
        if not isinstance(body, dict):
            raise BadRequest("the body must be a JSON object")
        return body

    # -- pages -----------------------------------------------------------------

    def page(self) -> None:
        html = _static("index.html").decode().replace("{{CSRF_TOKEN}}", self.dashboard.csrf_token)
        self._send(200, html.encode(), "text/html; charset=utf-8")

    def _static_file(self, name: str) -> None:
        if name not in STATIC_FILES:
            return self._error(404, "no such file")
        ctype = mimetypes.guess_type(name)[0] or "application/octet-stream"
        if ctype.startswith("text/") or ctype in ("application/javascript", "image/svg+xml"):
            ctype += "; charset=utf-8"
        self._send(200, _static(name), ctype)

    def favicon(self) -> None:
        self._send(200, _static("favicon.svg"), "image/svg+xml")

    def healthz(self) -> None:
        self._send(200, b"ok\n", "text/plain; charset=utf-8")

    def metrics(self) -> None:
        store = self.dashboard.store
        try:
            has_view = store.schema()["metrics"]
            stats, counters = store.metrics_rows()
            text = prom.render(stats, counters, has_metrics_view=has_view)
        except psycopg.Error as e:
            log.warning("/metrics: %s", e)
            text = prom.render(None, None, error=str(e))
        self._send(200, text.encode(), prom.CONTENT_TYPE)

    # -- JSON reads ---------------------------------------------------------------

    def api_info(self) -> None:
        self._json(200, self.dashboard.store.schema())

    def api_queues(self) -> None:
        self._json(200, self.dashboard.store.queues())

    def api_jobs(self) -> None:
        self._json(200, self.dashboard.store.jobs(self.query))

    def api_job(self) -> None:
        self._json(200, self.dashboard.store.job(self.query["queue"], int(self.query["id"])))

    def api_workflows(self) -> None:
        self._json(200, self.dashboard.store.workflows(self.query))

    def api_workflow(self) -> None:
        wid = str(uuid.UUID(self.query["id"]))
        self._json(200, self.dashboard.store.workflow(wid))

    def api_schedules(self) -> None:
        self._json(200, self.dashboard.store.schedules())

    # -- actions (POST) -------------------------------------------------------------

    def _str(self, key: str) -> str:
        v = self.body.get(key)
        if not isinstance(v, str) or not v:
            raise BadRequest(f"{key} (text) is required")
        return v

    def _bool(self, key: str) -> bool:
        v = self.body.get(key)
        if not isinstance(v, bool):
            raise BadRequest(f"{key} (true or false) is required")
        return v

    def _id(self) -> int:
        v = self.body.get("id")
        if isinstance(v, bool) or not isinstance(v, (int, str)):
            raise BadRequest("id is required")
        return int(v)

    def act_retry(self) -> None:
        q, i = self._str("queue"), self._id()
        ok = self.dashboard.store.retry(q, i)
        log.info("retry %s/%s -> %s", q, i, ok)
        self._json(200, {"ok": bool(ok), "message": f"job {i} retried" if ok else
                         f"job {i} was not retried (only failed or cancelled jobs are)"})

    def act_cancel(self) -> None:
        q, i = self._str("queue"), self._id()
        ok = self.dashboard.store.cancel(q, i)
        log.info("cancel %s/%s -> %s", q, i, ok)
        self._json(200, {"ok": bool(ok), "message": f"job {i} cancelled" if ok else
                         f"job {i} was not cancelled (it is done or cancelled already)"})

    def act_bulk(self) -> None:
        action = self._str("action")
        f = {k: self.body.get(k) for k in ("queue", "status", "q", "workflow", "max")}
        n = self.dashboard.store.bulk(action, f)
        log.info("bulk %s %s -> %s", action, f, n)
        verb = "retried" if action == "retry" else "cancelled"
        self._json(200, {"ok": True, "count": n, "message": f"{n} job{'s' if n != 1 else ''} {verb}"})

    def act_cancel_workflow(self) -> None:
        wid = str(uuid.UUID(self._str("workflow_id")))
        n = self.dashboard.store.cancel_workflow(wid)
        self._json(200, {"ok": True, "count": n, "message": f"{n} step{'s' if n != 1 else ''} cancelled"})

    def act_pause(self) -> None:
        q, paused = self._str("queue"), self._bool("paused")
        self.dashboard.store.set_paused(q, paused)
        log.info("queue %s paused=%s", q, paused)
        self._json(200, {"ok": True, "message": f"queue {q} {'paused' if paused else 'resumed'}"})

    def act_enable_schedule(self) -> None:
        name, enabled = self._str("name"), self._bool("enabled")
        ok = self.dashboard.store.enable_schedule(name, enabled)
        self._json(200, {"ok": bool(ok), "message": (f"schedule {name} {'enabled' if enabled else 'disabled'}"
                                                     if ok else f"no schedule {name}")})


GET_ROUTES: dict[str, Callable[[_Handler], None]] = {
    "/": _Handler.page,
    "/index.html": _Handler.page,
    "/favicon.ico": _Handler.favicon,
    "/healthz": _Handler.healthz,
    "/metrics": _Handler.metrics,
    "/api/info": _Handler.api_info,
    "/api/queues": _Handler.api_queues,
    "/api/jobs": _Handler.api_jobs,
    "/api/job": _Handler.api_job,
    "/api/workflows": _Handler.api_workflows,
    "/api/workflow": _Handler.api_workflow,
    "/api/schedules": _Handler.api_schedules,
}
POST_ROUTES: dict[str, Callable[[_Handler], None]] = {
    "/api/job/retry": _Handler.act_retry,
    "/api/job/cancel": _Handler.act_cancel,
    "/api/jobs/bulk": _Handler.act_bulk,
    "/api/workflow/cancel": _Handler.act_cancel_workflow,
    "/api/queue/pause": _Handler.act_pause,
    "/api/schedule/enable": _Handler.act_enable_schedule,
}
