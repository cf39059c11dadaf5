# ALTER EXTENSION pg_wf UPDATE from 1.1 to the current version (1.12), through
# 1.2, where a claim's running state moved from the job row to the unlogged
# claim table (1.3 then drops the job row's unused owner_pid). The library
# does not serve a schema older than 1.2: every function says so (55000,
# with the hint to update) and the background worker leaves the database
# alone. The jobs of 1.1 -- every state, a claim whose session died with the
# library swap, a dependent waiting on it -- keep their state through the
# update; the lost claim is then recovered with its attempt counted. The
# updated schema is the same as a fresh CREATE EXTENSION's (compared object
# by object, from every older version, in 015_schema_drift.pl).
use strict;
use warnings FATAL => 'all';
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use WfTap;

my $node = wf_node('upgrade', sweep_interval => '200ms', no_extension => 1);
$node->safe_psql('postgres', "CREATE EXTENSION pg_wf VERSION '1.1'");
is($node->safe_psql('postgres', "SELECT extversion FROM pg_extension WHERE extname = 'pg_wf'"),
	'1.1', 'version 1.1 installed');

# The functions refuse an old schema, clearly, and change nothing.
my ($rc, $out, $err) = $node->psql('postgres',
	"\\set VERBOSITY verbose\nSELECT wf_enqueue('up', '{}')");
like($err, qr/55000: pg_wf's SQL objects in this database are older than its library/,
	'a function under 1.1 raises 55000');
like($err, qr/HINT:  Run ALTER EXTENSION pg_wf UPDATE/, 'with the hint to update');
is($node->safe_psql('postgres', 'SELECT count(*) FROM wf.job'), '0', 'and changes nothing');
ok($node->wait_for_log(qr/pg_wf worker: .* older than its library/),
	'the worker says why it leaves the database alone');

# The jobs of 1.1, written as its library wrote them (with the job row's
# owner_pid of 1.1): done, failed, pending, scheduled, and one running --
# its claim row names a session that is gone (the server restarted to load
# the new library) -- with a blocked child.
$node->safe_psql('postgres', q{
	INSERT INTO wf.job (queue, id, max_attempts, attempt_budget, status, attempt, run_at,
	                    started_at, finished_at, owner_pid, pending_deps, has_dependents,
	                    worker, result, last_error, step_name, idempotency_key, depends_on, payload)
	VALUES ('up_done', 1, 5, 5, 'done', 1, now(), now(), now(), NULL, 0, false, 'old', '"r"', NULL, NULL, NULL, NULL, '{"n": "done"}'),
	       ('up_dead', 2, 1, 1, 'failed', 1, now(), now(), now(), NULL, 0, false, 'old', NULL, 'boom', NULL, NULL, NULL, '{"n": "failed"}'),
	       ('up', 3, 5, 5, 'pending', 0, now(), NULL, NULL, NULL, 0, false, NULL, NULL, NULL, NULL, 'pending', NULL, '{"n": "pending"}'),
	       ('up_later', 4, 5, 5, 'pending', 0, now() + interval '1 day', NULL, NULL, NULL, 0, false, NULL, NULL, NULL, NULL, NULL, NULL, '{"n": "later"}'),
	       ('up_run', 5, 5, 5, 'running', 1, now(), now(), NULL, 4242, 0, true, 'old', NULL, NULL, 'parent', NULL, NULL, '{"n": "running"}'),
	       ('up_child', 6, 5, 5, 'blocked', 0, now(), NULL, NULL, NULL, 1, false, NULL, NULL, NULL, 'child', NULL, '{5}', '{"n": "child"}');
	SELECT setval('wf.job_id_seq', 6);
	INSERT INTO wf.ready (queue, priority, run_at, id)
	     SELECT queue, priority, run_at, id FROM wf.job WHERE status = 'pending';
	INSERT INTO wf.dependency VALUES (5, 'up_child', 6);
	INSERT INTO wf.claim (queue, id, attempt, owner_session) VALUES ('up_run', 5, 1, 777);
});

my $jobs_sql = q{SELECT string_agg(concat_ws(' ', id, queue, status, attempt, worker, payload, result, depends_on), E'\n' ORDER BY id) FROM wf.jobs};
my $jobs_before = $node->safe_psql('postgres', $jobs_sql);
like($jobs_before, qr/^5 up_run running 1 old /m, 'the 1.1 view shows the claim');

