# ALTER EXTENSION pg_wf UPDATE from 1.0 to 1.1 with jobs in every state and
# a live worker holding a claim: nothing is lost, the claimed job completes
# after the update and releases its dependent, and the 1.1 functions work.
# Before the update, the 1.1 library serves the 1.0 schema: claims return
# the 1.0 columns and the background worker recovers lost jobs without
# touching tables that do not exist yet. The updated schema is the same as
# a fresh CREATE EXTENSION's.
use strict;
use warnings FATAL => 'all';
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use WfTap;

my $node = wf_node('upgrade', sweep_interval => '200ms', no_extension => 1);
$node->safe_psql('postgres', "CREATE EXTENSION pg_wf VERSION '1.0'");
is($node->safe_psql('postgres', "SELECT extversion FROM pg_extension WHERE extname = 'pg_wf'"),
	'1.0', 'version 1.0 installed');
ok(wait_reapers($node, 'postgres', 1), 'a reaper serves the 1.0 database');

# Jobs in every state.
$node->safe_psql('postgres', q{
	SELECT wf_enqueue('up', '{"n": "pending"}', idempotency_key => 'pending');
	SELECT wf_enqueue('up_done', '{"n": "done"}');
	SELECT wf_complete(queue, id, attempt, '{"r": "done"}') FROM wf_claim('up_done');
	SELECT wf_enqueue('up_dead', '{"n": "failed"}', max_attempts => 1);
	SELECT wf_fail(queue, id, attempt, 'boom') FROM wf_claim('up_dead');
	SELECT wf_enqueue('up_later', '{"n": "later"}', run_at => now() + interval '1 day');
	SELECT wf_enqueue('up_run', '{"n": "running"}', step_name => 'parent');
});
my $worker = $node->background_psql('postgres');
my $claimed = $worker->query_safe("SELECT id || ' ' || attempt FROM wf_claim('up_run', worker => 'old')");
my ($pid_job, $pid_attempt) = split / /, $claimed;
is($pid_attempt, '1', 'a worker claimed a job under 1.0');
$node->safe_psql('postgres',
	"SELECT wf_enqueue('up_child', '{\"n\": \"child\"}', step_name => 'child', depends_on => ARRAY[$pid_job])");
is($node->safe_psql('postgres', q{SELECT count(*) FROM regexp_split_to_table(pg_get_function_result('wf_claim'::regproc), ', ')}),
	'11', 'wf_claim has its 1.0 columns');

# The 1.1 library with the 1.0 schema: a claim works, and the reaper
# recovers the jobs of a lost session.
$node->safe_psql('postgres', "SELECT wf_enqueue('up_lost', '{\"n\": \"lost\"}')");
my $lost = $node->background_psql('postgres');
my $lost_id = $lost->query_safe("SELECT id FROM wf_claim('up_lost')");
ok($lost_id, 'a claim under 1.0 returns its columns');
kill_client($lost);
ok( $node->poll_query_until('postgres',
		"SELECT status = 'pending' FROM wf.jobs WHERE id = $lost_id"),
	'the reaper recovers a lost job of the 1.0 schema');
is($node->safe_psql('postgres', 'SELECT wf_sweep() >= 0'), 't', 'wf_sweep works under 1.0');
ok(!$node->log_contains(qr/ERROR/), 'no errors in the log from the worker under 1.0')
  or diag(join("\n", grep { /ERROR/ } split /\n/, slurp_file($node->logfile)));

my $jobs_sql = q{SELECT string_agg(concat_ws(' ', id, queue, status, attempt, payload, result, depends_on), E'\n' ORDER BY id) FROM wf.jobs};
my $jobs_before = $node->safe_psql('postgres', $jobs_sql);

# ---- the update, with the worker's claim open ----
$node->safe_psql('postgres', 'ALTER EXTENSION pg_wf UPDATE');
is($node->safe_psql('postgres', "SELECT extversion FROM pg_extension WHERE extname = 'pg_wf'"),
	'1.1', 'updated to 1.1');
is($node->safe_psql('postgres', $jobs_sql), $jobs_before, 'every job is as it was');
is($node->safe_psql('postgres', q{SELECT count(*) FROM regexp_split_to_table(pg_get_function_result('wf_claim'::regproc), ', ')}),
	'13', 'wf_claim has its 1.1 columns');
is($node->safe_psql('postgres', "SELECT status, waiting_for, events FROM wf.jobs WHERE id = $pid_job"),
	'running||', 'wf.jobs has the new columns; the claimed job still runs');

# The worker of 1.0 times completes its job in the same session.
is($worker->query_safe("SELECT wf_heartbeat('up_run', $pid_job, 1)"), 't', 'its heartbeat still holds');
is($worker->query_safe("SELECT wf_complete('up_run', $pid_job, 1, '{\"from\": \"parent\"}')"),
	't', 'the job claimed before the update completes after it');
is( $worker->query_safe("SELECT step_name || ' ' || inputs || ' ' || coalesce(checkpoints::text, '-') || ' ' || coalesce(events::text, '-') FROM wf_claim('up_child')"),
	'child {"parent": {"from": "parent"}} - -', 'its dependent is released with its input; the new columns are NULL');
