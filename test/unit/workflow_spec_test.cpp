#include "core/workflow_spec.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <ctime>
#include <climits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/validation.hpp"

using namespace wf::core;
using nlohmann::json;

namespace {

constexpr std::size_t payload_limit = 1024 * 1024;

WorkflowSpec parse(const std::string& text, std::size_t limit = payload_limit) {
    return parse_workflow_spec(text, limit);
}

WorkflowSpec parse_doc(const json& spec) {
    return parse(spec.dump());
}

struct Failure {
    std::string sqlstate;  // "" when the spec was accepted
    std::string message;
    std::string detail;
    std::string hint;
};

Failure failure_of(const std::string& text, std::size_t limit = payload_limit) {
    try {
        parse_workflow_spec(text, limit);
    } catch (const Error& e) {
        return {e.sqlstate(), e.what(), e.detail(), e.hint()};
    }
    return {};
}

Failure failure_of_doc(const json& spec) {
    return failure_of(spec.dump());
}

std::vector<std::string> names(const WorkflowSpec& w) {
    std::vector<std::string> out;
    for (const StepSpec& s : w.steps) out.push_back(s.name);
    return out;
}

// Every step comes after the steps it runs after, and "after" is sorted and unique.
void expect_topological(const WorkflowSpec& w) {
    for (std::size_t i = 0; i < w.steps.size(); i++) {
        const auto& after = w.steps[i].after;
        for (std::size_t k = 0; k < after.size(); k++) {
            EXPECT_LT(after[k], i) << "step " << w.steps[i].name;
            if (k > 0) {
                EXPECT_LT(after[k - 1], after[k]) << "step " << w.steps[i].name;
            }
        }
    }
}

// The names of the steps a step runs after.
std::vector<std::string> after_names(const WorkflowSpec& w, const std::string& step) {
    for (const StepSpec& s : w.steps)
        if (s.name == step) {
            std::vector<std::string> out;
            for (std::size_t p : s.after) out.push_back(w.steps[p].name);
            return out;
        }
    ADD_FAILURE() << "no step " << step;
    return {};
}

using Names = std::vector<std::string>;

}  // namespace

// --- valid specs -----------------------------------------------------------

TEST(WorkflowSpec, SingleStepTakesTheDefaults) {
    WorkflowSpec w = parse(R"({"queue": "q", "steps": [{"name": "only"}]})");
    EXPECT_FALSE(w.name.has_value());
    ASSERT_EQ(w.steps.size(), 1u);
    const StepSpec& s = w.steps[0];
    EXPECT_EQ(s.name, "only");
    EXPECT_EQ(s.queue, "q");
    EXPECT_EQ(s.payload_json, "{}");
    EXPECT_EQ(s.priority, 0);
    EXPECT_FALSE(s.max_attempts.has_value());
    EXPECT_FALSE(s.run_at.has_value());
    EXPECT_TRUE(s.after.empty());
}

TEST(WorkflowSpec, EveryFieldIsRead) {
    WorkflowSpec w = parse(R"({
        "name": "nightly",
        "queue": "default",
        "steps": [
            {"name": "fetch"},
            {"name": "summarize", "queue": "llm", "payload": {"model": "small", "n": 3},
             "priority": -7, "max_attempts": 3, "run_at": "2026-12-01T10:00:00Z",
             "after": ["fetch"]}
        ]})");
    ASSERT_EQ(w.name, std::optional<std::string>("nightly"));
    ASSERT_EQ(names(w), (Names{"fetch", "summarize"}));
    EXPECT_EQ(w.steps[0].queue, "default");
    const StepSpec& s = w.steps[1];
    EXPECT_EQ(s.queue, "llm");
    EXPECT_EQ(json::parse(s.payload_json), json::parse(R"({"model": "small", "n": 3})"));
    EXPECT_EQ(s.priority, -7);
    EXPECT_EQ(s.max_attempts, std::optional<int>(3));
    EXPECT_EQ(s.run_at, std::optional<std::string>("2026-12-01T10:00:00Z"));
    EXPECT_EQ(s.after, (std::vector<std::size_t>{0}));
}

TEST(WorkflowSpec, StepQueuesNeedNoDefault) {
    WorkflowSpec w = parse(R"({"steps": [{"name": "a", "queue": "x"},
                                         {"name": "b", "queue": "y", "after": ["a"]}]})");
    EXPECT_EQ(w.steps[0].queue, "x");
    EXPECT_EQ(w.steps[1].queue, "y");
}

TEST(WorkflowSpec, NullMeansAbsent) {
    WorkflowSpec w = parse(R"({"name": null, "queue": "q", "steps": [
        {"name": "a", "queue": null, "payload": null, "priority": null,
         "max_attempts": null, "run_at": null, "after": null}]})");
    EXPECT_FALSE(w.name.has_value());
    const StepSpec& s = w.steps[0];
    EXPECT_EQ(s.queue, "q");
    EXPECT_EQ(s.payload_json, "{}");
    EXPECT_EQ(s.priority, 0);
    EXPECT_FALSE(s.max_attempts.has_value());
    EXPECT_FALSE(s.run_at.has_value());
    EXPECT_TRUE(s.after.empty());
}

TEST(WorkflowSpec, IntegerLimitsAreAccepted) {
    json spec = {{"queue", "q"},
                 {"steps",
                  {{{"name", "lo"}, {"priority", INT_MIN}, {"max_attempts", 1}},
                   {{"name", "hi"}, {"priority", INT_MAX}, {"max_attempts", limits::max_attempts}}}}};
    WorkflowSpec w = parse_doc(spec);
    EXPECT_EQ(w.steps[0].priority, INT_MIN);
    EXPECT_EQ(w.steps[0].max_attempts, std::optional<int>(1));
    EXPECT_EQ(w.steps[1].priority, INT_MAX);
    EXPECT_EQ(w.steps[1].max_attempts, std::optional<int>(limits::max_attempts));
}

// INT_MAX attempts were accepted, and parking or retrying the step then
// overflowed its budget (22003): at most limits::max_attempts.
TEST(WorkflowSpec, MaxAttemptsIsBounded) {
    json spec = {{"queue", "q"},
                 {"steps", {{{"name", "hi"}, {"max_attempts", INT_MAX}}}}};
    EXPECT_EQ(failure_of_doc(spec).sqlstate, "22023");
}

TEST(WorkflowSpec, Chain) {
    WorkflowSpec w = parse(R"({"queue": "q", "steps": [
        {"name": "a"}, {"name": "b", "after": ["a"]}, {"name": "c", "after": ["b"]}]})");
    ASSERT_EQ(names(w), (Names{"a", "b", "c"}));
    EXPECT_TRUE(w.steps[0].after.empty());
    EXPECT_EQ(w.steps[1].after, (std::vector<std::size_t>{0}));
    EXPECT_EQ(w.steps[2].after, (std::vector<std::size_t>{1}));
}

TEST(WorkflowSpec, Diamond) {
    WorkflowSpec w = parse(R"({"queue": "q", "steps": [
        {"name": "join", "after": ["left", "right"]},
        {"name": "right", "after": ["root"]},
        {"name": "left", "after": ["root"]},
        {"name": "root"}]})");
    expect_topological(w);
    ASSERT_EQ(names(w), (Names{"root", "right", "left", "join"}));
    EXPECT_EQ(after_names(w, "join"), (Names{"right", "left"}));
    EXPECT_EQ(after_names(w, "left"), (Names{"root"}));
    EXPECT_EQ(after_names(w, "right"), (Names{"root"}));
}

