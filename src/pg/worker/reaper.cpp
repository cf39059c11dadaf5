// The reaper: running jobs whose owner session is gone, or whose lease (or
// max run time) ran out, go back to pending (or to failed when their
// attempts are spent); jobs not started by their start_by fail.
// Run by the background worker every wf.sweep_interval and when a claiming
// session exits, and by hand with wf_sweep(). The transitions are in
// job_state.cpp; this file decides whose claims are lost.
#include "pg/worker/reaper.hpp"

#include "pg/api/frame.hpp"
#include "pg/api/schedule.hpp"
#include "pg/citus/cluster_calls.hpp"
#include "pg/citus/ownership.hpp"
#include "pg/citus/shard_route.hpp"
#include "pg/jobs/children.hpp"
#include "pg/jobs/dependencies.hpp"
#include "pg/runtime/ownership.hpp"

namespace wf::pg {

int64 sweep_database() {
    std::vector<int64> finished;
    int64 recovered = 0;
    if (!claims_survived()) recovered += recover_lost_claims("the server restarted", &finished);

    std::vector<int64> dead;
    for (int64 key : claim_owner_keys()) {
        bool alive = call([&] { return owner_is_alive(key); });
        if (!alive) dead.push_back(key);
    }
    // On a distributed pg_wf, a client may outlive the backend that served
    // its claim (citus/ownership.hpp).
    if (!dead.empty() && current_shard_group() != nullptr) dead = without_live_origins(dead);
    recovered += recover_claims(dead, &finished);

    if (!finished.empty()) cancel_dependents(finished, "failed: its worker was lost");

    // Jobs that were to start by a deadline that passed.
    std::vector<int64> unstarted;
    fail_unstarted_jobs(&unstarted);
    if (!unstarted.empty()) cancel_dependents(unstarted, "failed: not started by its deadline");

    // Outcomes of child workflows whose parent another transaction held
    // (workflows are not served on a distributed pg_wf).
    if (current_shard_group() == nullptr) settle_undelivered_children();
    return recovered;
}

}  // namespace wf::pg

using namespace wf::pg;

namespace {

// wf_sweep's passes in one shard group, or on one server.
int64 sweep_here() {
    int64 n = sweep_database();
    // The background worker's other duties, for a server without it.
    settle_release_debts();
    wake_waiting_jobs(std::nullopt, std::nullopt);
    if (current_shard_group() != nullptr) wake_signalled_jobs();
    return n;
}

// On a distributed pg_wf: every shard group with something to sweep (a
// claim, a wait, a release owed, a job with a start_by deadline passed),
// each on its node; and the due schedules, on the coordinator.
int64 sweep_cluster() {
    require_schema_at_least("1.8", "wf_sweep on a distributed pg_wf");
    std::string now = timestamptz_literal(TimestampTzGetDatum(GetCurrentTimestamp()));
    int64 recovered = 0;
    for (const std::string& queue : one_queue_per_group({
             "SELECT DISTINCT queue FROM wf.claim WHERE queue <> ''",
             "SELECT DISTINCT queue FROM wf.event_wait",
             "SELECT DISTINCT child_queue AS queue FROM wf.release_debt",
             "SELECT DISTINCT queue FROM wf.job WHERE start_by <= " + now +
                 " AND status IN ('pending', 'blocked')"}))
        recovered += call_in_group("_sweep_group", queue, "");
    fire_due_schedules();
    return recovered;
}

}  // namespace

// wf_sweep() -> int: one reaper pass by hand (recovery, event timeouts,
// due schedules); returns the jobs recovered.
WF_SQL_FUNCTION(wf_sweep) {
    int64 recovered = with_job_tables_anywhere([] {
        require_right(Capability::administer, "*");
        if (distributed()) return sweep_cluster();
        int64 n = sweep_here();
        fire_due_schedules();
        return n;
    });
    PG_RETURN_INT32(static_cast<int32>(recovered));
}

// wf._sweep_group(queue) -> int: wf_sweep in the shard group of `queue`, on
// a distributed pg_wf (called by sweep_cluster).
WF_SQL_FUNCTION(wf_group_sweep) {
    require_group_call_from_pg_wf("wf._sweep_group");
    queue_arg(fcinfo, 0);
    int64 recovered = with_queue_tables(PG_GETARG_DATUM(0), [] { return sweep_here(); });
    PG_RETURN_INT32(static_cast<int32>(recovered));
}

// wf_recover_lost_claims() -> int: jobs whose claim was lost without a
// crash -- a dump restored while they ran (claims are not dumped) -- are
// given back, their attempt counted. One scan of wf.job; run it once after
// the restore has finished (not during it: before wf.ready is loaded every
// pending job would look lost).
namespace {
int64 recover_dumped_claims() {
    std::vector<int64> finished;
    int64 n = recover_lost_claims("a dump was taken", &finished);
    if (!finished.empty()) cancel_dependents(finished, "failed: its worker was lost");
    return n;
}
}  // namespace

WF_SQL_FUNCTION_ANY_SCAN(wf_recover_lost_claims) {
    int64 recovered = with_job_tables_anywhere([] {
        require_right(Capability::administer, "*");
        if (!distributed()) return recover_dumped_claims();
        // On a distributed pg_wf: in every shard group with pending jobs.
        require_schema_at_least("1.8", "wf_recover_lost_claims on a distributed pg_wf");
        int64 n = 0;
        for (const std::string& queue :
             one_queue_per_group({"SELECT DISTINCT queue FROM wf.job WHERE status = 'pending'"}))
            n += call_in_group("_recover_lost_claims", queue, "");
        return n;
    });
    PG_RETURN_INT32(static_cast<int32>(recovered));
}

// wf._recover_lost_claims(queue) -> int: wf_recover_lost_claims in the shard
// group of `queue`, on a distributed pg_wf.
WF_SQL_FUNCTION(wf_group_recover_lost_claims) {
    require_group_call_from_pg_wf("wf._recover_lost_claims");
    queue_arg(fcinfo, 0);
    int64 recovered = with_queue_tables(PG_GETARG_DATUM(0), [] { return recover_dumped_claims(); });
    PG_RETURN_INT32(static_cast<int32>(recovered));
}
