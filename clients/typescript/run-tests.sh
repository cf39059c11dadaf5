#!/usr/bin/env bash
# The TypeScript library's tests: installs the pinned dependencies (npm ci), builds dist/ and the
# tests, and runs node's test runner against the server in PG_WF_TEST_DSN (a superuser DSN, URL or
# libpq keyword=value, of a database with CREATE EXTENSION pg_wf, on a server with
# shared_preload_libraries = pg_wf). Needs node >= 20.10 and npm. Ends with "N passed, M failed".
set -uo pipefail
cd "$(dirname "$0")"

if [ -z "${PG_WF_TEST_DSN:-}" ]; then
    echo "PG_WF_TEST_DSN is not set"
    echo "0 passed, 1 failed"
    exit 2
fi

fail_setup() {
    echo "$1"
    echo "0 passed, 1 failed"
    exit 1
}

npm ci --no-audit --no-fund --loglevel=error || fail_setup "npm ci failed"
npm run --silent build || fail_setup "npm run build failed"
npm run --silent build:test || fail_setup "building the tests failed"

passed=0
failed=0
# dist/ is committed (users need no build step): it must be the build of src/.
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    if git diff --quiet -- dist && [ -z "$(git ls-files --others --exclude-standard -- dist)" ]; then
        echo "ok - dist/ is the build of src/"
        passed=$((passed + 1))
    else
        echo "not ok - dist/ differs from the build of src/: commit the rebuilt dist/"
        git status --short -- dist
        failed=$((failed + 1))
    fi
fi

node --test --test-concurrency=1 \
    --test-reporter=spec --test-reporter-destination=stdout \
    --test-reporter=tap --test-reporter-destination=build/results.tap \
    build/*.test.js
rc=$?

count() { sed -n "s/^# $1 \([0-9]*\)$/\1/p" build/results.tap | tail -1; }
pass=$(count pass)
fail=$(count fail)
cancelled=$(count cancelled)
if [ -z "$pass" ]; then
    echo "the test runner reported nothing (exit $rc)"
    failed=$((failed + 1))
else
    passed=$((passed + pass))
    failed=$((failed + ${fail:-0} + ${cancelled:-0}))
    if [ "$rc" -ne 0 ] && [ "${fail:-0}" -eq 0 ] && [ "${cancelled:-0}" -eq 0 ]; then
        echo "the test runner exited $rc"
        failed=$((failed + 1))
    fi
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