TEST(WorkflowSpec, FanOutFanIn) {
    json steps = json::array({{{"name", "split"}}});
    json all = json::array();
    for (int i = 0; i < 50; i++) {
        std::string n = "map" + std::to_string(i);
        steps.push_back({{"name", n}, {"after", {"split"}}});
        all.push_back(n);
    }
    steps.push_back({{"name", "reduce"}, {"after", all}});
    WorkflowSpec w = parse_doc(json{{"queue", "q"}, {"steps", steps}});
    ASSERT_EQ(w.steps.size(), 52u);
    expect_topological(w);
    EXPECT_EQ(w.steps[0].name, "split");
    for (int i = 1; i <= 50; i++) {
        EXPECT_EQ(w.steps[i].name, "map" + std::to_string(i - 1));
        EXPECT_EQ(w.steps[i].after, (std::vector<std::size_t>{0}));
    }
    EXPECT_EQ(w.steps[51].name, "reduce");
    ASSERT_EQ(w.steps[51].after.size(), 50u);
    for (std::size_t k = 0; k < 50; k++) EXPECT_EQ(w.steps[51].after[k], k + 1);
}

TEST(WorkflowSpec, IndependentStepsKeepTheirOrder) {
    WorkflowSpec w = parse(R"({"queue": "q", "steps": [
        {"name": "z"}, {"name": "a"}, {"name": "m"}, {"name": "b"}]})");
    EXPECT_EQ(names(w), (Names{"z", "a", "m", "b"}));
}

TEST(WorkflowSpec, TopologicalInputKeepsItsOrder) {
    WorkflowSpec w = parse(R"({"queue": "q", "steps": [
        {"name": "x"}, {"name": "a"}, {"name": "y", "after": ["x"]},
        {"name": "b", "after": ["a", "x"]}, {"name": "z"}, {"name": "c", "after": ["y"]}]})");
    EXPECT_EQ(names(w), (Names{"x", "a", "y", "b", "z", "c"}));
    expect_topological(w);
}

TEST(WorkflowSpec, AStepListedBeforeItsPredecessorFollowsIt) {
    // "child" moves to just after "parent"; everything else keeps its place.
    WorkflowSpec w = parse(R"({"queue": "q", "steps": [
        {"name": "x"}, {"name": "child", "after": ["parent"]}, {"name": "y"},
        {"name": "parent"}, {"name": "z"}]})");
    EXPECT_EQ(names(w), (Names{"x", "y", "parent", "child", "z"}));
    expect_topological(w);
}

TEST(WorkflowSpec, ReversedChainIsReordered) {
    WorkflowSpec w = parse(R"({"queue": "q", "steps": [
        {"name": "d", "after": ["c"]}, {"name": "c", "after": ["b"]},
        {"name": "b", "after": ["a"]}, {"name": "a"}]})");
    EXPECT_EQ(names(w), (Names{"a", "b", "c", "d"}));
    expect_topological(w);
}

TEST(WorkflowSpec, WaitsForTheLastPredecessor) {
    // "late" needs "p1" and "p2": it follows p2, the later of the two.
    WorkflowSpec w = parse(R"({"queue": "q", "steps": [
        {"name": "late", "after": ["p2", "p1"]}, {"name": "p1"}, {"name": "mid"},
        {"name": "p2"}, {"name": "end"}]})");
    EXPECT_EQ(names(w), (Names{"p1", "mid", "p2", "late", "end"}));
    EXPECT_EQ(after_names(w, "late"), (Names{"p1", "p2"}));
}

TEST(WorkflowSpec, RepeatedPredecessorsCountOnce) {
    WorkflowSpec w = parse(R"({"queue": "q", "steps": [
        {"name": "a"}, {"name": "b"}, {"name": "c", "after": ["b", "a", "b", "a", "b"]}]})");
    EXPECT_EQ(w.steps[2].after, (std::vector<std::size_t>{0, 1}));
}

TEST(WorkflowSpec, NamesAreCaseSensitive) {
    WorkflowSpec w = parse(R"({"queue": "q", "steps": [
        {"name": "Fetch"}, {"name": "fetch", "after": ["Fetch"]}]})");
    EXPECT_EQ(names(w), (Names{"Fetch", "fetch"}));
    EXPECT_EQ(failure_of(R"({"queue": "q", "steps": [{"name": "Fetch"},
                             {"name": "b", "after": ["FETCH"]}]})")
                  .message,
              "step \"b\" runs after unknown step \"FETCH\"");
}

// --- payloads ----------------------------------------------------------------

TEST(WorkflowSpecPayload, RoundTripsThroughJson) {
    json payload = {{"text", "line1\nline2 \"quoted\" \\ tab\t"},
                    {"unicode", "Grüße 日本 \U0001F600"},
                    {"list", {1, -2, true, false, nullptr, "x", json::array(), json::object()}},
                    {"nested", {{"a", {{"b", {{"c", json::array({1, 2, 3})}}}}}}},
                    {"big", 18446744073709551615ULL},
                    {"neg", -9223372036854775807LL - 1}};
    json spec = {{"queue", "q"}, {"steps", {{{"name", "s"}, {"payload", payload}}}}};
    WorkflowSpec w = parse_doc(spec);
    EXPECT_EQ(json::parse(w.steps[0].payload_json), payload);
    // Compact, as jsonb would print it without spaces.
    EXPECT_EQ(w.steps[0].payload_json.find(": "), std::string::npos);
}

TEST(WorkflowSpecPayload, NumbersKeepTheirSourceText) {
    WorkflowSpec w = parse(R"({"queue": "q", "steps": [{"name": "s", "payload":
        {"price": 1.50, "exact": 0.1000000000000000055511151231257827,
         "huge": 123456789012345678901234567890, "tiny": 1e-7, "exp": 2.5E+10,
         "negzero": -0.0, "int": 42, "negint": -42}}]})");
    EXPECT_EQ(w.steps[0].payload_json,
              R"({"price":1.50,"exact":0.1000000000000000055511151231257827,)"
              R"("huge":123456789012345678901234567890,"tiny":1e-7,"exp":2.5E+10,)"
              R"("negzero":-0.0,"int":42,"negint":-42})");
}

TEST(WorkflowSpecPayload, AnyJsonValueIsAPayload) {
    WorkflowSpec w = parse(R"({"queue": "q", "steps": [
        {"name": "n", "payload": 3.25}, {"name": "s", "payload": "text"},
        {"name": "a", "payload": [1, [2, [3]], {}]}, {"name": "e", "payload": {}},
        {"name": "b", "payload": false}]})");
    EXPECT_EQ(w.steps[0].payload_json, "3.25");
    EXPECT_EQ(w.steps[1].payload_json, "\"text\"");
    EXPECT_EQ(w.steps[2].payload_json, "[1,[2,[3]],{}]");
    EXPECT_EQ(w.steps[3].payload_json, "{}");
    EXPECT_EQ(w.steps[4].payload_json, "false");
}

TEST(WorkflowSpecPayload, StringsAreEscaped) {
    json payload = {{"ctl", std::string("a\x01"
                                        "b\x1f\b\f\r")},
                    {"k\"ey", "v\\"}};
    WorkflowSpec w =
        parse_doc({{"queue", "q"}, {"steps", {{{"name", "s"}, {"payload", payload}}}}});
    EXPECT_EQ(w.steps[0].payload_json, R"({"ctl":"a\u0001b\u001f\b\f\r","k\"ey":"v\\"})");
    EXPECT_EQ(json::parse(w.steps[0].payload_json), payload);
}

TEST(WorkflowSpecPayload, NestedNamesDoNotLeak) {
    // Keys of the spec inside a payload are payload, not spec.
    WorkflowSpec w = parse(R"({"queue": "q", "steps": [{"name": "s", "payload":
        {"name": "inner", "after": ["nothing"], "steps": [{"queue": 1}]}}]})");
    ASSERT_EQ(w.steps.size(), 1u);
    EXPECT_EQ(w.steps[0].name, "s");
    EXPECT_TRUE(w.steps[0].after.empty());
    EXPECT_EQ(w.steps[0].payload_json,
              R"({"name":"inner","after":["nothing"],"steps":[{"queue":1}]})");
}

TEST(WorkflowSpecPayload, DeepNestingIsWrittenWithoutRecursion) {
    const int depth = 100000;
    std::string payload = std::string(depth, '[') + "1.0" + std::string(depth, ']');
    WorkflowSpec w =
        parse(R"({"queue": "q", "steps": [{"name": "s", "payload": )" + payload + "}]}");
    EXPECT_EQ(w.steps[0].payload_json, payload);
}

