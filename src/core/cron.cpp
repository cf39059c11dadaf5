#include "cron.hpp"

#include <array>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "error.hpp"

namespace wf::core {

namespace {

constexpr std::size_t max_expression_bytes = 1000;
constexpr std::int64_t time_limit = std::int64_t{1} << 62;  // keeps the arithmetic in int64

// ---- calendar (proleptic Gregorian, days since 1970-01-01; H. Hinnant's algorithms)

std::int64_t floor_div(std::int64_t a, std::int64_t b) {
    std::int64_t q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) q--;
    return q;
}

struct Civil {
    std::int64_t year;
    int month;  // 1-12
    int day;    // 1-31
};

std::int64_t days_from_civil(std::int64_t y, int m, int d) {
    y -= m <= 2;
    const std::int64_t era = floor_div(y, 400);
    const std::int64_t yoe = y - era * 400;                                    // [0, 399]
    const std::int64_t doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;  // [0, 365]
    const std::int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;            // [0, 146096]
    return era * 146097 + doe - 719468;
}

Civil civil_from_days(std::int64_t z) {
    z += 719468;
    const std::int64_t era = floor_div(z, 146097);
    const std::int64_t doe = z - era * 146097;
    const std::int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    const std::int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    const std::int64_t mp = (5 * doy + 2) / 153;
    const int d = static_cast<int>(doy - (153 * mp + 2) / 5 + 1);
    const int m = static_cast<int>(mp < 10 ? mp + 3 : mp - 9);
    return {yoe + era * 400 + (m <= 2), m, d};
}

int weekday_from_days(std::int64_t z) {  // 0 = Sunday; 1970-01-01 was a Thursday
    return static_cast<int>(z - floor_div(z + 4, 7) * 7 + 4);
}

bool is_leap(std::int64_t y) {
    return y % 4 == 0 && (y % 100 != 0 || y % 400 == 0);
}

int days_in_month(std::int64_t y, int m) {
    static constexpr int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    return m == 2 && is_leap(y) ? 29 : days[m - 1];
}

// ---- bit sets of field values

bool has(std::uint64_t bits, int v) {
    return (bits >> v) & 1U;
}

// The smallest value >= from and <= to in `bits`, or -1.
int next_value(std::uint64_t bits, int from, int to) {
    for (int v = from; v <= to; v++)
        if (has(bits, v)) return v;
    return -1;
}

std::uint64_t range_bits(int lo, int hi) {
    std::uint64_t bits = 0;
    for (int v = lo; v <= hi; v++) bits |= std::uint64_t{1} << v;
    return bits;
}

// ---- fields

enum class Names { none, months, weekdays };

struct FieldSpec {
    const char* name;
    int min;
    int max;  // as written; day-of-week takes 7 for Sunday
    Names names;
    const char* accepts;  // errdetail for a bad value
};

constexpr FieldSpec minute_field{"minute", 0, 59, Names::none, "The minute field takes 0-59."};
constexpr FieldSpec hour_field{"hour", 0, 23, Names::none, "The hour field takes 0-23."};
constexpr FieldSpec dom_field{"day-of-month", 1, 31, Names::none,
                              "The day-of-month field takes 1-31."};
constexpr FieldSpec month_field{"month", 1, 12, Names::months,
                                "The month field takes 1-12 or JAN-DEC."};
constexpr FieldSpec dow_field{"day-of-week", 0, 7, Names::weekdays,
                              "The day-of-week field takes 0-7 (0 and 7 are both Sunday) or "
                              "SUN-SAT."};

constexpr std::array<const char*, 12> month_names = {"JAN", "FEB", "MAR", "APR", "MAY", "JUN",
                                                     "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"};
constexpr std::array<const char*, 7> weekday_names = {"SUN", "MON", "TUE", "WED",
                                                      "THU", "FRI", "SAT"};

const char* const syntax_hint =
    "A cron expression has five fields, minute hour day-of-month month day-of-week, "
    "each *, a value, a range a-b, a step */n or a-b/n, or a list of these, "
    "e.g. \"*/15 9-17 * * MON-FRI\".";
const char* const shortcut_hint =
    "The shortcuts are @yearly, @annually, @monthly, @weekly, @daily, @midnight and @hourly.";

bool is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}
bool is_digit(char c) {
    return c >= '0' && c <= '9';
}
char to_upper(char c) {
    return c >= 'a' && c <= 'z' ? static_cast<char>(c - 'a' + 'A') : c;
}

