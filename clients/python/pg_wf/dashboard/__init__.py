"""pg_wf's web dashboard: `pg-wf dashboard --dsn ...` (see README.md here).

A small HTTP server (standard library + psycopg 3) serving one static page
and a JSON API over pg_wf's views and wf_* functions, and /metrics in the
Prometheus text format.
"""

from .server import Dashboard

__all__ = ["Dashboard", "serve"]


def serve(dsn: str, host: str = "127.0.0.1", port: int = 8089, **kw) -> None:
    """Serves the dashboard until interrupted."""
    Dashboard(dsn, host=host, port=port, **kw).serve_forever()
