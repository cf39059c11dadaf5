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
}  // namespace limits

// `argument` is the SQL argument's name, used in the message.
void require_not_null(bool is_null, std::string_view argument);
void validate_queue_name(std::string_view queue);
void validate_label(std::string_view value, std::string_view argument, bool may_be_empty = false);
void validate_idempotency_key(std::string_view key);
void validate_positive(std::int64_t value, std::string_view argument);
void validate_max_jobs(int max_jobs);
void validate_payload_size(std::size_t bytes, std::size_t limit_bytes, std::string_view what);
void validate_batch_length(std::size_t jobs);
void validate_dependency_count(std::size_t dependencies);
void validate_non_negative_seconds(double seconds, std::string_view argument);

}  // namespace wf::core
