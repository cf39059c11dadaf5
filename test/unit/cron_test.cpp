#include "core/cron.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <ctime>
#include <limits>
#include <string>
#include <vector>

#include "core/error.hpp"

using namespace wf::core;

namespace {

// The C library is the independent oracle for the calendar: the tests convert
// with timegm/gmtime_r, the code under test with its own arithmetic.
std::int64_t at(const char* text) {
    std::tm tm{};
    int sec = 0;
    const int n = std::sscanf(text, "%d-%d-%d %d:%d:%d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                              &tm.tm_hour, &tm.tm_min, &sec);
    EXPECT_GE(n, 5) << text;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    tm.tm_sec = sec;
    return static_cast<std::int64_t>(timegm(&tm));
}

std::string show(std::int64_t t) {
    const std::time_t tt = static_cast<std::time_t>(t);
    std::tm tm{};
    gmtime_r(&tt, &tm);
    char buf[64];
    std::snprintf(
        buf, sizeof buf, "%04d-%02d-%02d %02d:%02d:%02d %s", tm.tm_year + 1900, tm.tm_mon + 1,
        tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
        std::vector<const char*>{"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"}[tm.tm_wday]);
    return buf;
}

// The next fire time after `from`, shown with its weekday, or "never".
std::string next(const char* expr, const char* from) {
    const auto t = CronSchedule::parse(expr).next_after(at(from));
    return t ? show(*t) : "never";
}

// The next `count` fire times after `from`.
std::vector<std::string> fires(const char* expr, const char* from, int count) {
    const CronSchedule s = CronSchedule::parse(expr);
    std::vector<std::string> out;
    std::int64_t t = at(from);
    for (int i = 0; i < count; i++) {
        const auto n = s.next_after(t);
        if (!n) break;
        out.push_back(show(*n));
        t = *n;
    }
    return out;
}

std::string describe(const char* expr) {
    return CronSchedule::parse(expr).describe();
}

struct Failure {
    std::string sqlstate, message, detail, hint;
};

Failure failure_of(const std::string& expr) {
    try {
        CronSchedule::parse(expr);
    } catch (const Error& e) {
        return {e.sqlstate(), e.what(), e.detail(), e.hint()};
    }
    return {"", "(no error)", "", ""};
}

}  // namespace

// ---- syntax

TEST(CronSyntax, EveryMinute) {
    EXPECT_EQ(describe("* * * * *"), "* * * * *");
    EXPECT_EQ(next("* * * * *", "2024-03-15 10:07:30"), "2024-03-15 10:08:00 Fri");
}

TEST(CronSyntax, SingleValues) {
    EXPECT_EQ(describe("5 4 3 2 1"), "5 4 3 2 1");
    EXPECT_EQ(describe("05 04 03 02 01"), "5 4 3 2 1");  // leading zeros, as Vixie reads them
    EXPECT_EQ(describe("59 23 31 12 6"), "59 23 31 12 6");
    EXPECT_EQ(describe("0 0 1 1 0"), "0 0 1 1 0");
}

TEST(CronSyntax, Ranges) {
    EXPECT_EQ(describe("10-20 9-17 1-15 3-5 1-5"), "10-20 9-17 1-15 3-5 1-5");
    EXPECT_EQ(describe("7-7 * * * *"), "7 * * * *");
    EXPECT_EQ(describe("0-59 0-23 * 1-12 *"), "* * * * *");
}

TEST(CronSyntax, Steps) {
    EXPECT_EQ(describe("*/15 * * * *"), "*/15 * * * *");
    EXPECT_EQ(describe("*/1 * * * *"), "* * * * *");
    EXPECT_EQ(describe("10-50/20 * * * *"), "10-50/20 * * * *");
    EXPECT_EQ(describe("10-59/20 * * * *"), "10-50/20 * * * *");  // stops at the last fitting value
    EXPECT_EQ(describe("5/20 * * * *"), "5-45/20 * * * *");       // a/n: from a to the end
    EXPECT_EQ(describe("0 */6 * * *"), "0 */6 * * *");
    EXPECT_EQ(describe("0 0 * */3 *"), "0 0 * */3 *");
    EXPECT_EQ(describe("*/60 * * * *"), "0 * * * *");
    EXPECT_EQ(fires("*/20 * * * *", "2024-03-15 10:07", 4),
              (std::vector<std::string>{"2024-03-15 10:20:00 Fri", "2024-03-15 10:40:00 Fri",
                                        "2024-03-15 11:00:00 Fri", "2024-03-15 11:20:00 Fri"}));
    EXPECT_EQ(fires("5/20 * * * *", "2024-03-15 10:07", 4),
              (std::vector<std::string>{"2024-03-15 10:25:00 Fri", "2024-03-15 10:45:00 Fri",
                                        "2024-03-15 11:05:00 Fri", "2024-03-15 11:25:00 Fri"}));
}

TEST(CronSyntax, Lists) {
    EXPECT_EQ(describe("1,3-5,7 * * * *"), "1,3-5,7 * * * *");
    EXPECT_EQ(describe("30,0 * * * *"), "*/30 * * * *");
    EXPECT_EQ(describe("0 8,12,18 * * *"), "0 8,12,18 * * *");
    EXPECT_EQ(describe("0 0 1,15 * *"), "0 0 1,15 * *");
    EXPECT_EQ(describe("0-10/5,30,50-55 * * * *"), "0,5,10,30,50-55 * * * *");
    EXPECT_EQ(describe("1,1,1 * * * *"), "1 * * * *");
}

TEST(CronSyntax, MonthNames) {
    EXPECT_EQ(describe("0 0 1 JAN *"), "0 0 1 1 *");
    EXPECT_EQ(describe("0 0 1 dec *"), "0 0 1 12 *");
    EXPECT_EQ(describe("0 0 1 Mar-May *"), "0 0 1 3-5 *");
    EXPECT_EQ(describe("0 0 1 jan,APR,jul,Oct *"), "0 0 1 */3 *");
    EXPECT_EQ(describe("0 0 1 JAN-DEC/2 *"), "0 0 1 */2 *");
    EXPECT_EQ(describe("0 0 1 feb/4 *"), "0 0 1 2-10/4 *");
    const char* names[] = {"JAN", "FEB", "MAR", "APR", "MAY", "JUN",
                           "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"};
    for (int m = 1; m <= 12; m++)
        EXPECT_EQ(describe(("0 0 1 " + std::string(names[m - 1]) + " *").c_str()),
                  "0 0 1 " + std::to_string(m) + " *");
}

TEST(CronSyntax, DayNames) {
    const char* names[] = {"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"};
    for (int d = 0; d < 7; d++)
        EXPECT_EQ(describe(("0 0 * * " + std::string(names[d])).c_str()),
                  "0 0 * * " + std::to_string(d));
    EXPECT_EQ(describe("0 9 * * mon-fri"), "0 9 * * 1-5");
    EXPECT_EQ(describe("0 9 * * Sat,sUn"), "0 9 * * 0,6");
    EXPECT_EQ(describe("0 9 * * MON-SAT/2"), "0 9 * * 1-5/2");
}

TEST(CronSyntax, SundayIsZeroAndSeven) {
    EXPECT_EQ(describe("0 0 * * 7"), "0 0 * * 0");
    EXPECT_EQ(describe("0 0 * * 0,7"), "0 0 * * 0");
    EXPECT_EQ(describe("0 0 * * 5-7"), "0 0 * * 0,5,6");
    EXPECT_EQ(describe("0 0 * * 0-7"), "0 0 * * 0-6");  // restricted, though every day
    EXPECT_EQ(describe("0 0 * * 1-7"), "0 0 * * 0-6");
    for (const char* sunday : {"0", "7", "SUN", "sun"}) {
        const std::string expr = std::string("30 6 * * ") + sunday;
        EXPECT_EQ(fires(expr.c_str(), "2024-03-15 10:00", 2),
                  (std::vector<std::string>{"2024-03-17 06:30:00 Sun", "2024-03-24 06:30:00 Sun"}))
            << expr;
    }
}

TEST(CronSyntax, WhitespaceBetweenFields) {
    EXPECT_EQ(describe("  0\t12  *   * \t MON  "), "0 12 * * 1");
    EXPECT_EQ(describe("\n*/5 * * * *\n"), "*/5 * * * *");
}

TEST(CronSyntax, Shortcuts) {
    EXPECT_EQ(describe("@yearly"), "0 0 1 1 *");
    EXPECT_EQ(describe("@annually"), "0 0 1 1 *");
    EXPECT_EQ(describe("@monthly"), "0 0 1 * *");
    EXPECT_EQ(describe("@weekly"), "0 0 * * 0");
    EXPECT_EQ(describe("@daily"), "0 0 * * *");
    EXPECT_EQ(describe("@midnight"), "0 0 * * *");
    EXPECT_EQ(describe("@hourly"), "0 * * * *");
    EXPECT_EQ(describe("@Daily"), "0 0 * * *");
    EXPECT_EQ(describe("  @HOURLY "), "0 * * * *");
    EXPECT_EQ(next("@yearly", "2024-06-01 00:00"), "2025-01-01 00:00:00 Wed");
    EXPECT_EQ(next("@monthly", "2024-01-31 12:00"), "2024-02-01 00:00:00 Thu");
    EXPECT_EQ(next("@weekly", "2024-03-15 10:00"), "2024-03-17 00:00:00 Sun");
    EXPECT_EQ(next("@daily", "2024-03-15 10:00"), "2024-03-16 00:00:00 Sat");
    EXPECT_EQ(next("@midnight", "2024-03-15 00:00"), "2024-03-16 00:00:00 Sat");
    EXPECT_EQ(next("@hourly", "2024-03-15 10:00"), "2024-03-15 11:00:00 Fri");
}

// Canonical text parses back to the same schedule, star flags included.
TEST(CronSyntax, DescribeRoundTrips) {
    const char* exprs[] = {
        "* * * * *",        "*/7 */5 */3 */2 */2", "1-59/2 1-23/3 2-30/4 2-12/5 1-6/2",
        "0 0 13 * FRI",     "0 0 */2 * MON",       "0 0 1-31 * MON",
        "0 0 */2,10 * */3", "0 0 * * */7",         "0 0 * * */8",
        "0 0 */31 1 MON",   "0 0 30 2 *",          "0,1,2,5,6,7,30 0,1,3 4,5,8,9 1,2,12 0,6",
        "@weekly",          "0 0 * * 0-7",         "0 0 */5 * 1-7",
    };
    for (const char* expr : exprs) {
        const CronSchedule a = CronSchedule::parse(expr);
        const CronSchedule b = CronSchedule::parse(a.describe());
        EXPECT_EQ(b.describe(), a.describe()) << expr;
        std::int64_t ta = at("2023-12-30 22:00"), tb = ta;
        for (int i = 0; i < 50; i++) {
            const auto na = a.next_after(ta), nb = b.next_after(tb);
            ASSERT_EQ(na.has_value(), nb.has_value()) << expr;
            if (!na) break;
            ASSERT_EQ(*na, *nb) << expr << " -> " << a.describe();
            ta = *na;
            tb = *nb;
        }
    }
    EXPECT_EQ(describe("0 0 1-31 * MON"), "0 0 1-31 * 1");
    EXPECT_EQ(describe("0 0 */2,10 * */3"), "0 0 */2,10 * */3");
    EXPECT_EQ(describe("0 0 * * */7"), "0 0 * * */7");
}

// ---- errors

TEST(CronErrors, MessageNamesTheExpressionTheFieldAndTheValue) {
    const Failure f = failure_of("61 * * * *");
    EXPECT_EQ(f.sqlstate, "22023");
    EXPECT_EQ(f.message, "invalid cron expression \"61 * * * *\": minute 61 is out of range 0-59");
    EXPECT_EQ(f.detail, "The minute field takes 0-59.");
}

TEST(CronErrors, OutOfRangeValues) {
    const struct {
        const char* expr;
        const char* message;
    } cases[] = {
        {"60 * * * *", "minute 60 is out of range 0-59"},
        {"0-60 * * * *", "minute 60 is out of range 0-59"},
        {"* 24 * * *", "hour 24 is out of range 0-23"},
        {"* 1,2,99 * * *", "hour 99 is out of range 0-23"},
        {"* * 0 * *", "day-of-month 0 is out of range 1-31"},
        {"* * 32 * *", "day-of-month 32 is out of range 1-31"},
        {"* * * 0 *", "month 0 is out of range 1-12"},
        {"* * * 13 *", "month 13 is out of range 1-12"},
        {"* * * * 8", "day-of-week 8 is out of range 0-7"},
        {"99999999999999999999 * * * *", "minute 99999999999999999999 is out of range 0-59"},
        {"* * * * 00008", "day-of-week 00008 is out of range 0-7"},
    };
    for (const auto& c : cases) {
        const Failure f = failure_of(c.expr);
        EXPECT_EQ(f.sqlstate, "22023") << c.expr;
        EXPECT_EQ(f.message,
                  "invalid cron expression \"" + std::string(c.expr) + "\": " + c.message);
        EXPECT_FALSE(f.detail.empty()) << c.expr;
    }
}

TEST(CronErrors, ReversedRanges) {
    const struct {
        const char* expr;
        const char* message;
        const char* hint;
    } cases[] = {
        {"5-1 * * * *", "minute range 5-1 is reversed", "\"5-59,0-1\""},
        {"0 22-2 * * *", "hour range 22-2 is reversed", "\"22-23,0-2\""},
        {"0 0 31-1 * *", "day-of-month range 31-1 is reversed", "\"31-31,1-1\""},
        {"0 0 * NOV-FEB *", "month range NOV-FEB is reversed", "\"11-12,1-2\""},
        {"0 0 * * FRI-MON", "day-of-week range FRI-MON is reversed", "\"5-6,0-1\""},
        {"0 0 * * FRI-SUN", "day-of-week range FRI-SUN is reversed", "\"5-7\""},
        {"0 0 * * 7-2", "day-of-week range 7-2 is reversed", "\"0-2\""},
        {"10-5/2 * * * *", "minute range 10-5 is reversed", "\"10-59,0-5\""},
    };
    for (const auto& c : cases) {
        const Failure f = failure_of(c.expr);
        EXPECT_EQ(f.sqlstate, "22023") << c.expr;
        EXPECT_EQ(f.message,
                  "invalid cron expression \"" + std::string(c.expr) + "\": " + c.message);
        EXPECT_NE(f.hint.find(c.hint), std::string::npos) << c.expr << ": " << f.hint;
    }
}

TEST(CronErrors, BadSteps) {
    const struct {
        const char* expr;
        const char* message;
    } cases[] = {
        {"*/0 * * * *", "minute step 0 is out of range 1-60"},
        {"* */0 * * *", "hour step 0 is out of range 1-24"},
        {"* * 1-10/0 * *", "day-of-month step 0 is out of range 1-31"},
        {"* * * */13 *", "month step 13 is out of range 1-12"},
        {"* * * * */9", "day-of-week step 9 is out of range 1-8"},
        {"*/61 * * * *", "minute step 61 is out of range 1-60"},
        {"*/ * * * *", "minute field \"*/\" is missing a step after \"/\""},
        {"*/x * * * *", "minute step \"x\" is not a number"},
        {"*/-1 * * * *", "minute step \"-1\" is not a number"},
        {"* * * */FEB *", "month step \"FEB\" is not a number"},
        {"*/2/3 * * * *", "minute field \"*/2/3\" has more than one step"},
    };
    for (const auto& c : cases) {
        const Failure f = failure_of(c.expr);
        EXPECT_EQ(f.sqlstate, "22023") << c.expr;
        EXPECT_EQ(f.message,
                  "invalid cron expression \"" + std::string(c.expr) + "\": " + c.message);
    }
}

TEST(CronErrors, EmptyAndMissingParts) {
    const struct {
        const char* expr;
        const char* message;
    } cases[] = {
        {"1,,2 * * * *", "minute field has an empty list element"},
        {"* 1, * * *", "hour field has an empty list element"},
        {"* * ,1 * *", "day-of-month field has an empty list element"},
        {"* * * , *", "month field has an empty list element"},
        {"-5 * * * *", "minute field \"-5\" is missing a value"},
        {"* 5- * * *", "hour field \"5-\" is missing a value"},
        {"* * * * -", "day-of-week field \"-\" is missing a value"},
        {"* * /5 * *", "day-of-month field \"/5\" is missing a value"},
        {"1-2-3 * * * *", "minute range \"1-2-3\" has more than two bounds"},
        {"*-5 * * * *", "minute field \"*-5\" is not valid"},
        {"** * * * *", "minute field \"**\" is not valid"},
    };
    for (const auto& c : cases) {
        const Failure f = failure_of(c.expr);
        EXPECT_EQ(f.sqlstate, "22023") << c.expr;
        EXPECT_EQ(f.message,
                  "invalid cron expression \"" + std::string(c.expr) + "\": " + c.message);
        EXPECT_FALSE(f.hint.empty()) << c.expr;
    }
}

TEST(CronErrors, Garbage) {
    const struct {
        const char* expr;
        const char* message;
    } cases[] = {
        {"abc * * * *", "minute \"abc\" is not a number"},
        {"JAN * * * *", "minute \"JAN\" is not a number"},
        {"* MON * * *", "hour \"MON\" is not a number"},
        {"* * L * *", "day-of-month \"L\" is not a number"},
        {"* * ? * *", "day-of-month \"?\" is not a number"},
        {"* * * MON *", "month \"MON\" is not a number or a month name"},
        {"* * * JANUARY *", "month \"JANUARY\" is not a number or a month name"},
        {"* * * * JAN", "day-of-week \"JAN\" is not a number or a day name"},
        {"* * * * MONDAY", "day-of-week \"MONDAY\" is not a number or a day name"},
        {"* * * * 5#3", "day-of-week \"5#3\" is not a number or a day name"},
        {"1.5 * * * *", "minute \"1.5\" is not a number"},
        {"+5 * * * *", "minute \"+5\" is not a number"},
        {"0x1 * * * *", "minute \"0x1\" is not a number"},
        {"\xc3\xa9 * * * *", "minute \"\xc3\xa9\" is not a number"},
    };
    for (const auto& c : cases) {
        const Failure f = failure_of(c.expr);
        EXPECT_EQ(f.sqlstate, "22023") << c.expr;
        EXPECT_EQ(f.message,
                  "invalid cron expression \"" + std::string(c.expr) + "\": " + c.message);
        EXPECT_FALSE(f.detail.empty()) << c.expr;
    }
}

TEST(CronErrors, WrongFieldCount) {
    const struct {
        const char* expr;
        const char* message;
    } cases[] = {
        {"*", "expected 5 fields, found 1"},
        {"* * * *", "expected 5 fields, found 4"},
        {"0 0 * * * 2024", "expected 5 fields, found 6"},
        {"0 0 0 * * * *", "expected 5 fields, found 7"},
    };
    for (const auto& c : cases) {
        const Failure f = failure_of(c.expr);
        EXPECT_EQ(f.sqlstate, "22023") << c.expr;
        EXPECT_EQ(f.message,
                  "invalid cron expression \"" + std::string(c.expr) + "\": " + c.message);
        EXPECT_NE(f.detail.find("minute, hour, day-of-month, month and day-of-week"),
                  std::string::npos);
    }
    EXPECT_NE(failure_of("0 0 * * * 2024").hint.find("Seconds and years"), std::string::npos);
}

TEST(CronErrors, EmptyExpression) {
    for (const char* expr : {"", " ", "\t\n"}) {
        const Failure f = failure_of(expr);
        EXPECT_EQ(f.sqlstate, "22023");
        EXPECT_EQ(f.message, "cron expression must not be empty");
    }
}

TEST(CronErrors, TooLong) {
    std::string expr = "0";
    while (expr.size() <= 1000) expr += ",0";
    expr += " * * * *";
    const Failure f = failure_of(expr);
    EXPECT_EQ(f.sqlstate, "54000");
    EXPECT_EQ(f.message, "cron expression \"" + expr.substr(0, 32) + "...\" is too long");
    // Every minute listed, spelled out, is still accepted.
    std::string all;
    for (int m = 0; m < 60; m++) all += (m ? "," : "") + std::to_string(m);
    EXPECT_EQ(describe((all + " * * * *").c_str()), "* * * * *");
}

TEST(CronErrors, Shortcuts) {
    Failure f = failure_of("@reboot");
    EXPECT_EQ(f.sqlstate, "22023");
    EXPECT_EQ(f.message, "invalid cron expression \"@reboot\": @reboot is not supported");
    EXPECT_NE(f.hint.find("@hourly"), std::string::npos);
    EXPECT_EQ(failure_of("@REBOOT").message,
              "invalid cron expression \"@REBOOT\": @reboot is not supported");

    f = failure_of("@every 5m");
    EXPECT_EQ(f.sqlstate, "22023");
    EXPECT_EQ(f.message, "invalid cron expression \"@every 5m\": unknown shortcut \"@every\"");
    EXPECT_NE(f.hint.find("@yearly"), std::string::npos);
    EXPECT_EQ(failure_of("@").message, "invalid cron expression \"@\": unknown shortcut \"@\"");
    EXPECT_EQ(failure_of("@dailyy").message,
              "invalid cron expression \"@dailyy\": unknown shortcut \"@dailyy\"");

    f = failure_of("@daily 0 0 * * *");
    EXPECT_EQ(f.sqlstate, "22023");
    EXPECT_EQ(f.message, "invalid cron expression \"@daily 0 0 * * *\": nothing may follow @daily");
    EXPECT_EQ(failure_of("* @daily * * *").message,
              "invalid cron expression \"* @daily * * *\": hour \"@daily\" is not a number");
}

// ---- next fire times

TEST(CronNext, IsStrictlyAfterAndAtSecondZero) {
    EXPECT_EQ(next("*/15 * * * *", "2024-03-15 10:07:30"), "2024-03-15 10:15:00 Fri");
    EXPECT_EQ(next("*/15 * * * *", "2024-03-15 10:14:59"), "2024-03-15 10:15:00 Fri");
    EXPECT_EQ(next("*/15 * * * *", "2024-03-15 10:15:00"), "2024-03-15 10:30:00 Fri");
    EXPECT_EQ(next("*/15 * * * *", "2024-03-15 10:15:01"), "2024-03-15 10:30:00 Fri");
    const CronSchedule s = CronSchedule::parse("* * * * *");
    const std::int64_t t = at("2024-03-15 10:07:00");
    EXPECT_EQ(*s.next_after(t), t + 60);
    EXPECT_EQ(*s.next_after(t + 59), t + 60);
    EXPECT_EQ(*s.next_after(t - 1), t);
}

TEST(CronNext, CrossesHourDayMonthAndYear) {
    EXPECT_EQ(next("0 * * * *", "2024-03-15 10:59:59"), "2024-03-15 11:00:00 Fri");
    EXPECT_EQ(next("45 * * * *", "2024-03-15 10:46"), "2024-03-15 11:45:00 Fri");
    EXPECT_EQ(next("30 9 * * *", "2024-03-15 09:31"), "2024-03-16 09:30:00 Sat");
    EXPECT_EQ(next("0 0 * * *", "2024-03-15 23:59:59"), "2024-03-16 00:00:00 Sat");
    EXPECT_EQ(next("15 3,20 * * *", "2024-03-15 20:15"), "2024-03-16 03:15:00 Sat");
    EXPECT_EQ(next("0 0 1 * *", "2024-01-31 12:00"), "2024-02-01 00:00:00 Thu");
    EXPECT_EQ(next("0 0 1 * *", "2024-12-15 00:00"), "2025-01-01 00:00:00 Wed");
    EXPECT_EQ(next("0 0 1 1 *", "2024-12-31 23:59:59"), "2025-01-01 00:00:00 Wed");
    EXPECT_EQ(next("59 23 31 12 *", "2024-12-31 23:59"), "2025-12-31 23:59:00 Wed");
    EXPECT_EQ(next("0 12 * 6 *", "2024-06-30 12:00"), "2025-06-01 12:00:00 Sun");
    EXPECT_EQ(next("0 0 15 3,9 *", "2024-03-15 00:00"), "2024-09-15 00:00:00 Sun");
    EXPECT_EQ(fires("0 9-17/4 * * *", "2024-03-15 10:00", 4),
              (std::vector<std::string>{"2024-03-15 13:00:00 Fri", "2024-03-15 17:00:00 Fri",
                                        "2024-03-16 09:00:00 Sat", "2024-03-16 13:00:00 Sat"}));
}

TEST(CronNext, WorkingDays) {
    EXPECT_EQ(fires("0 9 * * MON-FRI", "2024-03-14 10:00", 3),
              (std::vector<std::string>{"2024-03-15 09:00:00 Fri", "2024-03-18 09:00:00 Mon",
                                        "2024-03-19 09:00:00 Tue"}));
    EXPECT_EQ(fires("*/30 22-23 * * SAT,SUN", "2024-03-15 10:00", 5),
              (std::vector<std::string>{"2024-03-16 22:00:00 Sat", "2024-03-16 22:30:00 Sat",
                                        "2024-03-16 23:00:00 Sat", "2024-03-16 23:30:00 Sat",
                                        "2024-03-17 22:00:00 Sun"}));
}

TEST(CronNext, MonthEnd) {
    // The 31st skips the months that do not have one.
    EXPECT_EQ(fires("0 0 31 * *", "2024-01-31 00:00", 4),
              (std::vector<std::string>{"2024-03-31 00:00:00 Sun", "2024-05-31 00:00:00 Fri",
                                        "2024-07-31 00:00:00 Wed", "2024-08-31 00:00:00 Sat"}));
    EXPECT_EQ(next("0 0 30 * *", "2024-01-30 00:00"), "2024-03-30 00:00:00 Sat");
    EXPECT_EQ(next("0 0 29 * *", "2023-01-29 00:00"), "2023-03-29 00:00:00 Wed");
    EXPECT_EQ(next("0 0 29 * *", "2024-01-29 00:00"), "2024-02-29 00:00:00 Thu");
    EXPECT_EQ(fires("0 0 28-31 2 *", "2023-01-01 00:00", 3),
              (std::vector<std::string>{"2023-02-28 00:00:00 Tue", "2024-02-28 00:00:00 Wed",
                                        "2024-02-29 00:00:00 Thu"}));
    EXPECT_EQ(next("0 0 31 4-6 *", "2024-01-01 00:00"), "2024-05-31 00:00:00 Fri");
}

TEST(CronNext, LeapYears) {
    EXPECT_EQ(next("0 12 29 2 *", "2023-06-01 00:00"), "2024-02-29 12:00:00 Thu");
    EXPECT_EQ(next("0 12 29 2 *", "2024-02-29 12:00"), "2028-02-29 12:00:00 Tue");
    EXPECT_EQ(next("0 12 29 2 *", "1999-01-01 00:00"), "2000-02-29 12:00:00 Tue");  // 400 rule
    // 2100 is not a leap year: eight years between fires, beyond a five-year horizon.
    EXPECT_EQ(next("0 12 29 2 *", "2096-03-01 00:00"), "2104-02-29 12:00:00 Fri");
    EXPECT_EQ(fires("0 0 * 2 *", "2100-02-27 00:00", 3),
              (std::vector<std::string>{"2100-02-28 00:00:00 Sun", "2101-02-01 00:00:00 Tue",
                                        "2101-02-02 00:00:00 Wed"}));
    EXPECT_EQ(next("0 0 1 3 *", "2024-02-28 12:00"), "2024-03-01 00:00:00 Fri");
    EXPECT_EQ(next("0 0 * * *", "2024-02-28 12:00"), "2024-02-29 00:00:00 Thu");
    EXPECT_EQ(next("0 0 * * *", "2023-02-28 12:00"), "2023-03-01 00:00:00 Wed");
}

TEST(CronNext, BothDayFieldsRestrictedMeansEither) {
    // Every 13th and every Friday.
    EXPECT_EQ(fires("0 0 13 * FRI", "2024-09-01 00:00", 6),
              (std::vector<std::string>{"2024-09-06 00:00:00 Fri", "2024-09-13 00:00:00 Fri",
                                        "2024-09-20 00:00:00 Fri", "2024-09-27 00:00:00 Fri",
                                        "2024-10-04 00:00:00 Fri", "2024-10-11 00:00:00 Fri"}));
    EXPECT_EQ(fires("0 0 13 * FRI", "2024-10-11 00:00", 2),
              (std::vector<std::string>{"2024-10-13 00:00:00 Sun", "2024-10-18 00:00:00 Fri"}));
    // The 1st, or Mondays: "1-31" is restricted, so with a day of week it is every day.
    EXPECT_EQ(fires("0 0 1 * 1", "2024-03-28 00:00", 3),
              (std::vector<std::string>{"2024-04-01 00:00:00 Mon", "2024-04-08 00:00:00 Mon",
                                        "2024-04-15 00:00:00 Mon"}));
    EXPECT_EQ(fires("0 0 1-31 * MON", "2024-03-28 00:00", 2),
              (std::vector<std::string>{"2024-03-29 00:00:00 Fri", "2024-03-30 00:00:00 Sat"}));
    // February 30 never comes, but Mondays in February do.
    EXPECT_EQ(next("0 0 30 2 MON", "2024-03-01 00:00"), "2025-02-03 00:00:00 Mon");
}

TEST(CronNext, AStarredDayFieldMeansBoth) {
    // Vixie cron: a field starting with '*' is unrestricted, so the day must
    // match both fields -- odd days that are Mondays.
    EXPECT_EQ(fires("0 0 */2 * MON", "2024-04-01 00:00", 3),
              (std::vector<std::string>{"2024-04-15 00:00:00 Mon", "2024-04-29 00:00:00 Mon",
                                        "2024-05-13 00:00:00 Mon"}));
    EXPECT_EQ(next("0 0 13 * */7", "2024-09-01 00:00"), "2024-10-13 00:00:00 Sun");
    EXPECT_EQ(next("0 0 * * MON", "2024-09-01 00:00"), "2024-09-02 00:00:00 Mon");
    EXPECT_EQ(next("0 0 13 * *", "2024-09-01 00:00"), "2024-09-13 00:00:00 Fri");
    // January 1st on a Monday: 2035, then 2046, eleven years later.
    EXPECT_EQ(next("0 0 */31 1 MON", "2035-01-02 00:00"), "2046-01-01 00:00:00 Mon");
    // February 29 on a Sunday: 2004, 2032.
    EXPECT_EQ(next("0 0 29 2 */7", "2004-03-01 00:00"), "2032-02-29 00:00:00 Sun");
}

TEST(CronNext, NeverFires) {
    for (const char* expr : {"0 0 30 2 *", "0 0 31 2 *", "0 0 30,31 2 *", "0 0 31 4,6,9,11 *",
                             "0 0 31 APR *", "0 0 31 2 */2", "* * 30-31 feb *"}) {
        const CronSchedule s = CronSchedule::parse(expr);
        EXPECT_FALSE(s.can_fire()) << expr;
        EXPECT_EQ(s.next_after(at("2024-01-01 00:00")), std::nullopt) << expr;
        EXPECT_EQ(s.next_after(0), std::nullopt) << expr;
    }
    for (const char* expr : {"0 0 29 2 *", "0 0 30 1-2 *", "0 0 31 2,3 *", "0 0 30 2 0",
                             "0 0 */30 2 *", "0 0 */31 2 MON"}) {
        const CronSchedule s = CronSchedule::parse(expr);
        EXPECT_TRUE(s.can_fire()) << expr;
        EXPECT_NE(s.next_after(at("2024-03-01 00:00")), std::nullopt) << expr;
    }
}

TEST(CronNext, BeforeTheEpochAndAtTheLimits) {
    EXPECT_EQ(*CronSchedule::parse("0 0 1 1 *").next_after(at("1969-06-01 00:00")), 0);
    EXPECT_EQ(*CronSchedule::parse("* * * * *").next_after(-1), 0);
    EXPECT_EQ(*CronSchedule::parse("* * * * *").next_after(-60), 0);
    EXPECT_EQ(*CronSchedule::parse("* * * * *").next_after(-61), -60);
    EXPECT_EQ(next("0 12 29 2 *", "1896-03-01 00:00"), "1904-02-29 12:00:00 Mon");  // 1900
    EXPECT_EQ(next("0 0 * * SUN", "1969-12-31 00:00"), "1970-01-04 00:00:00 Sun");
    const CronSchedule s = CronSchedule::parse("* * * * *");
    EXPECT_EQ(s.next_after(std::numeric_limits<std::int64_t>::max()), std::nullopt);
    EXPECT_EQ(s.next_after(std::numeric_limits<std::int64_t>::min()), std::nullopt);
    // Far, but well inside the range: PostgreSQL's timestamps end in 294276.
    const std::int64_t y200000 = 6249223180800;  // 200000-01-01 00:00:00 UTC
    EXPECT_EQ(*CronSchedule::parse("0 0 1 1 *").next_after(y200000 - 1), y200000);
    EXPECT_EQ(next("0 0 1 1 *", "1600-06-01 00:00"), "1601-01-01 00:00:00 Mon");
    EXPECT_EQ(next("0 0 29 2 *", "1599-01-01 00:00"), "1600-02-29 00:00:00 Tue");
}

TEST(CronNext, ManyFiresInOrder) {
    // A busy schedule: a year of fires, each strictly later, all matching.
    const CronSchedule s = CronSchedule::parse("*/10 8-18 * * MON-FRI");
    std::int64_t t = at("2024-01-01 00:00");
    int count = 0;
    while (true) {
        const auto n = s.next_after(t);
        ASSERT_TRUE(n);
        ASSERT_GT(*n, t);
        if (*n >= at("2025-01-01 00:00")) break;
        ASSERT_TRUE(s.matches(*n)) << show(*n);
        t = *n;
        count++;
    }
    // 262 working days in 2024, 11 hours of 6 fires each.
    EXPECT_EQ(count, 262 * 66);
}

// ---- matches, against the C library's calendar

TEST(CronMatches, AgreesWithGmtimeOverCenturies) {
    // Every day from 1895 to 2105 (through 1900, 2000 and 2100): the schedule
    // for that date and weekday matches it, and the neighbouring ones do not.
    for (std::int64_t t = at("1895-01-01 00:00"); t < at("2105-01-01 00:00"); t += 86400) {
        const std::time_t tt = static_cast<std::time_t>(t);
        std::tm tm{};
        gmtime_r(&tt, &tm);
        const std::string date =
            "0 0 " + std::to_string(tm.tm_mday) + " " + std::to_string(tm.tm_mon + 1) + " *";
        const std::string weekday = "0 0 * * " + std::to_string(tm.tm_wday);
        const std::string other_weekday = "0 0 * * " + std::to_string((tm.tm_wday + 1) % 7);
        ASSERT_TRUE(CronSchedule::parse(date).matches(t)) << show(t);
        ASSERT_TRUE(CronSchedule::parse(weekday).matches(t)) << show(t);
        ASSERT_FALSE(CronSchedule::parse(other_weekday).matches(t)) << show(t);
        ASSERT_FALSE(CronSchedule::parse(date).matches(t + 60)) << show(t);
    }
}

TEST(CronMatches, MinuteAndHour) {
    const CronSchedule s = CronSchedule::parse("15 10 * * *");
    EXPECT_TRUE(s.matches(at("2024-03-15 10:15:00")));
    EXPECT_TRUE(s.matches(at("2024-03-15 10:15:59")));
    EXPECT_FALSE(s.matches(at("2024-03-15 10:16:00")));
    EXPECT_FALSE(s.matches(at("2024-03-15 11:15:00")));
    EXPECT_TRUE(CronSchedule::parse("* * * * *").matches(-1));
}

// ---- next_after against a minute-by-minute scan

TEST(CronNext, AgreesWithAMinuteByMinuteScan) {
    const char* exprs[] = {
        "* * * * *",     "*/7 * * * *",   "59 23 * * *",     "0 0 1 * *",         "0 0 13 * FRI",
        "0 0 */2 * MON", "30 4 1,15 * 5", "0 12 * * 0,6",    "5/17 3-21/6 * * *", "0 0 28-31 * *",
        "0 0 * * 1-5",   "1 1 29 2 *",    "0 0 */3 */2 */3", "@hourly",           "@weekly",
    };
    const char* starts[] = {"2023-12-31 23:59:30", "2024-02-27 13:00", "2024-06-30 23:58",
                            "2023-02-25 00:00", "2024-02-28 23:59:59"};
    for (const char* expr : exprs) {
        const CronSchedule s = CronSchedule::parse(expr);
        for (const char* start : starts) {
            const std::int64_t from = at(start);
            std::optional<std::int64_t> scanned;
            // Ten days, minute by minute, from the next whole minute.
            for (std::int64_t t = (from / 60 + 1) * 60; t < from + 10 * 86400; t += 60)
                if (s.matches(t)) {
                    scanned = t;
                    break;
                }
            const auto fast = s.next_after(from);
            if (scanned)
                EXPECT_EQ(fast ? show(*fast) : "never", show(*scanned))
                    << expr << " from " << start;
            else
                EXPECT_TRUE(!fast || *fast >= from + 10 * 86400) << expr << " from " << start;
        }
    }
}
