#include "validation.hpp"

#include <string>

#include "error.hpp"

namespace wf::core {

namespace {
std::string arg(std::string_view a) { return std::string(a); }

// The first bytes of `s`, cut at a character boundary (UTF-8): error
// messages must stay valid text.
std::string prefix(std::string_view s, std::size_t bytes) {
    if (s.size() <= bytes) return std::string(s);
    while (bytes > 0 && (static_cast<unsigned char>(s[bytes]) & 0xC0) == 0x80) bytes--;
    return std::string(s.substr(0, bytes));
}

// Queue names appear in log lines and error messages: keep them printable.
bool has_control_character(std::string_view s) {
    for (unsigned char c : s)
        if (c < 0x20 || c == 0x7f) return true;
    return false;
}
}  // namespace

void require_not_null(bool is_null, std::string_view argument) {
    if (is_null)
        throw Error(sqlstate::null_not_allowed, arg(argument) + " must not be null");
}

void validate_queue_name(std::string_view queue) {
    if (queue.empty())
        throw Error(sqlstate::invalid_parameter, "queue name must not be empty");
    if (queue.size() > limits::queue_name_bytes)
        throw Error(sqlstate::program_limit,
                    "queue name \"" + prefix(queue, 32) + "...\" is too long",
                    "Queue names are limited to " + std::to_string(limits::queue_name_bytes) +
                        " bytes; this one has " + std::to_string(queue.size()) + ".");
    if (has_control_character(queue))
        throw Error(sqlstate::invalid_parameter,
                    "queue name must not contain control characters");
}

void validate_label(std::string_view value, std::string_view argument, bool may_be_empty) {
    if (!may_be_empty && value.empty())
        throw Error(sqlstate::invalid_parameter, arg(argument) + " must not be empty");
    if (value.size() > limits::label_bytes)
        throw Error(sqlstate::program_limit, arg(argument) + " is too long",
                    "It is limited to " + std::to_string(limits::label_bytes) +
                        " bytes; this one has " + std::to_string(value.size()) + ".");
}

void validate_idempotency_key(std::string_view key) {
    if (key.empty())
        throw Error(sqlstate::invalid_parameter, "idempotency_key must not be empty",
                    {}, "Pass NULL for a job without an idempotency key.");
    if (key.size() > limits::idempotency_key_bytes)
        throw Error(sqlstate::program_limit, "idempotency_key is too long",
                    "Idempotency keys are limited to " +
                        std::to_string(limits::idempotency_key_bytes) + " bytes; this one has " +
                        std::to_string(key.size()) + ".");
    // A schedule's tick is enqueued under the key schedule:<name>:<tick>: a
    // job that took such a key first would replace the tick's job, or, held
    // in an open transaction, stall the worker's cron pass.
    if (key.substr(0, std::string_view(kScheduleKeyPrefix).size()) == kScheduleKeyPrefix)
        throw Error(sqlstate::invalid_parameter,
                    "idempotency keys beginning with \"" + std::string(kScheduleKeyPrefix) +
                        "\" are reserved for pg_wf's schedules",
                    {}, "Choose a key with another prefix.");
}

void validate_positive(std::int64_t value, std::string_view argument) {
    if (value <= 0)
        throw Error(sqlstate::invalid_parameter,
                    arg(argument) + " must be positive, not " + std::to_string(value));
}

void validate_not_negative(std::int64_t value, std::string_view argument) {
    if (value < 0)
        throw Error(sqlstate::invalid_parameter,
                    arg(argument) + " must not be negative, not " + std::to_string(value),
                    {}, "0 removes the limit.");
}

OnDuplicate parse_on_duplicate(std::string_view value) {
    if (value == "keep") return OnDuplicate::keep;
    if (value == "replace") return OnDuplicate::replace;
    throw Error(sqlstate::invalid_parameter,
                "on_duplicate must be 'keep' or 'replace', not '" + std::string(value) + "'",
                {}, "'keep' returns the active job that holds the dedup key; 'replace' also gives "
                    "it the new payload and run_at while it has not started.");
}

void validate_max_attempts(std::int64_t max_attempts) {
    validate_positive(max_attempts, "max_attempts");
    if (max_attempts > limits::max_attempts)
        throw Error(sqlstate::invalid_parameter,
                    "max_attempts must be at most " + std::to_string(limits::max_attempts),
                    "Parking a job and retrying it add to its budget of attempts, which must "
                    "stay within an integer.");
}

void validate_max_jobs(int max_jobs) {
    validate_positive(max_jobs, "max_jobs");
    if (max_jobs > limits::max_jobs_per_claim)
        throw Error(sqlstate::program_limit,
                    "max_jobs " + std::to_string(max_jobs) + " is too large",
                    "One claim takes at most " + std::to_string(limits::max_jobs_per_claim) +
                        " jobs.");
}

void validate_payload_size(std::size_t bytes, std::size_t limit_bytes, std::string_view what) {
    if (bytes > limit_bytes)
        throw Error(sqlstate::program_limit, arg(what) + " is too large",
                    arg(what) + " has " + std::to_string(bytes) + " bytes; the limit is " +
                        std::to_string(limit_bytes) + ".",
                    "Raise wf.max_payload_size, or store large data elsewhere and pass a "
                    "reference.");
}

void validate_batch_length(std::size_t jobs) {
    if (jobs > limits::max_batch_jobs)
        throw Error(sqlstate::program_limit,
                    "batch of " + std::to_string(jobs) + " jobs is too large",
                    "One wf_enqueue_batch call takes at most " +
                        std::to_string(limits::max_batch_jobs) + " jobs.");
}

void validate_dependency_count(std::size_t dependencies) {
    if (dependencies > limits::max_dependencies)
        throw Error(sqlstate::program_limit,
                    "job has too many dependencies: " + std::to_string(dependencies),
                    "A job depends on at most " + std::to_string(limits::max_dependencies) +
                        " jobs.");
}

void validate_interval_seconds(double seconds, std::string_view argument, bool zero_allowed) {
    if (seconds <= 0 && !zero_allowed)
        throw Error(sqlstate::invalid_parameter, arg(argument) + " must be a positive interval");
    if (seconds < 0)
        throw Error(sqlstate::invalid_parameter, arg(argument) + " must not be negative");
    if (!(seconds <= limits::max_interval_seconds))
        throw Error(sqlstate::invalid_parameter, arg(argument) + " must be at most 100 years",
                    "A longer interval would overflow the times computed from it.");
}

void validate_event_name(std::string_view event) {
    validate_label(event, "event");
    if (event.substr(0, 3) == "wf:")
        throw Error(sqlstate::invalid_parameter,
                    "event name \"" + std::string(event) + "\" is reserved",
                    "Names starting with \"wf:\" are pg_wf's own (a job's children report as "
                    "\"wf:child:<name>\").",
                    "Choose a name without the prefix \"wf:\".");
}

}  // namespace wf::core
