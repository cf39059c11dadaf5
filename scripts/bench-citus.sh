#!/usr/bin/env bash
# pg_wf distributed by Citus next to one server, on this machine: claim +
# complete, one job per call, 8 clients (one queue each), for BENCH_SECONDS
# (20) per measure, synchronous_commit off everywhere (four servers share
# the machine's disk and cores; what is compared is the path of a call):
#   1. one server (the same build, Citus not loaded);
#   2. a coordinator + 2 workers, every client connected to the coordinator
#      (each call delegated to the worker holding its queue);
#   3. the same cluster, each client connected to the worker holding its
#      queue.
# Citus: PG_WF_CITUS_PG_CONFIG, or built by ../shared/citus/build-citus.sh.
# Prints one line per measure and the ratios to one server.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
seconds=${BENCH_SECONDS:-20}
clients=8
base=${BENCH_CITUS_PORT:-5621}
shared=${PG_WF_SHARED:-$repo/../shared}
pgc=${PG_WF_CITUS_PG_CONFIG:-}
if [ -z "$pgc" ]; then
    [ -x "$shared/citus/build-citus.sh" ] || { echo "no Citus: set PG_WF_CITUS_PG_CONFIG" >&2; exit 1; }
    pgc=$(bash "$shared/citus/build-citus.sh" | tail -1)
fi
bin=$("$pgc" --bindir)
(cd "$repo" && make -s -j2 PG_CONFIG="$pgc" >/dev/null && make -s install PG_CONFIG="$pgc" >/dev/null)

run_as=postgres
[ "$(id -u)" -ne 0 ] && run_as=""
as_user() { if [ -n "$run_as" ]; then runuser -u "$run_as" -- "$@"; else "$@"; fi; }
work=$(mktemp -d /tmp/pg_wf-bench-citus.XXXXXX)
[ -n "$run_as" ] && chown "$run_as" "$work"
ports=()
cleanup() {
    for p in "${ports[@]}"; do as_user "$bin/pg_ctl" -D "$work/n$p" -m immediate stop >/dev/null 2>&1 || true; done
    rm -rf "$work"
}
trap cleanup EXIT

node() {  # node PORT PRELOAD
    local p=$1 preload=$2
    as_user "$bin/initdb" -D "$work/n$p" -A trust -U postgres >/dev/null
    cat >> "$work/n$p/postgresql.conf" <<CONF
shared_preload_libraries = '$preload'
port = $p
listen_addresses = '127.0.0.1'
unix_socket_directories = '$work'
synchronous_commit = off
max_connections = 200
shared_buffers = '512MB'
citus.node_conninfo = 'sslmode=prefer'
citus.enable_statistics_collection = off
CONF
    [ "$preload" = pg_wf ] && sed -i '/^citus\./d' "$work/n$p/postgresql.conf"
    as_user "$bin/pg_ctl" -D "$work/n$p" -l "$work/n$p.log" -w start >/dev/null
    ports+=("$p")
}
sql() { as_user "$bin/psql" -h "$work" -p "$1" -U postgres -qAtX -v ON_ERROR_STOP=1 -c "$2"; }

# The pgbench script of client c: its own queue, claim then complete.
for c in $(seq 1 $clients); do
    cat > "$work/client$c.sql" <<SQL
SELECT id, attempt FROM wf_claim('bench_q$c') \gset
SELECT wf_complete('bench_q$c', :id, :attempt);
SQL
done
# A literal batch: on Citus a call is delegated when its arguments are
# constants (a subquery would keep it on the coordinator, refused).
batch="[$(printf '{},%.0s' $(seq 1 59999)){}]"
for c in $(seq 1 $clients); do
    echo "SELECT count(*) FROM wf_enqueue_batch('bench_q$c', '$batch');"
done > "$work/fill.sql"
[ -n "$run_as" ] && chown "$run_as" "$work/fill.sql"
fill() {  # fill PORT: enough jobs in every queue
    as_user "$bin/psql" -h "$work" -p "$1" -U postgres -qAtX -v ON_ERROR_STOP=1 -f "$work/fill.sql" >/dev/null
}
measure() {  # measure NAME PORT_OF_CLIENT...: jobs/s of the clients together
    local name=$1; shift
    local pids=() c=1
    for p in "$@"; do
        as_user "$bin/pgbench" -h "$work" -p "$p" -U postgres -n -M simple -c 1 -T "$seconds" \
            -f "$work/client$c.sql" postgres > "$work/$name.$c.out" 2>&1 &
        pids+=($!)
        c=$((c + 1))
    done
    wait "${pids[@]}"
    local total=0
    for c in $(seq 1 $clients); do
        local tps
        tps=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' "$work/$name.$c.out" | head -1)
        [ -n "$tps" ] || { cat "$work/$name.$c.out" >&2; exit 1; }
        total=$(awk -v a="$total" -v b="$tps" 'BEGIN { print a + b }')
    done
    printf '%s' "$total"
}

echo "== one server"
node $base pg_wf
sql $base "CREATE EXTENSION pg_wf"
fill $base
single=$(measure single $(for c in $(seq 1 $clients); do echo $base; done))
as_user "$bin/pg_ctl" -D "$work/n$base" -m fast stop >/dev/null
echo "one server: $single jobs/s"

echo "== coordinator + 2 workers"
co=$((base + 1)); w1=$((base + 2)); w2=$((base + 3))
for p in $co $w1 $w2; do node $p citus,pg_wf; sql $p "CREATE EXTENSION citus"; done
sql $co "SELECT citus_set_coordinator_host('127.0.0.1', $co)"
sql $co "SELECT citus_add_node('127.0.0.1', $w1)" >/dev/null
sql $co "SELECT citus_add_node('127.0.0.1', $w2)" >/dev/null
sql $co "CREATE EXTENSION pg_wf"
sql $co "SELECT wf_distribute()" >/dev/null 2>&1
fill $co
through=$(measure coordinator $(for c in $(seq 1 $clients); do echo $co; done))
echo "through the coordinator: $through jobs/s"
fill $co
direct_ports=()
for c in $(seq 1 $clients); do
    direct_ports+=("$(sql $co "SELECT n.nodeport FROM pg_dist_placement p JOIN pg_dist_node n USING (groupid)
        WHERE p.shardid = get_shard_id_for_distribution_column('wf.job', 'bench_q$c')")")
done
echo "queues per worker: $(printf '%s\n' "${direct_ports[@]}" | sort | uniq -c | tr -s ' ' | tr '\n' ';')"
direct=$(measure direct "${direct_ports[@]}")
echo "clients on the workers: $direct jobs/s"
awk -v s="$single" -v t="$through" -v d="$direct" 'BEGIN {
    printf "ratios to one server: through the coordinator %.2f, clients on the workers %.2f\n", t / s, d / s }'
