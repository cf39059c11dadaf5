// A rate limit's sliding window: how many claims were made in the last
// period, exact in the only sense that matters -- in no window of one
// period, starting at any microsecond, are more than `limit` claims
// admitted -- in memory that does not grow with the limit.
//
// The period is cut into kBuckets buckets; a ring keeps the counts of the
// last 2 * kBuckets + 1. A reservation at time t counts every claim from t's
// bucket minus kBuckets up to the latest bucket recorded: a span at least as
// long as any window of one period that holds t and the claims admitted
// before it (their times may be later than t: claimers read the clock before
// they arrive here, in any order). Why that is enough: take any window W of
// one period and the claim in it admitted last, at time t. Every other claim
// in W was admitted before it, so its bucket lies between bucket(t) -
// kBuckets (W starts at most one period before t) and the latest bucket
// recorded; all of them were counted, and fewer than `limit` were there.
// The price: a queue at its limit runs up to 1/(kBuckets + 1) below it.
//
// Pure C++ (no PostgreSQL): the shared-memory table of windows
// (src/pg/runtime/rate_windows.cpp) keeps one of these per queue or key and
// calls it under its lock.
#pragma once

#include <cstdint>

namespace wf::core {

class RateWindow {
public:
    static constexpr std::int64_t kBuckets = 32;
    static constexpr int kRing = 2 * kBuckets + 1;

    // A window of `limit` claims per `period_us` microseconds (> 0), empty,
    // as of time `now_us`.
    void reset(std::int32_t limit, std::int64_t period_us, std::int64_t now_us);
    bool same_limit(std::int32_t limit, std::int64_t period_us) const {
        return limit_ == limit && width_us_ == bucket_width(period_us);
    }

    // Admits up to `want` claims at time `at_us`; returns how many. When
    // fewer, *retry_after_us says when the window may next have room.
    int reserve(int want, std::int64_t at_us, std::int64_t* retry_after_us);
    // Takes back `n` claims admitted at `at_us` that were not made.
    void release(int n, std::int64_t at_us);
    // Claims a reservation at `now_us` would admit.
    int left(std::int64_t now_us);
    // No claim of it counts any more at `now_us`: its slot may be reused.
    bool idle(std::int64_t now_us) const { return head_ < now_us / width_us_ - kBuckets; }

    static std::int64_t bucket_width(std::int64_t period_us) {
        return period_us / kBuckets > 0 ? period_us / kBuckets : 1;
    }

private:
    void advance(std::int64_t bucket);
    // Claims counted against a reservation in `bucket`, or -1 when that
    // bucket is older than the ring; *oldest: the first counted bucket
    // with claims (-1: none).
    std::int64_t counted(std::int64_t bucket, std::int64_t* oldest) const;

    std::int32_t limit_ = 0;
    std::int64_t width_us_ = 1;
    std::int64_t head_ = 0;  // the latest bucket recorded
    std::int32_t counts_[kRing] = {};
};

}  // namespace wf::core
