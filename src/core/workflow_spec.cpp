#include "workflow_spec.hpp"

#include <algorithm>
#include <charconv>
#include <cctype>
#include <climits>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <unordered_set>
#include <utility>

#include <nlohmann/json.hpp>

#include "error.hpp"
#include "validation.hpp"

namespace wf::core {

namespace {

using json = nlohmann::json;

constexpr std::size_t no_index = static_cast<std::size_t>(-1);

std::string in_quotes(std::string_view s) {
    return "\"" + std::string(s) + "\"";
}

[[noreturn]] void fail(std::string message, std::string detail = {}, std::string hint = {}) {
    throw Error(sqlstate::invalid_parameter, std::move(message), std::move(detail),
                std::move(hint));
}

// The kinds of JSON value, as a message names them ("It is a string.").
enum class Kind { null, boolean, integer, fraction, string, object, array };

std::string describe(Kind k) {
    switch (k) {
        case Kind::null:
            return "null";
        case Kind::boolean:
            return "a boolean";
        case Kind::integer:
            return "a number";
        case Kind::fraction:
            return "a number with a fraction or an exponent";
        case Kind::string:
            return "a string";
        case Kind::object:
            return "an object";
        case Kind::array:
            break;
    }
    return "an array";
}

bool is_container(Kind k) {
    return k == Kind::object || k == Kind::array;
}

// JSON string syntax for text the lexer has already checked to be UTF-8.
void append_string(std::string& out, std::string_view s) {
    static const char hex[] = "0123456789abcdef";
    out += '"';
    for (char ch : s) {
        auto c = static_cast<unsigned char>(ch);
        switch (c) {
            case '"':
                out += "\\\"";
                break;
            case '\\':
                out += "\\\\";
                break;
            case '\b':
                out += "\\b";
                break;
            case '\f':
                out += "\\f";
                break;
            case '\n':
                out += "\\n";
                break;
            case '\r':
                out += "\\r";
                break;
            case '\t':
                out += "\\t";
                break;
            default:
                if (c < 0x20) {
                    out += "\\u00";
                    out += hex[c >> 4];
                    out += hex[c & 0xf];
                } else {
                    out += ch;
                }
        }
    }
    out += '"';
}

// The keys of the spec; a bit each, to notice one given twice.
enum Field : unsigned {
    f_none = 0,
    f_name = 1u << 0,
    f_queue = 1u << 1,
    f_steps = 1u << 2,
    f_payload = 1u << 3,
    f_priority = 1u << 4,
    f_max_attempts = 1u << 5,
    f_run_at = 1u << 6,
    f_after = 1u << 7,
    f_key = 1u << 8,
    f_unknown = 1u << 9,
    f_version = 1u << 10,
};

struct KeyName {
    const char* key;
    Field field;
};
const KeyName workflow_keys[] = {{"name", f_name},
                                 {"queue", f_queue},
                                 {"key", f_key},
                                 {"version", f_version},
                                 {"steps", f_steps}};
const KeyName step_keys[] = {{"name", f_name},
                             {"queue", f_queue},
                             {"payload", f_payload},
                             {"priority", f_priority},
                             {"max_attempts", f_max_attempts},
                             {"run_at", f_run_at},
                             {"key", f_key},
                             {"version", f_version},
                             {"after", f_after}};

template <std::size_t N>
Field field_of(std::string_view key, const KeyName (&keys)[N]) {
    for (const KeyName& k : keys)
        if (key == k.key) return k.field;
    return f_unknown;
}

template <std::size_t N>
std::string key_list(const KeyName (&keys)[N]) {
    std::string list;
    for (std::size_t i = 0; i < N; i++)
        list += (i == 0 ? "" : i + 1 == N ? " and " : ", ") + in_quotes(keys[i].key);
    return list;
}

// A step as written, before its predecessors are resolved.
struct ParsedStep {
    StepSpec spec;
    bool has_name = false;
    bool has_queue = false;
    std::size_t after_begin = 0, after_end = 0;  // its names in SpecReader::after_names
    std::size_t formed_bytes = 0;  // a formed payload's size (StepSpec::payload_formed)
};

// Reads the spec straight from nlohmann's SAX events, with no document tree
// in between: a 100,000-step spec as a tree costs several times the memory of
// the steps themselves, and the time is in that memory.
//
// Payloads are written back as text as they stream past, numbers as their
// source text: a double would change 0.1000000000000000055511 or
// 123456789012345678901234567890 on the way from the caller's jsonb to the
// job's.
//
// A step's errors wait for the end of its object, so that the message can
// name the step even when its "name" comes after the offending key; the first
// error in the step's text is the one reported.
class SpecReader {
public:
    explicit SpecReader(std::size_t max_payload_bytes) : max_payload_(max_payload_bytes) {}

