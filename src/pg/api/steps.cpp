// What a running job can do besides finishing: record a step's output
// (wf_checkpoint), sleep (wf_snooze), wait for an event (wf_await_event).
// And the other side of events: wf_signal. Parking (snooze, await) is a
// transition of job_state.cpp; events' own rows are kept here.
#include "core/error.hpp"
#include "core/validation.hpp"
#include "pg/api/events.hpp"
#include "pg/api/frame.hpp"
#include "pg/citus/cluster_calls.hpp"
#include "pg/jobs/children.hpp"

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

// On a distributed pg_wf wf.event is a reference table, which a call on
// one node does not write: an await reads its node's copy, and a signal
// (signal_on_cluster) writes every copy, then wakes the waits it finds. A
// wait it could not see yet (the await had read the copy before the signal
// committed) is woken by the node's worker, which wakes the waits of
// signalled events in each of its groups every wf.sweep_interval.
PreparedStatement read_event_copy(
    "SELECT signalled_at IS NOT NULL AS signalled, payload FROM wf.event WHERE name = $1",
    {TEXTOID});

std::string_view event_name_arg(FunctionCallInfo fcinfo, int n, const char* name) {
    std::string_view event = text_arg(fcinfo, n, name);
    core::validate_event_name(event);
    return event;
}

}  // namespace

int64 signal_on_cluster(std::string_view event, std::optional<Datum> payload) {
    require_schema_at_least("1.8", "wf_signal on a distributed pg_wf");
    std::string name = sql_literal(event);
    std::string value = jsonb_literal(payload);
    run_through_citus(
        "INSERT INTO wf.event AS e (name, payload, signalled_at)"
        " VALUES (" + name + ", " + value + ", pg_catalog.now())"
        " ON CONFLICT (name) DO UPDATE SET payload = excluded.payload,"
        "                                  signalled_at = excluded.signalled_at");
    int64 woken = 0;
    for (const std::string& queue :
         one_queue_per_group({"SELECT DISTINCT queue FROM wf.event_wait WHERE event = " + name}))
        woken += call_in_group("_wake_event", queue, name + "::pg_catalog.text, " + value);
    return woken;
}

namespace {

// A running attempt's progress lives in its claim row (unlogged: no WAL per
// report); the end of the attempt copies the last one into the job row.
PreparedStatement record_progress(
    "UPDATE wf.claim c SET progress = $4"
    "  FROM wf.job j WHERE " WF_SQL_TOKEN_HOLDS,
    {TEXTOID, INT8OID, INT4OID, JSONBOID});

// The largest progress report: it is meant to be small and frequent.
constexpr int kMaxProgressBytes = 8192;

// Parks the running attempt of `token`, locked first, with `park`, which
// returns the new status. A stale token gives nullptr; a job whose
// cancellation was requested cannot park: it ends cancelled, as its
// wf_complete would.
template <typename Park>
const char* park_running_job(const FencingToken& token, Park&& park) {
    return with_queue_tables(token.queue, [&]() -> const char* {
        require_right(Capability::work, token.queue_name);
        std::optional<RunningAttempt> running = lock_running_attempt(token);
        if (!running) return nullptr;
        if (running->cancel_requested) {
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

    const char* status = with_queue_tables(PG_GETARG_DATUM(0), [&]() -> const char* {
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
    std::string_view event = event_name_arg(fcinfo, 3, "event");
    Interval* timeout = PG_ARGISNULL(4) ? nullptr : interval_arg(fcinfo, 4, "timeout", true);
    Datum event_datum = PG_GETARG_DATUM(3);

    const char* status = park_running_job(token, [&] {
        Params<1> e;
        e.set(0, event_datum);
        // The row can vanish between the two statements (retention deletes
        // old events nobody waits for): then it is created again.
        std::optional<Rows> found;
        if (current_shard_group() != nullptr) {
            Rows rows = read_event_copy.execute(e.values, e.nulls);
            if (rows.size() == 1) found = rows;
        }
        for (int tries = 0; tries < 10 && !found && current_shard_group() == nullptr; tries++) {
            ensure_event.execute(e.values, e.nulls);
            Rows rows = read_event.execute(e.values, e.nulls);
            if (rows.size() == 1) found = rows;
        }
        if (!found && current_shard_group() != nullptr) {
            park_as_waiting(token, event_datum, timeout);
            return "waiting";
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
    std::string_view event = event_name_arg(fcinfo, 0, "event");
    if (!PG_ARGISNULL(1)) payload_arg(fcinfo, 1, "payload");

    int64 woken = with_job_tables_anywhere([&] {
        require_right(Capability::signal, event);
        if (distributed()) return signal_on_cluster(event, optional_arg(fcinfo, 1));
        return signal_event(PG_GETARG_DATUM(0), optional_arg(fcinfo, 1));
    });
    PG_RETURN_INT32(static_cast<int32>(woken));
}

// wf._wake_event(queue, event, payload) -> int: on a distributed pg_wf, the
// signal's wake-up in the shard group of `queue` (every queue of it),
// called by signal_on_cluster.
WF_SQL_FUNCTION(wf_group_wake_event) {
    require_group_call_from_pg_wf("wf._wake_event");
    queue_arg(fcinfo, 0);
    event_name_arg(fcinfo, 1, "event");
    int64 woken = with_queue_tables(PG_GETARG_DATUM(0), [&] {
        return wake_waiting_jobs(PG_GETARG_DATUM(1), optional_arg(fcinfo, 2));
    });
    PG_RETURN_INT32(static_cast<int32>(woken));
}

// wf_await_children(queue, id, attempt, timeout) -> text: 'waiting',
// 'pending' (every child finished and delivered: ready again at once),
// 'cancelled', or NULL for a stale token.
WF_SQL_FUNCTION(wf_await_children) {
    FencingToken token = fencing_token_arg(fcinfo);
    Interval* timeout = PG_ARGISNULL(3) ? nullptr : interval_arg(fcinfo, 3, "timeout", true);

    const char* status = park_running_job(token, [&] {
        // Under the job's lock: a child's delivery either came first (and
        // counts as delivered) or waits, and then wakes this job.
        if (undelivered_children(token.queue, token.id) == 0) {
            park_as_pending(token, clock_now(), std::nullopt, std::nullopt);
            return "pending";
        }
        park_as_waiting(token, text_datum(kChildrenEvent), timeout);
        return "waiting";
    });
    return status_result(fcinfo, status);
}

// wf_progress(queue, id, attempt, progress) -> boolean: false for a stale
// token.
WF_SQL_FUNCTION(wf_progress) {
    FencingToken token = fencing_token_arg(fcinfo);
    core::require_not_null(PG_ARGISNULL(3), "progress");
    Datum progress = PG_GETARG_DATUM(3);
    int bytes = call([&] { return static_cast<int>(VARSIZE_ANY_EXHDR(DatumGetJsonbP(progress))); });
    if (bytes > kMaxProgressBytes)
        throw core::Error(core::sqlstate::program_limit, "progress is too large",
                          "It has " + std::to_string(bytes) + " bytes; the limit is " +
                              std::to_string(kMaxProgressBytes) + ".",
                          "Report a small summary (counts, a phase); keep results for wf_complete.");
    bool yours = with_queue_tables(PG_GETARG_DATUM(0), [&] {
        require_right(Capability::work, token.queue_name);
        Params<4> p;
        p.set(0, token.queue);
        p.set(1, Int64GetDatum(token.id));
        p.set(2, Int32GetDatum(token.attempt));
        p.set(3, progress);
        return record_progress.execute(p.values, p.nulls).size() == 1;
    });
    PG_RETURN_BOOL(yours);
}
