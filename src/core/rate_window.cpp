#include "core/rate_window.hpp"

#include <algorithm>
#include <cstring>

namespace wf::core {

void RateWindow::reset(std::int32_t limit, std::int64_t period_us, std::int64_t now_us) {
    limit_ = limit;
    width_us_ = bucket_width(period_us);
    head_ = now_us / width_us_;
    std::memset(counts_, 0, sizeof(counts_));
}

void RateWindow::advance(std::int64_t bucket) {
    if (bucket <= head_) return;
    if (bucket - head_ >= kRing) {
        std::memset(counts_, 0, sizeof(counts_));
    } else {
        for (std::int64_t i = head_ + 1; i <= bucket; i++) counts_[i % kRing] = 0;
    }
    head_ = bucket;
}

std::int64_t RateWindow::counted(std::int64_t bucket, std::int64_t* oldest) const {
    std::int64_t lo = bucket - kBuckets;
    *oldest = -1;
    if (head_ - lo + 1 > kRing) return -1;
    std::int64_t sum = 0;
    for (std::int64_t i = lo; i <= head_; i++) {
        std::int32_t c = counts_[i % kRing];
        if (c > 0 && *oldest < 0) *oldest = i;
        sum += c;
    }
    return sum;
}

int RateWindow::reserve(int want, std::int64_t at_us, std::int64_t* retry_after_us) {
    *retry_after_us = 0;
    std::int64_t bucket = at_us / width_us_;
    advance(bucket);
    std::int64_t oldest;
    std::int64_t sum = counted(bucket, &oldest);
    if (sum < 0) {
        // A claimer whose clock reading is older than the ring: it reads
        // the clock again.
        *retry_after_us = 1000;
        return 0;
    }
    int granted = static_cast<int>(std::clamp<std::int64_t>(limit_ - sum, 0, want));
    counts_[bucket % kRing] += granted;
    if (granted < want) {
        // Room comes back when the oldest counted bucket leaves the span.
        std::int64_t frees_at = oldest >= 0 ? (oldest + kBuckets + 1) * width_us_
                                            : (bucket + 1) * width_us_;
        *retry_after_us = std::max<std::int64_t>(1, frees_at - at_us);
    }
    return granted;
}

void RateWindow::release(int n, std::int64_t at_us) {
    std::int64_t bucket = at_us / width_us_;
    if (n <= 0 || bucket > head_ || bucket <= head_ - kRing) return;
    std::int32_t& c = counts_[bucket % kRing];
    c -= std::min(c, n);
}

int RateWindow::left(std::int64_t now_us) {
    std::int64_t bucket = now_us / width_us_;
    advance(bucket);
    std::int64_t oldest;
    std::int64_t sum = counted(bucket, &oldest);
    return sum < 0 ? 0 : static_cast<int>(std::clamp<std::int64_t>(limit_ - sum, 0, limit_));
}

}  // namespace wf::core
