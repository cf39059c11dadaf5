// Cron schedules: wf_schedule / wf_unschedule, and the firing of due ticks
// by the background worker (and wf_sweep). Times are UTC (src/core/cron.hpp).
//
// Exactly once per tick: a tick's job and the schedule's move to its next
// run commit together, and the job carries the idempotency key
// 'schedule:<name>:<tick, epoch seconds>' in its queue, so no second
// firing of the same tick (a restarted worker, a promoted standby, a
// concurrent wf_sweep) can enqueue it again. After downtime a schedule
// fires once, for its latest missed tick, and moves to the next one after now.
#include "core/cron.hpp"
#include "core/error.hpp"
#include "core/validation.hpp"
#include "pg/api/schedule.hpp"

#include <optional>

#include "pg/api/frame.hpp"
#include "pg/api/rights.hpp"
#include "pg/citus/cluster_calls.hpp"
#include "pg/runtime/metrics.hpp"
#include "pg/runtime/wakeup.hpp"

namespace wf::pg {
namespace {

// A schedule fires with the rights of the role that made it ($6), checked
// at each tick.
PreparedStatement upsert_schedule(
    "INSERT INTO wf.schedule (name, cron, queue, payload, next_run_at, owner)"
    " VALUES ($1, $2, $3, $4, $5, $6)"
    " ON CONFLICT (name) DO UPDATE SET cron = excluded.cron, queue = excluded.queue,"
    "   payload = excluded.payload, next_run_at = excluded.next_run_at, owner = excluded.owner,"
    "   updated_at = now()",
    {TEXTOID, TEXTOID, TEXTOID, JSONBOID, TIMESTAMPTZOID, OIDOID});

// The queue of an existing schedule: replacing or removing it needs the
// right to administer that queue.
PreparedStatement lock_schedule(
    "SELECT queue FROM wf.schedule WHERE name = $1 FOR UPDATE", {TEXTOID});

PreparedStatement delete_schedule("DELETE FROM wf.schedule WHERE name = $1", {TEXTOID});

PreparedStatement read_schedule(
    "SELECT cron, enabled FROM wf.schedule WHERE name = $1", {TEXTOID});

// Enabled again, it fires from its next tick after now: what it missed
// while disabled is not caught up.
PreparedStatement set_schedule_enabled(
    "UPDATE wf.schedule SET enabled = $2, updated_at = now(),"
    "       next_run_at = CASE WHEN $2 AND NOT enabled THEN $3 ELSE next_run_at END"
    " WHERE name = $1",
    {TEXTOID, BOOLOID, TIMESTAMPTZOID});

// wf.schedule's rows as wf_schedule and its siblings change them. On a
// distributed pg_wf it is a reference table: written on the coordinator,
// through Citus, every node's copy in the caller's transaction (the
// schedule's owner is recorded by name, each copy with its node's OID).
std::string text_of(Datum d) {
    char* c = call([&] { return TextDatumGetCString(d); });
    std::string s(c);
    call([&] { pfree(c); });
    return s;
}

bool on_cluster() {
    if (!distributed()) return false;
    require_coordinator("schedules on a distributed pg_wf");
    require_schema_at_least("1.8", "schedules on a distributed pg_wf");
    return true;
}

std::string now_literal() { return timestamptz_literal(TimestampTzGetDatum(GetCurrentTransactionStartTimestamp())); }

// The queue of schedule `name`, locked, if it exists.
std::optional<std::string> lock_schedule_queue(Datum name) {
    Rows existing = [&] {
        if (on_cluster())
            return run_through_citus("SELECT queue FROM wf.schedule WHERE name = " +
                                     sql_literal(text_of(name)) + " FOR UPDATE");
        Params<1> p;
        p.set(0, name);
        return lock_schedule.execute(p.values, p.nulls);
    }();
    if (existing.empty()) return std::nullopt;
    return existing.text_at(0, "queue");
}

// Administer on the queue of schedule `name`, if it exists; whether it does.
bool require_right_on_schedule(Datum name) {
    std::optional<std::string> queue = lock_schedule_queue(name);
    if (!queue) return false;
    require_right(Capability::administer, *queue);
    return true;
}

// Due schedules, each locked: a second firer skips it, and after the first
// commits finds it moved on (the re-check of next_run_at).
PreparedStatement due_schedules(
    "SELECT name, cron, queue, payload, next_run_at, owner::oid AS owner FROM wf.schedule"
    " WHERE next_run_at <= $1 AND enabled ORDER BY next_run_at LIMIT 100 FOR UPDATE SKIP LOCKED",
    {TIMESTAMPTZOID});

PreparedStatement fire_tick(
    "WITH job AS ("
    " INSERT INTO wf.job (queue, status, payload, run_at, max_attempts, attempt_budget,"
    "                     idempotency_key, version)"
    " SELECT $2, 'pending', $3, $4, m, m, $5, v"
    "   FROM (SELECT coalesce((SELECT c.max_attempts FROM wf.queue_config c"
    "                          WHERE c.queue = $2), " WF_SQL_DEFAULT_MAX_ATTEMPTS ") AS m,"
    "                (SELECT c.version FROM wf.queue_config c WHERE c.queue = $2) AS v) AS budget"
    "  WHERE $7"
    " ON CONFLICT (queue, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING"
    " RETURNING queue, priority, run_at, id, key, version),"
    WF_SQL_ENTER_READY("job", "") ","
    " moved AS (UPDATE wf.schedule SET last_run_at = $4, next_run_at = $6,"
    "                  last_job_id = coalesce((SELECT id FROM job), last_job_id)"
    "            WHERE name = $1)"
    " SELECT count(*) AS fired FROM job",
    {TEXTOID, TEXTOID, JSONBOID, TIMESTAMPTZOID, TEXTOID, TIMESTAMPTZOID, BOOLOID});

// On a distributed pg_wf, a tick's job, in its queue's shard group
// (wf._fire_tick); the coordinator moves the schedule on (fire_on_cluster).
PreparedStatement fire_tick_job(
    "WITH job AS ("
    " INSERT INTO wf.job (id, queue, status, payload, run_at, max_attempts, attempt_budget,"
    "                     idempotency_key, version)"
    " SELECT nextval('wf.job_id_seq'), $1, 'pending', $2, $3, m, m, $4, v"
    "   FROM (SELECT coalesce((SELECT c.max_attempts FROM wf.queue_config c"
    "                          WHERE c.queue = $1), " WF_SQL_DEFAULT_MAX_ATTEMPTS ") AS m,"
    "                (SELECT c.version FROM wf.queue_config c WHERE c.queue = $1) AS v) AS budget"
    " ON CONFLICT (queue, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING"
    " RETURNING queue, priority, run_at, id, key, version),"
    WF_SQL_ENTER_READY("job", "")
    " SELECT id FROM job",
    {TEXTOID, JSONBOID, TIMESTAMPTZOID, TEXTOID});

constexpr int64 kPostgresEpochOffset =
    int64{POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE} * SECS_PER_DAY;

int64 to_unix_seconds(TimestampTz t) {
    // Floor division: times before 2000 are negative.
    int64 seconds = t / USECS_PER_SEC - (t % USECS_PER_SEC < 0 ? 1 : 0);
    return seconds + kPostgresEpochOffset;
}

TimestampTz from_unix_seconds(int64 s) {
    return (s - kPostgresEpochOffset) * USECS_PER_SEC;
}

// The first fire time after `now`, or NULL (Datum 0, *never = true).
Datum next_run(const core::CronSchedule& schedule, TimestampTz now, bool* never) {
    std::optional<int64> next = schedule.next_after(to_unix_seconds(now));
    *never = !next;
    return next ? TimestampTzGetDatum(from_unix_seconds(*next)) : 0;
}

// The latest fire time not after `now`, from `due` (a fire time not after
// `now`) on: after downtime, the one tick that runs. Minute by minute at
// worst; a schedule missed for longer than the walk fires for the tick the
// walk reached.
TimestampTz latest_tick(const core::CronSchedule& schedule, TimestampTz due, TimestampTz now) {
    constexpr int kMaxWalk = 1000000;  // two years of a minute-by-minute schedule
    int64 tick = to_unix_seconds(due);
    int64 limit = to_unix_seconds(now);
    for (int i = 0; i < kMaxWalk; i++) {
        std::optional<int64> next = schedule.next_after(tick);
        if (!next || *next > limit) break;
        tick = *next;
    }
    return tick == to_unix_seconds(due) ? due : from_unix_seconds(tick);
}

}  // namespace

namespace {

struct Due {
    std::string name, cron, queue;
    Datum payload;  // in SPI memory, alive until SPI_finish
    TimestampTz tick;
    Oid owner;
};

// What a tick does: its job (when `allowed`) and the schedule moved on to
// `next` (NULL when never), in one transaction. Whether a job was enqueued.
bool fire_here(const Due& schedule, TimestampTz tick, const std::string& key, bool never,
               Datum next, bool allowed) {
    Params<7> p;
    p.set(0, text_datum(schedule.name));
    p.set(1, text_datum(schedule.queue));
    p.set(2, schedule.payload);
    p.set(3, TimestampTzGetDatum(tick));
    p.set(4, text_datum(key));
    if (never) p.set_null(5); else p.set(5, next);
    p.set(6, BoolGetDatum(allowed));
    return fire_tick.execute(p.values, p.nulls).int64_at(0, "fired") > 0;
}

// On a distributed pg_wf, only the coordinator's worker (or wf_sweep
// there) fires: the job through Citus to its queue's node, the schedule's
// every copy moved on, in one (two-phase) transaction.
bool fire_on_cluster(const Due& schedule, TimestampTz tick, const std::string& key, bool never,
                     Datum next, bool allowed) {
    std::string tick_literal = timestamptz_literal(TimestampTzGetDatum(tick));
    int64 job = 0;
    if (allowed)
        job = call_in_group("_fire_tick", schedule.queue,
                            jsonb_literal(schedule.payload) + ", " + tick_literal + ", " +
                                sql_literal(key) + "::pg_catalog.text");
    run_through_citus(
        "UPDATE wf.schedule SET last_run_at = " + tick_literal +
        ", next_run_at = " + (never ? std::string("NULL") : timestamptz_literal(next)) +
        (job != 0 ? ", last_job_id = " + std::to_string(job) : std::string()) +
        " WHERE name = " + sql_literal(schedule.name));
    return job != 0;
}

std::vector<Due> read_due(const Rows& rows) {
    std::vector<Due> due(rows.size());
    for (size_t r = 0; r < due.size(); r++)
        due[r] = {rows.text_at(r, "name"), rows.text_at(r, "cron"), rows.text_at(r, "queue"),
                  rows.datum(r, "payload"), DatumGetTimestampTz(rows.datum(r, "next_run_at")),
                  DatumGetObjectId(rows.datum(r, "owner"))};
    return due;
}

}  // namespace

int64 fire_due_schedules() {
    TimestampTz now = GetCurrentTimestamp();
    bool on_cluster = distributed();
    std::vector<Due> due;
    if (on_cluster) {
        // Schedules fire once cluster-wide: on the coordinator (whose role
        // OIDs the owners are), and only at schema 1.8 (wf._fire_tick).
        if (!on_coordinator() || !schema_at_least("1.8")) return 0;
        due = read_due(run_through_citus(
            "SELECT name, cron, queue, payload, next_run_at, owner::pg_catalog.oid AS owner"
            "  FROM wf.schedule WHERE next_run_at <= " +
            timestamptz_literal(TimestampTzGetDatum(now)) +
            " AND enabled ORDER BY next_run_at LIMIT 100 FOR UPDATE SKIP LOCKED"));
    } else {
        Params<1> d;
        d.set(0, TimestampTzGetDatum(now));
        due = read_due(due_schedules.execute(d.values, d.nulls));
    }

    int64 fired = 0;
    for (const Due& schedule : due) {
        // Checked at wf_schedule; a row edited by hand may still be wrong.
        // It then stops (next_run NULL) rather than failing every pass.
        bool never = true;
        Datum next = 0;
        TimestampTz tick = schedule.tick;
        try {
            core::CronSchedule cron = core::CronSchedule::parse(schedule.cron);
            tick = latest_tick(cron, schedule.tick, now);
            next = next_run(cron, now, &never);
        } catch (const core::Error& e) {
            call([&] {
                ereport(WARNING,
                        (errmsg("pg_wf: schedule \"%s\" has a bad cron expression; it is stopped",
                                schedule.name.c_str()),
                         errdetail("%s", e.what())));
            });
        }
        std::string key = std::string(core::kScheduleKeyPrefix) + schedule.name + ":" +
                          std::to_string(to_unix_seconds(tick));
        // The tick fires with its owner's rights, checked now: without the
        // right to produce in the queue any more, it is skipped.
        bool allowed = has_right(schedule.owner, Capability::produce, schedule.queue);
        if (!allowed)
            call([&] {
                ereport(WARNING,
                        (errmsg("pg_wf: schedule \"%s\" skipped a tick: its owner may not "
                                "produce in queue \"%s\"",
                                schedule.name.c_str(), schedule.queue.c_str()),
                         errhint("Grant it: SELECT wf_grant('<owner>', 'produce', '%s'), or "
                                 "schedule it again as a role that may.",
                                 schedule.queue.c_str())));
            });
        bool enqueued = on_cluster ? fire_on_cluster(schedule, tick, key, never, next, allowed)
                                   : fire_here(schedule, tick, key, never, next, allowed);
        if (enqueued) {
            fired++;
            // On a distributed pg_wf the queue's node counts and wakes.
            if (!on_cluster) {
                note_queue_ready(schedule.queue.data(), schedule.queue.size());
                count(schedule.queue, Metric::enqueued);
            }
        }
    }
    return fired;
}

}  // namespace wf::pg