# ---- the update; seen inside its transaction, before the worker acts ----
is( $node->safe_psql('postgres', "BEGIN; ALTER EXTENSION pg_wf UPDATE; $jobs_sql;"
		  . " SELECT status || ' ' || attempt FROM wf.job WHERE id = 5; COMMIT;"),
	"$jobs_before\npending 0",
	'every job is as it was, the claimed one running at attempt 1; its job row is one attempt behind');
is($node->safe_psql('postgres', "SELECT extversion FROM pg_extension WHERE extname = 'pg_wf'"),
	'1.12', 'updated to 1.12');

# The worker now serves the database: the lost claim is recovered, its
# attempt counted, and the job runs again and releases its child.
ok( $node->poll_query_until('postgres',
		"SELECT status = 'pending' FROM wf.jobs WHERE id = 5"),
	'the claim of the gone session is recovered');
like($node->safe_psql('postgres', "SELECT attempt || ' ' || last_error FROM wf.jobs WHERE id = 5"),
	qr/^1 worker lost: session \(pid 4242\) ended during attempt 1$/, 'with its attempt counted');
my $worker = $node->background_psql('postgres');
is($worker->query_safe("SELECT id || ' ' || attempt FROM wf_claim('up_run', worker => 'new')"),
	'5 2', 'claimed again at attempt 2');
is($worker->query_safe("SELECT wf_complete('up_run', 5, 1, '{}')"), 'f', 'the old token is stale');
is($worker->query_safe("SELECT wf_complete('up_run', 5, 2, '{\"from\": \"parent\"}')"),
	't', 'the new one completes');
is( $worker->query_safe("SELECT step_name || ' ' || inputs || ' ' || coalesce(checkpoints::text, '-') || ' ' || coalesce(events::text, '-') FROM wf_claim('up_child')"),
	'child {"parent": {"from": "parent"}} - -', 'its dependent is released with its input');
is($worker->query_safe("SELECT count(*) FROM wf_claim('up', max_jobs => 5)"), '1',
	'the pending job of 1.1 is claimed');
is($worker->query_safe("SELECT wf_checkpoint('up', 3, 1, 'half', '1')"), 'recorded',
	'wf_checkpoint on a job enqueued under 1.1');
is($worker->query_safe("SELECT wf_await_event('up', 3, 1, 'go')"), 'waiting', 'wf_await_event');
is($node->safe_psql('postgres', "SELECT wf_signal('go', '\"now\"')"), '1', 'wf_signal wakes it');
is( $worker->query_safe("SELECT attempt || ' ' || checkpoints || ' ' || events FROM wf_claim('up')"),
	'2 {"half": 1} {"go": {"status": "signalled", "payload": "now"}}',
	'claimed again with its checkpoint and event');
is($node->safe_psql('postgres', "SELECT wf_enqueue('up', '{\"n\": \"pending\"}', idempotency_key => 'pending')"),
	'3', 'an idempotency key of 1.1 is remembered');
$worker->quit;

# The new functions and views.
my $w = $node->safe_psql('postgres', q{
	SELECT wf_submit('{"name": "after-upgrade", "queue": "up_wf", "steps": [{"name": "a"}, {"name": "b", "after": ["a"]}]}')});
is($node->safe_psql('postgres', "SELECT name, status, steps FROM wf.workflows WHERE workflow_id = '$w'"),
	'after-upgrade|running|2', 'wf_submit and wf.workflows');
$node->safe_psql('postgres', "SELECT wf_complete(queue, id, attempt, '1') FROM wf_claim('up_wf')");
is($node->safe_psql('postgres', "SELECT inputs FROM wf_claim('up_wf')"), '{"a": 1}', 'a workflow runs');
is($node->safe_psql('postgres', "SELECT wf_workflow('$w')->>'status'"), 'running', 'wf_workflow');
# The completion writes the job row without the executor, finding its
# columns by name: in an updated table the added ones come last.
is( $node->safe_psql('postgres', q{
	SELECT count(*) FROM wf_enqueue_batch('up_direct', '[1, 2]');
	SELECT wf_progress(queue, id, attempt, '{"at": 1}') FROM wf_claim('up_direct', 'up-worker', 2);
	SELECT count(*) FROM wf_complete_many('up_direct', (SELECT array_agg(id ORDER BY id) FROM wf.job WHERE queue = 'up_direct'),
	                                      '{1,1}', ARRAY['"r1"', '"r2"']::jsonb[]);
	SELECT string_agg(concat_ws(' ', status, attempt, result, progress, worker, started_at IS NOT NULL,
	                            finished_at IS NOT NULL), '; ' ORDER BY id)
	  FROM wf.jobs WHERE queue = 'up_direct'}),
	qq{2\nt\nt\n2\ndone 1 "r1" {"at": 1} up-worker t t; done 1 "r2" {"at": 1} up-worker t t},
	'a job row of the updated table is completed column by column');
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
is($upgraded, $fresh, 'the updated schema equals a fresh 1.12 install');
is( $node->safe_psql('postgres', q{
	SELECT array_agg(c::regclass::text ORDER BY c::regclass::text) FROM pg_extension, unnest(extconfig) c WHERE extname = 'pg_wf'}),
	$node->safe_psql('fresh', q{
	SELECT array_agg(c::regclass::text ORDER BY c::regclass::text) FROM pg_extension, unnest(extconfig) c WHERE extname = 'pg_wf'}),
	'the same tables are dumped as in a fresh install');

