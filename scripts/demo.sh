#!/usr/bin/env bash
# The pg_wf demo, one command: installs what is missing, builds and installs
# the extension, starts a throwaway PostgreSQL 15 cluster with pg_wf preloaded,
# runs demo/pipeline.py (worker processes running a document pipeline through
# the SQL API; one of them is killed midway), then demo/workflow.py (one
# workflow submitted with wf_submit, with a step that waits for an approval
# signal), then demo/translations.py (a workflow whose step starts one child
# workflow per language with wf_start_child and parks in wf_await_children;
# the children report wf_progress, one fails once and is retried; the step
# collects their outcomes and fans out with wf_complete_with_steps, while the
# driver blocks in wf_wait_workflow) and stops the cluster again.
# The cluster lives in .demo/ (ignored by git, replaced by the next run).
# Usage: sudo scripts/demo.sh   (root installs packages and the extension)
# PG_CONFIG picks the PostgreSQL to build against and run; PG_WF_DEMO_PORT
# the first port tried (5455; taken ports are skipped).
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
begin=$(date +%s%N)
elapsed() { awk -v ns=$(( $(date +%s%N) - begin )) 'BEGIN { printf "%.1f", ns / 1e9 }'; }
say() { printf '== %s\n' "$*"; }
is_root() { [ "$(id -u)" -eq 0 ]; }
# initdb and the server refuse to run as root.
as_pg() { if is_root; then runuser -u postgres -- "$@"; else "$@"; fi; }

base=""       # the demo's directory: cluster, socket, logs
cluster=""    # its data directory, once initdb ran
tmp_base=""   # set when the cluster had to go to /tmp
build_log=""
cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    [ -z "$build_log" ] || rm -f "$build_log"
    if [ -n "$cluster" ] && [ -f "$cluster/postmaster.pid" ]; then
        as_pg "$bindir/pg_ctl" -D "$cluster" -m fast -w -t 20 stop >/dev/null 2>&1 ||
            as_pg "$bindir/pg_ctl" -D "$cluster" -m immediate -w stop >/dev/null 2>&1 || true
        say "cluster stopped"
    fi
    case $rc in
        0) say "demo done in $(elapsed) s, nothing left running" ;;
        130 | 143) echo "demo interrupted after $(elapsed) s, nothing left running" >&2 ;;
        *)  if [ -n "$base" ] && [ -s "$base/server.log" ]; then
                echo "--- last lines of $base/server.log"
                tail -n 20 "$base/server.log"
            fi
            echo "demo failed (exit $rc) after $(elapsed) s; its files are in ${base:-(none)}" >&2 ;;
    esac
    # A cluster under /tmp is kept only to look into a failure.
    if [ -n "$tmp_base" ] && { [ "$rc" -eq 0 ] || [ "$rc" -eq 130 ] || [ "$rc" -eq 143 ]; }; then
        rm -rf "$tmp_base"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# 1. Packages, build, install.
"$repo/scripts/install-deps.sh"
PG_CONFIG=${PG_CONFIG:-pg_config}
bindir=$("$PG_CONFIG" --bindir)
pkglibdir=$("$PG_CONFIG" --pkglibdir)
if ! is_root && [ ! -w "$pkglibdir" ]; then
    echo "demo: installing pg_wf into $pkglibdir needs root: run sudo scripts/demo.sh" >&2
    exit 1
fi
say "build and install pg_wf"
build_log=$(mktemp /tmp/pg_wf-demo-build.XXXXXX)
# The lock keeps concurrent builds of this tree (tests, benchmarks) apart.
lock=()
command -v flock >/dev/null && lock=(flock /tmp/pg_wf-build.lock)
if ! (cd "$repo" && "${lock[@]}" sh -c 'make -s -j2 && make -s install') >"$build_log" 2>&1; then
    cat "$build_log"
    exit 1
fi

# 2. A throwaway cluster, owned by postgres when run as root. It goes to
# .demo/ unless postgres cannot reach the repository, or the socket path
# would be too long for a unix socket.
base="$repo/.demo"
if [ -f "$base/data/postmaster.pid" ]; then  # left running by a killed run
    as_pg "$bindir/pg_ctl" -D "$base/data" -m immediate -w stop >/dev/null 2>&1 || true
fi
why=""
if is_root && ! runuser -u postgres -- test -x "$repo"; then
    why="the postgres user cannot enter $repo"
