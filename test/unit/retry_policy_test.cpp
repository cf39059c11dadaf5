#include "core/retry_policy.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

using namespace wf::core;

TEST(Backoff, DoublesPerAttemptWithoutJitter) {
    BackoffSettings s{1.0, 3600.0, 0.0};
    EXPECT_DOUBLE_EQ(backoff_seconds(s, 1, 0.5), 1.0);
    EXPECT_DOUBLE_EQ(backoff_seconds(s, 2, 0.5), 2.0);
    EXPECT_DOUBLE_EQ(backoff_seconds(s, 5, 0.5), 16.0);
}

TEST(Backoff, IsCappedAtTheMaximum) {
    BackoffSettings s{1.0, 3600.0, 0.0};
    EXPECT_DOUBLE_EQ(backoff_seconds(s, 13, 0.5), 3600.0);
    EXPECT_DOUBLE_EQ(backoff_seconds(s, 1000000, 0.5), 3600.0);
}

TEST(Backoff, JitterStaysWithinAQuarter) {
    BackoffSettings s;  // 1 s base, 1 h cap, 25% jitter
    EXPECT_DOUBLE_EQ(backoff_seconds(s, 3, 0.0), 3.0);    // 4 s - 25%
    EXPECT_DOUBLE_EQ(backoff_seconds(s, 3, 0.5), 4.0);
    EXPECT_NEAR(backoff_seconds(s, 3, 0.999999), 5.0, 1e-5);  // 4 s + 25%
    for (int attempt = 1; attempt < 30; attempt++)
        for (double r : {0.0, 0.1, 0.37, 0.5, 0.9, 0.9999}) {
            double d = backoff_seconds(s, attempt, r);
            EXPECT_GE(d, 0.75 * std::min(3600.0, std::ldexp(1.0, attempt - 1)));
            EXPECT_LE(d, 1.25 * std::min(3600.0, std::ldexp(1.0, attempt - 1)));
        }
}

TEST(Backoff, OutOfRangeInputsAreClamped) {
    BackoffSettings s{2.0, 60.0, 0.25};
    EXPECT_DOUBLE_EQ(backoff_seconds(s, 0, 0.5), 2.0);
    EXPECT_DOUBLE_EQ(backoff_seconds(s, -7, 0.5), 2.0);
    EXPECT_DOUBLE_EQ(backoff_seconds(s, 1, -3.0), 1.5);
    EXPECT_DOUBLE_EQ(backoff_seconds(s, 1, 7.0), 2.5);
}

TEST(FailureOutcome, RetriesUntilAttemptsAreSpent) {
    EXPECT_EQ(classify_failure(1, 5, false), FailOutcome::retry);
    EXPECT_EQ(classify_failure(4, 5, false), FailOutcome::retry);
    EXPECT_EQ(classify_failure(5, 5, false), FailOutcome::dead_letter);
    EXPECT_EQ(classify_failure(9, 5, false), FailOutcome::dead_letter);
}

TEST(FailureOutcome, PermanentFailureIsFinalAtOnce) {
    EXPECT_EQ(classify_failure(1, 5, true), FailOutcome::dead_letter);
}