using namespace wf;
using namespace wf::pg;

// wf_schedule(name, cron, queue, payload) -> timestamptz: the next run.
WF_SQL_FUNCTION_ANY_SCAN(wf_schedule) {
    core::validate_label(text_arg(fcinfo, 0, "name"), "name");
    std::string_view cron = text_arg(fcinfo, 1, "cron");
    std::string_view queue = queue_arg(fcinfo, 2);
    Datum payload = payload_arg(fcinfo, 3, "payload");
    core::CronSchedule schedule = core::CronSchedule::parse(cron);
    if (!schedule.can_fire())
        throw core::Error(core::sqlstate::invalid_parameter,
                          "cron expression \"" + std::string(cron) + "\" never fires",
                          {}, "No date matches its day-of-month and month fields.");
    bool never = true;
    Datum next = next_run(schedule, GetCurrentTimestamp(), &never);
    if (never)
        throw core::Error(core::sqlstate::invalid_parameter,
                          "cron expression \"" + std::string(cron) + "\" never fires");

    with_job_tables_anywhere([&] {
        require_right(Capability::administer, queue);
        require_right_on_schedule(PG_GETARG_DATUM(0));  // one it replaces
        if (on_cluster()) {
            const char* owner = call([] { return GetUserNameFromId(RunAsOwner::caller(), false); });
            run_through_citus(
                "INSERT INTO wf.schedule (name, cron, queue, payload, next_run_at, owner) VALUES (" +
                sql_literal(text_of(PG_GETARG_DATUM(0))) + ", " + sql_literal(cron) + ", " +
                sql_literal(queue) + ", " + jsonb_literal(payload) + ", " + timestamptz_literal(next) +
                // regrole reads an identifier: quoted, a name keeps its case.
                ", " + sql_literal(call([&] { return quote_identifier(owner); })) +
                "::pg_catalog.regrole)"
                " ON CONFLICT (name) DO UPDATE SET cron = excluded.cron, queue = excluded.queue,"
                "   payload = excluded.payload, next_run_at = excluded.next_run_at,"
                "   owner = excluded.owner, updated_at = " + now_literal());
            return;
        }
        Params<6> p;
        p.set(0, PG_GETARG_DATUM(0));
        p.set(1, PG_GETARG_DATUM(1));
        p.set(2, PG_GETARG_DATUM(2));
        p.set(3, payload);
        p.set(4, next);
        p.set(5, ObjectIdGetDatum(RunAsOwner::caller()));
        upsert_schedule.execute(p.values, p.nulls);
    });
    PG_RETURN_TIMESTAMPTZ(DatumGetTimestampTz(next));
}

