// What a running job can do besides finishing: record a step's output
// (wf_checkpoint), sleep (wf_snooze), wait for an event (wf_await_event).
// And the other side of events: wf_signal, and the timeouts the reaper fires.
// Parking a job (snooze, await) ends its claim without spending an attempt:
// its max_attempts grows by one, since the next claim counts one more.
#include "core/error.hpp"
#include "core/validation.hpp"
#include "pg/base/args.hpp"
#include "pg/jobs/job_state.hpp"
#include "pg/runtime/wakeup.hpp"

namespace wf::pg {
namespace {

// The job row is locked (FOR SHARE) so that a recovery or completion of
// this attempt, running at the same time, either comes first (and the
// token is stale) or waits for this checkpoint.
PreparedStatement record_checkpoint(
    "WITH job AS (SELECT 1 FROM wf.job j, wf.claim c WHERE " WF_TOKEN_HOLDS
    "              FOR SHARE OF j),"
    " recorded AS ("
    "  INSERT INTO wf.checkpoint (queue, job_id, step, output, attempt)"
    "  SELECT $1, $2, $4, $5, $3 FROM job"
    "  ON CONFLICT (queue, job_id, step) DO NOTHING RETURNING 1)"
    " SELECT EXISTS (SELECT 1 FROM job), EXISTS (SELECT 1 FROM recorded)",
    {TEXTOID, INT8OID, INT4OID, TEXTOID, JSONBOID});

// The running attempt, locked: parking it must not race its completion or
// its recovery.
PreparedStatement lock_running(
    "SELECT j.cancel_requested FROM wf.job j, wf.claim c WHERE " WF_TOKEN_HOLDS
    " FOR NO KEY UPDATE OF j",
    {TEXTOID, INT8OID, INT4OID});

// Back to pending at $4 (its place in line), claim released. With an
// event name in $5, the event is delivered, signalled with payload $6.
PreparedStatement park_pending(
    "WITH parked AS ("
    " UPDATE wf.job j SET status = 'pending', run_at = $4, max_attempts = j.max_attempts + 1,"
    "        events = CASE WHEN $5::text IS NULL THEN j.events"
    "                      ELSE coalesce(j.events, '{}') || jsonb_build_object($5::text,"
    "                        jsonb_build_object('status', 'signalled', 'payload', $6::jsonb)) END,"
    WF_END_ATTEMPT
    "  RETURNING j.queue, j.priority, j.run_at, j.id),"
    " released AS (DELETE FROM wf.claim c"
    "               WHERE c.queue = $1 AND c.id = $2 AND c.attempt = $3"
    "                 AND EXISTS (SELECT 1 FROM parked)),"
    " ready AS (INSERT INTO wf.ready (queue, priority, run_at, id)"
    "           SELECT queue, priority, run_at, id FROM parked ON CONFLICT DO NOTHING)"
    " SELECT 1 FROM parked",
    {TEXTOID, INT8OID, INT4OID, TIMESTAMPTZOID, TEXTOID, JSONBOID});

PreparedStatement park_waiting(
    "WITH parked AS ("
    " UPDATE wf.job j SET status = 'waiting', max_attempts = j.max_attempts + 1,"
    WF_END_ATTEMPT
    "  RETURNING j.id),"
    " released AS (DELETE FROM wf.claim c"
    "               WHERE c.queue = $1 AND c.id = $2 AND c.attempt = $3"
    "                 AND EXISTS (SELECT 1 FROM parked)),"
    " waits AS (INSERT INTO wf.event_wait (queue, id, attempt, event, timeout_at)"
    "           SELECT $1, $2, $3, $4, now() + $5 FROM parked"
    "           ON CONFLICT (queue, id) DO UPDATE SET attempt = excluded.attempt,"
    "              event = excluded.event, timeout_at = excluded.timeout_at, since = now())"
    " SELECT 1 FROM parked",
    {TEXTOID, INT8OID, INT4OID, TEXTOID, INTERVALOID});

// Every await and signal of an event goes through its row: an await reads
// it FOR SHARE, a signal updates it. Whichever commits second sees the
// other: an await after a signal finds it signalled; a signal after an
// await finds its wait row.
PreparedStatement ensure_event(
    "INSERT INTO wf.event (name) VALUES ($1) ON CONFLICT (name) DO NOTHING", {TEXTOID});

PreparedStatement read_event(
    "SELECT signalled_at IS NOT NULL, payload FROM wf.event WHERE name = $1 FOR SHARE",
    {TEXTOID});

PreparedStatement record_signal(
    "INSERT INTO wf.event AS e (name, payload, signalled_at) VALUES ($1, $2, now())"
    " ON CONFLICT (name) DO UPDATE SET payload = excluded.payload,"
    "                                  signalled_at = excluded.signalled_at",
    {TEXTOID, JSONBOID});

// Wakes the jobs waiting on an event ($1) or whose timeout passed ($1
// NULL): wait rows first, then jobs, in every caller. A wait row of a job
// no longer waiting at that attempt (cancelled, say) is just removed.
PreparedStatement wake_parked_jobs(
    "WITH woken_waits AS ("
    "  DELETE FROM wf.event_wait w"
    "   WHERE ($1::text IS NOT NULL AND w.event = $1)"
    "      OR ($1::text IS NULL AND w.timeout_at <= $3)"
    "  RETURNING w.queue, w.id, w.attempt, w.event),"
    " woken AS ("
    "  UPDATE wf.job j SET status = 'pending', run_at = $3,"
    "         events = coalesce(j.events, '{}') || jsonb_build_object(w.event,"
    "           CASE WHEN $1::text IS NULL THEN jsonb_build_object('status', 'timed_out')"
    "                ELSE jsonb_build_object('status', 'signalled', 'payload', $2::jsonb) END)"
    "    FROM woken_waits w"
    "   WHERE j.queue = w.queue AND j.id = w.id AND j.attempt = w.attempt"
    "     AND j.status = 'waiting'"
    "  RETURNING j.queue, j.priority, j.run_at, j.id),"
    " ready AS (INSERT INTO wf.ready (queue, priority, run_at, id)"
    "           SELECT queue, priority, run_at, id FROM woken ON CONFLICT DO NOTHING)"
    " SELECT queue, count(*) FROM woken GROUP BY queue",
    {TEXTOID, JSONBOID, TIMESTAMPTZOID});

// Wakes the claimers of the queues woken (wake_parked_jobs' result); returns
// the number of jobs woken.
int64 note_woken(uint64 rows) {
    int64 jobs = 0;
    for (uint64 r = 0; r < rows; r++) {
        std::string queue = column_text(r, 1);
        note_queue_ready(queue.data(), queue.size());
        jobs += column_int64(r, 2);
    }
    return jobs;
}

std::string_view event_name_arg(FunctionCallInfo fcinfo, int n) {
    std::string_view event = text_arg(fcinfo, n, "event");
    core::validate_label(event, "event");
    return event;
}

// Parks the running job (queue, id, attempt = arguments 0..2) as pending
// until `run_at`; with `event` (not 0), that event is delivered, signalled
// with `payload` (0: JSON null). Claimers waiting on the queue are woken, to
// take it or to recompute when the next job is due.
void park_as_pending(FunctionCallInfo fcinfo, std::string_view queue, Datum run_at, Datum event,
                     Datum payload) {
    Params<6> p;
    for (int i = 0; i < 3; i++) p.set(i, PG_GETARG_DATUM(i));
    p.set(3, run_at);
    if (event) p.set(4, event); else p.set_null(4);
    if (payload) p.set(5, payload); else p.set_null(5);
    park_pending.execute(p.values, p.nulls);
    note_queue_ready(queue.data(), queue.size());
}

// Parks the running attempt (queue, id, attempt = arguments 0..2), locked
// first, with `park`, which returns the new status. A stale token gives
// nullptr; a job whose cancellation was requested cannot park: it ends
// cancelled, as its wf_complete would.
template <typename Park>
const char* park_running_job(FunctionCallInfo fcinfo, Park&& park) {
    SpiConnection spi;
    Params<3> p;
    for (int i = 0; i < 3; i++) p.set(i, PG_GETARG_DATUM(i));
    const char* status = nullptr;
    if (lock_running.execute(p.values, p.nulls) == 1) {
        if (column_bool(0, 1)) {
            complete_job(PG_GETARG_DATUM(0), PG_GETARG_DATUM(1), PG_GETARG_DATUM(2), 0, true);
            status = "cancelled";
        } else {
            status = park();
        }
    }
    spi.finish();
    return status;
}

}  // namespace

int64 wake_timed_out_waits() {
    Params<3> p;
    p.set_null(0);
    p.set_null(1);
    p.set(2, clock_now());
    return note_woken(wake_parked_jobs.execute(p.values, p.nulls));
}

}  // namespace wf::pg

