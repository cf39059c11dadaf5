#!/usr/bin/env bash
# The dashboard's browser test: seeds the database of PG_WF_TEST_DSN (a
# superuser connection to a database with CREATE EXTENSION pg_wf), starts
# `python3 -m pg_wf dashboard` as a role that is no superuser, and drives
# Debian's headless chromium through every page (pg_wf/dashboard/tests/).
# Screenshots, the console log, /metrics and the server's log go to
# pg_wf/dashboard/tests/artifacts/. Ends with `N passed, M failed`.
#
# Needs the Debian packages chromium and python3-psycopg (optional:
# python3-prometheus-client, a second reader of /metrics).
set -u
cd "$(dirname "$0")"
PY=${PG_WF_PYTHON:-/usr/bin/python3}   # Debian's Python: it has python3-psycopg
if [ -z "${PG_WF_TEST_DSN:-}" ]; then
    echo "PG_WF_TEST_DSN is not set (a superuser connection to a database with pg_wf)"
    echo "0 passed, 1 failed"; exit 1
fi
if ! command -v chromium >/dev/null 2>&1; then
    echo "chromium is missing: apt-get install -y chromium"
    echo "0 passed, 1 failed"; exit 1
fi
if ! "$PY" -c 'import psycopg' 2>/dev/null; then
    echo "$PY has no psycopg: apt-get install -y python3-psycopg"
    echo "0 passed, 1 failed"; exit 1
fi
PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" exec "$PY" pg_wf/dashboard/tests/test_browser.py