# ---- rights granted under 1.5 hold after the update to 1.6 ----
# A database at 1.5 whose roles hold capabilities, with the EXECUTE grants
# wf_grant gave them then (written here as it wrote them: the 1.6 library
# serves no 1.5 schema). The update recreates the functions whose arguments
# grew and adds new ones; afterwards every role may run exactly what
# wf_grant gives the same capabilities in a fresh 1.6 database, and none of
# it is recorded as the extension's initial privileges (which pg_dump
# leaves out).
my %rights_1_5 = (
	produce => [qw(wf_enqueue wf_enqueue_batch wf_submit)],
	work    => [qw(wf_claim wf_complete_and_claim wf_heartbeat wf_complete wf_complete_many
		  wf_fail wf_checkpoint wf_snooze wf_await_event)],
	signal  => [qw(wf_signal)],
	operate => [qw(wf_retry wf_cancel wf_cancel_workflow wf_workflow)]);
$rights_1_5{administer} = [ (map { @$_ } values %rights_1_5),
	qw(wf_configure_queue wf_schedule wf_unschedule wf_sweep wf_recover_lost_claims wf_grant wf_revoke) ];
my @capabilities = sort keys %rights_1_5;
$node->safe_psql('postgres', join('', map { "CREATE ROLE up_$_;\n" } @capabilities));
$node->safe_psql('postgres', 'CREATE DATABASE granted_1_5');
$node->safe_psql('granted_1_5', "CREATE EXTENSION pg_wf VERSION '1.5'");
for my $c (@capabilities)
{
	my $names = join(',', @{ $rights_1_5{$c} });
	$node->safe_psql('granted_1_5', qq{
		INSERT INTO wf.grant (grantee, capability, queues, granted_by)
		     VALUES ('up_$c', '$c', 'q*', current_user::regrole);
		DO \$\$
		DECLARE f regprocedure;
		BEGIN
		  FOR f IN SELECT p.oid FROM pg_proc p
		            WHERE p.pronamespace = 'public'::regnamespace
		              AND p.proname = ANY ('{$names}'::text[]) LOOP
		    EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO up_$c', f);
		  END LOOP;
		END \$\$;});
}
$node->safe_psql('granted_1_5', 'ALTER EXTENSION pg_wf UPDATE');
is($node->safe_psql('granted_1_5', "SELECT extversion FROM pg_extension WHERE extname = 'pg_wf'"),
	'1.12', 'a 1.5 database with grants updated to 1.12');
$node->safe_psql('postgres', 'CREATE DATABASE granted_1_6');
$node->safe_psql('granted_1_6', 'CREATE EXTENSION pg_wf');
$node->safe_psql('granted_1_6', join('', map { "SELECT wf_grant('up_$_', '$_', 'q*');\n" } @capabilities));
my $execute_sql = q{
	SELECT string_agg(format('%s %s %s', p.proname, a.grantee::regrole, a.grantor::regrole),
	                  E'\n' ORDER BY p.proname, a.grantee::regrole::text)
	  FROM pg_proc p, aclexplode(p.proacl) a
	 WHERE p.pronamespace = 'public'::regnamespace AND p.proname LIKE 'wf\_%'
	   AND a.privilege_type = 'EXECUTE' AND a.grantee::regrole::text LIKE 'up\_%'};
my $granted_fresh = $node->safe_psql('granted_1_6', $execute_sql);
like($granted_fresh, qr/^wf_progress up_work wf_owner$/m,
	'fresh 1.6: wf_grant gives work the new wf_progress');
