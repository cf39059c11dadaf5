"""The `pg-wf` command: `pg-wf dashboard --dsn ...`.

Also runs as `python3 -m pg_wf dashboard ...`.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading


def _dashboard(args: argparse.Namespace) -> int:
    from .dashboard.server import Dashboard, is_loopback  # psycopg is needed from here on

    dsn = args.dsn or os.environ.get("PG_WF_DSN") or os.environ.get("DATABASE_URL") or ""
    dash = Dashboard(dsn, host=args.host, port=args.port, pool_size=args.pool_size,
                     allowed_hosts=args.allow_host)
    try:
        info = dash.store.schema()
    except Exception as e:  # noqa: BLE001 - a clear message instead of a traceback
        print(f"pg-wf dashboard: cannot use the database: {e}", file=sys.stderr)
        return 2
    try:
        dash.make_server()
    except OSError as e:
        print(f"pg-wf dashboard: cannot listen on {args.host}:{args.port}: {e}", file=sys.stderr)
        return 2
    log = logging.getLogger("pg_wf.dashboard")
    log.info("pg_wf %s in database %s as role %s%s", info["version"], info["database"], info["role"],
             " (superuser)" if info["superuser"] else "")
    if not is_loopback(args.host):
        log.warning("listening on %s: anyone who reaches this port acts as role %s (no login)",
                    args.host, info["role"])
    # One line on stdout, for people and scripts: where it listens.
    print(f"pg_wf dashboard on {dash.url} (metrics at {dash.url}metrics)", flush=True)
    # shutdown() waits for serve_forever, which runs in this thread: ask from another
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=dash.shutdown).start())
    try:
        dash.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="pg-wf", description="pg_wf command line tools")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more log output")
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("dashboard", help="serve the web dashboard and /metrics",
                       description="Serve pg_wf's web dashboard (queues, jobs, workflows, schedules) "
                                   "and Prometheus metrics at /metrics.")
    d.add_argument("--dsn", help="libpq connection string or URI (default: $PG_WF_DSN, $DATABASE_URL, "
                                 "then libpq's PG* variables); the role's pg_wf rights decide what it "
                                 "shows and may do")
    d.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    d.add_argument("--port", type=int, default=8089, help="port (default 8089; 0 picks a free one)")
    d.add_argument("--pool-size", type=int, default=4, help="database connections (default 4)")
    d.add_argument("--allow-host", action="append", default=[], metavar="HOST[:PORT]",
                   help="accept this Host header too (behind a reverse proxy on a loopback bind)")
    d.set_defaults(func=_dashboard)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose > 1 else logging.INFO if args.verbose or
                        args.command == "dashboard" else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
