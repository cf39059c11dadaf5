#include "retry_policy.hpp"

#include <algorithm>
#include <cmath>

namespace wf::core {

double backoff_seconds(const BackoffSettings& settings, int attempt, double unit_random) {
    const int exponent = std::clamp(attempt, 1, 64) - 1;
    // ldexp cannot overflow into UB the way a shift would; min() caps it.
    const double raw = std::ldexp(settings.base_seconds, exponent);
    const double capped = std::min(raw, settings.max_seconds);
    const double r = std::clamp(unit_random, 0.0, 1.0);
    const double factor = 1.0 + settings.jitter * (2.0 * r - 1.0);
    return std::max(0.0, capped * factor);
}

FailOutcome classify_failure(int attempt, int max_attempts, bool permanent) {
    if (permanent || attempt >= max_attempts) return FailOutcome::dead_letter;
    return FailOutcome::retry;
}

}  // namespace wf::core
