#include "core/validation.hpp"

#include <gtest/gtest.h>

#include <string>

#include "core/error.hpp"

using namespace wf::core;

namespace {
// The SQLSTATE a call fails with, or "" when it does not fail.
template <typename F>
std::string sqlstate_of(F&& f) {
    try {
        f();
    } catch (const Error& e) {
        return e.sqlstate();
    }
    return "";
}
}  // namespace

TEST(QueueName, AcceptsOrdinaryNames) {
    EXPECT_EQ(sqlstate_of([] { validate_queue_name("emails"); }), "");
    EXPECT_EQ(sqlstate_of([] { validate_queue_name("llm.summarize/v2"); }), "");
    EXPECT_EQ(sqlstate_of([] { validate_queue_name(std::string(128, 'q')); }), "");
}

TEST(QueueName, RejectsEmptyLongAndControlCharacters) {
    EXPECT_EQ(sqlstate_of([] { validate_queue_name(""); }), "22023");
    EXPECT_EQ(sqlstate_of([] { validate_queue_name(std::string(129, 'q')); }), "54000");
    EXPECT_EQ(sqlstate_of([] { validate_queue_name("a\nb"); }), "22023");
}

TEST(QueueName, MessageNamesTheProblem) {
    try {
        validate_queue_name("");
        FAIL();
    } catch (const Error& e) {
        EXPECT_STREQ(e.what(), "queue name must not be empty");
    }
}

TEST(Arguments, NullIsNotAllowed) {
    EXPECT_EQ(sqlstate_of([] { require_not_null(true, "payload"); }), "22004");
    EXPECT_EQ(sqlstate_of([] { require_not_null(false, "payload"); }), "");
    try {
        require_not_null(true, "payload");
    } catch (const Error& e) {
        EXPECT_STREQ(e.what(), "payload must not be null");
    }
}

TEST(Arguments, PositiveNumbers) {
    EXPECT_EQ(sqlstate_of([] { validate_positive(1, "max_attempts"); }), "");
    EXPECT_EQ(sqlstate_of([] { validate_positive(0, "max_attempts"); }), "22023");
    EXPECT_EQ(sqlstate_of([] { validate_positive(-5, "max_running"); }), "22023");
}

TEST(Arguments, LimitsWhereZeroMeansNone) {
    EXPECT_EQ(sqlstate_of([] { validate_not_negative(0, "rate_limit"); }), "");
    EXPECT_EQ(sqlstate_of([] { validate_not_negative(100, "rate_limit"); }), "");
    EXPECT_EQ(sqlstate_of([] { validate_not_negative(-1, "key_concurrency"); }), "22023");
}

TEST(Arguments, OnDuplicate) {
    EXPECT_EQ(parse_on_duplicate("keep"), OnDuplicate::keep);
    EXPECT_EQ(parse_on_duplicate("replace"), OnDuplicate::replace);
    EXPECT_EQ(sqlstate_of([] { parse_on_duplicate("Keep"); }), "22023");
    EXPECT_EQ(sqlstate_of([] { parse_on_duplicate(""); }), "22023");
}

TEST(Arguments, MaxJobsIsBounded) {
    EXPECT_EQ(sqlstate_of([] { validate_max_jobs(1); }), "");
    EXPECT_EQ(sqlstate_of([] { validate_max_jobs(limits::max_jobs_per_claim); }), "");
    EXPECT_EQ(sqlstate_of([] { validate_max_jobs(0); }), "22023");
    EXPECT_EQ(sqlstate_of([] { validate_max_jobs(limits::max_jobs_per_claim + 1); }), "54000");
}

TEST(Arguments, IdempotencyKeys) {
    EXPECT_EQ(sqlstate_of([] { validate_idempotency_key("order-42"); }), "");
    EXPECT_EQ(sqlstate_of([] { validate_idempotency_key(""); }), "22023");
    EXPECT_EQ(sqlstate_of([] { validate_idempotency_key(std::string(513, 'k')); }), "54000");
    // Reserved for the ticks of cron schedules.
    EXPECT_EQ(sqlstate_of([] { validate_idempotency_key("schedule:nightly:1764547200"); }), "22023");
    EXPECT_EQ(sqlstate_of([] { validate_idempotency_key("my-schedule:1"); }), "");
}

TEST(Arguments, PayloadSizeLimit) {
    EXPECT_EQ(sqlstate_of([] { validate_payload_size(1024, 1024, "payload"); }), "");
    EXPECT_EQ(sqlstate_of([] { validate_payload_size(1025, 1024, "payload"); }), "54000");
}

