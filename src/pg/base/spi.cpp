#include "pg/base/spi.hpp"

#include <stdexcept>

#include "core/error.hpp"
#include "pg/base/statement_settings.hpp"

namespace wf::pg {

void spi_connect() {
    int rc = call([] { return SPI_connect(); });
    if (rc != SPI_OK_CONNECT) throw std::runtime_error("SPI_connect failed");
}

void spi_finish() {
    call([] { SPI_finish(); });
}

PreparedStatement::PreparedStatement(const char* sql, std::initializer_list<Oid> argument_types,
                                     Planning planning)
    : sql_(sql), argument_types_(argument_types), planning_(planning) {}

SqlRoute* current_sql_route = nullptr;

SPIPlanPtr PreparedStatement::prepare_text(const char* sql) {
    int options = planning_ == Planning::generic ? CURSOR_OPT_GENERIC_PLAN
                                                 : CURSOR_OPT_CUSTOM_PLAN;
    return call([&] {
        pin_statement_settings();
        SPIPlanPtr p = SPI_prepare_cursor(sql, static_cast<int>(argument_types_.size()),
                                          argument_types_.data(), options);
        if (p == nullptr)
            elog(ERROR, "pg_wf: could not prepare statement: %s",
                 SPI_result_code_string(SPI_result));
        SPI_keepplan(p);
        return p;
    });
}

SPIPlanPtr PreparedStatement::plan() {
    if (current_sql_route != nullptr) return routed_plan(current_sql_route);
    if (plan_ == nullptr) plan_ = prepare_text(sql_);
    return plan_;
}

SPIPlanPtr PreparedStatement::routed_plan(SqlRoute* route) {
    auto found = route->plans.find(this);
    if (found != route->plans.end()) return found->second;
    core::RoutedSql routed = core::route_sql(sql_, route->names);
    // Refused rather than run against one node's copy of a reference table.
    if (!routed.writes_replicated.empty())
        throw core::Error("0A000", "this operation is not supported on a distributed pg_wf yet",
                          "It writes " + routed.writes_replicated +
                              ", which Citus replicates to every node, from the node that "
                              "serves one queue.",
                          "README, \"Scaling out\": what a distributed pg_wf supports.");
    SPIPlanPtr p = prepare_text(routed.sql.c_str());
    route->plans.emplace(this, p);
    return p;
}

Rows PreparedStatement::execute(const Datum* values, const char* nulls) {
    SPIPlanPtr p = plan();
    int rc = call([&] {
        pin_statement_settings();
        return SPI_execute_plan(p, const_cast<Datum*>(values), nulls, false, 0);
    });
    if (rc < 0) throw std::runtime_error(SPI_result_code_string(rc));
    return Rows(SPI_tuptable, SPI_processed);
}

Rows PreparedStatement::execute_latest(const Datum* values, const char* nulls) {
    SPIPlanPtr p = plan();
    int rc = call([&] {
        pin_statement_settings();
        CommandCounterIncrement();
        return SPI_execute_snapshot(p, const_cast<Datum*>(values), nulls, GetLatestSnapshot(),
                                    InvalidSnapshot, false, false, 0);
    });
    if (rc < 0) throw std::runtime_error(SPI_result_code_string(rc));
    return Rows(SPI_tuptable, SPI_processed);
}

int Rows::position(const char* column) const {
    int n = table_ ? SPI_fnumber(table_->tupdesc, column) : SPI_ERROR_NOATTRIBUTE;
    if (n <= 0)
        throw std::logic_error(std::string("pg_wf: a statement has no column \"") + column + "\"");
    return n;
}

bool Rows::is_null(uint64 row, const char* column) const {
    bool isnull = false;
    SPI_getbinval(table_->vals[row], table_->tupdesc, position(column), &isnull);
    return isnull;
}

Datum Rows::datum(uint64 row, const char* column) const {
    bool isnull = false;
    Datum d = SPI_getbinval(table_->vals[row], table_->tupdesc, position(column), &isnull);
    return isnull ? 0 : d;
}

// A column read as a pointer must hold one: reading a by-value column (a
// bigint) as text or uuid would dereference its value. A slip of pg_wf's
// own code, refused as an internal error rather than a crashed backend.
void Rows::require_type(const char* column, bool ok, const char* as) const {
    if (ok) return;
    throw std::logic_error(std::string("pg_wf: column \"") + column + "\" read as " + as);
}

pg_uuid_t Rows::uuid_at(uint64 row, const char* column) const {
    int n = position(column);
    require_type(column, TupleDescAttr(table_->tupdesc, n - 1)->atttypid == UUIDOID, "uuid");
    bool isnull = false;
    Datum d = SPI_getbinval(table_->vals[row], table_->tupdesc, n, &isnull);
    pg_uuid_t id;
    std::memcpy(&id, DatumGetUUIDP(d), sizeof id);
    return id;
}

std::vector<int64> Rows::int64_column(const char* column) const {
    std::vector<int64> v;
    v.reserve(count_);
    for (uint64 r = 0; r < count_; r++) v.push_back(int64_at(r, column));
    return v;
}

std::vector<pg_uuid_t> Rows::uuid_column(const char* column) const {
    std::vector<pg_uuid_t> v;
    v.reserve(count_);
    for (uint64 r = 0; r < count_; r++) v.push_back(uuid_at(r, column));
    return v;
}

int64 Rows::int64_at(uint64 row, const char* column) const {
    return DatumGetInt64(datum(row, column));
}
int32 Rows::int32_at(uint64 row, const char* column) const {
    return DatumGetInt32(datum(row, column));
}
bool Rows::bool_at(uint64 row, const char* column) const {
    return DatumGetBool(datum(row, column));
}

std::string Rows::text_at(uint64 row, const char* column) const {
    int n = position(column);
    require_type(column, TupleDescAttr(table_->tupdesc, n - 1)->attlen == -1, "text");
    bool isnull = false;
    Datum d = SPI_getbinval(table_->vals[row], table_->tupdesc, n, &isnull);
    if (isnull) return {};
    text* t = call([&] { return DatumGetTextPP(d); });
    return std::string(VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t));
}

void Rows::free() {
    SPITupleTable* table = table_;
    table_ = nullptr;
    count_ = 0;
    if (table) call([&] { SPI_freetuptable(table); });
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