bool equals_ignoring_case(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); i++)
        if (to_upper(a[i]) != to_upper(b[i])) return false;
    return true;
}

bool all_digits(std::string_view s) {
    if (s.empty()) return false;
    for (char c : s)
        if (!is_digit(c)) return false;
    return true;
}

// A decimal number, or -1 when it has more digits than any field could use.
int to_number(std::string_view digits) {
    std::size_t i = 0;
    while (i + 1 < digits.size() && digits[i] == '0') i++;  // leading zeros, as in "05"
    digits.remove_prefix(i);
    if (digits.size() > 4) return -1;
    int n = 0;
    for (char c : digits) n = n * 10 + (c - '0');
    return n;
}

// What a reversed range lo-hi most likely meant, as a list that wraps around.
std::string wrapped(int lo, int hi, const FieldSpec& spec) {
    const auto range = [](int a, int b) { return std::to_string(a) + "-" + std::to_string(b); };
    if (spec.names == Names::weekdays) {
        if (lo == 7) return range(0, hi);  // Sunday onwards
        if (hi == 0) return range(lo, 7);  // up to Sunday
        return range(lo, 6) + "," + range(0, hi);
    }
    return range(lo, spec.max) + "," + range(spec.min, hi);
}

class Parser {
public:
    explicit Parser(std::string_view expr) : expr_(expr) {}

    [[noreturn]] void fail(const std::string& what, std::string detail = {},
                           std::string hint = {}) const {
        throw Error(sqlstate::invalid_parameter,
                    "invalid cron expression \"" + std::string(expr_) + "\": " + what,
                    std::move(detail), std::move(hint));
    }

    // The values a field selects; day-of-week 7 folds into 0.
    std::uint64_t field(std::string_view text, const FieldSpec& spec) const {
        std::uint64_t bits = 0;
        std::size_t start = 0;
        for (;;) {
            const std::size_t comma = text.find(',', start);
            const std::string_view element =
                text.substr(start, comma == std::string_view::npos ? comma : comma - start);
            bits |= this->element(element, spec);
            if (comma == std::string_view::npos) break;
            start = comma + 1;
        }
        if (spec.names == Names::weekdays && has(bits, 7))
            bits = (bits | std::uint64_t{1}) & ~(std::uint64_t{1} << 7);
        return bits;
    }

private:
    std::uint64_t element(std::string_view element, const FieldSpec& spec) const {
        const std::string name = spec.name;
        const std::string quoted = "\"" + std::string(element) + "\"";
        if (element.empty())
            fail(name + " field has an empty list element", {},
                 "Separate the values of a list with single commas, e.g. \"1,15,30\".");

        std::string_view base = element;
        std::optional<std::string_view> step_text;
        if (const std::size_t slash = element.find('/'); slash != std::string_view::npos) {
            base = element.substr(0, slash);
            step_text = element.substr(slash + 1);
            if (step_text->find('/') != std::string_view::npos)
                fail(name + " field " + quoted + " has more than one step", {}, syntax_hint);
        }

        int lo = spec.min;
        int hi = spec.max;
        if (base != "*") {
            if (!base.empty() && base[0] == '*')
                fail(name + " field " + quoted + " is not valid", {},
                     "\"*\" stands alone or takes a step, as in \"*/5\".");
            const std::size_t dash = base.find('-');
            if (dash == std::string_view::npos) {
                lo = value(base, spec, quoted);
                // "a/n" runs from a to the end of the field; a lone "a" is just a.
                hi = step_text ? spec.max : lo;
            } else {
                const std::string_view lo_text = base.substr(0, dash);
                const std::string_view hi_text = base.substr(dash + 1);
                if (hi_text.find('-') != std::string_view::npos)
                    fail(name + " range " + quoted + " has more than two bounds", {}, syntax_hint);
                lo = value(lo_text, spec, quoted);
                hi = value(hi_text, spec, quoted);
                if (lo > hi)
                    fail(name + " range " + std::string(base) + " is reversed",
                         "A range runs from its low bound to its high bound; it does not "
                         "wrap around.",
                         "Write it as a list, e.g. \"" + wrapped(lo, hi, spec) + "\".");
            }
        }

        int step = 1;
        if (step_text) {
            const int span = spec.max - spec.min + 1;
            if (step_text->empty())
                fail(name + " field " + quoted + " is missing a step after \"/\"", {}, syntax_hint);
            if (!all_digits(*step_text))
                fail(name + " step \"" + std::string(*step_text) + "\" is not a number", {},
                     syntax_hint);
            step = to_number(*step_text);
            if (step < 1 || step > span)
                fail(name + " step " + std::string(*step_text) + " is out of range 1-" +
                         std::to_string(span),
                     "A step is at least 1 and at most the " + std::to_string(span) +
                         " values of the " + name + " field.");
        }

        std::uint64_t bits = 0;
        for (int v = lo; v <= hi; v += step) bits |= std::uint64_t{1} << v;
        return bits;
    }

