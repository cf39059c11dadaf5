// SPI with plans prepared once per backend and reused by every call.
#pragma once

#include <initializer_list>

#include "guard.hpp"

namespace wf::pg {

// One SPI connection for the span of a SQL function call. On the error path
// nothing is done here: aborting the transaction closes SPI.
class SpiConnection {
public:
    SpiConnection();
    SpiConnection(const SpiConnection&) = delete;
    SpiConnection& operator=(const SpiConnection&) = delete;
    void finish();

private:
    bool open_ = false;
};

// A statement prepared on first use and kept for the life of the backend;
// the plan cache replans it by itself if the schema changes.
class PreparedStatement {
public:
    PreparedStatement(const char* sql, std::initializer_list<Oid> argument_types);

    // Runs it (read-write, fresh snapshot) and returns the rows processed;
    // the rows are in SPI_tuptable until the next statement.
    uint64 execute(const Datum* values, const char* nulls);

private:
    const char* sql_;
    std::vector<Oid> argument_types_;
    SPIPlanPtr plan_ = nullptr;
};

// Reading SPI_tuptable. Columns are 1-based, as in SPI.
bool column_is_null(uint64 row, int column);
Datum column(uint64 row, int column);  // NULL reads as 0
int64 column_int64(uint64 row, int column);
int32 column_int32(uint64 row, int column);
bool column_bool(uint64 row, int column);
std::string column_text(uint64 row, int column);  // NULL reads as ""

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
};

}  // namespace wf::pg