TEST(Arguments, BatchAndDependencyLimits) {
    EXPECT_EQ(sqlstate_of([] { validate_batch_length(0); }), "");
    EXPECT_EQ(sqlstate_of([] { validate_batch_length(limits::max_batch_jobs + 1); }), "54000");
    EXPECT_EQ(sqlstate_of([] { validate_dependency_count(limits::max_dependencies + 1); }), "54000");
}

TEST(Arguments, Labels) {
    EXPECT_EQ(sqlstate_of([] { validate_label("summarize", "step_name"); }), "");
    EXPECT_EQ(sqlstate_of([] { validate_label("", "step_name"); }), "22023");
    EXPECT_EQ(sqlstate_of([] { validate_label(std::string(257, 's'), "worker"); }), "54000");
}

TEST(Arguments, IntervalsAreBounded) {
    EXPECT_EQ(sqlstate_of([] { validate_interval_seconds(0, "delay", true); }), "");
    EXPECT_EQ(sqlstate_of([] { validate_interval_seconds(0, "lease", false); }), "22023");
    EXPECT_EQ(sqlstate_of([] { validate_interval_seconds(-1, "delay", true); }), "22023");
    EXPECT_EQ(sqlstate_of([] { validate_interval_seconds(limits::max_interval_seconds, "lease", false); }), "");
    // 100 million years: a lease like that made every claim of its queue fail with 22008.
    EXPECT_EQ(sqlstate_of([] { validate_interval_seconds(1e8 * 365.25 * 86400, "lease", false); }), "22023");
    // '101 years' as PostgreSQL counts it (1212 months of 30 days).
    EXPECT_EQ(sqlstate_of([] { validate_interval_seconds(101.0 * 12 * 30 * 86400, "lease", false); }), "22023");
    EXPECT_EQ(sqlstate_of([] { validate_interval_seconds(limits::max_interval_seconds + 1, "backoff_base", false); }), "22023");
}

TEST(Arguments, MaxAttemptsIsBounded) {
    EXPECT_EQ(sqlstate_of([] { validate_max_attempts(1); }), "");
    EXPECT_EQ(sqlstate_of([] { validate_max_attempts(limits::max_attempts); }), "");
    EXPECT_EQ(sqlstate_of([] { validate_max_attempts(0); }), "22023");
    // INT_MAX was accepted, and a snooze or retry of the job then overflowed (22003).
    EXPECT_EQ(sqlstate_of([] { validate_max_attempts(2147483647); }), "22023");
}

// 1.6: event names starting with "wf:" are pg_wf's own (a job's children:
// "wf:children", "wf:child:<name>"); wf_signal, wf_await_event and
// wf_signal_with_start refuse them.
TEST(EventName, OrdinaryNamesAreAccepted) {
    EXPECT_EQ(sqlstate_of([] { validate_event_name("approval:42"); }), "");
    EXPECT_EQ(sqlstate_of([] { validate_event_name("wf"); }), "");
    EXPECT_EQ(sqlstate_of([] { validate_event_name("wf_done"); }), "");
    EXPECT_EQ(sqlstate_of([] { validate_event_name("my-wf:x"); }), "");  // not a prefix
    EXPECT_EQ(sqlstate_of([] { validate_event_name("w:f"); }), "");
    EXPECT_EQ(sqlstate_of([] { validate_event_name(std::string(256, 'e')); }), "");
}

TEST(EventName, ReservedPrefixIsRefused) {
    EXPECT_EQ(sqlstate_of([] { validate_event_name("wf:"); }), "22023");
    EXPECT_EQ(sqlstate_of([] { validate_event_name("wf:children"); }), "22023");
    EXPECT_EQ(sqlstate_of([] { validate_event_name("wf:child:fetch"); }), "22023");
    EXPECT_EQ(sqlstate_of([] { validate_event_name("wf:anything else"); }), "22023");
    try {
        validate_event_name("wf:child:x");
        FAIL();
    } catch (const Error& e) {
        EXPECT_STREQ(e.what(), "event name \"wf:child:x\" is reserved");
        EXPECT_FALSE(e.detail().empty());
        EXPECT_NE(e.hint().find("wf:"), std::string::npos) << e.hint();
    }
}

TEST(EventName, LabelRulesStillApply) {
    EXPECT_EQ(sqlstate_of([] { validate_event_name(""); }), "22023");
    EXPECT_EQ(sqlstate_of([] { validate_event_name(std::string(257, 'e')); }), "54000");
    // A long name with the prefix: refused either way, never accepted.
    EXPECT_NE(sqlstate_of([] { validate_event_name("wf:" + std::string(300, 'e')); }), "");
    try {
        validate_event_name("");
        FAIL();
    } catch (const Error& e) {
        EXPECT_STREQ(e.what(), "event must not be empty");
    }
}
