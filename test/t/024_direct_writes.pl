# The enqueue, the claim, the completion and the end of claims write
# pg_wf's tables without the executor (src/pg/jobs/job_inserts.cpp,
# ready_set.cpp, job_rows.cpp, claim_table.cpp). What the executor did for
# free must still happen:
# - the writes reach logical decoding, so a publication (or Citus moving a
#   shard) replicates them: each new job and ready row, each ready row's
#   delete with its replica identity, each job row's update with its new
#   status and result;
# - with a publication FOR ALL TABLES, whose replica identity checks the
#   executor makes for every write, the whole life of a job still runs;
# - a standby refuses them like any write.
use strict;
use warnings FATAL => 'all';
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use WfTap;

my $node = wf_node('direct_writes', allows_streaming => 1,
	conf => "wal_level = logical\nmax_replication_slots = 4\n");
# Ready rows of plain queues leave the key order once a worker serves the
# database (as the decoded rows below show).
ok(wait_worker_serves($node), 'a worker serves the database');
$node->safe_psql('postgres', 'CREATE PUBLICATION everything FOR ALL TABLES');
$node->safe_psql('postgres', "SELECT 1 FROM pg_create_logical_replication_slot('decoded', 'test_decoding')");

$node->safe_psql('postgres', "SELECT count(*) FROM wf_enqueue_batch('dw', '[1, 2, 3]')");
is( $node->safe_psql('postgres', q{
	SELECT wf_complete(queue, id, attempt, '"one"') FROM wf_claim('dw');
	SELECT count(*) FROM (SELECT wf_complete_many('dw', array_agg(id ORDER BY id), array_agg(attempt ORDER BY id),
	                                              ARRAY['"two"', '"three"']::jsonb[])
	                        FROM wf_claim('dw', max_jobs => 2)) s;
	SELECT string_agg(status || ' ' || result, ', ' ORDER BY id) FROM wf.jobs WHERE queue = 'dw'}),
	qq{t\n2\ndone "one", done "two", done "three"},
	'with a publication of every table, jobs are claimed and completed');

my @changes = split /\n/, $node->safe_psql('postgres',
	"SELECT data FROM pg_logical_slot_get_changes('decoded', NULL, NULL) WHERE data LIKE 'table wf.%'");
is(scalar(grep { /^table wf\.job: INSERT: queue\[text\]:'dw' id\[bigint\]:\d+ .*status\[text\]:'pending'.*payload\[jsonb\]:'[123]'/ } @changes),
	3, 'each new job row of the batch is decoded');