using namespace wf;
using namespace wf::pg;

// wf_checkpoint(queue, id, attempt, step, output) -> text:
// 'recorded', 'already_recorded', or NULL for a stale token.
WF_SQL_FUNCTION(wf_checkpoint) {
    fencing_token_args(fcinfo);
    core::validate_label(text_arg(fcinfo, 3, "step"), "step");
    if (!PG_ARGISNULL(4)) payload_arg(fcinfo, 4, "output");

    SpiConnection spi;
    Params<5> p;
    for (int i = 0; i < 4; i++) p.set(i, PG_GETARG_DATUM(i));
    if (PG_ARGISNULL(4)) p.set_null(4); else p.set(4, PG_GETARG_DATUM(4));
    record_checkpoint.execute(p.values, p.nulls);
    bool yours = column_bool(0, 1);
    bool recorded = column_bool(0, 2);
    spi.finish();
    if (!yours) PG_RETURN_NULL();
    PG_RETURN_DATUM(text_datum(recorded ? "recorded" : "already_recorded"));
}

// Returns the status text of a park, or NULL for a stale token (nullptr).
static Datum status_result(FunctionCallInfo fcinfo, const char* status) {
    if (status == nullptr) PG_RETURN_NULL();
    // Made after SPI_finish, which frees what was allocated since SPI_connect.
    return text_datum(status);
}