is($worker->query_safe("SELECT count(*) FROM wf_claim('up', max_jobs => 5)"), '1',
	'the pending job of 1.0 is claimed');
my $up_id = $node->safe_psql('postgres', "SELECT id FROM wf.jobs WHERE queue = 'up'");
is($worker->query_safe("SELECT wf_checkpoint('up', $up_id, 1, 'half', '1')"), 'recorded',
	'wf_checkpoint on a job enqueued under 1.0');
is($worker->query_safe("SELECT wf_await_event('up', $up_id, 1, 'go')"), 'waiting', 'wf_await_event');
is($node->safe_psql('postgres', "SELECT wf_signal('go', '\"now\"')"), '1', 'wf_signal wakes it');
is( $worker->query_safe("SELECT attempt || ' ' || checkpoints || ' ' || events FROM wf_claim('up')"),
	'2 {"half": 1} {"go": {"status": "signalled", "payload": "now"}}',
	'claimed again with its checkpoint and event');
$worker->quit;

# The new functions and views.
my $w = $node->safe_psql('postgres', q{
	SELECT wf_submit('{"name": "after-upgrade", "queue": "up_wf", "steps": [{"name": "a"}, {"name": "b", "after": ["a"]}]}')});
is($node->safe_psql('postgres', "SELECT name, status, steps FROM wf.workflows WHERE workflow_id = '$w'"),
	'after-upgrade|running|2', 'wf_submit and wf.workflows');
$node->safe_psql('postgres', "SELECT wf_complete(queue, id, attempt, '1') FROM wf_claim('up_wf')");
is($node->safe_psql('postgres', "SELECT inputs FROM wf_claim('up_wf')"), '{"a": 1}', 'a workflow runs');
is($node->safe_psql('postgres', "SELECT wf_workflow('$w')->>'status'"), 'running', 'wf_workflow');
ok($node->safe_psql('postgres', "SELECT wf_schedule('up-sched', '0 0 1 1 *', 'up_sched') > now()"),
	'wf_schedule');
$node->safe_psql('postgres', "UPDATE wf.schedule SET next_run_at = now() - interval '1 minute' WHERE name = 'up-sched'");
ok($node->poll_query_until('postgres', "SELECT count(*) = 1 FROM wf.jobs WHERE queue = 'up_sched'"),
	'the worker fires schedules in the updated database');

# ---- the updated schema is a fresh install's ----
$node->safe_psql('postgres', 'CREATE DATABASE fresh');
$node->safe_psql('fresh', 'CREATE EXTENSION pg_wf');
my $schema_sql = q{
	SELECT string_agg(x, E'\n' ORDER BY x) FROM (
	  SELECT pg_describe_object(classid, objid, objsubid) AS x FROM pg_depend
	   WHERE refclassid = 'pg_extension'::regclass AND deptype = 'e'
	     AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'pg_wf')
	  UNION ALL
	  SELECT format('%s.%s %s %s %s', c.relname, a.attname, format_type(a.atttypid, a.atttypmod),
	                a.attnotnull, pg_get_expr(d.adbin, d.adrelid))
	    FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
	    JOIN pg_namespace n ON n.oid = c.relnamespace
	    LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
	   WHERE n.nspname = 'wf' AND a.attnum > 0 AND NOT a.attisdropped
	  UNION ALL
	  SELECT indexdef FROM pg_indexes WHERE schemaname = 'wf'
	  UNION ALL
	  SELECT viewname || ': ' || definition FROM pg_views WHERE schemaname = 'wf'
	  UNION ALL
	  SELECT format('%s(%s) %s %s %s', p.proname, pg_get_function_arguments(p.oid),
	                pg_get_function_result(p.oid), p.provolatile::text, p.proconfig::text)
	    FROM pg_proc p WHERE p.proname LIKE 'wf\_%' AND p.pronamespace = 'public'::regnamespace
	  UNION ALL
	  SELECT conrelid::regclass || ' ' || pg_get_constraintdef(oid) FROM pg_constraint
	   WHERE connamespace = 'wf'::regnamespace
	  UNION ALL
	  SELECT c.relname || ' ' || coalesce(array_to_string(c.reloptions, ','), '') || ' ' || c.relpersistence::text
	    FROM pg_class c WHERE c.relnamespace = 'wf'::regnamespace) s};
my $upgraded = $node->safe_psql('postgres', $schema_sql);
my $fresh = $node->safe_psql('fresh', $schema_sql);
is($upgraded, $fresh, 'the updated schema equals a fresh 1.1 install');
is( $node->safe_psql('postgres', q{
	SELECT array_agg(c::regclass::text ORDER BY c::regclass::text) FROM pg_extension, unnest(extconfig) c WHERE extname = 'pg_wf'}),
	$node->safe_psql('fresh', q{
	SELECT array_agg(c::regclass::text ORDER BY c::regclass::text) FROM pg_extension, unnest(extconfig) c WHERE extname = 'pg_wf'}),
	'the same tables are dumped as in a fresh install');

ok(!$node->log_contains(qr/ERROR/), 'no errors in the server log')
  or diag(join("\n", grep { /ERROR/ } split /\n/, slurp_file($node->logfile)));

$node->stop;
done_testing();
