// The workflow spec of wf_submit(spec jsonb): parsed and checked as a whole
// before anything is written, so a bad spec creates nothing.
//
// Shape (every key other than "steps" and a step's "name" is optional):
//
//   {
//     "name":  "nightly-report",          workflow label
//     "queue": "default",                 queue of the steps that name none
//     "key":   "order-42",                at most one active workflow per key
//     "version": "v2",                    version of the steps that name none
//     "steps": [
//       {"name": "fetch", "payload": {"url": "https://example.com"}},
//       {"name": "summarize",
//        "queue": "llm",                  overrides the top-level "queue"
//        "payload": {"model": "small"},   any JSON value; {} when absent
//        "priority": 5,                   integer; 0 when absent
//        "max_attempts": 3,               positive integer; the queue's default when absent
//        "run_at": "2026-12-01T10:00:00Z",  kept as text: the SQL layer casts it
//        "key": "customer-42",            the job's key (flow control); none when absent
//        "version": "v2",                 the step's version (claims with versions)
//        "after": ["fetch"]}              names of the steps it runs after
//     ]
//   }
//
// Rules:
// - Unknown keys are errors, at the top level and in steps (a typo such as
//   "afterr" must not silently drop a dependency), and so is a key given twice
//   (jsonb never has one; raw text might).
// - JSON null for an optional key means the key is absent and its default applies.
// - Step names are unique and case-sensitive. "after" may name steps listed
//   later; a step may not list itself; repeated names in "after" count once (as
//   duplicate ids in wf_enqueue's depends_on do). Its length is not capped by
//   limits::max_dependencies: a fan-in step after every other step (map-reduce)
//   is a workflow's ordinary shape, and the step limit bounds it.
// - Steps are counted from 1 in messages ("step 3 has no name"); a step with a
//   valid name is named by it, even when the offending key comes first. The
//   first error is reported: first those found reading the text, in its order;
//   then, with the whole spec read, a duplicate name, a step without a queue,
//   an unknown predecessor or a step after itself; then a cycle.
// - A payload is returned as compact JSON text, its keys in the order given
//   (jsonb's, for a spec that was jsonb) and its numbers as their source text
//   ("1.50", 123456789012345678901234567890): no double in between, so a
//   payload reaches the job unchanged. Its size, the default {} included, is
//   checked against max_payload_bytes. A source that has the payload formed
//   already (a jsonb's container) gives it whole instead (JsonEvent::formed):
//   the step then keeps the source's handle, and its size is the source's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace wf::core {

namespace limits {
inline constexpr std::size_t max_workflow_steps = 100000;
inline constexpr std::size_t run_at_bytes = 128;
}  // namespace limits

struct StepSpec {
    std::string name;
    std::string queue;                // the step's own, else the workflow's
    std::string payload_json = "{}";  // compact JSON text; empty when formed
    // The source's handle of a payload it gave formed (JsonEvent::formed),
    // which payload_json then does not hold; 0 when none.
    std::uint64_t payload_formed = 0;
    int priority = 0;
    std::optional<int> max_attempts;  // absent: the queue's default
    std::optional<std::string> run_at;
    std::optional<std::string> key;
    std::optional<std::string> version;  // absent: the workflow's, else the queue's
    // Steps already in the workflow it runs after (a step added by
    // wf_complete_with_steps), by name, each once.
    std::vector<std::string> after_existing;
    // Indexes into WorkflowSpec::steps of the steps it runs after: ascending,
    // without duplicates, each smaller than the step's own index.
    std::vector<std::size_t> after;
};

struct WorkflowSpec {
    std::optional<std::string> name;
    std::optional<std::string> key;      // signal-with-start: one active workflow per key
    std::optional<std::string> version;  // of the steps that name none
    // In a topological order: every step comes after the steps it runs after.
    // The order is the input order, except that a step listed before one of
    // its predecessors moves down to follow the last of them; a spec already
    // in topological order keeps its order exactly.
    std::vector<StepSpec> steps;
};

// One token of a JSON document. A spec already parsed (jsonb) is read as
// these, with no JSON text in between; parse_workflow_spec turns text into
// the same tokens. `text`: a string's or a key's value (unescaped), a
// number's text as JSON writes it ("12", "1.50", "1e3"), a boolean's
// ("true"/"false"); it needs to live only until read() returns.
//
// `formed`: an object or array the source has formed already, given whole
// where a step's payload goes (the value of a step's "payload" key, and
// nowhere else): `handle` names it for the source, which keeps it alive
// until the spec is written; `bytes` is its size for max_payload_bytes.
// A jsonb source gives its payload containers so, which then need neither
// their tokens read nor their text parsed again.
struct JsonEvent {
    enum class Type : unsigned char {
        null, boolean, number, string, key, begin_object, end_object, begin_array, end_array,
        formed
    };
    Type type = Type::null;
    std::string_view text;
    std::uint64_t handle = 0;  // formed: non-zero
    std::size_t bytes = 0;     // formed
};

// Reads a spec token by token, then checks it whole: what
// parse_workflow_spec does, for a source that is not text.
class WorkflowSpecReader {
public:
    explicit WorkflowSpecReader(std::size_t max_payload_bytes);
    ~WorkflowSpecReader();
    WorkflowSpecReader(const WorkflowSpecReader&) = delete;
    WorkflowSpecReader& operator=(const WorkflowSpecReader&) = delete;

    // Throws wf::core::Error at the first error the tokens so far show.
    void read(const JsonEvent& event);
    // After the last token: the spec, with parse_workflow_spec's arguments
    // and errors.
    WorkflowSpec finish(const std::vector<std::string>& existing_steps = {},
                        const std::string& default_queue = {});

private:
    struct State;
    std::unique_ptr<State> state_;
};

// Throws wf::core::Error: 22P02 for text that is not JSON, 54000 for limits
// (step count, name lengths, a payload over max_payload_bytes), 22023 for
// everything else (wrong types, unknown keys, missing or duplicate names,
// unknown predecessors, cycles), each message naming the offending step.
// `existing_steps`: names of steps already in the workflow (steps added to a
// running workflow): "after" may name them, new steps may not reuse them.
// `default_queue` (non-empty): the queue of steps that name none when the
// spec has no "queue" of its own.
WorkflowSpec parse_workflow_spec(std::string_view json_text, std::size_t max_payload_bytes,
                                 const std::vector<std::string>& existing_steps = {},
                                 const std::string& default_queue = {});

}  // namespace wf::core
