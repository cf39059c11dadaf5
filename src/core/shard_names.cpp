#include "core/shard_names.hpp"

#include <cctype>

namespace wf::core {
namespace {

bool identifier_char(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$';
}

// Whether the words before position `at` (skipping blanks) end with the
// keyword sequence `words` (upper case, single-spaced), case-insensitively.
bool preceded_by(std::string_view sql, size_t at, std::string_view words) {
    size_t i = at;
    for (size_t w = words.size(); w > 0;) {
        while (i > 0 && std::isspace(static_cast<unsigned char>(sql[i - 1]))) i--;
        size_t word_end = w;
        while (w > 0 && words[w - 1] != ' ') w--;
        std::string_view word = words.substr(w, word_end - w);
        if (w > 0) w--;  // the space between words
        if (i < word.size()) return false;
        for (size_t k = 0; k < word.size(); k++)
            if (std::toupper(static_cast<unsigned char>(sql[i - word.size() + k])) != word[k])
                return false;
        i -= word.size();
        if (i > 0 && identifier_char(sql[i - 1])) return false;
    }
    return true;
}

bool is_write_target(std::string_view sql, size_t at) {
    return preceded_by(sql, at, "INSERT INTO") || preceded_by(sql, at, "UPDATE") ||
           preceded_by(sql, at, "DELETE FROM");
}

}  // namespace

RoutedSql route_sql(std::string_view sql, const std::vector<ShardName>& names) {
    RoutedSql out;
    out.sql.reserve(sql.size() + 64);
    bool in_literal = false;
    for (size_t i = 0; i < sql.size();) {
        char c = sql[i];
        if (c == '\'') in_literal = !in_literal;  // '' inside a literal toggles twice
        if (!in_literal && (i == 0 || !identifier_char(sql[i - 1]))) {
            const ShardName* hit = nullptr;
            for (const ShardName& n : names) {
                size_t len = n.table.size();
                if (sql.compare(i, len, n.table) == 0 &&
                    (i + len == sql.size() || !identifier_char(sql[i + len]))) {
                    hit = &n;
                    break;
                }
            }
            if (hit) {
                if (hit->replicated && is_write_target(sql, i)) out.writes_replicated = hit->table;
                out.sql += hit->shard;
                i += hit->table.size();
                continue;
            }
        }
        out.sql += c;
        i++;
    }
    return out;
}

}  // namespace wf::core
