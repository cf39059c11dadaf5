// Errors raised by the pure core. They carry a SQLSTATE so the PostgreSQL
// boundary (src/pg/guard.cpp) can report them as PostgreSQL would.
#pragma once

#include <stdexcept>
#include <string>

namespace wf::core {

// The five characters of a SQLSTATE, kept as text so the core needs no
// PostgreSQL header.
namespace sqlstate {
inline constexpr const char* invalid_parameter = "22023";
inline constexpr const char* null_not_allowed = "22004";
inline constexpr const char* invalid_text = "22P02";
inline constexpr const char* program_limit = "54000";
inline constexpr const char* unique_violation = "23505";
inline constexpr const char* foreign_key_violation = "23503";
inline constexpr const char* object_in_use = "55006";
inline constexpr const char* insufficient_privilege = "42501";
}  // namespace sqlstate

class Error : public std::runtime_error {
public:
    Error(const char* code, std::string message, std::string detail = {},
          std::string hint = {})
        : std::runtime_error(std::move(message)),
          code_(code),
          detail_(std::move(detail)),
          hint_(std::move(hint)) {}

    const char* sqlstate() const { return code_; }
    const std::string& detail() const { return detail_; }
    const std::string& hint() const { return hint_; }

private:
    const char* code_;
    std::string detail_;
    std::string hint_;
};

}  // namespace wf::core
