// Cron schedules for wf_schedule(): the five standard fields, read the way
// Vixie cron (and so pg_cron) reads them.
//
// All times are UTC, as seconds since the Unix epoch. A schedule has no time
// zone: "0 9 * * *" fires at 09:00 UTC. Keeping the calendar arithmetic here
// (no <ctime>, no TZ database) makes it deterministic and thread-safe.
//
// Syntax, field by field (minute hour day-of-month month day-of-week):
//   *            every value
//   a            one value; months take JAN-DEC, days of week SUN-SAT
//                (case-insensitive); day-of-week 0 and 7 are both Sunday
//   a-b          a range, low to high (ranges do not wrap around)
//   */n  a-b/n   every n-th value of the field or of the range
//   a/n          every n-th value from a to the end of the field
//   x,y,...      a list of any of the above
// Shortcuts: @yearly (@annually), @monthly, @weekly, @daily (@midnight), @hourly.
//
// Day-of-month and day-of-week, as in Vixie cron: when both fields are
// restricted, a day matches if EITHER matches ("0 0 13 * FRI" fires on every
// 13th and on every Friday). A field counts as unrestricted when it starts with
// "*" -- including "*/2" -- and then a day must match both fields.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace wf::core {

class CronSchedule {
public:
    // Throws Error (SQLSTATE 22023) naming the field and the value at fault.
    static CronSchedule parse(std::string_view expr);

    // The first fire time strictly after `unix_seconds_utc` (always at second 0),
    // or nullopt when the schedule can never fire ("0 0 30 2 *"). The answer is
    // exact: the Gregorian calendar repeats every 400 years, so no horizon cuts
    // off rare but real fire times (Feb 29 skips 2100: 2096 -> 2104). Times
    // beyond +/-2^62 seconds, far outside what PostgreSQL stores, give nullopt.
    std::optional<std::int64_t> next_after(std::int64_t unix_seconds_utc) const;

    // Whether the schedule fires in the minute that holds `unix_seconds_utc`.
    bool matches(std::int64_t unix_seconds_utc) const;

    // False when no date can ever match (day 30 or 31 only in February, ...).
    bool can_fire() const { return can_fire_; }

    // The schedule as a canonical five-field expression: numbers instead of
    // names, shortcuts expanded ("@daily" -> "0 0 * * *"), lists compressed.
    // Parsing it gives the same schedule back.
    std::string describe() const;

private:
    CronSchedule() = default;

    bool day_matches(std::int64_t year, int month, int day) const;

    std::uint64_t minutes_ = 0;        // bit m: minute m (0-59)
    std::uint64_t hours_ = 0;          // bit h: hour h (0-23)
    std::uint64_t days_of_month_ = 0;  // bit d: day d (1-31)
    std::uint64_t months_ = 0;         // bit m: month m (1-12)
    std::uint64_t days_of_week_ = 0;   // bit w: weekday w (0 = Sunday ... 6)
    bool dom_star_ = false;            // the day-of-month field starts with '*'
    bool dow_star_ = false;            // the day-of-week field starts with '*'
    bool can_fire_ = false;
};

}  // namespace wf::core