is(scalar(grep { /^table wf\.ready: INSERT: queue\[text\]:'dw' priority\[integer\]:0 run_at\[timestamp with time zone\]:'[^']+' id\[bigint\]:\d+ key\[text\]:null version\[text\]:null key_order\[boolean\]:false$/ } @changes),
	3, 'and each new ready row (outside the key order: the queue claims in plain order)');
is(scalar(grep { /^table wf\.ready: DELETE: queue\[text\]:'dw' priority\[integer\]:0 run_at\[timestamp with time zone\]:'[^']+' id\[bigint\]:\d+$/ } @changes),
	3, 'each claim\'s delete of a ready row is decoded, named by its replica identity');
is(scalar(grep { /^table wf\.job: UPDATE: .*status\[text\]:'done'.*result\[jsonb\]:'"(one|two|three)"'/ } @changes),
	3, 'each completion\'s update of a job row is decoded with its status and result');

# Completions whose job rows no longer fit their page are not HOT: the new
# versions get index entries through the executor's index maintenance.
# amcheck then finds every row version of wf.job in each of its indexes.
$node->safe_psql('postgres', 'CREATE EXTENSION amcheck');
$node->safe_psql('postgres', q{
	SELECT count(*) FROM wf_enqueue_batch('dw_big', (SELECT jsonb_agg(g) FROM generate_series(1, 2000) g));
	SELECT count(*) FROM (SELECT wf_complete_many('dw_big', array_agg(id), array_agg(attempt),
	                                              array_agg(jsonb_build_object('text', repeat('x', 1500))))
	                        FROM wf_claim('dw_big', max_jobs => 2000)) s;
	SELECT wf_enqueue('dw_big', '{}') > 0;
	SELECT wf_complete(queue, id, attempt, jsonb_build_object('text', repeat('y', 1500)))
	  FROM wf_claim('dw_big');
	SELECT pg_stat_force_next_flush()});
ok( $node->safe_psql('postgres',
		"SELECT n_tup_upd - n_tup_hot_upd FROM pg_stat_user_tables WHERE relid = 'wf.job'::regclass") > 100,
	'most of those updates were not HOT');
is( $node->safe_psql('postgres', q{
	SELECT count(*) FROM pg_index i, bt_index_check(i.indexrelid, heapallindexed => true)
	 WHERE i.indrelid = 'wf.job'::regclass}),
	'5', 'every index of wf.job has every row version');
is($node->safe_psql('postgres', "SELECT count(*) FROM wf.jobs WHERE queue = 'dw_big' AND status = 'done'"),
	'2001', 'and finds every job done');

# Claims insert their claim rows by hand, with the executor's index
# maintenance: claim_pkey gets every row, and the partial claim_key every
# row of a job with a key (per-key limits count running jobs through it).
# All in one session: its claims end with it.
$node->safe_psql('postgres', q{
	SELECT count(*) FROM wf_enqueue_batch('dw_keys', (SELECT jsonb_agg(g) FROM generate_series(1, 300) g),
	                                      keys => (SELECT array_agg(CASE WHEN g % 3 = 0 THEN NULL ELSE 'k' || g % 3 END)
	                                                 FROM generate_series(1, 300) g))});
# Enqueues insert job and ready rows by hand, a batch at a time, with the
# executor's index maintenance: every index of both tables has every row
# it should (the partial ones those with a key, a version).
$node->safe_psql('postgres', q{
	SELECT wf_enqueue('dw_new', jsonb_build_object('v', g), key => 'k' || g % 2, version => 'v' || g % 3)
	  FROM generate_series(1, 30) g;
	SELECT count(*) FROM wf_enqueue_batch('dw_new', (SELECT jsonb_agg(g) FROM generate_series(1, 1500) g),
	                                      keys => (SELECT array_agg(CASE WHEN g % 3 = 0 THEN NULL ELSE 'k' || g % 3 END)
	                                                 FROM generate_series(1, 1500) g))});
is( $node->safe_psql('postgres', q{
	SELECT count(*) FROM pg_index i, bt_index_check(i.indexrelid, heapallindexed => true)
	 WHERE i.indrelid IN ('wf.job'::regclass, 'wf.ready'::regclass);
	SET enable_seqscan = off; SET enable_bitmapscan = off;
	SELECT count(*) FROM wf.ready WHERE queue = 'dw_new' AND version = 'v1';
	SELECT count(*) FROM wf.ready WHERE queue = 'dw_new' AND key = 'k1';
	SELECT count(*) FROM wf.job WHERE queue = 'dw_new' AND key = 'k2';
	SELECT count(*) FROM wf.job WHERE id IN (SELECT id FROM wf.ready WHERE queue = 'dw_new')}),
	"8\n10\n515\n500\n1530", 'new jobs are in every index of wf.job and wf.ready');
my @claim_checks = split /\n/, $node->safe_psql('postgres', q{
	SELECT count(*) FROM wf_claim('dw_keys', max_jobs => 200) \gset
	SELECT count(*) FROM wf_claim('dw_keys', max_jobs => 50) \gset
	SELECT count(*) FROM pg_index i, bt_index_check(i.indexrelid, heapallindexed => true)
	 WHERE i.indrelid = 'wf.claim'::regclass;
	SELECT string_agg(key || ' ' || n, ', ' ORDER BY key)
	  FROM (SELECT key, count(*) AS n FROM wf.claim WHERE queue = 'dw_keys' AND key IS NOT NULL GROUP BY key) k;
	SET enable_seqscan = off; SET enable_bitmapscan = off;
	SELECT count(*) FROM wf.claim WHERE queue = 'dw_keys' AND key = 'k1'});
is($claim_checks[0], '2', 'both indexes of wf.claim have every claim row they should');
is($claim_checks[1], 'k1 84, k2 83', 'each key has its running jobs');
is($claim_checks[2], '84', 'and claim_key finds them');

# Completions release blocked children by hand (release_rows.cpp): each
# release is decoded (the child's update, its new ready row), and every
# index of wf.job and wf.ready still has every row.
$node->safe_psql('postgres', q{
	SELECT wf_submit('{"name": "dw_flow", "queue": "dw_flow", "steps": [
	                   {"name": "a"}, {"name": "b", "after": ["a"]}, {"name": "c", "after": ["a", "b"]}]}');
	SELECT wf_complete(queue, id, attempt) FROM wf_claim('dw_flow');
	SELECT wf_complete(queue, id, attempt) FROM wf_claim('dw_flow')});
my @released = split /\n/, $node->safe_psql('postgres',
	"SELECT data FROM pg_logical_slot_get_changes('decoded', NULL, NULL) WHERE data LIKE 'table wf.%'");
is(scalar(grep { /^table wf\.job: UPDATE: queue\[text\]:'dw_flow' .*status\[text\]:'pending'.*pending_deps\[integer\]:0 / } @released),
	2, 'each release of a blocked step is decoded');
is(scalar(grep { /^table wf\.job: UPDATE: queue\[text\]:'dw_flow' .*status\[text\]:'blocked'.*pending_deps\[integer\]:1 / } @released),
	1, 'and a step that still waits on another');
is(scalar(grep { /^table wf\.ready: INSERT: queue\[text\]:'dw_flow'/ } @released),
	3, 'each step enters the ready set once');
is( $node->safe_psql('postgres', q{
	SELECT count(*) FROM pg_index i, bt_index_check(i.indexrelid, heapallindexed => true)
	 WHERE i.indrelid IN ('wf.job'::regclass, 'wf.ready'::regclass);
	SELECT string_agg(step_name || ' ' || status, ', ' ORDER BY id) FROM wf.job WHERE queue = 'dw_flow'}),
	"8\na done, b done, c pending", 'after the releases, every index has every row');

# Each backend keeps the index definitions of the tables it writes by hand
# from one call to the next (index_entries.cpp). An index added or dropped
# by another session, or by the session's own transaction, must be seen at
# the next call: a session whose definitions are kept enqueues after each
# change, and every index then has exactly the rows it should. A btree
# with a plain predicate stays on the kept path; an expression index and a
# GIN index take the executor's path. A deferrable constraint, whose
# checks at commit the executor queues and this code does not, is refused
# (by the trigger that comes with it).
my $kept = $node->background_psql('postgres', on_error_stop => 0);
my $enqueue_n = sub {
	my ($n) = @_;
	return $kept->query_safe("SELECT wf_enqueue('dw_idx', jsonb_build_object('n', $n), priority => $n) > 0");
};
$enqueue_n->(1);
$node->safe_psql('postgres', 'CREATE INDEX hand_high ON wf.job (queue, id) WHERE priority > 5');
$enqueue_n->($_) for (2, 7, 8);
is( $node->safe_psql('postgres', q{
	SELECT count(*) FROM bt_index_check('wf.hand_high', heapallindexed => true);
	SET enable_seqscan = off; SET enable_bitmapscan = off;
	SELECT count(*) FROM wf.job WHERE queue = 'dw_idx' AND priority > 5}),
	"1\n2", 'an index added by another session gets the rows its predicate admits');
$node->safe_psql('postgres', q{
	CREATE INDEX hand_n ON wf.job ((payload->>'n'));
	CREATE INDEX hand_gin ON wf.job USING gin (payload jsonb_path_ops)});
$enqueue_n->($_) for (3, 9);
is( $node->safe_psql('postgres', q{
	SELECT count(*) FROM pg_index i, bt_index_check(i.indexrelid, heapallindexed => true)
	 WHERE i.indrelid = 'wf.job'::regclass AND i.indexrelid <> 'wf.hand_gin'::regclass;
	SET enable_seqscan = off;
	SELECT count(*) FROM wf.job WHERE payload->>'n' IN ('3', '9');
	SELECT count(*) FROM wf.job WHERE payload @> '{"n": 9}';
	SELECT count(*) FROM wf.job WHERE queue = 'dw_idx' AND priority > 5}),
	"7\n2\n1\n3", 'an expression index and a GIN index get theirs by the executor\'s path, and the others still');
$node->safe_psql('postgres', 'DROP INDEX wf.hand_high, wf.hand_n, wf.hand_gin');
$enqueue_n->(10);
is($kept->query_safe(q{
	BEGIN;
	CREATE INDEX hand_own ON wf.ready (queue, id) WHERE priority > 9;
	SELECT wf_enqueue('dw_idx', '{}', priority => 11) > 0;
	SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off;
	SELECT count(*) FROM wf.ready WHERE queue = 'dw_idx' AND priority > 9;
	SELECT count(*) FROM bt_index_check('wf.hand_own', heapallindexed => true);
	ROLLBACK}), "t\n2\n1",
	'after the drops the session writes on, and an index its own transaction adds gets its rows');
is( $node->safe_psql('postgres', q{
	SELECT count(*) FROM pg_index i, bt_index_check(i.indexrelid, heapallindexed => true)
	 WHERE i.indrelid IN ('wf.job'::regclass, 'wf.ready'::regclass);
	SELECT count(*) FROM wf.job WHERE queue = 'dw_idx'}),
	"8\n7", 'every index of wf.job and wf.ready has every row');
$node->safe_psql('postgres', 'ALTER TABLE wf.ready ADD CONSTRAINT hand_deferred UNIQUE (id) DEFERRABLE');
my ($ret, $out, $err) = $node->psql('postgres',
	"\\set VERBOSITY verbose\nSELECT wf_enqueue('dw_idx', '{}')");
like($err, qr/ERROR:  55000: pg_wf's table wf.ready is not as its library expects: it has a trigger/,
	'a deferrable constraint added by hand is refused (55000), not left unchecked');
$node->safe_psql('postgres', 'ALTER TABLE wf.ready DROP CONSTRAINT hand_deferred');
is($enqueue_n->(12) . ' ' . $node->safe_psql('postgres', "SELECT count(*) FROM wf.job WHERE queue = 'dw_idx'"),
	't 8', 'the refused enqueue left nothing; without the constraint the session enqueues again');
# The session keeps the OIDs of pg_wf's tables by name too
# (direct_table.cpp): a table renamed away and another made in its name,
# here in the session's own transaction, is where its next enqueue writes.
my $ready_before = $node->safe_psql('postgres', "SELECT count(*) FROM wf.ready WHERE queue = 'dw_idx'");
is($kept->query_safe(q{
	BEGIN;
	ALTER TABLE wf.ready RENAME TO ready_moved;
	ALTER INDEX wf.ready_claim_order RENAME TO ready_claim_order_moved;
	CREATE TABLE wf.ready (LIKE wf.ready_moved INCLUDING DEFAULTS);
	ALTER TABLE wf.ready OWNER TO wf_owner;
	CREATE UNIQUE INDEX ready_claim_order ON wf.ready (queue, priority DESC, run_at, id);
	SELECT wf_enqueue('dw_idx', '{}') > 0;
	SELECT count(*) FROM wf.ready WHERE queue = 'dw_idx';
	SELECT count(*) FROM wf.ready_moved WHERE queue = 'dw_idx';
	ROLLBACK}), "t\n1\n$ready_before",
	'a table renamed and replaced in the session\'s transaction: the enqueue writes the new one');
is($enqueue_n->(13) . ' ' . $node->safe_psql('postgres', "SELECT count(*) FROM wf.ready WHERE queue = 'dw_idx'"),
	't ' . ($ready_before + 1), 'after the rollback, the table it was');
$kept->quit;

# A standby refuses every write, these too.
$node->backup('b');
my $standby = PostgreSQL::Test::Cluster->new('direct_writes_standby');
$standby->init_from_backup($node, 'b', has_streaming => 1);
$standby->start;
$node->wait_for_catchup($standby);
for my $call ("SELECT wf_enqueue('dw', '{}')", "SELECT wf_enqueue_batch('dw', '[1]')",
	"SELECT * FROM wf_claim('dw')", "SELECT wf_complete('dw', 1, 1)",
	"SELECT wf_complete_many('dw', '{1}', '{1}')")
{
	my ($ret, $out, $err) = $standby->psql('postgres', "\\set VERBOSITY verbose\n$call");
	like($err, qr/ERROR:  25006: /, "on a standby: $call is refused with 25006");
}
$standby->stop;
$node->stop;
done_testing();
