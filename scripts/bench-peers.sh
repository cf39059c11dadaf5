#!/usr/bin/env bash
# pg_wf next to its peers, graphile-worker and pg-boss (versions pinned in
# bench/peers/package-lock.json, installed from npm into the git-ignored
# bench/peers/node_modules), and the plain SKIP LOCKED table of
# scripts/bench.sh, on a throwaway cluster with bench.sh's settings (durable
# commits), in the same run. All four are driven from one Node runtime
# (bench/peers/peers.js) with the same `pg` client:
#   drain  N jobs pre-enqueued in bulk, then run by no-op handlers: each
#          system with the same concurrency and batch size, in its own
#          batched mode. jobs/s from the first handler starting to every
#          job recorded as finished; best of BENCH_ROUNDS, order alternating.
#   wake   one idle consumer; one job committed at a time: from the
#          enqueuer's COMMIT returning to the handler starting, p50 and p99.
# Every job must be handled (a run that falls short fails). Prints one table
# and writes it to .bench/peers.md.
#
# Usage: scripts/bench-peers.sh                 full run, about 13 minutes
#        BENCH_QUICK=1 scripts/bench-peers.sh   smoke run, about 2 minutes
# Settings (environment):
#   BENCH_PEERS_JOBS     jobs of each drain run (50000; quick 10000)
#   BENCH_PEERS_WORKERS  concurrency of each system (8)
#   BENCH_PEERS_BATCH    jobs per fetch (100)
#   BENCH_WAKE_JOBS      jobs of each latency run (1000; quick 100)
#   BENCH_ROUNDS         drain runs per system, best kept (3; quick 1): a run
#                        of the fast systems lasts 2-3 s, and an autovacuum
#                        or a slow stretch of the shared disk can land in one
#   BENCH_PEERS_PORT     port of the throwaway cluster (5497, so that it can
#                        run beside bench.sh's; Unix socket only)
#   PG_CONFIG, BENCH_KEEP=1   as in scripts/bench.sh
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
bench_src="$repo/bench"
peers="$bench_src/peers"
case "${BENCH_QUICK:-0}" in ""|0|no|false) quick=0 ;; *) quick=1 ;; esac
if [ "$quick" = 1 ]; then
    JOBS=${BENCH_PEERS_JOBS:-10000}; WAKE_JOBS=${BENCH_WAKE_JOBS:-100}; ROUNDS=${BENCH_ROUNDS:-1}
else
    JOBS=${BENCH_PEERS_JOBS:-50000}; WAKE_JOBS=${BENCH_WAKE_JOBS:-1000}; ROUNDS=${BENCH_ROUNDS:-3}
fi
WORKERS=${BENCH_PEERS_WORKERS:-8}
BATCH=${BENCH_PEERS_BATCH:-100}
BENCH_TAG=bench-peers
. "$repo/scripts/bench-cluster.sh"

# ---------------------------------------------------------------- setup
# Other work on the machine moves every figure: the load goes in the report.
load_start=$(cut -d' ' -f1 /proc/loadavg)
command -v node >/dev/null || die "node not found (Node.js 20 or later)"
[ "$(node -p 'process.versions.node.split(".")[0]')" -ge 20 ] || die "Node.js 20 or later needed, found $(node -v)"
# npm ci again only when the lockfile changed since the last install.
if [ ! -f "$peers/node_modules/.package-lock.json" ] || [ "$peers/package-lock.json" -nt "$peers/node_modules/.package-lock.json" ]; then
    log "npm ci in bench/peers (graphile-worker, pg-boss, pg)"
    (cd "$peers" && npm ci --no-audit --no-fund --loglevel=error) >&2 || die "npm ci failed"
fi
bench_build
bench_cluster "$repo/.bench/peers" "${BENCH_PEERS_PORT:-5497}"
bench_pristine
export PGHOST="$sock" PGPORT="$port"

peers_js() { node "$peers/peers.js" "$@" --jobs "$JOBS" --workers "$WORKERS" --batch "$BATCH" --wake-jobs "$WAKE_JOBS"; }
results="$work/peers.jsonl"
peers_js setup >"$results"
log "versions: $(cat "$results")"

# Empty tables of one system and a checkpoint, as bench.sh's reset.
empty() {
    case $1 in
        wf|base) reset "$1" ;;
        gw) sql -c "TRUNCATE graphile_worker._private_jobs, graphile_worker._private_job_queues" -c "CHECKPOINT" ;;
        boss) sql -c "TRUNCATE pgboss.job, pgboss.archive" -c "CHECKPOINT" ;;
    esac
}
systems="wf base gw boss"

# ---------------------------------------------------------------- drain
log "drain: $JOBS jobs per system, $WORKERS workers, batches of $BATCH, best of $ROUNDS"
for r in $(seq 1 "$ROUNDS"); do
    order=$systems
    [ $((r % 2)) = 0 ] && order=$(echo "$systems" | tr ' ' '\n' | tac | tr '\n' ' ')
    for s in $order; do
        empty "$s"
        out=$(peers_js drain "$s") || die "drain of $s failed"
        echo "$out" >>"$results"
        log "  $out"
    done
done

# ---------------------------------------------------------------- wake
log "wake: $WAKE_JOBS jobs per system, one at a time, one idle consumer"
for s in $systems; do
    empty "$s"
    out=$(peers_js wake "$s") || die "wake latency of $s failed"
    echo "$out" >>"$results"
    log "  $out"
done

# ---------------------------------------------------------------- report
{
    echo "# pg_wf next to graphile-worker and pg-boss"
    echo
    echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, PostgreSQL $(sql -c 'SHOW server_version'), Node $(node -v), pg_wf $(sql -c "SELECT extversion FROM pg_extension WHERE extname = 'pg_wf'") at $(cd "$repo" && git rev-parse --short HEAD 2>/dev/null || echo '?')$(cd "$repo" && git diff --quiet HEAD -- src sql 2>/dev/null || echo ' + local changes'); $([ "$quick" = 1 ] && echo 'QUICK run' || echo 'full run')."
    echo "Load average (1 min) at the start $load_start, at the end $(cut -d' ' -f1 /proc/loadavg)."
    echo "fsync=on, synchronous_commit=on, shared_buffers=256MB. Drain: $JOBS jobs pre-enqueued, no-op handlers, $WORKERS workers, batches of $BATCH, best of $ROUNDS. Wake: $WAKE_JOBS jobs one at a time to one idle consumer, from the enqueuer's COMMIT returning to the handler starting."
    echo
    peers_js table <"$results"
} >"$repo/.bench/peers.md"
echo
cat "$repo/.bench/peers.md"
echo "(table written to $repo/.bench/peers.md)"
