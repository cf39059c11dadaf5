#include "spi.hpp"

#include <stdexcept>

#include "../core/error.hpp"
#include "jobs.hpp"

namespace wf::pg {

SpiConnection::SpiConnection() {
    // Every SQL function and worker pass works through SPI: this is where an
    // old schema under a new library is stopped (see schema_is_current).
    if (!schema_is_current())
        throw core::Error("55000", "pg_wf's SQL objects in this database are older than its library",
                          "The library needs version " WF_SCHEMA_VERSION " of the extension.",
                          "Run ALTER EXTENSION pg_wf UPDATE.");
    int rc = call([] { return SPI_connect(); });
    if (rc != SPI_OK_CONNECT) throw std::runtime_error("SPI_connect failed");
    open_ = true;
}

void SpiConnection::finish() {
    if (!open_) return;
    open_ = false;
    call([] { return SPI_finish(); });
}

PreparedStatement::PreparedStatement(const char* sql, std::initializer_list<Oid> argument_types)
    : sql_(sql), argument_types_(argument_types) {}

uint64 PreparedStatement::execute(const Datum* values, const char* nulls) {
    if (plan_ == nullptr) {
        SPIPlanPtr plan = call([&] {
            // Generic plans: the plan cache would otherwise replan every call
            // whose custom plan looks cheaper, which for these statements is all.
            SPIPlanPtr p = SPI_prepare_cursor(sql_, static_cast<int>(argument_types_.size()),
                                              argument_types_.data(), CURSOR_OPT_GENERIC_PLAN);
            if (p == nullptr)
                elog(ERROR, "pg_wf: could not prepare statement: %s",
                     SPI_result_code_string(SPI_result));
            SPI_keepplan(p);
            return p;
        });
        plan_ = plan;
    }
    int rc = call([&] {
        return SPI_execute_plan(plan_, const_cast<Datum*>(values), nulls, false, 0);
    });
    if (rc < 0) throw std::runtime_error(SPI_result_code_string(rc));
    return SPI_processed;
}

bool column_is_null(uint64 row, int col) {
    bool isnull = false;
    SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, col, &isnull);
    return isnull;
}

Datum column(uint64 row, int col) {
    bool isnull = false;
    Datum d = SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, col, &isnull);
    return isnull ? 0 : d;
}

int64 column_int64(uint64 row, int col) { return DatumGetInt64(column(row, col)); }
int32 column_int32(uint64 row, int col) { return DatumGetInt32(column(row, col)); }
bool column_bool(uint64 row, int col) { return DatumGetBool(column(row, col)); }

std::string column_text(uint64 row, int col) {
    if (column_is_null(row, col)) return {};
    Datum d = column(row, col);
    text* t = call([&] { return DatumGetTextPP(d); });
    return std::string(VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t));
}

Datum int8_array(const std::vector<int64>& values) {
    std::vector<Datum> items;
    items.reserve(values.size());
    for (int64 v : values) items.push_back(Int64GetDatum(v));
    return call([&] {
        return PointerGetDatum(construct_array(items.data(), static_cast<int>(items.size()),
                                               INT8OID, 8, true, TYPALIGN_DOUBLE));
    });
}

Datum datum_array(const std::vector<Datum>& values, const std::vector<bool>& nulls,
                  Oid element_type) {
    int n = static_cast<int>(values.size());
    std::vector<char> null_flags(values.size());
    for (size_t i = 0; i < nulls.size() && i < values.size(); i++) null_flags[i] = nulls[i];
    return call([&] {
        int16 length;
        bool by_value;
        char align;
        get_typlenbyvalalign(element_type, &length, &by_value, &align);
        int dims[1] = {n};
        int lower_bounds[1] = {1};
        return PointerGetDatum(construct_md_array(
            const_cast<Datum*>(values.data()), reinterpret_cast<bool*>(null_flags.data()), 1,
            dims, lower_bounds, element_type, length, by_value, align));
    });
}

Datum text_datum(std::string_view s) {
    return call([&] {
        return PointerGetDatum(cstring_to_text_with_len(s.data(), static_cast<int>(s.size())));
    });
}

}  // namespace wf::pg