// wf_unschedule(name) -> boolean: whether there was such a schedule.
WF_SQL_FUNCTION_ANY_SCAN(wf_unschedule) {
    text_arg(fcinfo, 0, "name");
    bool removed = with_job_tables_anywhere([&] {
        if (!require_right_on_schedule(PG_GETARG_DATUM(0))) return false;
        if (on_cluster()) {
            run_through_citus("DELETE FROM wf.schedule WHERE name = " +
                              sql_literal(text_of(PG_GETARG_DATUM(0))));
            return true;
        }
        Params<1> p;
        p.set(0, PG_GETARG_DATUM(0));
        return delete_schedule.execute(p.values, p.nulls).size() == 1;
    });
    PG_RETURN_BOOL(removed);
}

// wf_enable_schedule(name, enabled) -> boolean: whether there is such a
// schedule.
WF_SQL_FUNCTION_ANY_SCAN(wf_enable_schedule) {
    text_arg(fcinfo, 0, "name");
    bool enabled = bool_arg(fcinfo, 1, "enabled");
    bool found = with_job_tables_anywhere([&] {
        if (!require_right_on_schedule(PG_GETARG_DATUM(0))) return false;
        std::string name = sql_literal(text_of(PG_GETARG_DATUM(0)));
        Params<3> p;
        p.set(0, PG_GETARG_DATUM(0));
        p.set(1, BoolGetDatum(enabled));
        Rows schedule = on_cluster() ? run_through_citus("SELECT cron, enabled FROM wf.schedule WHERE name = " + name)
                                     : read_schedule.execute(p.values, p.nulls);
        p.set_null(2);
        if (enabled && !schedule.bool_at(0, "enabled")) {
            try {
                core::CronSchedule cron = core::CronSchedule::parse(schedule.text_at(0, "cron"));
                bool never = true;
                Datum next = next_run(cron, GetCurrentTimestamp(), &never);
                if (!never) p.set(2, next);
            } catch (const core::Error&) {
                // A row edited by hand: enabled, it stays stopped (next_run NULL).
            }
        }
        if (on_cluster()) {
            // As set_schedule_enabled, with its values written in.
            bool restart = enabled && !schedule.bool_at(0, "enabled");
            std::string next = p.nulls[2] == 'n' ? "NULL" : timestamptz_literal(p.values[2]);
            run_through_citus("UPDATE wf.schedule SET enabled = " + std::string(enabled ? "true" : "false") +
                              ", updated_at = " + now_literal() +
                              (restart ? ", next_run_at = " + next : std::string()) +
                              " WHERE name = " + name);
            return true;
        }
        set_schedule_enabled.execute(p.values, p.nulls);
        return true;
    });
    PG_RETURN_BOOL(found);
}