    std::optional<std::string> name;
    std::optional<std::string> queue;
    std::optional<std::string> workflow_key;
    std::optional<std::string> version;
    std::deque<ParsedStep> steps;  // a deque: NameIndex keeps views of the names
    std::vector<std::string> after_names;

    // One token of the spec (see JsonEvent).
    void read(const JsonEvent& event);
    // Whether every object and array opened has been closed.
    bool complete() const { return started_ && stack_.empty(); }

private:
    enum class Ctx { root, steps, step, after, payload, skip };
    struct Frame {
        Ctx ctx;
        bool is_object;
        bool first = true;      // payload: no comma yet
        Field field = f_none;   // root and step: the key whose value comes next
        unsigned seen = 0;      // root and step: the keys given so far
        std::size_t count = 0;  // after: elements so far
    };

    std::size_t max_payload_;
    std::vector<Frame> stack_;
    // The scalar of the current event.
    std::int64_t int_ = 0;
    std::string text_;  // a number's or a boolean's text
    std::string_view string_;  // a string's value, valid during its event
    bool started_ = false;
    // The first error in the current step; given where, `step "x"` or `step 3`.
    std::function<Error(const std::string& where)> pending_;

    bool value(Kind k);
    void key(std::string_view k);
    void number(std::string_view text);
    void root_value(Field field, Kind k);
    void step_value(Field field, Kind k);
    void after_element(Kind k);
    void payload_value(Kind k);
    void formed_payload(const JsonEvent& event);
    bool close();
    void begin_step();
    void end_step();
    void check_payload_size();

    void push(Ctx ctx, Kind k) { stack_.push_back(Frame{ctx, k == Kind::object}); }
    std::string ordinal() const { return "step " + std::to_string(steps.size()); }
    std::string& payload() { return steps.back().spec.payload_json; }

