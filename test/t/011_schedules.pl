# Cron schedules fired by the background worker: a due schedule fires once
# with no one calling wf_sweep(); missed ticks fire once; across a clean
# restart and a crash restart (SIGKILL of a backend while the worker fires
# many schedules) every tick has exactly one job, and nothing fires early.
use strict;
use warnings FATAL => 'all';
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);
use WfTap;

my $node = wf_node('schedules', sweep_interval => '200ms', no_extension => 1);
# Schedules fire only where a worker serves the database: one must start
# soon after CREATE EXTENSION, without waiting for the launcher's periodic
# recheck (a minute) or for a first claim.
$node->safe_psql('postgres', 'CREATE EXTENSION pg_wf');
my $t_created = time();
my $reaper_up;
while (time() - $t_created < 10)
{
	if (reaper_count($node, 'postgres') == 1) { $reaper_up = time() - $t_created; last; }
	sleep 0.1;
}
ok(defined $reaper_up, 'a reaper serves the database within 10 s of CREATE EXTENSION')
  or diag('no reaper 10 s after CREATE EXTENSION');
ok(wait_reapers($node, 'postgres', 1), 'a reaper serves the database');

# A minute schedule that runs through the whole test, at real ticks.
$node->safe_psql('postgres', "SELECT wf_schedule('tick', '* * * * *', 'sq_tick', '{\"kind\": \"tick\"}')");

# ---- 1. the worker fires a due schedule, once ----
my $next = $node->safe_psql('postgres',
	"SELECT wf_schedule('yearly', '0 0 1 1 *', 'sq_yearly', '{\"kind\": \"yearly\"}') > now()");
is($next, 't', 'wf_schedule returns a next run in the future');
is($node->safe_psql('postgres', "SELECT count(*) FROM wf.jobs WHERE queue = 'sq_yearly'"),
	'0', 'nothing is enqueued before it is due');
# Due for three years: missed ticks.
my $tick = $node->safe_psql('postgres', q{
	UPDATE wf.schedule
	   SET next_run_at = make_timestamptz(extract(year FROM now() AT TIME ZONE 'UTC')::int - 2, 1, 1, 0, 0, 0, 'UTC')
	 WHERE name = 'yearly' RETURNING extract(epoch FROM next_run_at)::bigint});
ok($node->poll_query_until('postgres', "SELECT count(*) > 0 FROM wf.jobs WHERE queue = 'sq_yearly'"),
	'the background worker fired the due schedule');
sleep 1;    # five more sweeps
is($node->safe_psql('postgres', "SELECT count(*) FROM wf.jobs WHERE queue = 'sq_yearly'"),
	'1', 'three missed ticks fire one job, and later sweeps none');
is( $node->safe_psql('postgres', q{
	SELECT j.idempotency_key = 'schedule:yearly:' || extract(epoch FROM s.last_run)::bigint
	       AND j.id = s.last_job_id AND j.payload = '{"kind": "yearly"}'
	       AND s.next_run = make_timestamptz(extract(year FROM now() AT TIME ZONE 'UTC')::int + 1, 1, 1, 0, 0, 0, 'UTC')
	  FROM wf.jobs j, wf.schedules s WHERE j.queue = 'sq_yearly' AND s.name = 'yearly'}),
	't', 'the job is keyed by its tick, and the schedule moved to its next real tick');

# ---- 2. a clean restart: a tick due while the server is down fires once after ----
# The worker sleeps an hour between sweeps, so the tick made due now is not
# fired before the restart (the setting is reset for the next start).
$node->safe_psql('postgres', "ALTER SYSTEM SET wf.sweep_interval = '1h'; SELECT pg_reload_conf()");
sleep 1;    # the reload wakes the worker once; then it sleeps
$node->safe_psql('postgres',
	"SELECT wf_schedule('restart', '0 0 1 1 *', 'sq_restart'); ALTER SYSTEM RESET wf.sweep_interval");
$node->safe_psql('postgres', q{
	UPDATE wf.schedule
	   SET next_run_at = make_timestamptz(extract(year FROM now() AT TIME ZONE 'UTC')::int, 1, 1, 0, 0, 0, 'UTC')
	 WHERE name = 'restart'});
is($node->safe_psql('postgres', "SELECT count(*) FROM wf.jobs WHERE queue = 'sq_restart'"),
	'0', 'not fired before the restart');
$node->restart;
ok($node->poll_query_until('postgres', "SELECT count(*) > 0 FROM wf.jobs WHERE queue = 'sq_restart'"),
	'fired by the worker after the restart');
sleep 1;
is($node->safe_psql('postgres', "SELECT count(*) FROM wf.jobs WHERE queue = 'sq_restart'"),
	'1', 'once');
is($node->safe_psql('postgres', "SELECT count(*) FROM wf.jobs WHERE queue = 'sq_yearly'"),
	'1', 'the schedule fired before the restart does not fire again');

