#!/usr/bin/env bash
# The Python library's test suite (pytest) against a real server.
# Usage: PG_WF_TEST_DSN='host=... port=... dbname=... user=...' clients/python/run-tests.sh [pytest args]
# The DSN: a superuser connection to a database where CREATE EXTENSION pg_wf
# has been run, on a server with shared_preload_libraries = 'pg_wf' (a short
# wf.sweep_interval, e.g. 200ms, keeps the recovery tests quick).
# Needs Debian's python3-psycopg and python3-pytest (for /usr/bin/python3, or
# the interpreter in $PYTHON). The last line of the output is `N passed, M failed`.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
python=${PYTHON:-/usr/bin/python3}
[ -x "$python" ] || python=python3

if [ -z "${PG_WF_TEST_DSN:-}" ]; then
    echo "run-tests.sh: set PG_WF_TEST_DSN to a database with the pg_wf extension" >&2
    echo "0 passed, 1 failed"
    exit 1
fi
if ! "$python" -c 'import psycopg, pytest' 2>/dev/null; then
    echo "run-tests.sh: $python lacks psycopg 3 or pytest (apt-get install python3-psycopg python3-pytest)" >&2
    echo "0 passed, 1 failed"
    exit 1
fi

report=$(mktemp /tmp/pg_wf-pytest.XXXXXX.xml)
trap 'rm -f "$report"' EXIT
cd "$here"
PYTHONPATH="$here${PYTHONPATH:+:$PYTHONPATH}" PYTHONDONTWRITEBYTECODE=1 \
    "$python" -m pytest -p no:cacheprovider -q -rfE --junitxml="$report" tests "$@"
rc=$?

# Count from the JUnit report: errors (a fixture that failed) count as failures.
read -r passed failed < <("$python" - "$report" <<'PY'
import sys
import xml.etree.ElementTree as ET
try:
    root = ET.parse(sys.argv[1]).getroot()
except Exception:
    print(0, 1)
    sys.exit()
suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
tests = sum(int(s.get("tests", 0)) for s in suites)
bad = sum(int(s.get("failures", 0)) + int(s.get("errors", 0)) for s in suites)
skipped = sum(int(s.get("skipped", 0)) for s in suites)
print(tests - bad - skipped, bad)
PY
)
if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then
    failed=1  # pytest failed before or around the tests (collection, usage)
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