// wf._fire_tick(queue, payload, run_at, idempotency_key) -> bigint: on a
// distributed pg_wf, a tick's job in its queue's shard group (the id, or
// NULL when the tick's key is taken); called by fire_on_cluster.
WF_SQL_FUNCTION(wf_group_fire_tick) {
    require_group_call_from_pg_wf("wf._fire_tick");
    BoundedLockWaits bounded;
    std::string queue(queue_arg(fcinfo, 0));
    Datum payload = payload_arg(fcinfo, 1, "payload");
    core::require_not_null(PG_ARGISNULL(2), "run_at");
    Datum run_at = PG_GETARG_DATUM(2);
    text_arg(fcinfo, 3, "idempotency_key");
    std::optional<int64> id = with_queue_tables(PG_GETARG_DATUM(0), [&]() -> std::optional<int64> {
        Params<4> p;
        p.set(0, PG_GETARG_DATUM(0));
        p.set(1, payload);
        p.set(2, run_at);
        p.set(3, PG_GETARG_DATUM(3));
        Rows job = fire_tick_job.execute(p.values, p.nulls);
        if (job.empty()) return std::nullopt;
        return job.int64_at(0, "id");
    });
    if (!id) PG_RETURN_NULL();
    note_queue_ready(queue.data(), queue.size());
    count(queue, Metric::enqueued);
    PG_RETURN_INT64(*id);
}