// wf_snooze(queue, id, attempt, delay) -> text: 'pending', 'cancelled', or
// NULL for a stale token.
WF_SQL_FUNCTION(wf_snooze) {
    fencing_token_args(fcinfo);
    std::string_view queue = text_arg(fcinfo, 0, "queue");
    Interval* delay = interval_arg(fcinfo, 3, "delay", true);

    const char* status = park_running_job(fcinfo, [&] {
        Datum until = call([&] {
            return DirectFunctionCall2(timestamptz_pl_interval, clock_now(),
                                       IntervalPGetDatum(delay));
        });
        park_as_pending(fcinfo, queue, until, 0, 0);
        return "pending";
    });
    return status_result(fcinfo, status);
}

// wf_await_event(queue, id, attempt, event, timeout) -> text: 'waiting',
// 'pending' (signalled already), 'cancelled', or NULL for a stale token.
WF_SQL_FUNCTION(wf_await_event) {
    fencing_token_args(fcinfo);
    std::string_view queue = text_arg(fcinfo, 0, "queue");
    std::string_view event = event_name_arg(fcinfo, 3);
    Interval* timeout = PG_ARGISNULL(4) ? nullptr : interval_arg(fcinfo, 4, "timeout", true);

    const char* status = park_running_job(fcinfo, [&] {
        Params<1> e;
        e.set(0, PG_GETARG_DATUM(3));
        // The row can vanish between the two statements (retention deletes
        // old events nobody waits for): then it is created again.
        bool found = false;
        for (int tries = 0; tries < 10 && !found; tries++) {
            ensure_event.execute(e.values, e.nulls);
            found = read_event.execute(e.values, e.nulls) == 1;
        }
        if (!found)
            throw core::Error("40001",
                              "event \"" + std::string(event) + "\" was deleted while awaiting it",
                              {}, "Retry the call.");
        if (column_bool(0, 1)) {
            // Signalled before: delivered now, the job is ready at once.
            park_as_pending(fcinfo, queue, clock_now(), PG_GETARG_DATUM(3), column(0, 2));
            return "pending";
        }
        Params<5> w;
        for (int i = 0; i < 4; i++) w.set(i, PG_GETARG_DATUM(i));
        if (timeout) w.set(4, IntervalPGetDatum(timeout)); else w.set_null(4);
        park_waiting.execute(w.values, w.nulls);
        // A max_running slot is free again.
        note_queue_ready(queue.data(), queue.size());
        return "waiting";
    });
    return status_result(fcinfo, status);
}

// wf_signal(event, payload) -> int: the jobs made ready. The signal is kept
// for jobs that await the event later.
WF_SQL_FUNCTION(wf_signal) {
    event_name_arg(fcinfo, 0);
    if (!PG_ARGISNULL(1)) payload_arg(fcinfo, 1, "payload");

    SpiConnection spi;
    Params<3> p;
    p.set(0, PG_GETARG_DATUM(0));
    if (PG_ARGISNULL(1)) p.set_null(1); else p.set(1, PG_GETARG_DATUM(1));
    record_signal.execute(p.values, p.nulls);
    p.set(2, clock_now());
    int64 woken = note_woken(wake_parked_jobs.execute(p.values, p.nulls));
    spi.finish();
    PG_RETURN_INT32(static_cast<int32>(woken));
}
