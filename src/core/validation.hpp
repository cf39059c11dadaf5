// Argument rules of the SQL API, checked before anything is written.
// Every function throws wf::core::Error with the SQLSTATE PostgreSQL users expect.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace wf::core {

namespace limits {
inline constexpr std::size_t queue_name_bytes = 128;
inline constexpr std::size_t idempotency_key_bytes = 512;
inline constexpr std::size_t label_bytes = 256;  // worker and step names
inline constexpr int max_jobs_per_claim = 10000;
inline constexpr std::size_t max_batch_jobs = 100000;
inline constexpr std::size_t max_dependencies = 10000;
// A job's budget of attempts: parking and retries add to it, and it must
// stay far from the int range.
inline constexpr std::int64_t max_attempts = 1000000;
// Every interval argument (leases, backoff, delays, timeouts): longer ones
// would push a timestamp past its range in some later computation, and no
// job waits a century. Counted as PostgreSQL counts an interval's years
// (12 months of 30 days), so that '100 years' is the longest.
inline constexpr double max_interval_seconds = 100.0 * 12 * 30 * 86400;
}  // namespace limits

// `argument` is the SQL argument's name, used in the message.
void require_not_null(bool is_null, std::string_view argument);
void validate_queue_name(std::string_view queue);
void validate_label(std::string_view value, std::string_view argument, bool may_be_empty = false);
// The idempotency keys of jobs enqueued by cron schedules begin with this;
// no caller may use it.
inline constexpr const char* kScheduleKeyPrefix = "schedule:";
void validate_idempotency_key(std::string_view key);
// An event name of wf_signal, wf_await_event, wf_signal_with_start: a
// label that does not start with "wf:", the prefix of pg_wf's own events
// (a job's children: "wf:children", "wf:child:<name>").
void validate_event_name(std::string_view event);
void validate_positive(std::int64_t value, std::string_view argument);
// A limit where 0 means none (22023 below 0).
void validate_not_negative(std::int64_t value, std::string_view argument);
// wf_enqueue's on_duplicate: "keep" or "replace" (22023).
enum class OnDuplicate { keep, replace };
OnDuplicate parse_on_duplicate(std::string_view value);
void validate_max_jobs(int max_jobs);
// 1 .. limits::max_attempts (22023).
void validate_max_attempts(std::int64_t max_attempts);
void validate_payload_size(std::size_t bytes, std::size_t limit_bytes, std::string_view what);
void validate_batch_length(std::size_t jobs);
void validate_dependency_count(std::size_t dependencies);
// An interval argument, in seconds: not negative, not zero unless
// `zero_allowed`, at most limits::max_interval_seconds.
void validate_interval_seconds(double seconds, std::string_view argument, bool zero_allowed);

}  // namespace wf::core
