#!/usr/bin/env bash
# Runs every test of pg_wf: unit tests of the pure core, pg_regress for the
# SQL API, isolation specs for concurrency, TAP crash tests. Installs what is
# missing first. Usage:
# scripts/test.sh [unit|regress|isolation|tap|clients|citus ...]
# (clients: the Python and TypeScript libraries' suites and the dashboard's
# browser test, against one throwaway cluster; citus: test/citus/run.sh, TAP
# tests on a Citus coordinator and two workers, skipped with a line
# "citus: skipped (why)" when no Citus is found.)
# Ends with one line "N passed, M failed".
set -uo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
suites=("$@")
[ ${#suites[@]} -eq 0 ] && suites=(unit regress isolation tap clients citus)
want() { local s; for s in "${suites[@]}"; do [ "$s" = "$1" ] && return 0; done; return 1; }

"$repo/scripts/install-deps.sh" || exit 1
# PG_CONFIG picks the server to build for and test against (default: 15).
export PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
export PATH="$("$PG_CONFIG" --bindir):$PATH"

echo "== build and install"
( cd "$repo" && make -s -j2 && make -s install ) >/tmp/pg_wf-build.log 2>&1 || {
    cat /tmp/pg_wf-build.log; echo "0 passed, 1 failed"; exit 1; }

passed=0
failed=0
count() { passed=$((passed + $1)); failed=$((failed + $2)); }

# The server suites run as an unprivileged user (initdb refuses root), from
# a copy of the tree that user can write to.
run_as=postgres
[ "$(id -u)" -ne 0 ] && run_as=""
work=$(mktemp -d /tmp/pg_wf-test.XXXXXX)
# PG_WF_KEEP_TMP=1 keeps the copy (results/, regression.diffs, logs) for a look.
[ -z "${PG_WF_KEEP_TMP:-}" ] && trap 'rm -rf "$work"' EXIT
echo "work dir: $work"
tar -C "$repo" --exclude=.git --exclude=.demo --exclude=.bench -cf - . | tar -C "$work" -xf -
[ -n "$run_as" ] && chown -R "$run_as" "$work"
as_user() { if [ -n "$run_as" ]; then runuser -u "$run_as" -- "$@"; else "$@"; fi; }

if want unit; then
    echo "== unit tests (pure C++ core, GoogleTest)"
    out=$(cd "$repo" && make -s unit 2>&1); echo "$out" | tail -n 25
    p=$(echo "$out" | sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' | tail -1)
    f=$(echo "$out" | sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' | tail -1)
    [ -z "$p" ] && [ -z "$f" ] && f=1
    count "${p:-0}" "${f:-0}"
fi

# pg_regress and the isolation tester print one line per test ending in
# "ok" or "FAILED"; prove prints one line per file.
server_suite() {
    local name=$1 target=$2
    echo "== $name"
    local out
    out=$(cd "$work" && as_user timeout 1800 make -s "$target" 2>&1)
    echo "$out"
    local p f
    if [ "$target" = tapcheck ]; then
        # prove: one test program per file; its summary report names each
        # failing one on a line "test/t/NNN_x.pl (Wstat: ...".
        local files
        files=$(echo "$out" | sed -n 's/^Files=\([0-9]*\),.*/\1/p' | tail -1)
        f=$(echo "$out" | grep -cE '^test/t/.*\.pl +\(Wstat:')
        p=$(( ${files:-0} - f ))
        echo "$out" | grep -q '^Result: PASS' || [ "$f" -gt 0 ] || f=1
    else
        p=$(echo "$out" | grep -cE ' \.\.\. ok')
        f=$(echo "$out" | grep -cE ' \.\.\. FAILED')
    fi
    if [ "$p" -eq 0 ] && [ "$f" -eq 0 ]; then f=1; fi
    count "$p" "$f"
    for d in regression.diffs output_iso/regression.diffs test/regression.diffs test/output_iso/regression.diffs; do
        [ -s "$work/$d" ] && { echo "--- $d"; head -n 200 "$work/$d"; }
    done
    if [ "$target" = tapcheck ] && [ "$f" -gt 0 ]; then
        for log in "$work"/tmp_check/log/regress_log_*; do
            [ -f "$log" ] && { echo "--- $log"; tail -n 60 "$log"; }
        done
    fi
}
want regress && server_suite "pg_regress: the SQL API" regresscheck
want isolation && server_suite "isolation specs: concurrency" isolationcheck
want tap && server_suite "TAP: crashes, restarts, recovery" tapcheck

# Counts the last line "N passed, M failed" of a runner's output (none: one
# failure).
count_last_line() {
    local line p f
    line=$(echo "$1" | grep -E '^[0-9]+ passed, [0-9]+ failed$' | tail -1)
    p=$(echo "$line" | sed -n 's/^\([0-9]*\) passed.*/\1/p')
    f=$(echo "$line" | sed -n 's/.* \([0-9]*\) failed$/\1/p')
    if [ -z "$line" ]; then p=0; f=1; fi
    count "${p:-0}" "${f:-0}"
}

# The client suites share one throwaway cluster with pg_wf preloaded; each
# suite's runner ends with "N passed, M failed".
client_suite() {
    local name=$1 runner=$2
    echo "== $name"
    if [ ! -f "$work/$runner" ]; then
        echo "missing $runner"; count 0 1; return
    fi
    local out
    out=$(cd "$work" && as_user env PG_WF_TEST_DSN="$client_dsn" HOME="$work/.home" \
              timeout 1800 bash "$runner" 2>&1)
    echo "$out" | tail -n 60
    count_last_line "$out"
}
if want clients; then
    cluster="$work/clients-cluster"
    client_port=${PG_WF_CLIENTS_PORT:-5491}
    bindir=$("$PG_CONFIG" --bindir)
    mkdir -p "$work/.home" && { [ -z "$run_as" ] || chown "$run_as" "$work/.home"; }
    as_user "$bindir/initdb" -D "$cluster" -A trust -U postgres >/dev/null
    cat >> "$cluster/postgresql.conf" <<CONF
shared_preload_libraries = 'pg_wf'
port = $client_port
listen_addresses = ''
unix_socket_directories = '$work'
wf.sweep_interval = '200ms'
max_connections = 200
fsync = off
CONF
    if as_user "$bindir/pg_ctl" -D "$cluster" -l "$work/clients-cluster.log" -w start >/dev/null; then
        as_user "$bindir/psql" -h "$work" -p "$client_port" -U postgres -qAtX \
            -c "CREATE DATABASE wftest" \
            -c "\\c wftest" -c "CREATE EXTENSION pg_wf" >/dev/null
        client_dsn="host=$work port=$client_port user=postgres dbname=wftest"
        client_suite "Python library: pytest" clients/python/run-tests.sh
        client_suite "TypeScript library: node --test" clients/typescript/run-tests.sh
        client_suite "dashboard: headless Chromium" clients/python/dashboard-tests.sh
        as_user "$bindir/pg_ctl" -D "$cluster" -m fast -w stop >/dev/null
    else
        tail -n 20 "$work/clients-cluster.log"; count 0 1
    fi
fi

# Citus: run.sh finds (or builds) a PostgreSQL tree with Citus, installs
# pg_wf there from a copy of its own (so it runs as root, not as_user) and
# runs its TAP tests as postgres; with no Citus it prints "citus: skipped
# (why)" and "0 passed, 0 failed". From the repo, not the work copy: it
# looks for the shared folder beside the repo.
if want citus; then
    echo "== Citus: a coordinator and two workers"
    out=$(cd "$repo" && timeout 3600 bash "$repo/test/citus/run.sh" 2>&1)
    echo "$out" | tail -n 200
    count_last_line "$out"
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