    void defer(std::function<Error(const std::string&)> make) {
        if (!pending_) pending_ = std::move(make);
    }
    void defer(const Error& e) {
        defer([e](const std::string&) { return e; });
    }
    void defer_wrong_type(const char* key, const char* expected, Kind k) {
        defer([=](const std::string& where) {
            return Error(sqlstate::invalid_parameter,
                         in_quotes(key) + " of " + where + " must be " + expected,
                         "It is " + describe(k) + ".");
        });
    }
    // A check from validation.hpp, its message told where the value sits.
    template <typename F>
    void defer_check(F&& check) {
        try {
            check();
        } catch (const Error& e) {
            defer([e](const std::string& where) {
                return Error(e.sqlstate(), std::string(e.what()) + " in " + where, e.detail(),
                             e.hint());
            });
        }
    }
    std::optional<int> int_value(const char* key, Kind k);
};

void SpecReader::read(const JsonEvent& event) {
    // Tokens after the spec's end, or an end with nothing open: not JSON
    // (jsonb and the text's parser never give them).
    bool is_end = event.type == JsonEvent::Type::end_object || event.type == JsonEvent::Type::end_array;
    if (stack_.empty() && (started_ || is_end))
        throw Error(sqlstate::invalid_text, "workflow spec is not valid JSON",
                    "It has a token after its end.");
    started_ = true;
    switch (event.type) {
        case JsonEvent::Type::null:
            value(Kind::null);
            break;
        case JsonEvent::Type::boolean:
            text_.assign(event.text);
            value(Kind::boolean);
            break;
        case JsonEvent::Type::number:
            number(event.text);
            break;
        case JsonEvent::Type::string:
            string_ = event.text;
            value(Kind::string);
            break;
        case JsonEvent::Type::key:
            key(event.text);
            break;
        case JsonEvent::Type::begin_object:
            value(Kind::object);
            break;
        case JsonEvent::Type::begin_array:
            value(Kind::array);
            break;
        case JsonEvent::Type::end_object:
        case JsonEvent::Type::end_array:
            close();
            break;
        case JsonEvent::Type::formed:
            formed_payload(event);
            break;
    }
}

// A payload the source gave formed: kept by its handle, its size checked
// at the end of the step as a payload's text is.
void SpecReader::formed_payload(const JsonEvent& event) {
    Frame* f = stack_.empty() ? nullptr : &stack_.back();
    if (f == nullptr || f->ctx != Ctx::step || (f->field != f_payload && f->field != f_unknown) ||
        event.handle == 0)
        throw Error(sqlstate::invalid_parameter,
                    "workflow spec has a formed value where no step's payload goes");
    if (f->field == f_unknown) return;  // a key given twice: its value is ignored
    ParsedStep& step = steps.back();
    step.spec.payload_json.clear();
    step.spec.payload_formed = event.handle;
    step.formed_bytes = event.bytes;
}

// A number by its text, as nlohmann classifies one: an integer when it has
// no fraction or exponent and fits int64 (or uint64: kept as INT64_MAX, out
// of every range checked), else a fraction (123456789012345678901234567890).
void SpecReader::number(std::string_view text) {
    text_.assign(text);
    Kind k = Kind::fraction;
    if (!text.empty() && text.find_first_of(".eE") == std::string_view::npos) {
        const char* end = text.data() + text.size();
        std::int64_t v = 0;
        std::uint64_t u = 0;
        if (auto [p, ec] = std::from_chars(text.data(), end, v); ec == std::errc() && p == end) {
            int_ = v;
            k = Kind::integer;
        } else if (auto [q, ec2] = std::from_chars(text.data(), end, u);
                   ec2 == std::errc() && q == end) {
            int_ = INT64_MAX;
            k = Kind::integer;
        }
    }
    value(k);
}

bool SpecReader::value(Kind k) {
    if (stack_.empty()) {
        if (k != Kind::object)
            fail("workflow spec must be a JSON object", "It is " + describe(k) + ".");
        push(Ctx::root, k);
        return true;
    }
    Frame& f = stack_.back();
    switch (f.ctx) {
        case Ctx::root:
            root_value(f.field, k);
            break;
        case Ctx::steps:
            if (k != Kind::object)
                fail("step " + std::to_string(steps.size() + 1) + " must be a JSON object",
                     "It is " + describe(k) + ".");
            begin_step();
            push(Ctx::step, k);
            break;
        case Ctx::step:
            step_value(f.field, k);
            break;
        case Ctx::after:
            after_element(k);
            break;
        case Ctx::payload:
            payload_value(k);
            break;
        case Ctx::skip:
            if (is_container(k)) push(Ctx::skip, k);
            break;
    }
    return true;
}

void SpecReader::key(std::string_view k) {
    Frame& f = stack_.back();
    switch (f.ctx) {
        case Ctx::root:
            f.field = field_of(k, workflow_keys);
            if (f.field == f_unknown)
                fail("unknown key " + in_quotes(k) + " in the workflow", {},
                     "The keys of the workflow are " + key_list(workflow_keys) + ".");
            if (f.seen & f.field) fail("key " + in_quotes(k) + " appears twice in the workflow");
            f.seen |= f.field;
            break;
        case Ctx::step:
            f.field = field_of(k, step_keys);
            if (f.field == f_unknown) {
                defer([k = std::string(k)](const std::string& where) {
                    return Error(sqlstate::invalid_parameter,
                                 "unknown key " + in_quotes(k) + " in " + where, {},
                                 "The keys of a step are " + key_list(step_keys) + ".");
                });
            } else if (f.seen & f.field) {
                defer([k = std::string(k)](const std::string& where) {
                    return Error(sqlstate::invalid_parameter,
                                 "key " + in_quotes(k) + " appears twice in " + where);
                });
                f.field = f_unknown;  // the value is ignored
            }
            f.seen |= f.field;
            break;
        case Ctx::payload:
            if (!f.first) payload() += ',';
            f.first = false;
            append_string(payload(), k);
            payload() += ':';
            break;
        default:
            break;
    }
}

void SpecReader::root_value(Field field, Kind k) {
    if (k == Kind::null) return;  // absent
    if (field == f_steps) {
        if (k != Kind::array)
            fail("\"steps\" of the workflow must be an array", "It is " + describe(k) + ".");
        push(Ctx::steps, k);
        return;
    }
    const char* key = field == f_name    ? "name"
                      : field == f_key   ? "key"
                      : field == f_version ? "version"
                                           : "queue";
    if (k != Kind::string)
        fail(in_quotes(key) + " of the workflow must be a string", "It is " + describe(k) + ".");
    if (field == f_key || field == f_version) {
        validate_label(string_, std::string("workflow ") + key);
        (field == f_key ? workflow_key : version) = string_;
    } else if (field == f_name) {
        validate_label(string_, "workflow name");
        name = string_;
    } else {
        try {
            validate_queue_name(string_);
        } catch (const Error& e) {
            throw Error(e.sqlstate(), std::string(e.what()) + " in the workflow", e.detail(),
                        e.hint());
        }
        queue = string_;
    }
}

std::optional<int> SpecReader::int_value(const char* key, Kind k) {
    if (k != Kind::integer) {
        defer_wrong_type(key, "an integer", k);
        return std::nullopt;
    }
    if (int_ < INT_MIN || int_ > INT_MAX) {
        defer([key](const std::string& where) {
            return Error(sqlstate::invalid_parameter,
                         in_quotes(key) + " of " + where + " is out of range for an integer",
                         "It must lie between " + std::to_string(INT_MIN) + " and " +
                             std::to_string(INT_MAX) + ".");
        });
        return std::nullopt;
    }
    return static_cast<int>(int_);
}

void SpecReader::step_value(Field field, Kind k) {
    ParsedStep& step = steps.back();
    // Null is an absent key; an unexpected container is skipped whole.
    bool taken = false;
    if (k == Kind::null && field != f_unknown) return;
    switch (field) {
        case f_name:
            if (k != Kind::string) {
                defer_wrong_type("name", "a string", k);
                break;
            }
            if (string_.empty() || string_.size() > limits::label_bytes) {
                // Its "name of step 3" argument is built only for a bad name.
                try {
                    validate_label(string_, "name of " + ordinal());
                } catch (const Error& e) {
                    defer(e);
                }
                break;
            }
            step.spec.name = string_;
            step.has_name = true;
            break;
        case f_queue:
            if (k != Kind::string) {
                defer_wrong_type("queue", "a string", k);
                break;
            }
            defer_check([&] { validate_queue_name(string_); });
            step.spec.queue = string_;
            step.has_queue = true;
            break;
        case f_payload:
            payload().clear();
            step.spec.payload_formed = 0;
            payload_value(k);
            taken = true;
            break;
        case f_priority:
            if (auto v = int_value("priority", k)) step.spec.priority = *v;
            break;
        case f_max_attempts:
            if (auto v = int_value("max_attempts", k)) {
                if (*v <= 0 || *v > limits::max_attempts)
                    defer([n = *v](const std::string& where) {
                        return Error(sqlstate::invalid_parameter,
                                     "\"max_attempts\" of " + where +
                                         (n <= 0 ? " must be positive, not "
                                                 : " must be at most " +
                                                       std::to_string(limits::max_attempts) +
                                                       ", not ") +
                                         std::to_string(n));
                    });
                else
                    step.spec.max_attempts = *v;
            }
            break;
        case f_key:
            if (k != Kind::string) {
                defer_wrong_type("key", "a string", k);
                break;
            }
            defer_check([&] { validate_label(string_, "\"key\""); });
            step.spec.key = string_;
            break;
        case f_version:
            if (k != Kind::string) {
                defer_wrong_type("version", "a string", k);
                break;
            }
            defer_check([&] { validate_label(string_, "\"version\""); });
            step.spec.version = string_;
            break;
        case f_run_at:
            if (k != Kind::string) {
                defer_wrong_type("run_at", "a string", k);
            } else if (string_.empty()) {
                defer([](const std::string& where) {
                    return Error(sqlstate::invalid_parameter,
                                 "\"run_at\" of " + where + " must not be empty");
                });
            } else if (string_.size() > limits::run_at_bytes) {
                defer([bytes = string_.size()](const std::string& where) {
                    return Error(sqlstate::program_limit, "\"run_at\" of " + where + " is too long",
                                 "It is limited to " + std::to_string(limits::run_at_bytes) +
                                     " bytes; this one has " + std::to_string(bytes) + ".");
                });
            } else {
                step.spec.run_at = string_;
            }
            break;
        case f_after:
            if (k != Kind::array) {
                defer_wrong_type("after", "an array of step names", k);
                break;
            }
            push(Ctx::after, k);
            taken = true;
            break;
        default:  // an unknown or repeated key, already reported
            break;
    }
    if (!taken && is_container(k)) push(Ctx::skip, k);
}

void SpecReader::after_element(Kind k) {
    std::size_t n = ++stack_.back().count;
    if (k == Kind::string) {
        after_names.emplace_back(string_);
        return;
    }
    defer([n, k](const std::string& where) {
        return Error(sqlstate::invalid_parameter,
                     "\"after\" of " + where + " must be an array of step names",
                     "Element " + std::to_string(n) + " is " + describe(k) + ".");
    });
    if (is_container(k)) push(Ctx::skip, k);
}

void SpecReader::payload_value(Kind k) {
    std::string& out = payload();
    if (!stack_.empty()) {
        Frame& f = stack_.back();
        if (f.ctx == Ctx::payload && !f.is_object) {  // in an object, key() wrote the separator
            if (!f.first) out += ',';
            f.first = false;
        }
    }
    switch (k) {
        case Kind::null:
            out += "null";
            break;
        case Kind::boolean:
        case Kind::integer:
        case Kind::fraction:
            out += text_;
            break;
        case Kind::string:
            append_string(out, string_);
            break;
        case Kind::object:
        case Kind::array:
            out += k == Kind::object ? '{' : '[';
            push(Ctx::payload, k);
            return;
    }
}

void SpecReader::check_payload_size() {
    const ParsedStep& step = steps.back();
    std::size_t bytes = step.spec.payload_formed != 0 ? step.formed_bytes : step.spec.payload_json.size();
    if (bytes <= max_payload_) return;
    defer([bytes, limit = max_payload_](const std::string& where) {
        try {
            validate_payload_size(bytes, limit, "payload of " + where);
        } catch (const Error& e) {
            return e;
        }
        return Error(sqlstate::program_limit, "payload of " + where + " is too large");
    });
}

bool SpecReader::close() {
    Frame f = stack_.back();
    stack_.pop_back();
    if (f.ctx == Ctx::payload) {
        payload() += f.is_object ? '}' : ']';
    } else if (f.ctx == Ctx::step) {
        end_step();
    }
    return true;
}

void SpecReader::begin_step() {
    if (steps.size() == limits::max_workflow_steps)
        throw Error(
            sqlstate::program_limit,
            "workflow has more than " + std::to_string(limits::max_workflow_steps) + " steps", {},
            "Split the work into several workflows.");
    steps.emplace_back();
    steps.back().after_begin = after_names.size();
}

void SpecReader::end_step() {
    ParsedStep& step = steps.back();
    step.after_end = after_names.size();
    check_payload_size();  // the default {} included, as in wf_enqueue
    if (pending_) {
        auto make = std::move(pending_);
        pending_ = nullptr;
        throw make(step.has_name ? "step " + in_quotes(step.spec.name) : ordinal());
    }
    if (!step.has_name) fail(ordinal() + " has no name", {}, "Every step needs a unique \"name\".");
}

// Step indexes by name: open addressing in one flat array, built once the
// step count is known. A node-based map spends its time in the allocator and
// in cache misses, and this lookup runs once per step and once per edge.
class NameIndex {
public:
    explicit NameIndex(const std::deque<ParsedStep>& steps) : steps_(steps) {
        std::size_t capacity = 16;
        while (capacity < 2 * steps.size()) capacity *= 2;
        slots_.assign(capacity, Slot{0, no_index});
        mask_ = capacity - 1;
    }

