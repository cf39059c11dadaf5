// What a running job can do besides finishing: record a step's output
// (wf_checkpoint), sleep (wf_snooze), wait for an event (wf_await_event).
// And the other side of events: wf_signal. Parking (snooze, await) is a
// transition of job_state.cpp; events' own rows are kept here.
#include "core/error.hpp"
#include "core/validation.hpp"
#include "pg/api/frame.hpp"

namespace wf::pg {
namespace {

// The job row is locked (FOR SHARE) so that a recovery or completion of
// this attempt, running at the same time, either comes first (and the
// token is stale) or waits for this checkpoint.
PreparedStatement record_checkpoint(
    "WITH job AS (SELECT 1 FROM wf.job j, wf.claim c WHERE " WF_SQL_TOKEN_HOLDS
    "              FOR SHARE OF j),"
    " recorded AS ("
    "  INSERT INTO wf.checkpoint (queue, job_id, step, output, attempt)"
    "  SELECT $1, $2, $4, $5, $3 FROM job"
    "  ON CONFLICT (queue, job_id, step) DO NOTHING RETURNING 1)"
    " SELECT EXISTS (SELECT 1 FROM job) AS yours, EXISTS (SELECT 1 FROM recorded) AS recorded",
    {TEXTOID, INT8OID, INT4OID, TEXTOID, JSONBOID});

// Every await and signal of an event goes through its row: an await reads
// it FOR SHARE, a signal updates it. Whichever commits second sees the
// other: an await after a signal finds it signalled; a signal after an
// await finds its wait row.
PreparedStatement ensure_event(
    "INSERT INTO wf.event (name) VALUES ($1) ON CONFLICT (name) DO NOTHING", {TEXTOID});

PreparedStatement read_event(
    "SELECT signalled_at IS NOT NULL AS signalled, payload FROM wf.event WHERE name = $1 FOR SHARE",
    {TEXTOID});

PreparedStatement record_signal(
    "INSERT INTO wf.event AS e (name, payload, signalled_at) VALUES ($1, $2, now())"
    " ON CONFLICT (name) DO UPDATE SET payload = excluded.payload,"
    "                                  signalled_at = excluded.signalled_at",
    {TEXTOID, JSONBOID});

std::string_view event_name_arg(FunctionCallInfo fcinfo, int n) {
    std::string_view event = text_arg(fcinfo, n, "event");
    core::validate_label(event, "event");
    return event;
}

// Parks the running attempt of `token`, locked first, with `park`, which
// returns the new status. A stale token gives nullptr; a job whose
// cancellation was requested cannot park: it ends cancelled, as its
// wf_complete would.
template <typename Park>
const char* park_running_job(const FencingToken& token, Park&& park) {
    return with_job_tables([&]() -> const char* {
        require_right(Capability::work, token.queue_name);
        std::optional<bool> cancel_requested = lock_running_attempt(token);
        if (!cancel_requested) return nullptr;
        if (*cancel_requested) {
            complete_job(token, std::nullopt);
            return "cancelled";
        }
        return park();
    });
}

// The status text of a park, or NULL for a stale token (nullptr).
Datum status_result(FunctionCallInfo fcinfo, const char* status) {
    if (status == nullptr) PG_RETURN_NULL();
    return text_datum(status);
}

}  // namespace
}  // namespace wf::pg

using namespace wf;
using namespace wf::pg;

// wf_checkpoint(queue, id, attempt, step, output) -> text:
// 'recorded', 'already_recorded', or NULL for a stale token.
WF_SQL_FUNCTION(wf_checkpoint) {
    FencingToken token = fencing_token_arg(fcinfo);
    core::validate_label(text_arg(fcinfo, 3, "step"), "step");
    if (!PG_ARGISNULL(4)) payload_arg(fcinfo, 4, "output");

    const char* status = with_job_tables([&]() -> const char* {
        require_right(Capability::work, token.queue_name);
        Params<5> p;
        p.set(0, token.queue);
        p.set(1, Int64GetDatum(token.id));
        p.set(2, Int32GetDatum(token.attempt));
        p.set(3, PG_GETARG_DATUM(3));
        p.set_or_null(4, PG_ARGISNULL(4), PG_GETARG_DATUM(4));
        Rows rows = record_checkpoint.execute(p.values, p.nulls);
        if (!rows.bool_at(0, "yours")) return nullptr;
        return rows.bool_at(0, "recorded") ? "recorded" : "already_recorded";
    });
    return status_result(fcinfo, status);
}

// wf_snooze(queue, id, attempt, delay) -> text: 'pending', 'cancelled', or
// NULL for a stale token.
WF_SQL_FUNCTION(wf_snooze) {
    FencingToken token = fencing_token_arg(fcinfo);
    Interval* delay = interval_arg(fcinfo, 3, "delay", true);

    const char* status = park_running_job(token, [&] {
        Datum until = call([&] {
            return DirectFunctionCall2(timestamptz_pl_interval, clock_now(),
                                       IntervalPGetDatum(delay));
        });
        park_as_pending(token, until, std::nullopt, std::nullopt);
        return "pending";
    });
    return status_result(fcinfo, status);
}

// wf_await_event(queue, id, attempt, event, timeout) -> text: 'waiting',
// 'pending' (signalled already), 'cancelled', or NULL for a stale token.
WF_SQL_FUNCTION(wf_await_event) {
    FencingToken token = fencing_token_arg(fcinfo);
    std::string_view event = event_name_arg(fcinfo, 3);
    Interval* timeout = PG_ARGISNULL(4) ? nullptr : interval_arg(fcinfo, 4, "timeout", true);
    Datum event_datum = PG_GETARG_DATUM(3);

    const char* status = park_running_job(token, [&] {
        Params<1> e;
        e.set(0, event_datum);
        // The row can vanish between the two statements (retention deletes
        // old events nobody waits for): then it is created again.
        std::optional<Rows> found;
        for (int tries = 0; tries < 10 && !found; tries++) {
            ensure_event.execute(e.values, e.nulls);
            Rows rows = read_event.execute(e.values, e.nulls);
            if (rows.size() == 1) found = rows;
        }
        if (!found)
            throw core::Error("40001",
                              "event \"" + std::string(event) + "\" was deleted while awaiting it",
                              {}, "Retry the call.");
        if (found->bool_at(0, "signalled")) {
            // Signalled before: delivered now, the job is ready at once.
            std::optional<Datum> payload;
            if (!found->is_null(0, "payload")) payload = found->datum(0, "payload");
            park_as_pending(token, clock_now(), event_datum, payload);
            return "pending";
        }
        park_as_waiting(token, event_datum, timeout);
        return "waiting";
    });
    return status_result(fcinfo, status);
}

// wf_signal(event, payload) -> int: the jobs made ready. The signal is kept
// for jobs that await the event later.
WF_SQL_FUNCTION(wf_signal) {
    std::string_view event = event_name_arg(fcinfo, 0);
    if (!PG_ARGISNULL(1)) payload_arg(fcinfo, 1, "payload");

    int64 woken = with_job_tables([&] {
        require_right(Capability::signal, event);
        Params<2> p;
        p.set(0, PG_GETARG_DATUM(0));
        p.set_or_null(1, PG_ARGISNULL(1), PG_GETARG_DATUM(1));
        record_signal.execute(p.values, p.nulls);
        return wake_waiting_jobs(PG_GETARG_DATUM(0), optional_arg(fcinfo, 1));
    });
    PG_RETURN_INT32(static_cast<int32>(woken));
}
