# The throwaway cluster of the benchmarks, sourced by scripts/bench.sh and
# scripts/bench-peers.sh so that both measure on the same settings: pg_wf
# built and installed, a fresh cluster with durable commits, a database
# `bench` with pg_wf and the baseline table (bench/schema.sql), and the
# helpers that empty one side between runs.
#
# The sourcing script sets repo and bench_src first; BENCH_TAG names it in
# the log lines. Then: bench_build, bench_cluster DIR PORT, bench_pristine.

# PG_CONFIG picks the PostgreSQL installation to build against and run (as
# in scripts/demo.sh); by default the system's PostgreSQL 15.
if [ -z "${PG_CONFIG:-}" ]; then
    export PATH="/usr/lib/postgresql/15/bin:$PATH"
    PG_CONFIG=$(command -v pg_config || echo /usr/lib/postgresql/15/bin/pg_config)
fi
BIN=$("$PG_CONFIG" --bindir 2>/dev/null || echo /usr/lib/postgresql/15/bin)
[ -x "$BIN/pgbench" ] || BIN=/usr/lib/postgresql/15/bin

log() { printf '[%s %s] %s\n' "${BENCH_TAG:-bench}" "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

is_root=0; [ "$(id -u)" -eq 0 ] && is_root=1
as_pg() { if [ $is_root = 1 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

# As root: the missing packages, then pg_wf built and installed into
# PG_CONFIG's PostgreSQL. Otherwise pg_wf must be installed already.
bench_build() {
    if [ $is_root = 1 ]; then
        "$repo/scripts/install-deps.sh" >&2 || die "installing dependencies failed"
        if ! (cd "$repo" && flock /tmp/pg_wf-build.lock make -s -j2 PG_CONFIG="$PG_CONFIG" install) >/tmp/pg_wf-bench-build.log 2>&1; then
            [ -f "$("$PG_CONFIG" --pkglibdir)/pg_wf.so" ] || { cat /tmp/pg_wf-bench-build.log >&2; die "build failed"; }
            log "warning: build failed (see /tmp/pg_wf-bench-build.log); benchmarking the installed pg_wf"
        fi
    else
        [ -f "$("$PG_CONFIG" --pkglibdir)/pg_wf.so" ] || die "pg_wf is not installed in $("$PG_CONFIG" --pkglibdir): run 'make install' as root"
    fi
}

# bench_cluster DIR PORT: a fresh cluster in DIR/data (in a temporary
# directory if postgres cannot write DIR), listening on a Unix socket only,
# stopped on exit unless BENCH_KEEP=1. Sets work, data, sock, port, dsn and
# sql (psql on database bench).
bench_cluster() {
    work=$1; port=$2
    mkdir -p "$work"
    if [ $is_root = 1 ]; then
        chown postgres "$work"
        if ! runuser -u postgres -- test -w "$work" 2>/dev/null; then
            local wanted=$work
            work=$(mktemp -d /tmp/pg_wf-bench.XXXXXX)
            chown postgres "$work"
            log "postgres cannot write $wanted; the cluster lives in $work"
        fi
    fi
    data="$work/data"
    sock="$work"
    # A Unix socket path must stay short.
    if [ ${#sock} -gt 80 ]; then sock=$(mktemp -d /tmp/pg_wf-bench-sock.XXXXXX); [ $is_root = 1 ] && chown postgres "$sock"; fi

    stop_cluster
    rm -rf "$data"
    log "initdb in $data"
    as_pg "$BIN/initdb" -D "$data" -U postgres -A trust -E UTF8 --locale=C.UTF-8 >"$work/initdb.log" 2>&1 \
        || { cat "$work/initdb.log" >&2; die "initdb failed"; }
    cat >>"$data/postgresql.conf" <<EOF

# pg_wf benchmark: durable commits, as in production.
listen_addresses = ''
unix_socket_directories = '$sock'
port = $port
fsync = on
synchronous_commit = on
full_page_writes = on
shared_buffers = 256MB
shared_preload_libraries = 'pg_wf'
max_connections = 100
max_worker_processes = 16
# The bench checkpoints between runs itself; none should land inside one.
max_wal_size = 16GB
checkpoint_timeout = 1h
# What autovacuum did during a run, in server.log.
log_autovacuum_min_duration = 0
EOF
    if [ "${BENCH_KEEP:-0}" != 1 ]; then trap stop_cluster EXIT; fi
    as_pg "$BIN/pg_ctl" -D "$data" -l "$work/server.log" -w start >/dev/null || { tail -n 30 "$work/server.log" >&2; die "server did not start"; }

    dsn="host=$sock port=$port user=postgres dbname=bench"
    export PGOPTIONS="-c client_min_messages=warning"
    "$BIN/createdb" -h "$sock" -p "$port" -U postgres bench
    sql -c "CREATE EXTENSION pg_wf"
    sql -f "$bench_src/schema.sql"
    bench_role_grants
    sql -c "VACUUM ANALYZE counter"
}

# BENCH_AS=worker: the timed clients run as a role that is no superuser,
# with the rights a worker and a producer need (wf_grant) and the same
# privileges on the baseline's tables, so that pg_wf's checks are paid.
# Default: the superuser postgres, for which pg_wf checks nothing.
bench_user=postgres
[ "${BENCH_AS:-postgres}" = worker ] && bench_user=bench_worker
bench_role_grants() {
    [ "$bench_user" = postgres ] && return 0
    sql -c "DO \$\$ BEGIN CREATE ROLE bench_worker LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END \$\$"
    sql -c "SELECT wf_grant('bench_worker', 'produce', '*'), wf_grant('bench_worker', 'work', '*')" \
        -c "GRANT ALL ON ALL TABLES IN SCHEMA public TO bench_worker" \
        -c "GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO bench_worker" >/dev/null
}

stop_cluster() {
    if [ -n "${data:-}" ] && [ -f "$data/postmaster.pid" ]; then
        as_pg "$BIN/pg_ctl" -D "$data" -m fast -w stop >/dev/null 2>&1 || true
    fi
}
# The database sql (and bench.sh's pgbench runs) use; bench.sh's history
# section switches it to a second database for its empty-history runs.
db=bench
sql() { "$BIN/psql" -X -q -At -v ON_ERROR_STOP=1 -h "$sock" -p "$port" -U postgres -d "$db" "$@"; }

# pg_wf's tables as CREATE EXTENSION leaves them (some hold a row from the
# start), kept aside so that every run starts from that state, whatever the
# storage layout of the version under test. Sets wf_tables and wf_restore.
bench_pristine() {
    wf_tables=$(sql -c "SELECT string_agg(format('%I.%I', n.nspname, c.relname), ', ')
                          FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                         WHERE n.nspname = 'wf' AND c.relkind IN ('r', 'p') AND c.relname <> 'queue_config'")
    wf_restore=$(sql <<'EOF'
CREATE SCHEMA bench_pristine;
SELECT string_agg(format('INSERT INTO wf.%I SELECT * FROM bench_pristine.%I;', c.relname, c.relname), ' ')
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE n.nspname = 'wf' AND c.relkind IN ('r', 'p') AND c.relname <> 'queue_config';
DO $$
DECLARE t text;
BEGIN
    FOR t IN SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
              WHERE n.nspname = 'wf' AND c.relkind IN ('r', 'p') AND c.relname <> 'queue_config'
    LOOP
        EXECUTE format('CREATE TABLE bench_pristine.%I AS SELECT * FROM wf.%I', t, t);
    END LOOP;
END $$;
EOF
)
}

# Empty state of one side: no jobs at all, a checkpoint so that no run pays
# for the previous run's dirty pages.
# pg_wf's worker locks these tables in passes of its own, in its own order,
# so a TRUNCATE of them all can lose a deadlock against it: then again.
reset() {
    if [ "$1" = wf ]; then
        local try
        for try in 1 2 3 4 5; do
            sql -c "BEGIN; TRUNCATE $wf_tables; $wf_restore COMMIT;" 2>"$work/reset.err" && break
            grep -q "deadlock detected" "$work/reset.err" && [ "$try" -lt 5 ] \
                || { cat "$work/reset.err" >&2; die "could not empty pg_wf's tables"; }
            log "  (emptying pg_wf's tables lost a deadlock with its worker; again)"
            sleep 0.2
        done
    else sql -c "TRUNCATE baseline_jobs RESTART IDENTITY"; fi
    sql -c "CHECKPOINT"
}
settle() { sql -c "VACUUM ANALYZE $wf_tables" -c "VACUUM ANALYZE baseline_jobs"; }
