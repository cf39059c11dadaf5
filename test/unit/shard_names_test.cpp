// core::route_sql: a statement names one shard group's relations instead of
// pg_wf's distributed tables, and says when it would write a replicated one.
#include <gtest/gtest.h>

#include "core/shard_names.hpp"

using wf::core::route_sql;
using wf::core::ShardName;

namespace {

const std::vector<ShardName> kNames = {
    {"wf.job", "wf.job_102008", false},
    {"wf.ready", "wf.ready_102040", false},
    {"wf.dependency", "wf.dependency_102100", true},
};

}  // namespace

TEST(RouteSql, ReplacesWholeTableNamesOnly) {
    auto r = route_sql("SELECT j.id FROM wf.job j JOIN wf.jobs v ON true, wf.job_id_seq s, wf.ready", kNames);
    EXPECT_EQ(r.sql, "SELECT j.id FROM wf.job_102008 j JOIN wf.jobs v ON true, wf.job_id_seq s, wf.ready_102040");
    EXPECT_EQ(r.writes_replicated, "");
}

TEST(RouteSql, LeavesLiteralsAndLongerQualifiedNamesAlone) {
    auto r = route_sql("SELECT nextval('wf.job'), 'it''s wf.job', xwf.job FROM wf.job", kNames);
    EXPECT_EQ(r.sql, "SELECT nextval('wf.job'), 'it''s wf.job', xwf.job FROM wf.job_102008");
}

TEST(RouteSql, NameAtTheEndAndBeforePunctuation) {
    EXPECT_EQ(route_sql("DELETE FROM wf.ready", kNames).sql, "DELETE FROM wf.ready_102040");
    EXPECT_EQ(route_sql("(wf.job)", kNames).sql, "(wf.job_102008)");
    EXPECT_EQ(route_sql("wf.job.id", kNames).sql, "wf.job_102008.id");
}

TEST(RouteSql, ReadingAReplicatedTableIsNotAWrite) {
    auto r = route_sql("SELECT d.child_id FROM wf.dependency d WHERE d.parent_id = $1", kNames);
    EXPECT_EQ(r.sql, "SELECT d.child_id FROM wf.dependency_102100 d WHERE d.parent_id = $1");
    EXPECT_EQ(r.writes_replicated, "");
}

TEST(RouteSql, WritingAReplicatedTableIsFlagged) {
    EXPECT_EQ(route_sql("INSERT INTO wf.dependency VALUES (1)", kNames).writes_replicated, "wf.dependency");
    EXPECT_EQ(route_sql("WITH x AS (update\n  wf.dependency SET a = 1) SELECT 1", kNames).writes_replicated, "wf.dependency");
    EXPECT_EQ(route_sql("delete   from wf.dependency d", kNames).writes_replicated, "wf.dependency");
    // Writing a shard of the group is what routing is for.
    EXPECT_EQ(route_sql("INSERT INTO wf.job VALUES (1)", kNames).writes_replicated, "");
    EXPECT_EQ(route_sql("UPDATE wf.job SET a = 1 FROM wf.dependency d", kNames).writes_replicated, "");
    // A word that merely ends like the keyword is not it.
    EXPECT_EQ(route_sql("SELECT xupdate wf.dependency", kNames).writes_replicated, "");
}