elif [ ${#base} -gt 80 ]; then
    why="$base is too long a path for a unix socket"
fi
if [ -n "$why" ]; then
    tmp_base=$(mktemp -d /tmp/pg_wf-demo.XXXXXX)
    base=$tmp_base
    say "$why: the cluster goes to $base instead (removed at the end)"
else
    rm -rf "$base"
    mkdir -p "$base"
fi
is_root && chown postgres: "$base"

# The cluster listens on 127.0.0.1 only: a port another server holds there
# makes the start fail (no TCP socket at all) instead of sharing the port
# over ::1, and the next port is tried. The demo itself talks over the unix
# socket in $base, which no other cluster uses.
port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
port=${PG_WF_DEMO_PORT:-5455}
next_free_port() {
    while port_in_use "$port" || [ -e "$base/.s.PGSQL.$port" ]; do port=$((port + 1)); done
}
next_free_port

say "start a throwaway cluster in $base (port $port)"
as_pg "$bindir/initdb" -D "$base/data" -U postgres -A trust -E UTF8 --no-locale --no-sync \
    >"$base/initdb.log" 2>&1 || { cat "$base/initdb.log"; exit 1; }
cluster="$base/data"
cat >>"$cluster/postgresql.conf" <<EOF

# pg_wf demo
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$base'
shared_preload_libraries = 'pg_wf'
wf.sweep_interval = '500ms'
EOF
for try in 1 2 3 4 5 6 7 8 9 10; do
    rm -f "$base/server.log"
    started=$(as_pg "$bindir/pg_ctl" -D "$cluster" -l "$base/server.log" -w -t 30 start 2>&1) && break
    # Taken between the check and the start (another cluster starting now)?
    if [ "$try" -lt 10 ] && grep -q "could not create any TCP/IP sockets" "$base/server.log"; then
        port=$((port + 1))
        next_free_port
        say "port taken meanwhile: port $port"
        sed -i "s/^port = .*/port = $port/" "$cluster/postgresql.conf"
        continue
    fi
    echo "$started" >&2
    exit 1
done
export PGHOST=$base PGPORT=$port PGUSER=postgres PGDATABASE=pg_wf_demo
"$bindir/createdb" pg_wf_demo
psql=("$bindir/psql" -X -q -v ON_ERROR_STOP=1 -P pager=off)
"${psql[@]}" -c "CREATE EXTENSION pg_wf"
say "connect while it runs: psql -h $base -p $port -U postgres pg_wf_demo"

# 3. The pipeline.
say "run demo/pipeline.py: 30 documents x (summarize -> translate -> verify), 4 workers"
pipeline_rc=0
/usr/bin/python3 "$repo/demo/pipeline.py" || pipeline_rc=$?
[ "$pipeline_rc" -eq 130 ] && exit 130

say "the jobs the reaper recovered (wf.jobs)"
"${psql[@]}" -c "SELECT id, step_name AS step, payload->>'doc' AS doc, attempt, status, worker,
                        last_error
                   FROM wf.jobs WHERE last_error LIKE 'worker lost%' ORDER BY id"

# 4. A workflow in one call, parked on an approval until the driver signals it.
say "run demo/workflow.py: one wf_submit (fetch -> summarize | translate -> approve -> publish), 2 workers"
workflow_rc=0
/usr/bin/python3 "$repo/demo/workflow.py" || workflow_rc=$?
[ "$workflow_rc" -eq 130 ] && exit 130

# 5. Child workflows, progress, a wait for the result.
say "run demo/translations.py: one wf_submit (localize -> a child workflow per language -> publish each -> index), 4 workers"
translations_rc=0
/usr/bin/python3 "$repo/demo/translations.py" || translations_rc=$?
[ "$translations_rc" -eq 130 ] && exit 130

say "wf.workflows (part 1's documents are workflows too; part 3's children name their parent job in child_of)"
"${psql[@]}" -c "SELECT coalesce(name, '(a document, wf_enqueue)') AS workflow, child_of, count(*) AS workflows,
                        status, sum(steps) AS steps, sum(done) AS done, sum(waiting) AS waiting
                   FROM wf.workflows GROUP BY 1, 2, 4 ORDER BY 1"
say "wf.queue_stats"
"${psql[@]}" -c "SELECT * FROM wf.queue_stats"
[ "$pipeline_rc" -ne 0 ] && exit "$pipeline_rc"
[ "$workflow_rc" -ne 0 ] && exit "$workflow_rc"
exit "$translations_rc"