TEST(WorkflowSpecPayload, SizeLimit) {
    // {"k":""} is 8 bytes plus the x's.
    std::string at_limit = R"({"k":")" + std::string(92, 'x') + "\"}";
    ASSERT_EQ(at_limit.size(), 100u);
    std::string spec = R"({"queue": "q", "steps": [{"name": "big", "payload": )";
    EXPECT_EQ(failure_of(spec + at_limit + "}]}", 100).sqlstate, "");
    Failure f = failure_of(spec + R"({"k":")" + std::string(93, 'x') + "\"}}]}", 100);
    EXPECT_EQ(f.sqlstate, "54000");
    EXPECT_EQ(f.message, "payload of step \"big\" is too large");
    EXPECT_NE(f.detail.find("101 bytes"), std::string::npos) << f.detail;
    // The default {} counts too.
    EXPECT_EQ(failure_of(R"({"queue": "q", "steps": [{"name": "s"}]})", 1).sqlstate, "54000");
}

// --- errors ------------------------------------------------------------------

TEST(WorkflowSpecErrors, MalformedJson) {
    for (const char* text : {"", "{", "{\"steps\": [}", "{} x", "{'steps': []}", "nul"}) {
        Failure f = failure_of(text);
        EXPECT_EQ(f.sqlstate, "22P02") << text;
        EXPECT_EQ(f.message, "workflow spec is not valid JSON") << text;
        EXPECT_FALSE(f.detail.empty()) << text;
        EXPECT_EQ(f.detail.find("[json.exception"), std::string::npos) << f.detail;
    }
}

TEST(WorkflowSpecErrors, RootMustBeAnObject) {
    Failure f = failure_of("[]");
    EXPECT_EQ(f.sqlstate, "22023");
    EXPECT_EQ(f.message, "workflow spec must be a JSON object");
    EXPECT_EQ(f.detail, "It is an array.");
    EXPECT_EQ(failure_of("1.5").detail, "It is a number with a fraction or an exponent.");
}

TEST(WorkflowSpecErrors, NoSteps) {
    for (const char* text : {R"({"queue": "q"})", R"({"queue": "q", "steps": []})",
                             R"({"queue": "q", "steps": null})"}) {
        Failure f = failure_of(text);
        EXPECT_EQ(f.sqlstate, "22023") << text;
        EXPECT_EQ(f.message, "workflow has no steps") << text;
    }
    Failure f = failure_of(R"({"queue": "q", "steps": {"a": {}}})");
    EXPECT_EQ(f.sqlstate, "22023");
    EXPECT_EQ(f.message, "\"steps\" of the workflow must be an array");
    EXPECT_EQ(f.detail, "It is an object.");
}

TEST(WorkflowSpecErrors, TooManySteps) {
    std::string text = R"({"queue": "q", "steps": [)";
    for (std::size_t i = 0; i <= limits::max_workflow_steps; i++)
        text += (i ? "," : "") + std::string(R"({"name": "s)") + std::to_string(i) + "\"}";
    text += "]}";
    Failure f = failure_of(text);
    EXPECT_EQ(f.sqlstate, "54000");
    EXPECT_EQ(f.message, "workflow has more than 100000 steps");
}

TEST(WorkflowSpecErrors, StepMustBeAnObject) {
    Failure f = failure_of(R"({"queue": "q", "steps": [{"name": "a"}, "b"]})");
    EXPECT_EQ(f.sqlstate, "22023");
    EXPECT_EQ(f.message, "step 2 must be a JSON object");
    EXPECT_EQ(f.detail, "It is a string.");
}

TEST(WorkflowSpecErrors, StepWithoutName) {
    Failure f = failure_of(R"({"queue": "q", "steps": [{"name": "a"}, {"name": "b"},
                              {"payload": {}}]})");
    EXPECT_EQ(f.sqlstate, "22023");
    EXPECT_EQ(f.message, "step 3 has no name");
    EXPECT_EQ(failure_of(R"({"queue": "q", "steps": [{"name": null}]})").message,
              "step 1 has no name");
}

TEST(WorkflowSpecErrors, StepNameMustBeAGoodString) {
    Failure f = failure_of(R"({"queue": "q", "steps": [{"name": 7}]})");
    EXPECT_EQ(f.sqlstate, "22023");
    EXPECT_EQ(f.message, "\"name\" of step 1 must be a string");
    EXPECT_EQ(f.detail, "It is a number.");

    f = failure_of(R"({"queue": "q", "steps": [{"name": "a"}, {"name": ""}]})");
    EXPECT_EQ(f.sqlstate, "22023");
    EXPECT_EQ(f.message, "name of step 2 must not be empty");

    json spec = {{"queue", "q"}, {"steps", {{{"name", std::string(257, 'n')}}}}};
    f = failure_of_doc(spec);
    EXPECT_EQ(f.sqlstate, "54000");
    EXPECT_EQ(f.message, "name of step 1 is too long");
    spec["steps"][0]["name"] = std::string(256, 'n');
    EXPECT_EQ(failure_of_doc(spec).sqlstate, "");
}

TEST(WorkflowSpecErrors, DuplicateStepName) {
    Failure f = failure_of(R"({"queue": "q", "steps": [{"name": "fetch"}, {"name": "b"},
                              {"name": "c"}, {"name": "fetch"}]})");
    EXPECT_EQ(f.sqlstate, "22023");
    EXPECT_EQ(f.message, "duplicate step name \"fetch\"");
    EXPECT_EQ(f.detail, "Steps 1 and 4 are both named \"fetch\".");
}

TEST(WorkflowSpecErrors, UnknownKeys) {
    Failure f = failure_of(R"({"queue": "q", "steps": [{"name": "x", "afterr": ["y"]}]})");
    EXPECT_EQ(f.sqlstate, "22023");
    EXPECT_EQ(f.message, "unknown key \"afterr\" in step \"x\"");
    EXPECT_NE(f.hint.find("\"after\""), std::string::npos) << f.hint;

    // A misspelt "name" is reported as what it is, not as a missing name.
    f = failure_of(R"({"queue": "q", "steps": [{"nmae": "x"}]})");
    EXPECT_EQ(f.message, "unknown key \"nmae\" in step 1");

    f = failure_of(R"({"queue": "q", "stepz": [], "steps": [{"name": "x"}]})");
    EXPECT_EQ(f.sqlstate, "22023");
    EXPECT_EQ(f.message, "unknown key \"stepz\" in the workflow");
    // 1.6: "key" and "version" are keys of the workflow too.
    EXPECT_EQ(f.hint,
              "The keys of the workflow are \"name\", \"queue\", \"key\", \"version\" and "
              "\"steps\".");
    // ... and "version" of a step.
    f = failure_of(R"({"queue": "q", "steps": [{"name": "x", "versoin": "v1"}]})");
    EXPECT_EQ(f.message, "unknown key \"versoin\" in step \"x\"");
    EXPECT_NE(f.hint.find("\"version\""), std::string::npos) << f.hint;
}

TEST(WorkflowSpecErrors, MissingQueue) {
    Failure f = failure_of(R"({"steps": [{"name": "a", "queue": "x"}, {"name": "b"}]})");
    EXPECT_EQ(f.sqlstate, "22023");
    EXPECT_EQ(f.message, "step \"b\" has no queue");
    EXPECT_FALSE(f.hint.empty());
}