    int value(std::string_view text, const FieldSpec& spec, const std::string& element) const {
        const std::string name = spec.name;
        if (text.empty()) fail(name + " field " + element + " is missing a value", {}, syntax_hint);
        if (all_digits(text)) {
            const int n = to_number(text);
            if (n < spec.min || n > spec.max)
                fail(name + " " + std::string(text) + " is out of range " +
                         std::to_string(spec.min) + "-" + std::to_string(spec.max),
                     spec.accepts);
            return n;
        }
        if (spec.names == Names::months)
            for (std::size_t i = 0; i < month_names.size(); i++)
                if (equals_ignoring_case(text, month_names[i])) return static_cast<int>(i) + 1;
        if (spec.names == Names::weekdays)
            for (std::size_t i = 0; i < weekday_names.size(); i++)
                if (equals_ignoring_case(text, weekday_names[i])) return static_cast<int>(i);
        const std::string quoted = "\"" + std::string(text) + "\"";
        switch (spec.names) {
            case Names::months:
                fail(name + " " + quoted + " is not a number or a month name", spec.accepts);
            case Names::weekdays:
                fail(name + " " + quoted + " is not a number or a day name", spec.accepts);
            case Names::none:
                break;
        }
        fail(name + " " + quoted + " is not a number", spec.accepts);
    }

    std::string_view expr_;
};

// ---- canonical text

std::vector<int> values_of(std::uint64_t bits, int lo, int hi) {
    std::vector<int> values;
    for (int v = lo; v <= hi; v++)
        if (has(bits, v)) values.push_back(v);
    return values;
}

// `bits` as a list of values and runs; with `may_use_star`, "*" and "*/n"
// stand for the whole field and for steps from its start.
std::string compress(std::uint64_t bits, int lo, int hi, bool may_use_star) {
    const std::vector<int> v = values_of(bits, lo, hi);
    if (may_use_star && bits == range_bits(lo, hi)) return "*";
    if (v.size() >= 2) {
        const int step = v[1] - v[0];
        bool progression = step >= 2;
        for (std::size_t i = 2; progression && i < v.size(); i++)
            progression = v[i] - v[i - 1] == step;
        if (progression) {
            if (may_use_star && v.front() == lo && v.back() + step > hi)
                return "*/" + std::to_string(step);
            if (v.size() >= 3)
                return std::to_string(v.front()) + "-" + std::to_string(v.back()) + "/" +
                       std::to_string(step);
        }
    }
    std::string out;
    for (std::size_t i = 0; i < v.size();) {
        std::size_t j = i;
        while (j + 1 < v.size() && v[j + 1] == v[j] + 1) j++;
        if (!out.empty()) out += ",";
        if (j - i >= 2) {
            out += std::to_string(v[i]) + "-" + std::to_string(v[j]);
        } else {
            for (std::size_t k = i; k <= j; k++) out += (k > i ? "," : "") + std::to_string(v[k]);
        }
        i = j + 1;
    }
    return out;
}

