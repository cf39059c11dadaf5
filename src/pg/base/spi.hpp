// SPI, the way pg_wf's SQL runs: statements prepared once per backend, a
// scope that always closes its connection, and results read by column name.
#pragma once

#include <initializer_list>
#include <unordered_map>

#include "core/shard_names.hpp"

#include "pg/base/guard.hpp"

namespace wf::pg {

// Runs `body` inside one SPI connection and closes it when the body
// returns, so that no caller pairs SPI_connect and SPI_finish by hand. On
// the error path nothing is done here: aborting the (sub)transaction closes
// SPI. What the body returns must not point into SPI memory (the rows of
// a statement, a Datum read from them): SPI_finish frees it.
template <typename Body>
decltype(auto) with_spi(Body&& body);

// The rows a statement returned, valid until the next statement or the end
// of the SPI scope. Columns are read by the names the statement gives them
// (its select list or RETURNING list), so a reader cannot drift from the
// SQL it reads; a name the statement lacks is a bug, raised as XX000.
class Rows {
public:
    Rows(SPITupleTable* table, uint64 count) : table_(table), count_(count) {}
    uint64 size() const { return count_; }
    bool empty() const { return count_ == 0; }

    bool is_null(uint64 row, const char* column) const;
    Datum datum(uint64 row, const char* column) const;  // NULL reads as 0
    int64 int64_at(uint64 row, const char* column) const;
    int32 int32_at(uint64 row, const char* column) const;
    bool bool_at(uint64 row, const char* column) const;
    std::string text_at(uint64 row, const char* column) const;  // NULL reads as ""
    pg_uuid_t uuid_at(uint64 row, const char* column) const;    // copied out of SPI memory
    // A column of every row (job ids, workflow ids).
    std::vector<int64> int64_column(const char* column) const;
    std::vector<pg_uuid_t> uuid_column(const char* column) const;
    // The 1-based position of a column, for readers that copy a range.
    int position(const char* column) const;
    SPITupleTable* table() const { return table_; }
    // Frees the rows at once (a long wait runs many statements).
    void free();

private:
    void require_type(const char* column, bool ok, const char* as) const;
    SPITupleTable* table_;
    uint64 count_;
};

// While set, statements name other relations than the ones written in
// them: on a distributed pg_wf, one shard group's (pg/citus/shard_route.hpp
// sets it). A statement keeps one plan per route, in the route.
struct SqlRoute {
    std::vector<core::ShardName> names;
    std::unordered_map<const void*, SPIPlanPtr> plans;
};
extern SqlRoute* current_sql_route;

// A statement prepared on first use and kept for the life of the backend;
// the plan cache replans it by itself if the schema changes.
class PreparedStatement {
public:
    // Plans are generic: the plan cache would otherwise replan every call
    // whose custom plan looks cheaper, which for these statements is all.
    // `Planning::per_call` is for statements that take large arrays (a
    // batch of thousands of jobs): a generic plan guesses 10 elements, and
    // with a queue's statistics out of date can join them to the queue's
    // jobs in quadratic time; planned with the array at hand, it cannot.
    enum class Planning { generic, per_call };
    PreparedStatement(const char* sql, std::initializer_list<Oid> argument_types,
                      Planning planning = Planning::generic);

    // Runs it (read-write, fresh snapshot) and returns its rows.
    Rows execute(const Datum* values, const char* nulls);
    Rows execute() { return execute(nullptr, nullptr); }
    // Runs it with the latest snapshot, whatever the isolation level: what
    // a check made under a lock must read (as foreign keys' checks do).
    Rows execute_latest(const Datum* values, const char* nulls);

private:
    SPIPlanPtr plan();
    SPIPlanPtr routed_plan(SqlRoute* route);
    SPIPlanPtr prepare_text(const char* sql);
    const char* sql_;
    std::vector<Oid> argument_types_;
    Planning planning_;
    SPIPlanPtr plan_ = nullptr;
};

// A bigint[] Datum, for parameters that take job ids or owner keys.
Datum int8_array(const std::vector<int64>& values);

// A one-dimensional array of `element_type` (nulls[i]: element i is NULL),
// for statements that take one array per column (unnest).
Datum datum_array(const std::vector<Datum>& values, const std::vector<bool>& nulls,
                  Oid element_type);

// A text Datum (palloc'd in the current memory context).
Datum text_datum(std::string_view s);

// Parameter arrays for PreparedStatement::execute.
template <int N>
struct Params {
    Datum values[N] = {};
    char nulls[N];
    Params() { std::memset(nulls, ' ', N); }
    void set(int i, Datum value) { values[i] = value, nulls[i] = ' '; }
    void set_null(int i) { values[i] = 0, nulls[i] = 'n'; }
    // A Datum that is 0 for NULL (an optional argument).
    void set_or_null(int i, bool is_null, Datum value) {
        if (is_null) set_null(i); else set(i, value);
    }
};

// ---- implementation of with_spi ----
void spi_connect();
void spi_finish();

template <typename Body>
decltype(auto) with_spi(Body&& body) {
    spi_connect();
    if constexpr (std::is_void_v<decltype(body())>) {
        body();
        spi_finish();
    } else {
        auto result = body();
        spi_finish();
        return result;
    }
}

}  // namespace wf::pg