    // Adds step i; returns the earlier step of the same name, or no_index.
    std::size_t insert(std::size_t i) {
        const std::string& name = steps_[i].spec.name;
        std::size_t hash = std::hash<std::string_view>{}(name);
        std::size_t at = probe(name, hash);
        if (slots_[at].index != no_index) return slots_[at].index;
        slots_[at] = Slot{hash, i};
        return no_index;
    }

    std::size_t find(std::string_view name) const {
        return slots_[probe(name, std::hash<std::string_view>{}(name))].index;
    }

private:
    struct Slot {
        std::size_t hash;
        std::size_t index;  // no_index: empty
    };
    const std::deque<ParsedStep>& steps_;
    std::vector<Slot> slots_;
    std::size_t mask_ = 0;

    // The slot holding `name`, or the empty slot where it would go.
    std::size_t probe(std::string_view name, std::size_t hash) const {
        for (std::size_t at = hash & mask_;; at = (at + 1) & mask_) {
            const Slot& slot = slots_[at];
            if (slot.index == no_index) return at;
            if (slot.hash == hash && steps_[slot.index].spec.name == name) return at;
        }
    }
};

// Predecessors of each step by input index, in one flat array.
struct Edges {
    std::vector<std::size_t> start;  // step i's are at [start[i], start[i + 1])
    std::vector<std::size_t> to;
    std::size_t count(std::size_t i) const { return start[i + 1] - start[i]; }
    const std::size_t* begin(std::size_t i) const { return to.data() + start[i]; }
    const std::size_t* end(std::size_t i) const { return to.data() + start[i + 1]; }
};

// Names the steps of one cycle among the steps Kahn's algorithm could not
// place. Each of them waits for an unplaced predecessor, so walking from one
// to a waiting-for predecessor again and again must come back to a step
// already seen: that loop is a cycle. O(steps + edges).
[[noreturn]] void report_cycle(const std::deque<ParsedStep>& steps, const Edges& parents,
                               const std::vector<char>& placed) {
    std::size_t start = 0;
    while (placed[start]) start++;
    std::vector<std::size_t> seen_at(steps.size(), no_index);
    std::vector<std::size_t> path;
    std::size_t v = start;
    while (seen_at[v] == no_index) {
        seen_at[v] = path.size();
        path.push_back(v);
        v = *std::find_if(parents.begin(v), parents.end(v),
                          [&](std::size_t p) { return !placed[p]; });
    }
    // path runs from a step to its predecessor; a cycle reads the other way.
    std::vector<std::size_t> cycle(path.begin() + seen_at[v], path.end());
    std::reverse(cycle.begin(), cycle.end());
    std::rotate(cycle.begin(), std::min_element(cycle.begin(), cycle.end()), cycle.end());

    constexpr std::size_t shown_whole = 16, shown_head = 8;
    std::string text;
    for (std::size_t i = 0; i < cycle.size(); i++) {
        if (cycle.size() > shown_whole && i == shown_head) {
            text += " -> ...";
            i = cycle.size() - 1;
        }
        text += (i == 0 ? "" : " -> ") + in_quotes(steps[cycle[i]].spec.name);
    }
    text += " -> " + in_quotes(steps[cycle[0]].spec.name);
    fail("workflow has a cycle: " + text,
         cycle.size() > shown_whole ? "The cycle has " + std::to_string(cycle.size()) + " steps."
                                    : std::string(),
         "Each step in it runs after the one before it; remove one of these \"after\" "
         "entries.");
}

// nlohmann's SAX events, from JSON text, as JsonEvents.
class TextEvents {
public:
    explicit TextEvents(SpecReader& reader) : reader_(reader) {}
    std::string syntax_error;