is($node->safe_psql('granted_1_5', $execute_sql), $granted_fresh,
	'updated from 1.5: each role may run what wf_grant gives its capability in 1.6');
my $init_privs_sql = q{
	SELECT string_agg(format('%s %s', ip.objoid::regprocedure, ip.initprivs), E'\n'
	                  ORDER BY ip.objoid::regprocedure::text)
	  FROM pg_init_privs ip
	 WHERE ip.classoid = 'pg_proc'::regclass
	   AND ip.objoid IN (SELECT oid FROM pg_proc WHERE pronamespace = 'public'::regnamespace
	                                               AND proname LIKE 'wf\_%')};
is($node->safe_psql('granted_1_5', $init_privs_sql), $node->safe_psql('granted_1_6', $init_privs_sql),
	"updated from 1.5: the roles' grants are not the extension's initial privileges");

# ---- 1.10's keys, served by this library, then rebuilt by the update ----
# Before 1.11 wf.job and wf.claim were keyed (queue, id) and wf.job had
# job_id on (id); the library reads either order (direct_table.hpp). A
# database at 1.10 works through every path that looks rows up by hand --
# a claim and its completion, a batch, a workflow step released with its
# parent's result -- and a claim taken there is completed after the update
# rebuilt both keys.
my $keys_sql = q{SELECT string_agg(indexrelid::regclass || ' ' || pg_get_indexdef(indexrelid), E'\n' ORDER BY indexrelid::regclass::text)
	  FROM pg_index WHERE indrelid IN ('wf.job'::regclass, 'wf.claim'::regclass) AND indisprimary OR indexrelid::regclass::text = 'wf.job_id'};
$node->safe_psql('postgres', 'CREATE DATABASE at_1_10');
$node->safe_psql('at_1_10', "CREATE EXTENSION pg_wf VERSION '1.10'");
like($node->safe_psql('at_1_10', $keys_sql), qr/^wf\.claim_pkey .*\(queue, id\)\nwf\.job_id .*\(id\)\nwf\.job_pkey .*\(queue, id\)$/,
	'1.10: the keys led by the queue, and job_id');
my $w110 = $node->background_psql('at_1_10');
$w110->query_safe(q{SELECT wf_submit('{"steps": [{"name": "a", "queue": "k10", "payload": {}},
	{"name": "b", "queue": "k10", "payload": {}, "after": ["a"]}]}')});
my ($a_id, $a_att) = split /\|/, $w110->query_safe(q{SELECT id, attempt FROM wf_claim('k10')});
is($w110->query_safe(qq{SELECT wf_complete('k10', $a_id, $a_att, '{"n": 1}')}), 't', '1.10: a step completed');
is($w110->query_safe(q{SELECT step_name || ' ' || inputs FROM wf_claim('k10')}), 'b {"a": {"n": 1}}',
	"1.10: its child released and claimed with the parent's result");
$w110->query_safe(q{SELECT count(*) FROM wf_enqueue_batch('k10b', '[{}, {}, {}]')});
is($w110->query_safe(q{SELECT count(*) FROM wf_complete_many('k10b',
	(SELECT array_agg(id) FROM wf_claim('k10b', max_jobs => 2) c), '{1,1}')}), '2',
	'1.10: a batch claimed and completed');
my ($held, $held_att) = split /\|/, $w110->query_safe(q{SELECT id, attempt FROM wf_claim('k10b')});
$node->safe_psql('at_1_10', 'ALTER EXTENSION pg_wf UPDATE');
like($node->safe_psql('at_1_10', $keys_sql), qr/^wf\.claim_pkey .*\(id, queue\)\nwf\.job_pkey .*\(id, queue\)$/,
	'1.11: both keys led by the id, and no job_id');
is($w110->query_safe(qq{SELECT wf_complete('k10b', $held, $held_att)}), 't',
	'the claim taken under 1.10 completed after the update');
is($node->safe_psql('at_1_10', q{SELECT string_agg(status, ',' ORDER BY id) FROM wf.job}),
	'done,pending,done,done,done', 'every job as it should be (b still claimed)');
$w110->quit;

ok(!$node->log_contains(qr/ERROR:  (?!.*older than its library)/), 'no other errors in the server log')
  or diag(join("\n", grep { /ERROR/ } split /\n/, slurp_file($node->logfile)));

$node->stop;
done_testing();