# ---- 3. a crash restart while the worker fires 300 schedules ----
$node->safe_psql('postgres', q{
	SELECT wf_schedule('many-' || g, '0 0 1 1 *', 'sq_many', jsonb_build_object('n', g))
	  FROM generate_series(1, 300) g});
my $victim = $node->background_psql('postgres', on_error_stop => 0);
my $victim_pid = backend_pid($victim);
$node->safe_psql('postgres', q{
	UPDATE wf.schedule
	   SET next_run_at = make_timestamptz(extract(year FROM now() AT TIME ZONE 'UTC')::int - 1, 1, 1, 0, 0, 0, 'UTC')
	         - (substr(name, 6)::int * interval '1 minute')
	 WHERE name LIKE 'many-%'});
# Kill a backend as soon as the first of them fired.
$node->poll_query_until('postgres', "SELECT count(*) > 0 FROM wf.jobs WHERE queue = 'sq_many'");
my $before_crash = $node->safe_psql('postgres', "SELECT count(*) FROM wf.jobs WHERE queue = 'sq_many'");
kill 'KILL', $victim_pid;
eval { $victim->quit; };
ok($node->poll_query_until('postgres', 'SELECT true'), 'the server is back after the crash restart');
ok($node->log_contains(qr/all server processes terminated; reinitializing/), 'it went through a crash restart');
diag("schedules fired before the crash: $before_crash of 300");
ok( $node->poll_query_until('postgres',
		"SELECT count(*) = 0 FROM wf.schedule WHERE name LIKE 'many-%' AND next_run_at <= now()"),
	'after the crash restart the worker fired every due schedule');
sleep 1;
is( $node->safe_psql('postgres', q{
	SELECT count(*) || ' ' || count(DISTINCT idempotency_key) || ' ' || count(DISTINCT payload)
	  FROM wf.jobs WHERE queue = 'sq_many'}),
	'300 300 300', 'one job per schedule, each with its own key');
is( $node->safe_psql('postgres', q{
	SELECT count(*) FROM wf.jobs j JOIN wf.schedules s ON s.last_job_id = j.id
	 WHERE s.name LIKE 'many-%' AND j.idempotency_key = 'schedule:' || s.name || ':' || extract(epoch FROM s.last_run)::bigint
	   AND j.payload = jsonb_build_object('n', substr(s.name, 6)::int)}),
	'300', "each schedule's last_job_id is its job, keyed by its tick, with its payload");

# ---- 4. the minute schedule: real ticks, each once, none early ----
ok( $node->poll_query_until('postgres', "SELECT count(*) > 0 FROM wf.jobs WHERE queue = 'sq_tick'"),
	'the minute schedule fired at a real tick');
my $ticks = $node->safe_psql('postgres', q{
	SELECT count(*) || ' ' || count(DISTINCT idempotency_key) || ' '
	       || bool_and(split_part(idempotency_key, ':', 3)::bigint % 60 = 0) || ' '
	       || bool_and(created_at >= to_timestamp(split_part(idempotency_key, ':', 3)::bigint))
	  FROM wf.jobs WHERE queue = 'sq_tick'});
my ($n, $distinct, $aligned, $not_early) = split / /, $ticks;
diag("minute ticks fired: $n");
is($distinct, $n, 'each minute tick has one job');
is($aligned, 'true', 'ticks are whole minutes');
is($not_early, 'true', 'no tick fired before its time');
is( $node->safe_psql('postgres', q{
	SELECT s.next_run > now() - interval '5 seconds' AND s.next_run <= now() + interval '1 minute'
	       AND s.last_run = (SELECT max(to_timestamp(split_part(idempotency_key, ':', 3)::bigint))
	                           FROM wf.jobs WHERE queue = 'sq_tick')
	  FROM wf.schedules s WHERE name = 'tick'}),
	't', 'its next run is within the minute, its last run is its last job');
# (the 5 s: a tick that came due is fired by the next pass, up to wf.sweep_interval later)

# ---- 5. unscheduled: nothing more fires ----
$node->safe_psql('postgres', "SELECT wf_unschedule('yearly')");
$node->safe_psql('postgres', "SELECT wf_schedule('gone', '0 0 1 1 *', 'sq_gone')");
$node->safe_psql('postgres', "UPDATE wf.schedule SET next_run_at = now() - interval '1 hour' WHERE name = 'gone'");
ok($node->poll_query_until('postgres', "SELECT count(*) = 1 FROM wf.jobs WHERE queue = 'sq_gone'"),
	'a schedule made due fires');
is($node->safe_psql('postgres', "SELECT wf_unschedule('gone')"), 't', 'wf_unschedule removes it');
$node->safe_psql('postgres', "SELECT wf_sweep()");
sleep 0.5;
is($node->safe_psql('postgres', "SELECT count(*) FROM wf.jobs WHERE queue = 'sq_gone'"),
	'1', 'its job stays; nothing more fires');
ok(!$node->log_contains(qr/ERROR|bad cron expression/), 'the server log has no errors')
  or diag(join("\n", grep { /ERROR/ } split /\n/, slurp_file($node->logfile)));

$node->stop;
done_testing();
