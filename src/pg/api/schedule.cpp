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

// Administer on the queue of schedule `name`, if it exists; whether it does.
bool require_right_on_schedule(Datum name) {
    Params<1> p;
    p.set(0, name);
    Rows existing = lock_schedule.execute(p.values, p.nulls);
    if (existing.empty()) return false;
    require_right(Capability::administer, existing.text_at(0, "queue"));
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

int64 fire_due_schedules() {
    struct Due {
        std::string name, cron, queue;
        Datum payload;  // in SPI memory, alive until SPI_finish
        TimestampTz tick;
        Oid owner;
    };
    TimestampTz now = GetCurrentTimestamp();
    Params<1> d;
    d.set(0, TimestampTzGetDatum(now));
    Rows rows = due_schedules.execute(d.values, d.nulls);
    std::vector<Due> due(rows.size());
    for (size_t r = 0; r < due.size(); r++)
        due[r] = {rows.text_at(r, "name"), rows.text_at(r, "cron"), rows.text_at(r, "queue"),
                  rows.datum(r, "payload"), DatumGetTimestampTz(rows.datum(r, "next_run_at")),
                  DatumGetObjectId(rows.datum(r, "owner"))};

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
        Params<7> p;
        p.set(0, text_datum(schedule.name));
        p.set(1, text_datum(schedule.queue));
        p.set(2, schedule.payload);
        p.set(3, TimestampTzGetDatum(tick));
        p.set(4, text_datum(key));
        if (never) p.set_null(5); else p.set(5, next);
        p.set(6, BoolGetDatum(allowed));
        if (fire_tick.execute(p.values, p.nulls).int64_at(0, "fired") > 0) {
            fired++;
            note_queue_ready(schedule.queue.data(), schedule.queue.size());
            count(schedule.queue, Metric::enqueued);
        }
    }
    return fired;
}

}  // namespace wf::pg

using namespace wf;
using namespace wf::pg;

// wf_schedule(name, cron, queue, payload) -> timestamptz: the next run.
WF_SQL_FUNCTION(wf_schedule) {
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

    with_job_tables([&] {
        require_right(Capability::administer, queue);
        require_right_on_schedule(PG_GETARG_DATUM(0));  // one it replaces
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
WF_SQL_FUNCTION(wf_unschedule) {
    text_arg(fcinfo, 0, "name");
    bool removed = with_job_tables([&] {
        if (!require_right_on_schedule(PG_GETARG_DATUM(0))) return false;
        Params<1> p;
        p.set(0, PG_GETARG_DATUM(0));
        return delete_schedule.execute(p.values, p.nulls).size() == 1;
    });
    PG_RETURN_BOOL(removed);
}

// wf_enable_schedule(name, enabled) -> boolean: whether there is such a
// schedule.
WF_SQL_FUNCTION(wf_enable_schedule) {
    text_arg(fcinfo, 0, "name");
    bool enabled = bool_arg(fcinfo, 1, "enabled");
    bool found = with_job_tables([&] {
        if (!require_right_on_schedule(PG_GETARG_DATUM(0))) return false;
        Params<3> p;
        p.set(0, PG_GETARG_DATUM(0));
        p.set(1, BoolGetDatum(enabled));
        Rows schedule = read_schedule.execute(p.values, p.nulls);
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
        set_schedule_enabled.execute(p.values, p.nulls);
        return true;
    });
    PG_RETURN_BOOL(found);
}