// Day fields must keep their leading '*' exactly when they had one: it decides
// between the OR and the AND of the two day fields.
std::string compress_day_field(std::uint64_t bits, const FieldSpec& spec, bool star) {
    const int last = spec.names == Names::weekdays ? 6 : spec.max;
    if (!star) return compress(bits, spec.min, last, false);
    if (bits == range_bits(spec.min, last)) return "*";
    // "*/n" for the smallest n it holds (the first value alone, at worst), then the rest.
    const int span = spec.max - spec.min + 1;
    for (int n = 2; n <= span; n++) {
        std::uint64_t stepped = 0;
        for (int v = spec.min; v <= spec.max; v += n)
            stepped |= std::uint64_t{1} << (spec.names == Names::weekdays && v == 7 ? 0 : v);
        if ((stepped & ~bits) != 0) continue;
        std::string out = "*/" + std::to_string(n);
        if (const std::uint64_t rest = bits & ~stepped; rest != 0)
            out += "," + compress(rest, spec.min, last, false);
        return out;
    }
    return compress(bits, spec.min, last,
                    false);  // not reached: star fields hold their first value
}

}  // namespace

CronSchedule CronSchedule::parse(std::string_view expr) {
    while (!expr.empty() && is_space(expr.front())) expr.remove_prefix(1);
    while (!expr.empty() && is_space(expr.back())) expr.remove_suffix(1);
    if (expr.empty())
        throw Error(sqlstate::invalid_parameter, "cron expression must not be empty", {},
                    syntax_hint);
    if (expr.size() > max_expression_bytes)
        throw Error(sqlstate::program_limit,
                    "cron expression \"" + std::string(expr.substr(0, 32)) + "...\" is too long",
                    "Cron expressions are limited to " + std::to_string(max_expression_bytes) +
                        " bytes; this one has " + std::to_string(expr.size()) + ".");

    const Parser parser(expr);
    std::vector<std::string_view> fields;
    for (std::size_t i = 0; i < expr.size();) {
        if (is_space(expr[i])) {
            i++;
            continue;
        }
        std::size_t j = i;
        while (j < expr.size() && !is_space(expr[j])) j++;
        fields.push_back(expr.substr(i, j - i));
        i = j;
    }

    if (fields[0][0] == '@') {
        static constexpr std::array<std::pair<const char*, const char*>, 7> shortcuts = {{
            {"@yearly", "0 0 1 1 *"},
            {"@annually", "0 0 1 1 *"},
            {"@monthly", "0 0 1 * *"},
            {"@weekly", "0 0 * * 0"},
            {"@daily", "0 0 * * *"},
            {"@midnight", "0 0 * * *"},
            {"@hourly", "0 * * * *"},
        }};
        const std::string shortcut(fields[0]);
        if (equals_ignoring_case(shortcut, "@reboot"))
            parser.fail("@reboot is not supported",
                        "A schedule fires at times of the clock; there is no reboot for it to "
                        "follow.",
                        shortcut_hint);
        for (const auto& [name, expansion] : shortcuts) {
            if (!equals_ignoring_case(shortcut, name)) continue;
            if (fields.size() > 1)
                parser.fail("nothing may follow " + std::string(name), {},
                            "Write either a shortcut or five fields, not both.");
            CronSchedule s = parse(expansion);
            return s;
        }
        parser.fail("unknown shortcut \"" + shortcut + "\"", {}, shortcut_hint);
    }

    if (fields.size() != 5)
        parser.fail("expected 5 fields, found " + std::to_string(fields.size()),
                    "The fields are minute, hour, day-of-month, month and day-of-week.",
                    fields.size() > 5 ? "Seconds and years are not supported." : syntax_hint);

    CronSchedule s;
    s.minutes_ = parser.field(fields[0], minute_field);
    s.hours_ = parser.field(fields[1], hour_field);
    s.days_of_month_ = parser.field(fields[2], dom_field);
    s.months_ = parser.field(fields[3], month_field);
    s.days_of_week_ = parser.field(fields[4], dow_field);
    s.dom_star_ = fields[2][0] == '*';
    s.dow_star_ = fields[4][0] == '*';

    // Only a day-of-month that no chosen month has, with day-of-week not
    // offering an alternative, can never fire: any date that exists falls on
    // every weekday within the 400-year cycle, and a '*' day field holds day 1.
    s.can_fire_ = true;
    if (!s.dom_star_ && s.dow_star_) {
        s.can_fire_ = false;
        for (int m = 1; m <= 12; m++) {
            const int longest = m == 2 ? 29 : days_in_month(2001, m);
            if (has(s.months_, m) && (s.days_of_month_ & range_bits(1, longest)) != 0)
                s.can_fire_ = true;
        }
    }
    return s;
}

