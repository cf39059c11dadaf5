# The ready set's key order (1.10) holds only the ready rows of queues whose
# claims go key by key: an enqueue into any other queue writes its ready row
# outside wf.ready_key_order. A queue that begins to claim key by key has its
# rows put in by wf_configure_queue itself -- all but those of transactions
# still open then, which read the queue's plain settings before the change
# and write outside the key order after it. The worker puts those in as
# the transactions that overlapped the change end, and clears the queue's
# mark once all of them have. Here an enqueue is left open across the
# change, next to an unrelated open transaction: its rows are outside the
# key order; once it commits the worker puts them in (the queue still
# marked, the other one still open) and a fair claim takes both jobs; once
# the other one ends the mark is cleared. Then a queue changed three times
# while an enqueue into it is open, and workflow steps released by a
# transaction open across a change.
use strict;
use warnings FATAL => 'all';
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use WfTap;

my $node = wf_node('key_order', sweep_interval => '200ms');
$node->safe_psql('postgres', 'CREATE EXTENSION amcheck');
# Until a worker serves the database, every ready row is in the key order.
ok(wait_worker_serves($node), 'a worker serves the database');

# An unrelated transaction, open across the change too.
my $idle = $node->background_psql('postgres');
$idle->query_safe('BEGIN');
$idle->query_safe('SELECT 1');

my $late = $node->background_psql('postgres');
$late->query_safe('BEGIN');
# The enqueue reads the queue's settings (none: plain claims).
$late->query_safe(q{SELECT wf_enqueue('ko', '"early"')});
$node->safe_psql('postgres', q{SELECT wf_configure_queue('ko', fair => true)});
# Still open, the transaction enqueues again with the settings it read.
$late->query_safe(q{SELECT wf_enqueue('ko', '"late"')});
is( $late->query_safe(q{SELECT string_agg(key_order::text, ',' ORDER BY id) FROM wf.ready WHERE queue = 'ko'}),
	'false,false', 'an enqueue open across the change writes its ready rows outside the key order');
is( $node->safe_psql('postgres', q{SELECT key_order_sweep FROM wf.queue_config WHERE queue = 'ko'}),
	't', 'the queue is marked for the worker');
# Several passes of the worker: the mark stays while the enqueue is open.
sleep(1);
is( $node->safe_psql('postgres', q{SELECT key_order_sweep FROM wf.queue_config WHERE queue = 'ko'}),
	't', 'and stays marked while a transaction that overlapped the change is open');

$late->query_safe('COMMIT');
ok( $node->poll_query_until('postgres',
		q{SELECT bool_and(key_order) AND count(*) = 2 FROM wf.ready WHERE queue = 'ko'}),
	'once it committed, the worker puts its rows in the key order');
is( $node->safe_psql('postgres', q{SELECT key_order_sweep FROM wf.queue_config WHERE queue = 'ko'}),
	't', 'while another transaction that overlapped the change runs, the queue stays marked');
is( $node->safe_psql('postgres',
		q{SELECT string_agg(payload #>> '{}', ',' ORDER BY id) FROM wf_claim('ko', max_jobs => 10)}),
	'early,late', 'a fair claim takes both jobs');
$idle->query_safe('COMMIT');
ok( $node->poll_query_until('postgres',
		q{SELECT NOT key_order_sweep FROM wf.queue_config WHERE queue = 'ko'}),
	'once that one ended too, the worker clears the mark');
is( $node->safe_psql('postgres', q{
	SELECT count(*) FROM pg_index i, bt_index_check(i.indexrelid, heapallindexed => true)
	 WHERE i.indrelid = 'wf.ready'::regclass}),
	'3', 'every index of wf.ready is sound');

# A newer change while the worker waits: marked again, swept again.
my $open = $node->background_psql('postgres');
$open->query_safe('BEGIN');
$open->query_safe(q{SELECT wf_enqueue('ko2', '"a"')});
$node->safe_psql('postgres', q{SELECT wf_configure_queue('ko2', key_concurrency => 2)});
$node->safe_psql('postgres', q{SELECT wf_configure_queue('ko2', key_concurrency => 0)});
$node->safe_psql('postgres', q{SELECT wf_configure_queue('ko2', ordered => true)});
$open->query_safe(q{SELECT wf_enqueue('ko2', '"b"', key => 'k')});
$open->query_safe('COMMIT');
ok( $node->poll_query_until('postgres',
		q{SELECT NOT key_order_sweep FROM wf.queue_config WHERE queue = 'ko2'}),
	'a queue changed twice is swept once its overlapping transactions ended');
is( $node->safe_psql('postgres', q{SELECT string_agg(key_order::text, ',') FROM wf.ready WHERE queue = 'ko2'}),
	'true,true', 'with every ready row in the key order');

# Releases too: a completion releases a workflow step into a plain queue
# outside the key order, reading the queue's settings from its session's
# cache. Its transaction stays open across the change (the change cannot
# see that row) and completes another step after it (which may take in the
# change or not); the worker puts every such row in once it commits.
my $rel = $node->background_psql('postgres');
$rel->query_safe('BEGIN');
for my $n (1, 2) {
	$rel->query_safe(qq{SELECT wf_submit('{"queue": "kw", "steps": [{"name": "r$n"},
		{"name": "c$n", "queue": "kwc", "after": ["r$n"]}]}')});
}
$rel->query_safe(q{CREATE TEMP TABLE held AS SELECT id, attempt, step_name FROM wf_claim('kw', max_jobs => 2)});
$rel->query_safe(q{SELECT wf_complete('kw', id, attempt, '{}') FROM held WHERE step_name = 'r1'});
is( $rel->query_safe(q{
	SELECT string_agg(j.step_name || ':' || r.key_order, ',' ORDER BY j.step_name)
	  FROM wf.ready r JOIN wf.job j USING (queue, id) WHERE r.queue = 'kwc'}),
	'c1:false', 'a step released into a plain queue is written outside the key order');
$node->safe_psql('postgres', q{SELECT wf_configure_queue('kwc', fair => true)});
$rel->query_safe(q{SELECT wf_complete('kw', id, attempt, '{}') FROM held WHERE step_name = 'r2'});
$rel->query_safe('COMMIT');
ok( $node->poll_query_until('postgres',
		q{SELECT bool_and(key_order) AND count(*) = 2 FROM wf.ready WHERE queue = 'kwc'}),
	'once their transaction committed, the worker puts them in the key order');
is( $node->safe_psql('postgres',
		q{SELECT string_agg(step_name, ',' ORDER BY step_name) FROM wf_claim('kwc', max_jobs => 10)}),
	'c1,c2', 'a fair claim takes both steps');

$rel->quit;
$late->quit;
$idle->quit;
$open->quit;
$node->stop;
done_testing();