    bool null() { return on(JsonEvent::Type::null); }
    bool boolean(bool v) { return on(JsonEvent::Type::boolean, v ? "true" : "false"); }
    bool number_integer(json::number_integer_t v) {
        return on(JsonEvent::Type::number, std::to_string(v));
    }
    bool number_unsigned(json::number_unsigned_t v) {
        return on(JsonEvent::Type::number, std::to_string(v));
    }
    bool number_float(json::number_float_t, const std::string& text) {
        // nlohmann writes the locale's decimal point into the text; JSON's is '.'.
        std::string source = text;
        std::replace(source.begin(), source.end(), ',', '.');
        return on(JsonEvent::Type::number, source);
    }
    bool string(std::string& s) { return on(JsonEvent::Type::string, s); }
    bool binary(json::binary_t&) { return on(JsonEvent::Type::string); }  // not produced by JSON text
    bool key(std::string& k) { return on(JsonEvent::Type::key, k); }
    bool start_object(std::size_t) { return on(JsonEvent::Type::begin_object); }
    bool start_array(std::size_t) { return on(JsonEvent::Type::begin_array); }
    bool end_object() { return on(JsonEvent::Type::end_object); }
    bool end_array() { return on(JsonEvent::Type::end_array); }
    template <typename Exception>
    bool parse_error(std::size_t, const std::string&, const Exception& e) {
        syntax_error = e.what();
        return false;
    }

private:
    SpecReader& reader_;
    bool on(JsonEvent::Type type, std::string_view text = {}) {
        reader_.read(JsonEvent{type, text});
        return true;
    }
};

// The spec the reader has read, checked whole: names, queues, predecessors,
// cycles; its steps in a topological order.
WorkflowSpec resolve(SpecReader& reader, const std::vector<std::string>& existing_steps,
                     const std::string& default_queue) {
    if (!reader.complete())  // a source that stops inside a value; JSON text or jsonb never do
        throw Error(sqlstate::invalid_text, "workflow spec is not valid JSON",
                    "It ends inside an object or an array.");
    // Looked up once per name of the new steps and of their "after" lists.
    const std::unordered_set<std::string> existing(existing_steps.begin(), existing_steps.end());
    auto is_existing = [&](const std::string& name) { return existing.count(name) > 0; };
    std::deque<ParsedStep>& steps = reader.steps;
    const std::size_t n = steps.size();
    if (n == 0) fail("workflow has no steps", {}, "List the steps in the array \"steps\".");

    NameIndex index_of(steps);
    for (std::size_t i = 0; i < n; i++) {
        std::size_t first = index_of.insert(i);
        if (first == no_index && is_existing(steps[i].spec.name))
            fail("step " + in_quotes(steps[i].spec.name) + " is already a step of the workflow",
                 {}, "Give the steps added to a workflow names it does not use yet.");
        if (first != no_index)
            fail("duplicate step name " + in_quotes(steps[i].spec.name),
                 "Steps " + std::to_string(first + 1) + " and " + std::to_string(i + 1) +
                     " are both named " + in_quotes(steps[i].spec.name) + ".",
                 "Step names must be unique within a workflow.");
    }

    for (ParsedStep& step : steps) {
        if (step.has_queue) continue;
        if (!reader.queue && default_queue.empty())
            fail("step " + in_quotes(step.spec.name) + " has no queue", {},
                 "Give the step a \"queue\", or the workflow a default \"queue\".");
        step.spec.queue = reader.queue ? *reader.queue : default_queue;
    }

    // Predecessors, each once, in the order first listed.
    Edges parents;
    parents.start.reserve(n + 1);
    parents.to.reserve(reader.after_names.size());
    std::vector<std::size_t> listed_by(n, no_index);  // dedupes one step's "after"
    std::vector<std::size_t> child_count(n, 0);
    for (std::size_t i = 0; i < n; i++) {
        const ParsedStep& step = steps[i];
        parents.start.push_back(parents.to.size());
        for (std::size_t a = step.after_begin; a < step.after_end; a++) {
            const std::string& parent = reader.after_names[a];
            std::size_t p = index_of.find(parent);
            if (p == no_index && is_existing(parent)) {
                std::vector<std::string>& existing = steps[i].spec.after_existing;
                if (std::find(existing.begin(), existing.end(), parent) == existing.end())
                    existing.push_back(parent);
                continue;
            }
            if (p == no_index)
                fail("step " + in_quotes(step.spec.name) + " runs after unknown step " +
                         in_quotes(parent),
                     {}, "\"after\" lists names of steps of the same workflow.");
            if (p == i) fail("step " + in_quotes(step.spec.name) + " runs after itself");
            if (listed_by[p] == i) continue;
            listed_by[p] = i;
            parents.to.push_back(p);
            child_count[p]++;
        }
    }
    parents.start.push_back(parents.to.size());

    // Children of each step, ascending, in one flat array.
    std::vector<std::size_t> child_start(n + 1, 0);
    for (std::size_t i = 0; i < n; i++) child_start[i + 1] = child_start[i] + child_count[i];
    std::vector<std::size_t> children(child_start[n]);
    {
        std::vector<std::size_t> fill(child_start.begin(), child_start.end() - 1);
        for (std::size_t i = 0; i < n; i++)
            for (const std::size_t* p = parents.begin(i); p != parents.end(i); p++)
                children[fill[*p]++] = i;
    }

    // Kahn's algorithm, made stable: scan the steps in input order and place
    // each one whose predecessors are all placed. Placing a step releases its
    // children; a released child the scan has already passed is placed at
    // once (breadth first), a later one waits for the scan. O(steps + edges).
    std::vector<std::size_t> waiting_for(n);
    for (std::size_t i = 0; i < n; i++) waiting_for[i] = parents.count(i);
    std::vector<char> placed(n, 0);
    std::vector<std::size_t> order;
    order.reserve(n);
    for (std::size_t i = 0; i < n; i++) {
        if (placed[i] || waiting_for[i] > 0) continue;
        std::size_t head = order.size();
        placed[i] = 1;
        order.push_back(i);
        while (head < order.size()) {
            std::size_t u = order[head++];
            for (std::size_t k = child_start[u]; k < child_start[u + 1]; k++) {
                std::size_t c = children[k];
                if (--waiting_for[c] == 0 && c < i) {
                    placed[c] = 1;
                    order.push_back(c);
                }
            }
        }
    }
    if (order.size() < n) report_cycle(steps, parents, placed);

    std::vector<std::size_t> position(n);
    for (std::size_t k = 0; k < n; k++) position[order[k]] = k;
    WorkflowSpec result;
    result.name = std::move(reader.name);
    result.key = std::move(reader.workflow_key);
    result.version = std::move(reader.version);
    result.steps.reserve(n);
    for (std::size_t k = 0; k < n; k++) {
        std::size_t i = order[k];
        StepSpec& step = steps[i].spec;
        step.after.reserve(parents.count(i));
        for (const std::size_t* p = parents.begin(i); p != parents.end(i); p++)
            step.after.push_back(position[*p]);
        std::sort(step.after.begin(), step.after.end());
        result.steps.push_back(std::move(step));
    }
    return result;
}

}  // namespace

WorkflowSpec parse_workflow_spec(std::string_view json_text, std::size_t max_payload_bytes,
                                 const std::vector<std::string>& existing_steps,
                                 const std::string& default_queue) {
    SpecReader reader(max_payload_bytes);
    TextEvents events(reader);
    if (!json::sax_parse(json_text.data(), json_text.data() + json_text.size(), &events)) {
        std::string detail = events.syntax_error;
        // "[json.exception.parse_error.101] parse error at line 1, column 9: ..."
        if (auto end = detail.find("] ");
            detail.rfind("[json.exception", 0) == 0 && end != std::string::npos)
            detail.erase(0, end + 2);
        if (!detail.empty()) detail[0] = static_cast<char>(std::toupper(detail[0]));
        throw Error(sqlstate::invalid_text, "workflow spec is not valid JSON", detail);
    }
    return resolve(reader, existing_steps, default_queue);
}

struct WorkflowSpecReader::State {
    explicit State(std::size_t max_payload_bytes) : reader(max_payload_bytes) {}
    SpecReader reader;
};

WorkflowSpecReader::WorkflowSpecReader(std::size_t max_payload_bytes)
    : state_(std::make_unique<State>(max_payload_bytes)) {}

WorkflowSpecReader::~WorkflowSpecReader() = default;

void WorkflowSpecReader::read(const JsonEvent& event) {
    state_->reader.read(event);
}

WorkflowSpec WorkflowSpecReader::finish(const std::vector<std::string>& existing_steps,
                                        const std::string& default_queue) {
    return resolve(state_->reader, existing_steps, default_queue);
}

}  // namespace wf::core
