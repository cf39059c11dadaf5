// When a failed job runs again: exponential backoff with jitter.
#pragma once

#include <cstdint>

namespace wf::core {

struct BackoffSettings {
    double base_seconds = 1.0;    // delay after the first failed attempt
    double max_seconds = 3600.0;  // the cap, before jitter
    double jitter = 0.25;         // +/- this fraction of the delay
};

// Delay before the next attempt after `attempt` (1-based) failed.
// `unit_random` is a draw from [0, 1); passing it in keeps this pure and testable.
double backoff_seconds(const BackoffSettings& settings, int attempt, double unit_random);

enum class FailOutcome { retry, dead_letter };

// A failure is final when it is declared permanent or no attempts are left.
FailOutcome classify_failure(int attempt, int max_attempts, bool permanent);

}  // namespace wf::core