TEST(WorkflowSpecErrors, BadQueueNames) {
    Failure f = failure_of(R"({"steps": [{"name": "a", "queue": ""}]})");
    EXPECT_EQ(f.sqlstate, "22023");
    EXPECT_EQ(f.message, "queue name must not be empty in step \"a\"");

    json spec = {{"steps", {{{"name", "a"}, {"queue", std::string(129, 'q')}}}}};
    f = failure_of_doc(spec);
    EXPECT_EQ(f.sqlstate, "54000");
    EXPECT_NE(f.message.find("is too long in step \"a\""), std::string::npos) << f.message;

    f = failure_of(R"({"queue": "a\nb", "steps": [{"name": "a"}]})");
    EXPECT_EQ(f.sqlstate, "22023");
    EXPECT_EQ(f.message, "queue name must not contain control characters in the workflow");

    f = failure_of(R"({"steps": [{"name": "a", "queue": ["x"]}]})");
    EXPECT_EQ(f.message, "\"queue\" of step \"a\" must be a string");
    EXPECT_EQ(f.detail, "It is an array.");
    f = failure_of(R"({"queue": 1, "steps": [{"name": "a"}]})");
    EXPECT_EQ(f.message, "\"queue\" of the workflow must be a string");
}

TEST(WorkflowSpecErrors, WorkflowName) {
    EXPECT_EQ(failure_of(R"({"name": 1, "queue": "q", "steps": [{"name": "a"}]})").message,
              "\"name\" of the workflow must be a string");
    EXPECT_EQ(failure_of(R"({"name": "", "queue": "q", "steps": [{"name": "a"}]})").message,
              "workflow name must not be empty");
    json spec = {{"name", std::string(257, 'w')}, {"queue", "q"}, {"steps", {{{"name", "a"}}}}};
    EXPECT_EQ(failure_of_doc(spec).sqlstate, "54000");
}

TEST(WorkflowSpecErrors, Priority) {
    const std::string head = R"({"queue": "q", "steps": [{"name": "x", "priority": )";
    for (const char* bad : {"\"5\"", "1.5", "1.0", "true", "[1]"}) {
        Failure f = failure_of(head + bad + "}]}");
        EXPECT_EQ(f.sqlstate, "22023") << bad;
        EXPECT_EQ(f.message, "\"priority\" of step \"x\" must be an integer") << bad;
    }
    EXPECT_EQ(failure_of(head + "\"5\"}]}").detail, "It is a string.");
    for (const char* big :
         {"2147483648", "-2147483649", "18446744073709551615", "-9223372036854775808"}) {
        Failure f = failure_of(head + big + "}]}");
        EXPECT_EQ(f.sqlstate, "22023") << big;
        EXPECT_EQ(f.message, "\"priority\" of step \"x\" is out of range for an integer") << big;
    }
}

TEST(WorkflowSpecErrors, MaxAttempts) {
    const std::string head = R"({"queue": "q", "steps": [{"name": "x", "max_attempts": )";
    Failure f = failure_of(head + "0}]}");
    EXPECT_EQ(f.sqlstate, "22023");
    EXPECT_EQ(f.message, "\"max_attempts\" of step \"x\" must be positive, not 0");
    EXPECT_EQ(failure_of(head + "-3}]}").message,
              "\"max_attempts\" of step \"x\" must be positive, not -3");
    EXPECT_EQ(failure_of(head + "\"3\"}]}").message,
              "\"max_attempts\" of step \"x\" must be an integer");
    EXPECT_EQ(failure_of(head + "2147483648}]}").message,
              "\"max_attempts\" of step \"x\" is out of range for an integer");
}

TEST(WorkflowSpecErrors, RunAt) {
    const std::string head = R"({"queue": "q", "steps": [{"name": "x", "run_at": )";
    Failure f = failure_of(head + "1700000000}]}");
    EXPECT_EQ(f.sqlstate, "22023");
    EXPECT_EQ(f.message, "\"run_at\" of step \"x\" must be a string");
    EXPECT_EQ(failure_of(head + "\"\"}]}").message, "\"run_at\" of step \"x\" must not be empty");
    f = failure_of(head + "\"" + std::string(129, '1') + "\"}]}");
    EXPECT_EQ(f.sqlstate, "54000");
    EXPECT_EQ(f.message, "\"run_at\" of step \"x\" is too long");
}

TEST(WorkflowSpecErrors, AfterMustBeAnArrayOfNames) {
    Failure f = failure_of(R"({"queue": "q", "steps": [{"name": "a"},
                              {"name": "b", "after": "a"}]})");
    EXPECT_EQ(f.sqlstate, "22023");
    EXPECT_EQ(f.message, "\"after\" of step \"b\" must be an array of step names");
    EXPECT_EQ(f.detail, "It is a string.");

    f = failure_of(R"({"queue": "q", "steps": [{"name": "a"},
                       {"name": "b", "after": ["a", 1]}]})");
    EXPECT_EQ(f.message, "\"after\" of step \"b\" must be an array of step names");
    EXPECT_EQ(f.detail, "Element 2 is a number.");
}

TEST(WorkflowSpecErrors, UnknownPredecessor) {
    Failure f = failure_of(R"({"queue": "q", "steps": [{"name": "summarize"},
                              {"name": "translate", "after": ["summarise"]}]})");
    EXPECT_EQ(f.sqlstate, "22023");
    EXPECT_EQ(f.message, "step \"translate\" runs after unknown step \"summarise\"");
}

TEST(WorkflowSpecErrors, StepAfterItself) {
    Failure f = failure_of(R"({"queue": "q", "steps": [{"name": "a"},
                              {"name": "b", "after": ["a", "b"]}]})");
    EXPECT_EQ(f.sqlstate, "22023");
    EXPECT_EQ(f.message, "step \"b\" runs after itself");
}

TEST(WorkflowSpecErrors, TwoStepCycle) {
    Failure f = failure_of(R"({"queue": "q", "steps": [
        {"name": "a", "after": ["b"]}, {"name": "b", "after": ["a"]}]})");
    EXPECT_EQ(f.sqlstate, "22023");
    EXPECT_EQ(f.message, "workflow has a cycle: \"a\" -> \"b\" -> \"a\"");
}

TEST(WorkflowSpecErrors, CycleIsReadInRunningOrder) {
    // c runs after b, b after a, a after c: a -> b -> c -> a. Steps outside the
    // cycle, before and after it, are not named.
    Failure f = failure_of(R"({"queue": "q", "steps": [
        {"name": "ok"}, {"name": "down", "after": ["c"]},
        {"name": "c", "after": ["b", "ok"]}, {"name": "a", "after": ["ok", "c"]},
        {"name": "b", "after": ["a"]}]})");
    EXPECT_EQ(f.sqlstate, "22023");
    EXPECT_EQ(f.message, "workflow has a cycle: \"c\" -> \"a\" -> \"b\" -> \"c\"");
}

TEST(WorkflowSpecErrors, OneCycleOfSeveralIsNamed) {
    Failure f = failure_of(R"({"queue": "q", "steps": [
        {"name": "p", "after": ["q"]}, {"name": "q", "after": ["p"]},
        {"name": "x", "after": ["y"]}, {"name": "y", "after": ["x"]}]})");
    EXPECT_EQ(f.message, "workflow has a cycle: \"p\" -> \"q\" -> \"p\"");
}

TEST(WorkflowSpecErrors, LongCycleIsAbbreviated) {
    json steps = json::array();
    for (int i = 0; i < 20; i++)
        steps.push_back(
            {{"name", "s" + std::to_string(i)}, {"after", {"s" + std::to_string((i + 19) % 20)}}});
    Failure f = failure_of_doc(json{{"queue", "q"}, {"steps", steps}});
    EXPECT_EQ(f.sqlstate, "22023");
    EXPECT_EQ(f.message,
              "workflow has a cycle: \"s0\" -> \"s1\" -> \"s2\" -> \"s3\" -> \"s4\" -> \"s5\" "
              "-> \"s6\" -> \"s7\" -> ... -> \"s19\" -> \"s0\"");
    EXPECT_EQ(f.detail, "The cycle has 20 steps.");
}

