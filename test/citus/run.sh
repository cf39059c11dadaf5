#!/usr/bin/env bash
# pg_wf on Citus: builds pg_wf into a PostgreSQL tree that has Citus and runs
# the TAP tests test/citus/t/*.pl there, each on a coordinator and two workers
# on this machine (test/citus/CitusTap.pm). scripts/test.sh runs it as its
# suite "citus". Usage: test/citus/run.sh
#
# Citus is, in this order:
#   - the tree of $PG_WF_CITUS_PG_CONFIG (a pg_config whose pkglibdir has
#     citus.so), when that is set and not empty;
#   - the tree citus/build-citus.sh builds (a no-op when built) in the shared
#     folder $PG_WF_SHARED, default <repo>/../shared;
#   - the default pg_config's tree ($PG_CONFIG, else PostgreSQL 15's), when
#     it has citus.so.
# Without any, it prints one line "citus: skipped (why)" and passes.
#
# pg_wf is built from a copy of the repo (the objects of the main build are
# for another tree) and installed into the Citus tree: root is needed when
# that tree is root-owned. The tests run as user postgres when run as root
# (initdb refuses root). PG_WF_KEEP_TMP=1 keeps the copy and the tests' logs;
# PG_WF_CITUS_TESTS="t/001_cluster.pl ..." runs only those tests.
# Ends with one line "N passed, M failed", counting test files as the tap
# suite of scripts/test.sh does.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)

skip() { echo "citus: skipped ($*)"; echo "0 passed, 0 failed"; exit 0; }
fail() { echo "citus: $*"; echo "0 passed, 1 failed"; exit 1; }
has_citus() {
    local lib
    [ -x "$1" ] && lib=$("$1" --pkglibdir 2>/dev/null) && [ -f "$lib/citus.so" ]
}

pgc=""
if [ -n "${PG_WF_CITUS_PG_CONFIG:-}" ]; then
    pgc=$PG_WF_CITUS_PG_CONFIG
    [ -x "$pgc" ] || fail "PG_WF_CITUS_PG_CONFIG=$pgc: no such executable"
    has_citus "$pgc" || fail "PG_WF_CITUS_PG_CONFIG=$pgc: no citus.so in $("$pgc" --pkglibdir)"
else
    shared=${PG_WF_SHARED:-$repo/../shared}
    builder="$shared/citus/build-citus.sh"
    if [ -f "$builder" ]; then
        log=$(mktemp /tmp/pg_wf-citus-build.XXXXXX)
        if bash "$builder" >"$log" 2>&1; then
            pgc=$(tail -n 1 "$log")
            rm -f "$log"
            has_citus "$pgc" || fail "$builder printed \"$pgc\", not a pg_config of a tree with citus.so"
        else
            tail -n 30 "$log"
            fail "$builder failed (its output: $log)"
        fi
    else
        default=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
        [ -x "$default" ] || default=$(command -v pg_config || true)
        if [ -n "$default" ] && has_citus "$default"; then
            pgc=$default
        else
            where="no pg_config"
            [ -n "$default" ] && where="no citus.so in $("$default" --pkglibdir)"
            skip "no Citus: PG_WF_CITUS_PG_CONFIG is not set, no $builder, $where"
        fi
    fi
fi

bindir=$("$pgc" --bindir)
pkglibdir=$("$pgc" --pkglibdir)
echo "Citus: $pkglibdir/citus.so ($("$pgc" --version))"
command -v prove >/dev/null || fail "prove (perl's Test::Harness) is not installed"

run_as=postgres
[ "$(id -u)" -ne 0 ] && run_as=""
as_user() { if [ -n "$run_as" ]; then runuser -u "$run_as" -- "$@"; else "$@"; fi; }

work=$(mktemp -d /tmp/pg_wf-citus.XXXXXX)
tap="$work/src/test/citus"
# Any server a test left running (prove killed by the timeout skips
# Cluster.pm's END block) is stopped by its data directory.
cleanup() {
    local pidfile
    while IFS= read -r pidfile; do
        as_user "$bindir/pg_ctl" -D "$(dirname "$pidfile")" -m immediate -w stop >/dev/null 2>&1
    done < <(find "$work" -name postmaster.pid 2>/dev/null)
    [ -z "${PG_WF_KEEP_TMP:-}" ] && rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 143' TERM INT
echo "work dir: $work"

mkdir -p "$work/src"
tar -C "$repo" --exclude=.git --exclude=.demo --exclude=.bench --exclude=node_modules \
    --exclude='*.o' --exclude='*.bc' --exclude='*.so' --exclude='tmp_check*' \
    --exclude=results --exclude=output_iso --exclude=__pycache__ -cf - . |
    tar -C "$work/src" -xf -
if ! ( cd "$work/src" && make -s -j2 PG_CONFIG="$pgc" && make -s install PG_CONFIG="$pgc" ) \
        >"$work/build.log" 2>&1; then
    tail -n 40 "$work/build.log"
    fail "building or installing pg_wf into $pkglibdir failed"
fi
[ -n "$run_as" ] && chown -R "$run_as" "$work"

# As PGXS's prove_installcheck: the tree's bindir first in PATH, so that
# Cluster.pm runs its initdb and postgres; its TAP modules; its pg_regress
# (Cluster.pm's init calls pg_regress --config-auth).
out=$(cd "$tap" && as_user env PATH="$bindir:$PATH" TESTDIR="$tap" \
          PG_REGRESS="$pkglibdir/pgxs/src/test/regress/pg_regress" \
          timeout "${PG_WF_CITUS_TIMEOUT:-1800}" \
          prove -I "$pkglibdir/pgxs/src/test/perl" -I "$tap" ${PG_WF_CITUS_TESTS:-t/*.pl} 2>&1)
echo "$out"

# prove: one test program per file; its summary names each failing one on a
# line "t/NNN_x.pl (Wstat: ...".
files=$(echo "$out" | sed -n 's/^Files=\([0-9]*\),.*/\1/p' | tail -1)
failing=$(echo "$out" | sed -n 's/^\(t\/[^ ]*\.pl\) *(Wstat:.*/\1/p' | sort -u)
f=$(echo "$failing" | grep -c .)
p=$(( ${files:-0} - f ))
echo "$out" | grep -q '^Result: PASS' || [ "$f" -gt 0 ] || f=1
[ "$p" -lt 0 ] && p=0
if [ "$p" -eq 0 ] && [ "$f" -eq 0 ]; then f=1; fi

if [ "$f" -gt 0 ]; then
    for t in $failing; do
        base=$(basename "$t" .pl)
        log="$tap/tmp_check/log/regress_log_$base"
        [ -f "$log" ] && { echo "--- $log"; tail -n 60 "$log"; }
        # The servers' logs without the statements (log_statement = all).
        for node_log in "$tap/tmp_check/log/${base}"_*.log; do
            [ -f "$node_log" ] || continue
            echo "--- $node_log (no statements)"
            grep -vE 'LOG:  (statement|execute [^:]*): |STATEMENT:  ' "$node_log" | tail -n 30
        done
    done
fi
echo "$p passed, $f failed"
[ "$f" -eq 0 ]
