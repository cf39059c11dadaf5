// The reaper: running jobs whose owner session is gone, or whose lease (or
// max run time) ran out, go back to pending (or to failed when their
// attempts are spent); jobs not started by their start_by fail.
// Run by the background worker every wf.sweep_interval and when a claiming
// session exits, and by hand with wf_sweep(). The transitions are in
// job_state.cpp; this file decides whose claims are lost.
#include "pg/worker/reaper.hpp"

#include "pg/api/frame.hpp"
#include "pg/api/schedule.hpp"
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

// wf_sweep() -> int: one reaper pass by hand (recovery, event timeouts,
// due schedules); returns the jobs recovered.
WF_SQL_FUNCTION(wf_sweep) {
    int64 recovered = with_job_tables([] {
        require_right(Capability::administer, "*");
        int64 n = sweep_database();
        // The background worker's other duties, for a server without it.
        settle_release_debts();
        wake_waiting_jobs(std::nullopt, std::nullopt);
        fire_due_schedules();
        return n;
    });
    PG_RETURN_INT32(static_cast<int32>(recovered));
}

// wf_recover_lost_claims() -> int: jobs whose claim was lost without a
// crash -- a dump restored while they ran (claims are not dumped) -- are
// given back, their attempt counted. One scan of wf.job; run it once after
// the restore has finished (not during it: before wf.ready is loaded every
// pending job would look lost).
WF_SQL_FUNCTION(wf_recover_lost_claims) {
    int64 recovered = with_job_tables([] {
        require_right(Capability::administer, "*");
        std::vector<int64> finished;
        int64 n = recover_lost_claims("a dump was taken", &finished);
        if (!finished.empty()) cancel_dependents(finished, "failed: its worker was lost");
        return n;
    });
    PG_RETURN_INT32(static_cast<int32>(recovered));
}