TEST(WorkflowSpecErrors, StepIsNamedEvenWhenItsNameComesLast) {
    Failure f = failure_of(R"({"queue": "q", "steps": [
        {"priority": {"high": [1, {"x": 2}]}, "after": ["a"], "name": "x"}]})");
    EXPECT_EQ(f.sqlstate, "22023");
    EXPECT_EQ(f.message, "\"priority\" of step \"x\" must be an integer");
    EXPECT_EQ(f.detail, "It is an object.");
    // With a bad name, the step is named by its place.
    f = failure_of(R"({"queue": "q", "steps": [{"name": "a"},
                       {"name": "", "priority": "high"}]})");
    EXPECT_EQ(f.message, "name of step 2 must not be empty");
    f = failure_of(R"({"queue": "q", "steps": [{"priority": "high", "name": 3}]})");
    EXPECT_EQ(f.message, "\"priority\" of step 1 must be an integer");
}

TEST(WorkflowSpecErrors, FirstErrorInAStepWins) {
    Failure f = failure_of(R"({"queue": "q", "steps": [
        {"name": "x", "max_attempts": 0, "priority": "high", "bogus": 1}]})");
    EXPECT_EQ(f.message, "\"max_attempts\" of step \"x\" must be positive, not 0");
    f = failure_of(R"({"queue": "q", "steps": [
        {"bogus": 1, "name": "x", "max_attempts": 0}]})");
    EXPECT_EQ(f.message, "unknown key \"bogus\" in step \"x\"");
}

TEST(WorkflowSpecErrors, KeysGivenTwice) {
    Failure f = failure_of(R"({"queue": "q", "steps": [
        {"name": "x", "after": [], "after": ["y"]}]})");
    EXPECT_EQ(f.sqlstate, "22023");
    EXPECT_EQ(f.message, "key \"after\" appears twice in step \"x\"");
    f = failure_of(R"({"queue": "q", "steps": [{"name": "x"}], "steps": [{"name": "y"}]})");
    EXPECT_EQ(f.sqlstate, "22023");
    EXPECT_EQ(f.message, "key \"steps\" appears twice in the workflow");
}

TEST(WorkflowSpecErrors, WrongTypesAreSkippedWhole) {
    // The nested "name" inside a skipped value is not the step's name.
    Failure f = failure_of(R"({"queue": "q", "steps": [
        {"name": "x", "run_at": {"name": "y", "after": ["z"]}}]})");
    EXPECT_EQ(f.message, "\"run_at\" of step \"x\" must be a string");
    EXPECT_EQ(f.detail, "It is an object.");
    f = failure_of(R"({"queue": "q", "steps": [
        {"name": "x", "after": [["a"], "b"]}]})");
    EXPECT_EQ(f.message, "\"after\" of step \"x\" must be an array of step names");
    EXPECT_EQ(f.detail, "Element 1 is an array.");
    f = failure_of(R"({"queue": "q", "steps": [{"name": "x", "bogus": {"name": "y"}}]})");
    EXPECT_EQ(f.message, "unknown key \"bogus\" in step \"x\"");
}

TEST(WorkflowSpec, QueueMayFollowTheSteps) {
    WorkflowSpec w = parse(R"({"steps": [{"name": "a"}], "queue": "late"})");
    EXPECT_EQ(w.steps[0].queue, "late");
}

TEST(WorkflowSpecErrors, FirstErrorInInputOrderWins) {
    // A type error in step 2 is found before the unknown predecessor of step 1.
    Failure f = failure_of(R"({"queue": "q", "steps": [
        {"name": "a", "after": ["nope"]}, {"name": "b", "priority": "high"}]})");
    EXPECT_EQ(f.message, "\"priority\" of step \"b\" must be an integer");
}

// --- 1.6: workflow "key" and "version", step "version" ------------------------

TEST(WorkflowSpecKeyVersion, AbsentByDefault) {
    WorkflowSpec w = parse(R"({"queue": "q", "steps": [{"name": "a"}]})");
    EXPECT_FALSE(w.key.has_value());
    EXPECT_FALSE(w.version.has_value());
    EXPECT_FALSE(w.steps[0].version.has_value());
    EXPECT_TRUE(w.steps[0].after_existing.empty());
}

TEST(WorkflowSpecKeyVersion, TopLevelKeyAndVersionAreRead) {
    WorkflowSpec w = parse(R"({"name": "orders", "key": "order-42", "version": "v2",
                               "queue": "q", "steps": [{"name": "a"}, {"name": "b"}]})");
    EXPECT_EQ(w.name, std::optional<std::string>("orders"));
    EXPECT_EQ(w.key, std::optional<std::string>("order-42"));
    EXPECT_EQ(w.version, std::optional<std::string>("v2"));
    // The workflow's version is not copied into the steps: a step's own
    // version comes first, then the workflow's, then the queue's (SQL layer).
    EXPECT_FALSE(w.steps[0].version.has_value());
    EXPECT_FALSE(w.steps[1].version.has_value());
    // After the steps, too.
    w = parse(R"({"queue": "q", "steps": [{"name": "a"}], "version": "late", "key": "k"})");
    EXPECT_EQ(w.version, std::optional<std::string>("late"));
    EXPECT_EQ(w.key, std::optional<std::string>("k"));
}

TEST(WorkflowSpecKeyVersion, StepVersionIsRead) {
    WorkflowSpec w = parse(R"({"queue": "q", "version": "v1", "steps": [
        {"name": "a", "version": "v3"}, {"name": "b", "after": ["a"]},
        {"name": "c", "version": null}]})");
    ASSERT_EQ(names(w), (Names{"a", "b", "c"}));
    EXPECT_EQ(w.steps[0].version, std::optional<std::string>("v3"));
    EXPECT_FALSE(w.steps[1].version.has_value());
    EXPECT_FALSE(w.steps[2].version.has_value());  // null: absent
    EXPECT_EQ(w.version, std::optional<std::string>("v1"));
}

TEST(WorkflowSpecKeyVersion, NullMeansAbsent) {
    WorkflowSpec w = parse(R"({"key": null, "version": null, "queue": "q",
                               "steps": [{"name": "a", "version": null}]})");
    EXPECT_FALSE(w.key.has_value());
    EXPECT_FALSE(w.version.has_value());
    EXPECT_FALSE(w.steps[0].version.has_value());
}

TEST(WorkflowSpecKeyVersion, LabelsUpToTheLimitAreAccepted) {
    std::string longest(limits::label_bytes, 'k');
    json spec = {{"key", longest}, {"version", longest}, {"queue", "q"},
                 {"steps", {{{"name", "a"}, {"version", longest}}}}};
    WorkflowSpec w = parse_doc(spec);
    EXPECT_EQ(w.key, std::optional<std::string>(longest));
    EXPECT_EQ(w.version, std::optional<std::string>(longest));
    EXPECT_EQ(w.steps[0].version, std::optional<std::string>(longest));
}

TEST(WorkflowSpecKeyVersionErrors, WrongTypes) {
    Failure f = failure_of(R"({"key": 42, "queue": "q", "steps": [{"name": "a"}]})");
    EXPECT_EQ(f.sqlstate, "22023");
    EXPECT_EQ(f.message, "\"key\" of the workflow must be a string");
    EXPECT_EQ(f.detail, "It is a number.");

    f = failure_of(R"({"version": ["v1"], "queue": "q", "steps": [{"name": "a"}]})");
    EXPECT_EQ(f.sqlstate, "22023");
    EXPECT_EQ(f.message, "\"version\" of the workflow must be a string");
    EXPECT_EQ(f.detail, "It is an array.");

    f = failure_of(R"({"version": true, "queue": "q", "steps": [{"name": "a"}]})");
    EXPECT_EQ(f.sqlstate, "22023");
    EXPECT_EQ(f.detail, "It is a boolean.");

    f = failure_of(R"({"key": {"id": 1}, "queue": "q", "steps": [{"name": "a"}]})");
    EXPECT_EQ(f.sqlstate, "22023");
    EXPECT_EQ(f.message, "\"key\" of the workflow must be a string");
    EXPECT_EQ(f.detail, "It is an object.");

    // A step's version: the step is named, even when "name" comes later.
    f = failure_of(R"({"queue": "q", "steps": [{"name": "a", "version": 2}]})");
    EXPECT_EQ(f.sqlstate, "22023");
    EXPECT_EQ(f.message, "\"version\" of step \"a\" must be a string");
    EXPECT_EQ(f.detail, "It is a number.");
    f = failure_of(R"({"queue": "q", "steps": [{"version": {"name": "x"}, "name": "b"}]})");
    EXPECT_EQ(f.sqlstate, "22023");
    EXPECT_EQ(f.message, "\"version\" of step \"b\" must be a string");
    EXPECT_EQ(f.detail, "It is an object.");
    f = failure_of(R"({"queue": "q", "steps": [{"version": 1.5}]})");
    EXPECT_EQ(f.sqlstate, "22023");
    EXPECT_EQ(f.message, "\"version\" of step 1 must be a string");
}

