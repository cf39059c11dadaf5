// core::RateWindow: no window of one period ever admits more than the limit,
// whatever order claimers arrive in, and the limit is nearly reached.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "core/rate_window.hpp"

using wf::core::RateWindow;

namespace {

constexpr std::int64_t kSecond = 1000000;

// The most claims in any window (t - period, t] over the admitted claims.
int most_in_any_window(std::vector<std::pair<std::int64_t, int>> claims, std::int64_t period) {
    std::sort(claims.begin(), claims.end());
    int most = 0, in_window = 0;
    size_t first = 0;
    for (size_t i = 0; i < claims.size(); i++) {
        in_window += claims[i].second;
        while (claims[first].first <= claims[i].first - period) in_window -= claims[first++].second;
        most = std::max(most, in_window);
    }
    return most;
}

}  // namespace

TEST(RateWindow, AdmitsUpToTheLimitThenWaitsForTheWindow) {
    RateWindow w;
    w.reset(5, kSecond, 0);
    std::int64_t retry = 0;
    std::int64_t t = 10 * kSecond;
    EXPECT_EQ(w.reserve(3, t, &retry), 3);
    EXPECT_EQ(retry, 0);
    EXPECT_EQ(w.reserve(5, t + 1000, &retry), 2);
    EXPECT_GT(retry, 0);
    EXPECT_EQ(w.reserve(1, t + 2000, &retry), 0);
    EXPECT_GT(retry, 0);
    EXPECT_LE(retry, kSecond + RateWindow::bucket_width(kSecond));
    EXPECT_EQ(w.left(t + 3000), 0);
    // Once the retry time has come, there is room again.
    EXPECT_EQ(w.reserve(5, t + 2000 + retry, &retry), 5);
}

TEST(RateWindow, GivesBackWhatWasNotTaken) {
    RateWindow w;
    w.reset(4, kSecond, 0);
    std::int64_t retry;
    EXPECT_EQ(w.reserve(4, kSecond, &retry), 4);
    w.release(3, kSecond);
    EXPECT_EQ(w.left(kSecond + 1), 3);
    EXPECT_EQ(w.reserve(4, kSecond + 2, &retry), 3);
}

TEST(RateWindow, RefusesAClockReadingOlderThanItsRing) {
    RateWindow w;
    w.reset(100, kSecond, 0);
    std::int64_t retry;
    EXPECT_EQ(w.reserve(1, 10 * kSecond, &retry), 1);
    EXPECT_EQ(w.reserve(1, 10 * kSecond - 3 * kSecond / 2, &retry), 0);
    EXPECT_GT(retry, 0);
}

TEST(RateWindow, IdleOncePeriodPassed) {
    RateWindow w;
    w.reset(1, kSecond, 0);
    std::int64_t retry;
    w.reserve(1, kSecond, &retry);
    EXPECT_FALSE(w.idle(kSecond + kSecond / 2));
    EXPECT_TRUE(w.idle(3 * kSecond));
}

// Claimers read the clock, then arrive in any order up to `skew` later, and
// ask for 1 to 5 claims each, some of which they give back.
class RateWindowStress : public ::testing::TestWithParam<std::tuple<int, std::int64_t, std::int64_t>> {};

TEST_P(RateWindowStress, NoWindowExceedsTheLimit) {
    auto [limit, period, skew] = GetParam();
    std::mt19937_64 rng(limit * 7919 + period + skew);
    RateWindow w;
    w.reset(limit, period, 0);
    struct Reading { std::int64_t read_at, arrives_at; int want; };
    std::vector<Reading> readings;
    std::int64_t now = 100 * kSecond;
    const std::int64_t horizon = now + 20 * period;
    while (now < horizon) {
        now += static_cast<std::int64_t>(rng() % std::max<std::int64_t>(1, period / limit / 2 + 1));
        readings.push_back({now, now + static_cast<std::int64_t>(rng() % (skew + 1)),
                            1 + static_cast<int>(rng() % 5)});
    }
    std::sort(readings.begin(), readings.end(),
              [](const Reading& a, const Reading& b) { return a.arrives_at < b.arrives_at; });
    std::vector<std::pair<std::int64_t, int>> admitted;
    int total = 0;
    for (const Reading& r : readings) {
        std::int64_t retry;
        int got = w.reserve(r.want, r.read_at, &retry);
        int given_back = got > 0 && rng() % 4 == 0 ? static_cast<int>(rng() % got) : 0;
        if (given_back) w.release(given_back, r.read_at);
        if (got - given_back > 0) admitted.emplace_back(r.read_at, got - given_back);
        total += got - given_back;
    }
    EXPECT_LE(most_in_any_window(admitted, period), limit);
    // Demand is well above the limit: nearly all of it is used (a window
    // counts up to one bucket more than a period, and a late reader's
    // claims are refused).
    double periods = static_cast<double>(horizon - 100 * kSecond) / static_cast<double>(period);
    EXPECT_GE(total, static_cast<int>(0.85 * limit * periods)) << "admitted " << total;
}

INSTANTIATE_TEST_SUITE_P(
    Limits, RateWindowStress,
    ::testing::Values(std::make_tuple(1, kSecond, 0), std::make_tuple(10, kSecond, 0),
                      std::make_tuple(10, kSecond, 50000), std::make_tuple(100, kSecond, 200000),
                      std::make_tuple(1000, kSecond, 10000), std::make_tuple(50, 3600 * kSecond, 60 * kSecond),
                      std::make_tuple(7, 333333, 20000)));
