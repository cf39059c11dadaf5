// wf_configure_queue: per-queue defaults and limits.
#include "core/error.hpp"
#include "core/validation.hpp"
#include "pg/base/args.hpp"
#include "pg/jobs/job_state.hpp"
#include "pg/jobs/queue_settings.hpp"
#include "pg/runtime/shared_memory.hpp"
#include "pg/runtime/wakeup.hpp"

namespace wf::pg {
namespace {

// NULL keeps the current value; a lease of zero removes the queue's lease.
PreparedStatement upsert_config(
    "INSERT INTO wf.queue_config AS c"
    "       (queue, max_attempts, backoff_base, backoff_max, lease, max_running, paused)"
    " VALUES ($1, coalesce($2, 5), coalesce($3, '1 second'),"
    "         coalesce($4, greatest(coalesce($3, '1 second'), '1 hour')),"
    "         nullif($5, '0'), $6, coalesce($7, false))"
    " ON CONFLICT (queue) DO UPDATE SET"
    "   max_attempts = coalesce($2, c.max_attempts),"
    "   backoff_base = coalesce($3, c.backoff_base),"
    "   backoff_max = coalesce($4, c.backoff_max),"
    "   lease = CASE WHEN $5 IS NULL THEN c.lease ELSE nullif($5, '0') END,"
    "   max_running = coalesce($6, c.max_running),"
    "   paused = coalesce($7, c.paused),"
    "   updated_at = now()"
    " RETURNING backoff_base <= backoff_max",
    {TEXTOID, INT4OID, INTERVALOID, INTERVALOID, INTERVALOID, INT4OID, BOOLOID});

}  // namespace
}  // namespace wf::pg

using namespace wf;
using namespace wf::pg;

// wf_configure_queue(queue, max_attempts, backoff_base, backoff_max, lease,
//                    max_running, paused) -> void
WF_SQL_FUNCTION(wf_configure_queue) {
    std::string_view queue = queue_arg(fcinfo, 0);
    if (!PG_ARGISNULL(1)) core::validate_positive(PG_GETARG_INT32(1), "max_attempts");
    if (!PG_ARGISNULL(2)) interval_arg(fcinfo, 2, "backoff_base", false);
    if (!PG_ARGISNULL(3)) interval_arg(fcinfo, 3, "backoff_max", false);
    if (!PG_ARGISNULL(4)) interval_arg(fcinfo, 4, "lease", true);
    if (!PG_ARGISNULL(5)) core::validate_positive(PG_GETARG_INT32(5), "max_running");

    SpiConnection spi;
    Params<7> p;
    for (int i = 0; i < 7; i++) {
        if (PG_ARGISNULL(i)) p.set_null(i); else p.set(i, PG_GETARG_DATUM(i));
    }
    upsert_config.execute(p.values, p.nulls);
    if (!column_bool(0, 1))
        throw core::Error(core::sqlstate::invalid_parameter,
                          "backoff_max must not be less than backoff_base",
                          "The queue would back off from a base above its cap.");
    invalidate_queue_settings();
    // Unpaused, or room under a higher max_running: waiting claimers retry.
    note_queue_ready(queue.data(), queue.size());
    spi.finish();
    PG_RETURN_VOID();
}

// Run by CREATE EXTENSION: tells whether crash recovery is automatic here.
WF_SQL_FUNCTION(wf_after_create) {
    if (!shared_memory_ready()) {
        // A WARNING: CREATE EXTENSION hides NOTICEs of its script.
        call([] {
            ereport(WARNING,
                    (errmsg("pg_wf is not in shared_preload_libraries: jobs of sessions that "
                            "die are recovered only when wf_sweep() is called"),
                     errhint("Add pg_wf to shared_preload_libraries and restart the server to "
                             "run the background worker and wake waiting claimers at once.")));
        });
    } else {
        wake_launcher_at_commit();
    }
    PG_RETURN_VOID();
}