TEST(WorkflowSpecKeyVersionErrors, EmptyOrTooLong) {
    Failure f = failure_of(R"({"key": "", "queue": "q", "steps": [{"name": "a"}]})");
    EXPECT_EQ(f.sqlstate, "22023");
    EXPECT_EQ(f.message, "workflow key must not be empty");
    f = failure_of(R"({"version": "", "queue": "q", "steps": [{"name": "a"}]})");
    EXPECT_EQ(f.sqlstate, "22023");
    EXPECT_EQ(f.message, "workflow version must not be empty");
    f = failure_of(R"({"queue": "q", "steps": [{"name": "a", "version": ""}]})");
    EXPECT_EQ(f.sqlstate, "22023");
    EXPECT_EQ(f.message, "\"version\" must not be empty in step \"a\"");

    std::string too_long(limits::label_bytes + 1, 'v');
    f = failure_of_doc({{"key", too_long}, {"queue", "q"}, {"steps", {{{"name", "a"}}}}});
    EXPECT_EQ(f.sqlstate, "54000");
    EXPECT_EQ(f.message, "workflow key is too long");
    f = failure_of_doc({{"version", too_long}, {"queue", "q"}, {"steps", {{{"name", "a"}}}}});
    EXPECT_EQ(f.sqlstate, "54000");
    EXPECT_EQ(f.message, "workflow version is too long");
    f = failure_of_doc({{"queue", "q"}, {"steps", {{{"name", "a"}, {"version", too_long}}}}});
    EXPECT_EQ(f.sqlstate, "54000");
    EXPECT_EQ(f.message, "\"version\" is too long in step \"a\"");
}

TEST(WorkflowSpecKeyVersionErrors, GivenTwice) {
    // jsonb keeps one of two equal keys; raw text may have both.
    Failure f = failure_of(R"({"key": "a", "key": "b", "queue": "q", "steps": [{"name": "a"}]})");
    EXPECT_EQ(f.sqlstate, "22023");
    EXPECT_EQ(f.message, "key \"key\" appears twice in the workflow");
    f = failure_of(R"({"version": "a", "queue": "q", "version": "b", "steps": [{"name": "a"}]})");
    EXPECT_EQ(f.sqlstate, "22023");
    EXPECT_EQ(f.message, "key \"version\" appears twice in the workflow");
    f = failure_of(R"({"queue": "q", "steps": [{"name": "a", "version": "1", "version": "2"}]})");
    EXPECT_EQ(f.sqlstate, "22023");
    EXPECT_EQ(f.message, "key \"version\" appears twice in step \"a\"");
}

// --- 1.6: existing_steps (steps added to a running workflow) ------------------

namespace {
using Existing = std::vector<std::string>;

WorkflowSpec parse_adding(const std::string& text, const Existing& existing) {
    return parse_workflow_spec(text, payload_limit, existing);
}

Failure failure_adding(const std::string& text, const Existing& existing) {
    try {
        parse_workflow_spec(text, payload_limit, existing);
    } catch (const Error& e) {
        return {e.sqlstate(), e.what(), e.detail(), e.hint()};
    }
    return {};
}

const StepSpec& step_named(const WorkflowSpec& w, const std::string& name) {
    for (const StepSpec& s : w.steps)
        if (s.name == name) return s;
    throw std::runtime_error("no step " + name);
}
}  // namespace

TEST(WorkflowSpecExisting, AfterAnExistingStepLandsInAfterExisting) {
    WorkflowSpec w = parse_adding(R"({"queue": "q", "steps": [{"name": "m1", "after": ["split"]}]})",
                                  {"split", "side"});
    ASSERT_EQ(names(w), (Names{"m1"}));
    EXPECT_EQ(w.steps[0].after_existing, (Names{"split"}));
    EXPECT_TRUE(w.steps[0].after.empty());  // nothing to wait for among the new steps
}

TEST(WorkflowSpecExisting, AfterExistingIsDeduplicatedInFirstListedOrder) {
    WorkflowSpec w = parse_adding(
        R"({"queue": "q", "steps": [{"name": "j", "after": ["side", "split", "side", "split", "side"]}]})",
        {"split", "side"});
    EXPECT_EQ(w.steps[0].after_existing, (Names{"side", "split"}));
}

TEST(WorkflowSpecExisting, NewAndExistingPredecessorsTogether) {
    // A join after two new steps and the step that adds them (fan-out + join).
    WorkflowSpec w = parse_adding(R"({"queue": "q", "steps": [
        {"name": "join", "after": ["m1", "split", "m2", "split"]},
        {"name": "m1", "after": ["split"]},
        {"name": "m2"}]})",
                                  {"split"});
    expect_topological(w);
    ASSERT_EQ(names(w), (Names{"m1", "m2", "join"}));
    EXPECT_EQ(after_names(w, "join"), (Names{"m1", "m2"}));
    EXPECT_EQ(step_named(w, "join").after_existing, (Names{"split"}));
    EXPECT_EQ(step_named(w, "m1").after_existing, (Names{"split"}));
    EXPECT_TRUE(step_named(w, "m1").after.empty());
    EXPECT_TRUE(step_named(w, "m2").after_existing.empty());
}

TEST(WorkflowSpecExisting, ExistingStepsDoNotChangeAnOrdinarySpec) {
    WorkflowSpec w = parse_adding(
        R"({"queue": "q", "steps": [{"name": "a"}, {"name": "b", "after": ["a"]}]})", {"x", "y"});
    ASSERT_EQ(names(w), (Names{"a", "b"}));
    EXPECT_EQ(w.steps[1].after, (std::vector<std::size_t>{0}));
    EXPECT_TRUE(w.steps[0].after_existing.empty());
    EXPECT_TRUE(w.steps[1].after_existing.empty());
}

TEST(WorkflowSpecExisting, ANewStepMayNotReuseAnExistingName) {
    Failure f = failure_adding(R"({"queue": "q", "steps": [{"name": "m1"}, {"name": "split"}]})",
                               {"split", "side"});
    EXPECT_EQ(f.sqlstate, "22023");
    EXPECT_EQ(f.message, "step \"split\" is already a step of the workflow");
    EXPECT_FALSE(f.hint.empty());
    // Also when a new step runs after the name it reuses.
    f = failure_adding(R"({"queue": "q", "steps": [{"name": "side", "after": ["side"]}]})",
                       {"split", "side"});
    EXPECT_EQ(f.sqlstate, "22023");
    EXPECT_EQ(f.message, "step \"side\" is already a step of the workflow");
    // Names are case-sensitive: "Split" is a new name.
    WorkflowSpec w = parse_adding(R"({"queue": "q", "steps": [{"name": "Split"}]})", {"split"});
    EXPECT_EQ(names(w), (Names{"Split"}));
}

TEST(WorkflowSpecExisting, DuplicatesAmongNewStepsStillFail) {
    Failure f = failure_adding(R"({"queue": "q", "steps": [{"name": "n"}, {"name": "n"}]})",
                               {"split"});
    EXPECT_EQ(f.sqlstate, "22023");
    EXPECT_EQ(f.message, "duplicate step name \"n\"");
}

