// The reaper: running jobs whose owner session is gone, or whose lease ran
// out, go back to pending (or to failed when their attempts are spent).
// Run by the background worker every wf.sweep_interval and when a claiming
// session exits, and by hand with wf_sweep().
#include "args.hpp"
#include "jobs.hpp"
#include "shared_state.hpp"

namespace wf::pg {
namespace {

PreparedStatement running_owners(
    "SELECT DISTINCT owner_session FROM wf.job"
    " WHERE status = 'running' AND owner_session IS NOT NULL",
    {});

PreparedStatement recover_jobs(
    "UPDATE wf.job SET"
    "   status = CASE WHEN cancel_requested THEN 'cancelled'"
    "                 WHEN attempt >= max_attempts THEN 'failed' ELSE 'pending' END,"
    "   last_error = CASE WHEN owner_session = ANY($1)"
    "                     THEN format('worker lost: session (pid %s) ended during attempt %s',"
    "                                 owner_pid, attempt)"
    "                     ELSE format('worker lost: lease expired at %s during attempt %s',"
    "                                 lease_expires_at, attempt) END,"
    "   run_at = $2, owner_session = NULL, lease_expires_at = NULL,"
    "   finished_at = CASE WHEN cancel_requested OR attempt >= max_attempts THEN $2 END"
    " WHERE status = 'running'"
    "   AND (owner_session = ANY($1) OR lease_expires_at < $2)"
    " RETURNING queue, id, status",
    {INT8ARRAYOID, TIMESTAMPTZOID});

}  // namespace

int64 sweep_database() {
    uint64 owners = running_owners.execute(nullptr, nullptr);
    std::vector<Datum> dead;
    for (uint64 r = 0; r < owners; r++) {
        int64 key = column_int64(r, 1);
        bool alive = call([&] { return owner_is_alive(key); });
        if (!alive) dead.push_back(Int64GetDatum(key));
    }
    Params<2> p;
    p.set(0, call([&] {
        return PointerGetDatum(construct_array(dead.data(), static_cast<int>(dead.size()),
                                               INT8OID, 8, true, 'd'));
    }));
    p.set(1, clock_now());
    uint64 recovered = recover_jobs.execute(p.values, p.nulls);

    std::vector<int64> finished;
    for (uint64 r = 0; r < recovered; r++) {
        std::string status = column_text(r, 3);
        if (status == "pending") {
            std::string queue = column_text(r, 1);
            note_queue_ready(queue.data(), queue.size());
        } else {
            finished.push_back(column_int64(r, 2));
        }
    }
    if (!finished.empty()) cancel_dependents(finished, "failed: its worker was lost");
    return static_cast<int64>(recovered);
}

}  // namespace wf::pg

using namespace wf::pg;

// wf_sweep() -> int: one reaper pass by hand.
WF_SQL_FUNCTION(wf_sweep) {
    SpiConnection spi;
    int64 recovered = sweep_database();
    spi.finish();
    PG_RETURN_INT32(static_cast<int32>(recovered));
}