bool CronSchedule::day_matches(std::int64_t year, int month, int day) const {
    const bool dom = has(days_of_month_, day);
    const bool dow = has(days_of_week_, weekday_from_days(days_from_civil(year, month, day)));
    return dom_star_ || dow_star_ ? dom && dow : dom || dow;
}

bool CronSchedule::matches(std::int64_t t) const {
    if (t < -time_limit || t > time_limit) return false;
    const std::int64_t minute = floor_div(t, 60);
    const std::int64_t day = floor_div(minute, 1440);
    const int minute_of_day = static_cast<int>(minute - day * 1440);
    const Civil c = civil_from_days(day);
    return has(minutes_, minute_of_day % 60) && has(hours_, minute_of_day / 60) &&
           has(months_, c.month) && day_matches(c.year, c.month, c.day);
}

std::optional<std::int64_t> CronSchedule::next_after(std::int64_t t) const {
    if (!can_fire_ || t < -time_limit || t > time_limit) return std::nullopt;

    // Walk forward from the next whole minute, skipping a month, a day or an
    // hour at a time; each step only moves to a later candidate.
    const std::int64_t first = floor_div(t, 60) + 1;
    const std::int64_t first_day = floor_div(first, 1440);
    const Civil c = civil_from_days(first_day);
    std::int64_t year = c.year;
    int month = c.month;
    int day = c.day;
    int hour = static_cast<int>(first - first_day * 1440) / 60;
    int minute = static_cast<int>(first - first_day * 1440) % 60;

    // can_fire_ promises a match within one 400-year cycle; the bound only
    // guards against looping forever.
    const std::int64_t last_year = year + 401;
    while (year <= last_year) {
        if (!has(months_, month)) {
            month = next_value(months_, month + 1, 12);
            if (month < 0) {
                year++;
                month = next_value(months_, 1, 12);
            }
            day = 1;
            hour = minute = 0;
            continue;
        }
        if (day > days_in_month(year, month)) {
            if (++month > 12) {
                month = 1;
                year++;
            }
            day = 1;
            hour = minute = 0;
            continue;
        }
        if (!day_matches(year, month, day)) {
            day++;
            hour = minute = 0;
            continue;
        }
        const int h = next_value(hours_, hour, 23);
        if (h < 0) {
            day++;
            hour = minute = 0;
            continue;
        }
        if (h != hour) {
            hour = h;
            minute = 0;
        }
        const int m = next_value(minutes_, minute, 59);
        if (m < 0) {
            hour++;
            minute = 0;
            if (hour > 23) {
                day++;
                hour = 0;
            }
            continue;
        }
        return ((days_from_civil(year, month, day) * 24 + hour) * 60 + m) * 60;
    }
    return std::nullopt;
}

std::string CronSchedule::describe() const {
    return compress(minutes_, 0, 59, true) + " " + compress(hours_, 0, 23, true) + " " +
           compress_day_field(days_of_month_, dom_field, dom_star_) + " " +
           compress(months_, 1, 12, true) + " " +
           compress_day_field(days_of_week_, dow_field, dow_star_);
}

}  // namespace wf::core