TEST(WorkflowSpecExisting, UnknownNamesStillFail) {
    Failure f = failure_adding(
        R"({"queue": "q", "steps": [{"name": "m1", "after": ["split", "nope"]}]})", {"split"});
    EXPECT_EQ(f.sqlstate, "22023");
    EXPECT_EQ(f.message, "step \"m1\" runs after unknown step \"nope\"");
    // Without existing steps, an existing step's name is unknown.
    f = failure_of(R"({"queue": "q", "steps": [{"name": "m1", "after": ["split"]}]})");
    EXPECT_EQ(f.sqlstate, "22023");
    EXPECT_EQ(f.message, "step \"m1\" runs after unknown step \"split\"");
}

TEST(WorkflowSpecExisting, ANewStepAfterItselfStillFails) {
    Failure f = failure_adding(R"({"queue": "q", "steps": [{"name": "m1", "after": ["m1"]}]})",
                               {"split"});
    EXPECT_EQ(f.sqlstate, "22023");
    EXPECT_EQ(f.message, "step \"m1\" runs after itself");
}

TEST(WorkflowSpecExisting, CyclesAmongNewStepsStillFail) {
    Failure f = failure_adding(R"({"queue": "q", "steps": [
        {"name": "a", "after": ["b", "split"]}, {"name": "b", "after": ["a"]}]})",
                               {"split"});
    EXPECT_EQ(f.sqlstate, "22023");
    EXPECT_EQ(f.message, "workflow has a cycle: \"a\" -> \"b\" -> \"a\"");
}

// --- scale ---------------------------------------------------------------------

namespace {
constexpr std::size_t big = 100000;

// Wall and CPU time of one call. The bound is on this thread's CPU time: the
// unit tests share the machine with builds and servers, and a wall clock
// would measure them too.
struct Timing {
    double wall = 0, cpu = 0;
};

double thread_cpu_seconds() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

template <typename F>
Timing time_of(const char* what, F&& f) {
    auto wall0 = std::chrono::steady_clock::now();
    double cpu0 = thread_cpu_seconds();
    f();
    Timing t{std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count(),
             thread_cpu_seconds() - cpu0};
    std::printf("[          ] %s: %.3f s CPU, %.3f s wall\n", what, t.cpu, t.wall);
    return t;
}

std::string step_name(std::size_t i) {
    return "step-" + std::to_string(i);
}
}  // namespace

TEST(WorkflowSpecScale, HundredThousandStepChain) {
    std::string text = R"({"queue": "q", "steps": [{"name": "step-0"})";
    for (std::size_t i = 1; i < big; i++)
        text += R"(,{"name": ")" + step_name(i) + R"(", "after": [")" + step_name(i - 1) + "\"]}";
    text += "]}";
    WorkflowSpec w;
    EXPECT_LT(time_of("100,000-step chain", [&] { w = parse(text); }).cpu, 1.0);
    ASSERT_EQ(w.steps.size(), big);
    for (std::size_t i = 0; i < big; i++) {
        ASSERT_EQ(w.steps[i].name, step_name(i));
        if (i > 0) {
            ASSERT_EQ(w.steps[i].after, (std::vector<std::size_t>{i - 1}));
        }
    }
}

TEST(WorkflowSpecScale, HundredThousandStepChainInReverse) {
    // Every step is listed before its predecessor: the whole order is rebuilt.
    std::string text = R"({"queue": "q", "steps": [)";
    for (std::size_t i = big; i-- > 1;)
        text += R"({"name": ")" + step_name(i) + R"(", "after": [")" + step_name(i - 1) + "\"]},";
    text += R"({"name": "step-0"}]})";
    WorkflowSpec w;
    EXPECT_LT(time_of("100,000-step chain, reversed", [&] { w = parse(text); }).cpu, 1.0);
    ASSERT_EQ(w.steps.size(), big);
    for (std::size_t i = 0; i < big; i++) ASSERT_EQ(w.steps[i].name, step_name(i));
}

TEST(WorkflowSpecScale, HundredThousandStepFanIn) {
    // 99,999 independent steps and one after all of them (map-reduce), listed first.
    std::string text = R"({"queue": "q", "steps": [{"name": "reduce", "after": [)";
    for (std::size_t i = 1; i < big; i++) text += (i > 1 ? ",\"" : "\"") + step_name(i) + "\"";
    text += "]}";
    for (std::size_t i = 1; i < big; i++) text += R"(,{"name": ")" + step_name(i) + "\"}";
    text += "]}";
    WorkflowSpec w;
    EXPECT_LT(time_of("100,000-step fan-in", [&] { w = parse(text); }).cpu, 1.0);
    ASSERT_EQ(w.steps.size(), big);
    for (std::size_t i = 0; i + 1 < big; i++) {
        ASSERT_EQ(w.steps[i].name, step_name(i + 1));
        ASSERT_TRUE(w.steps[i].after.empty());
    }
    EXPECT_EQ(w.steps.back().name, "reduce");
    ASSERT_EQ(w.steps.back().after.size(), big - 1);
    for (std::size_t k = 0; k + 1 < big; k++) ASSERT_EQ(w.steps.back().after[k], k);
}

TEST(WorkflowSpecScale, HundredThousandStepCycle) {
    std::string text = R"({"queue": "q", "steps": [)";
    for (std::size_t i = 0; i < big; i++)
        text += std::string(i ? "," : "") + R"({"name": ")" + step_name(i) + R"(", "after": [")" +
                step_name((i + big - 1) % big) + "\"]}";
    text += "]}";
    Failure f;
    EXPECT_LT(time_of("100,000-step cycle", [&] { f = failure_of(text); }).cpu, 1.0);
    EXPECT_EQ(f.sqlstate, "22023");
    EXPECT_EQ(f.message.rfind("workflow has a cycle: \"step-0\" -> \"step-1\" -> ", 0), 0u)
        << f.message;
    EXPECT_EQ(f.detail, "The cycle has 100000 steps.");
}

// ---- a spec read as tokens (WorkflowSpecReader), as wf_submit reads jsonb ----

namespace {

using Type = JsonEvent::Type;

// Reads the tokens through one buffer that is overwritten after each read:
// a token's text needs to live only during read().
WorkflowSpec read_events(const std::vector<std::pair<Type, std::string>>& events,
                         std::size_t limit = payload_limit) {
    WorkflowSpecReader reader(limit);
    std::string buffer;
    for (const auto& [type, text] : events) {
        buffer = text;
        reader.read(JsonEvent{type, buffer});
        buffer.assign(buffer.size(), '#');
    }
    return reader.finish();
}

Failure failure_of_events(const std::vector<std::pair<Type, std::string>>& events) {
    try {
        read_events(events);
    } catch (const Error& e) {
        return {e.sqlstate(), e.what(), e.detail(), e.hint()};
    }
    return {};
}

// {"queue": "q", "steps": [{"name": "a", "payload": <payload>}, {"after": ["a"], "name": "b", "priority": <priority>}]}
std::vector<std::pair<Type, std::string>> two_steps(
    std::vector<std::pair<Type, std::string>> payload, std::pair<Type, std::string> priority) {
    std::vector<std::pair<Type, std::string>> e = {
        {Type::begin_object, ""}, {Type::key, "queue"}, {Type::string, "q"},
        {Type::key, "steps"},     {Type::begin_array, ""},
        {Type::begin_object, ""}, {Type::key, "name"},  {Type::string, "a"},
        {Type::key, "payload"}};
    e.insert(e.end(), payload.begin(), payload.end());
    std::vector<std::pair<Type, std::string>> rest = {
        {Type::end_object, ""},   {Type::begin_object, ""}, {Type::key, "after"},
        {Type::begin_array, ""},  {Type::string, "a"},      {Type::end_array, ""},
        {Type::key, "name"},      {Type::string, "b"},      {Type::key, "priority"},
        priority,                 {Type::end_object, ""},   {Type::end_array, ""},
        {Type::end_object, ""}};
    e.insert(e.end(), rest.begin(), rest.end());
    return e;
}

}  // namespace

TEST(WorkflowSpecReader, TokensGiveWhatTheTextGives) {
    WorkflowSpec w = read_events(two_steps(
        {{Type::begin_object, ""}, {Type::key, "n"}, {Type::number, "1.50"},
         {Type::key, "s"}, {Type::string, "line\n\"quoted\""}, {Type::key, "t"},
         {Type::boolean, "true"}, {Type::key, "z"}, {Type::null, ""}, {Type::end_object, ""}},
        {Type::number, "7"}));
    WorkflowSpec t = parse(R"({"queue": "q", "steps": [
        {"name": "a", "payload": {"n": 1.50, "s": "line\n\"quoted\"", "t": true, "z": null}},
        {"after": ["a"], "name": "b", "priority": 7}]})");
    ASSERT_EQ(names(w), names(t));
    for (std::size_t i = 0; i < 2; i++) {
        EXPECT_EQ(w.steps[i].queue, t.steps[i].queue);
        EXPECT_EQ(w.steps[i].payload_json, t.steps[i].payload_json);
        EXPECT_EQ(w.steps[i].priority, t.steps[i].priority);
        EXPECT_EQ(w.steps[i].after, t.steps[i].after);
    }
    EXPECT_EQ(w.steps[0].payload_json, R"({"n":1.50,"s":"line\n\"quoted\"","t":true,"z":null})");
    EXPECT_EQ(w.steps[1].priority, 7);
}

// Numbers arrive as text (jsonb's numeric output) and are classified as
// nlohmann classifies the same text.
TEST(WorkflowSpecReader, NumbersAreClassifiedByTheirText) {
    auto priority_failure = [](const std::string& number) {
        return failure_of_events(two_steps({{Type::begin_object, ""}, {Type::end_object, ""}},
                                           {Type::number, number}));
    };
    EXPECT_EQ(priority_failure("-2147483648").sqlstate, "");
    EXPECT_EQ(priority_failure("2147483647").sqlstate, "");
    for (const char* fraction : {"1.5", "1.0", "1e3", "2.5E+10", "123456789012345678901234567890",
                                 "-99999999999999999999"}) {
        Failure f = priority_failure(fraction);
        EXPECT_EQ(f.message, "\"priority\" of step \"b\" must be an integer") << fraction;
        EXPECT_EQ(f.detail, "It is a number with a fraction or an exponent.") << fraction;
    }
    for (const char* big : {"2147483648", "-2147483649", "18446744073709551615",
                            "-9223372036854775808"}) {
        Failure f = priority_failure(big);
        EXPECT_EQ(f.message, "\"priority\" of step \"b\" is out of range for an integer") << big;
    }
    WorkflowSpec w = read_events(two_steps({{Type::number, "123456789012345678901234567890"}},
                                           {Type::number, "0"}));
    EXPECT_EQ(w.steps[0].payload_json, "123456789012345678901234567890");
}

TEST(WorkflowSpecReader, ErrorsAreTheTextsErrors) {
    // A scalar spec, a key typo in a step, a payload over the limit.
    Failure scalar = failure_of_events({{Type::number, "5"}});
    EXPECT_EQ(scalar.sqlstate, "22023");
    EXPECT_EQ(scalar.message, "workflow spec must be a JSON object");
    EXPECT_EQ(scalar.detail, "It is a number.");
    auto events = two_steps({{Type::string, "x"}}, {Type::number, "1"});
    events[6].second = "nmae";  // step 1's "name"
    Failure typo = failure_of_events(events);
    EXPECT_EQ(typo.message, failure_of(R"({"queue": "q", "steps": [{"nmae": "a", "payload": "x"},
        {"after": ["a"], "name": "b", "priority": 1}]})").message);
    EXPECT_EQ(typo.message, "unknown key \"nmae\" in step 1");
    try {
        read_events(two_steps({{Type::string, std::string(40, 'x')}}, {Type::number, "1"}), 32);
        ADD_FAILURE() << "a payload over the limit was accepted";
    } catch (const Error& e) {
        EXPECT_EQ(e.sqlstate(), "54000");
    }
}

TEST(WorkflowSpecReader, ASourceThatStopsInsideAValueIsRefused) {
    WorkflowSpecReader reader(payload_limit);
    reader.read(JsonEvent{Type::begin_object});
    reader.read(JsonEvent{Type::key, "queue"});
    reader.read(JsonEvent{Type::string, "q"});
    try {
        reader.finish();
        ADD_FAILURE() << "an unfinished spec was accepted";
    } catch (const Error& e) {
        EXPECT_EQ(e.sqlstate(), "22P02");
        EXPECT_EQ(std::string(e.detail()), "It ends inside an object or an array.");
    }
    WorkflowSpecReader nothing(payload_limit);
    EXPECT_THROW(nothing.finish(), Error);
}

TEST(WorkflowSpecReader, TokensAfterTheEndAreRefused) {
    for (Type extra : {Type::end_object, Type::begin_object, Type::null}) {
        WorkflowSpecReader reader(payload_limit);
        if (extra != Type::end_object) {
            reader.read(JsonEvent{Type::begin_object});
            reader.read(JsonEvent{Type::end_object});
        }
        try {
            reader.read(JsonEvent{extra});
            ADD_FAILURE() << "a token after the end was read";
        } catch (const Error& e) {
            EXPECT_EQ(e.sqlstate(), "22P02");
        }
    }
}

// A payload the source gives formed (a jsonb container) is kept by its
// handle, its size checked as a payload's text is; anywhere else it is
// refused.
TEST(WorkflowSpecReader, FormedPayloadsAreKeptByTheirHandle) {
    auto read_with = [](const JsonEvent& value, const char* key, std::size_t limit) {
        WorkflowSpecReader reader(limit);
        for (const JsonEvent& e : {JsonEvent{Type::begin_object}, JsonEvent{Type::key, "queue"},
                                   JsonEvent{Type::string, "q"}, JsonEvent{Type::key, "steps"},
                                   JsonEvent{Type::begin_array}, JsonEvent{Type::begin_object},
                                   JsonEvent{Type::key, "name"}, JsonEvent{Type::string, "a"},
                                   JsonEvent{Type::key, key}, value, JsonEvent{Type::end_object},
                                   JsonEvent{Type::begin_object}, JsonEvent{Type::key, "name"},
                                   JsonEvent{Type::string, "b"}, JsonEvent{Type::end_object},
                                   JsonEvent{Type::end_array}, JsonEvent{Type::end_object}})
            reader.read(e);
        return reader.finish();
    };
    JsonEvent formed{Type::formed, {}, 0x1234, 30};
    WorkflowSpec w = read_with(formed, "payload", 30);
    ASSERT_EQ(w.steps.size(), 2u);
    EXPECT_EQ(w.steps[0].payload_formed, 0x1234u);
    EXPECT_EQ(w.steps[0].payload_json, "");
    EXPECT_EQ(w.steps[1].payload_formed, 0u);  // the default {}, as text
    EXPECT_EQ(w.steps[1].payload_json, "{}");
    try {
        read_with(formed, "payload", 29);
        ADD_FAILURE() << "a formed payload over the limit was accepted";
    } catch (const Error& e) {
        EXPECT_EQ(e.sqlstate(), "54000");
        EXPECT_EQ(std::string(e.what()), "payload of step \"a\" is too large");
        EXPECT_EQ(std::string(e.detail()), "payload of step \"a\" has 30 bytes; the limit is 29.");
    }
    for (const char* elsewhere : {"queue", "after", "name"}) {
        try {
            read_with(formed, elsewhere, 100);
            ADD_FAILURE() << "a formed value was read as " << elsewhere;
        } catch (const Error& e) {
            EXPECT_EQ(e.sqlstate(), "22023") << elsewhere;
        }
    }
    try {
        read_with(JsonEvent{Type::formed, {}, 0, 2}, "payload", 100);
        ADD_FAILURE() << "a formed value without a handle was accepted";
    } catch (const Error& e) {
        EXPECT_EQ(e.sqlstate(), "22023");
    }
    WorkflowSpecReader at_root(100);
    EXPECT_THROW(at_root.read(formed), Error);
}
