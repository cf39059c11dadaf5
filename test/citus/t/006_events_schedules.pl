# Events, schedules and wf_sweep on a distributed pg_wf (1.8), through the
# coordinator, with queues on both workers:
#  - wf_signal wakes the jobs waiting for the event on every node, in the
#    caller's transaction (a rolled-back signal wakes nothing); an await
#    after the signal goes on at once; an await whose transaction was open
#    while the signal committed is woken by its node's worker; timeouts;
#  - a schedule fires once cluster-wide (the coordinator's worker), its
#    job on the node of its queue and the schedule moved on in every node's
#    copy; schedules are made on the coordinator;
#  - wf_sweep by hand reaches every shard group (timeouts, start_by, cron);
#  - the calls pg_wf makes into a shard group (wf._wake_event, ...) refuse
#    anyone but pg_wf, and a planted operator never runs in them.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::RealBin/..";
use CitusTap;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes ();

my $c = citus_cluster('c006', distribute => 1);
my $coord = $c->coordinator;
my @workers = $c->workers;
my $q = sub { $c->sql_on($coord, $_[0]) };

# Two queues on each worker.
my ($on_first, $on_second) = $c->queues_on_workers(2);
my ($qa, $qc) = @$on_first;
my ($qb, $qd) = @$on_second;
ok($qa && $qb && $qc && $qd, "queues $qa, $qc on one worker, $qb, $qd on the other");

# A job of $queue, claimed and parked on $event (timeout $timeout or NULL)
# by one session; returns its id.
sub park_on
{
	my ($queue, $event, $timeout) = @_;
	my $id = $q->("SELECT wf_enqueue('$queue', '{}')");
	my $client = $coord->background_psql('postgres');
	my $got = '';
	for (1 .. 50)
	{
		my ($cid, $attempt) = split /\|/, $client->query_safe("SELECT id, attempt FROM wf_claim('$queue')");
		$got = $cid // '';
		last if $got eq $id || $got eq '';
		$client->query_safe("SELECT wf_complete('$queue', $cid, $attempt)");
	}
	die "could not claim $id" unless $got eq $id;
	my $status = $client->query_safe("SELECT wf_await_event('$queue', $id, 1, '$event', $timeout)");
	$client->quit;
	return ($id, $status);
}

# ---- events across nodes ----
my ($ja, $sa) = park_on($qa, 'paid', q{'1 hour'});
my ($jb, $sb) = park_on($qb, 'paid', 'NULL');
is("$sa $sb", 'waiting waiting', 'jobs on both workers wait for the event');

$q->('CREATE ROLE tenant LOGIN');
# Rights elsewhere: EXECUTE on the functions, pg_wf's own check refuses.
$q->("SELECT wf_grant('tenant', 'produce', '$qa')");
$q->("SELECT wf_grant('tenant', 'signal', 'other')");
$q->("SELECT wf_grant('tenant', 'administer', '$qc')");
my ($ret, $out, $err) = $coord->psql('postgres', "SET ROLE tenant; SELECT wf_signal('paid', '{}')");
like($err, qr/permission denied to signal event "paid"/, 'a role without the signal right is refused');

is($q->("BEGIN; SELECT wf_signal('paid', '{\"n\": 1}'); ROLLBACK;"), '2',
	'a signal inside a transaction wakes the waiting jobs of both nodes');
is($q->("SELECT string_agg(status, ' ' ORDER BY id) FROM wf.jobs WHERE id IN ($ja, $jb)"),
	'waiting waiting', 'rolled back, it woke nothing');
is($q->(q{SELECT wf_signal('paid', '{"n": 2}')}), '2', 'wf_signal: two jobs woken');
is($q->("SELECT string_agg(status || ' ' || (events -> 'paid')::text, ', ' ORDER BY id) FROM wf.jobs WHERE id IN ($ja, $jb)"),
	join(', ', ('pending {"status": "signalled", "payload": {"n": 2}}') x 2),
	'both pending, with the signal and its payload in their events');
is(join(',', map { $c->sql_on($_, "SELECT payload FROM wf.event WHERE name = 'paid'") } $c->all_nodes),
	'{"n": 2},{"n": 2},{"n": 2}', "every node's copy of the event has the signal");
is($q->("SELECT count(*) FROM wf.event_wait"), '0', 'no wait row left');

my ($jc, $sc) = park_on($qc, 'paid', 'NULL');
is($sc, 'pending', 'an await after the signal goes on at once');
is($q->("SELECT events -> 'paid' ->> 'payload' FROM wf.jobs WHERE id = $jc"), '{"n": 2}',
	'with the payload');

# An await whose transaction is open while the signal commits: the signal
# cannot see its wait, the node's worker wakes it.
{
	my $id = $q->("SELECT wf_enqueue('$qd', '{}')");
	my $client = $coord->background_psql('postgres');
	my ($cid, $attempt) = split /\|/, $client->query_safe("SELECT id, attempt FROM wf_claim('$qd')");
	is($cid, $id, 'claimed');
	$client->query_safe('BEGIN');
	is($client->query_safe("SELECT wf_await_event('$qd', $id, 1, 'late', NULL)"), 'waiting',
		'await in an open transaction');
	is($q->("SELECT wf_signal('late')"), '0', 'the signal meanwhile sees no committed wait');
	$client->query_safe('COMMIT');
	$client->quit;
	ok($c->wait_for("SELECT status || ' ' || (events -> 'late' ->> 'status') FROM wf.jobs WHERE id = $id",
			'pending signalled'),
		"the node's worker wakes the wait that came in after the signal");
}

# Timeouts, by each node's worker.
my ($jt) = park_on($qb, 'never', q{'300 ms'});
ok($c->wait_for("SELECT status || ' ' || (events -> 'never' ->> 'status') FROM wf.jobs WHERE id = $jt",
		'pending timed_out'), 'a timeout wakes the job');

# ---- the calls pg_wf makes into a group refuse anyone else ----
($ret, $out, $err) = $coord->psql('postgres', "SET ROLE tenant; SELECT wf._wake_event('$qa', 'paid', NULL)");
like($err, qr/permission denied for function _wake_event/, 'wf._wake_event: no EXECUTE for PUBLIC');
$q->('GRANT EXECUTE ON FUNCTION wf._wake_event(text, text, jsonb), wf._fire_tick(text, jsonb, timestamptz, text),'
	  . ' wf._sweep_group(text) TO tenant');
for my $call ("wf._wake_event('$qa', 'paid', NULL)", "wf._fire_tick('$qa', '{}', now(), 'k')",
	"wf._sweep_group('$qa')")
{
	($ret, $out, $err) = $coord->psql('postgres', "SET ROLE tenant; SELECT $call");
	like($err, qr/ERROR:  permission denied for function wf\._.*\n.*called by pg_wf itself/,
		"$call: refused even with EXECUTE granted");
}
is($q->("SELECT count(*) FROM wf.jobs WHERE queue = '$qa' AND idempotency_key = 'k'"), '0',
	'and nothing was enqueued');

# A planted operator (text = text in public, first on the caller's
# search_path) is not what pg_wf's statements through Citus call.
$q->(q{
CREATE TABLE public.planted_ran (who text);
GRANT INSERT ON public.planted_ran TO PUBLIC;
CREATE FUNCTION public.planted_eq(text, text) RETURNS boolean LANGUAGE plpgsql AS
  $$ BEGIN INSERT INTO public.planted_ran VALUES (current_user); RETURN $1 OPERATOR(pg_catalog.=) $2; END $$;
CREATE OPERATOR public.= (LEFTARG = text, RIGHTARG = text, FUNCTION = public.planted_eq);
});
my ($jp) = park_on($qa, 'planted', 'NULL');
is($q->("SET search_path = public, pg_catalog; SELECT wf_signal('planted')"), '1',
	'a signal with a planted operator first on the search_path');
is($q->('SELECT count(*) FROM public.planted_ran'), '0', 'the planted operator never ran');
$q->('DROP OPERATOR public.= (text, text); DROP FUNCTION public.planted_eq(text, text)');

# ---- schedules: once cluster-wide ----
($ret, $out, $err) = $workers[0]->psql('postgres', "SELECT wf_schedule('w', '* * * * *', '$qa', '{}')");
like($err, qr/must run on the Citus coordinator/, 'wf_schedule on a worker is refused');
($ret, $out, $err) = $coord->psql('postgres', "SET ROLE tenant; SELECT wf_schedule('t', '* * * * *', '$qa', '{}')");
like($err, qr/permission denied to administer in queue/, 'a role without administer is refused');

# A yearly cron made due by hand: a minute cron would also fire its own next
# tick when the test crosses a minute, and the test counts one job.
ok($q->("SELECT wf_schedule('tick', '0 0 1 1 *', '$qb', '{\"from\": \"cron\"}') > now()"),
	'a schedule made on the coordinator');
is(join(',', map { $c->sql_on($_, "SELECT count(*) FROM wf.schedule WHERE name = 'tick'") } $c->all_nodes),
	'1,1,1', 'every node has its copy');
$q->("UPDATE wf.schedule SET next_run_at = now() - interval '1 second' WHERE name = 'tick'");
ok($c->wait_for("SELECT count(*) FROM wf.jobs WHERE queue = '$qb' AND idempotency_key LIKE 'schedule:tick:%'", '1'),
	'the due tick enqueued its job');
my $fired = $q->("SELECT id FROM wf.jobs WHERE queue = '$qb' AND idempotency_key LIKE 'schedule:tick:%'");
is($fired >> 48, $q->("SELECT groupid FROM pg_dist_node WHERE nodeport = " . $workers[1]->port),
	"on the node of its queue (the id's range is that node's)");
ok($c->wait_for("SELECT count(*) FROM wf.schedule WHERE name = 'tick' AND last_job_id = $fired AND next_run_at > now()", '1'),
	'and the schedule moved on');
is(join(',', map { $c->sql_on($_, "SELECT last_job_id = $fired AND next_run_at > now() FROM wf.schedule WHERE name = 'tick'") } $c->all_nodes),
	't,t,t', "in every node's copy");
Time::HiRes::usleep(1_000_000);
is($q->("SELECT count(*) FROM wf.jobs WHERE idempotency_key LIKE 'schedule:tick:%'"), '1',
	'one job per tick: the workers do not fire it too');
is($q->("SELECT wf_enable_schedule('tick', false)"), 't', 'wf_enable_schedule');
is(join(',', map { $c->sql_on($_, "SELECT enabled FROM wf.schedule WHERE name = 'tick'") } $c->all_nodes),
	'f,f,f', 'disabled on every node');
is($q->("SELECT wf_unschedule('tick')"), 't', 'wf_unschedule');
is(join(',', map { $c->sql_on($_, "SELECT count(*) FROM wf.schedule") } $c->all_nodes),
	'0,0,0', 'gone from every node');

# ---- retention: old events nobody waits for go from every node ----
$q->("INSERT INTO wf.event (name, created_at) VALUES ('held', now() - interval '1 day')");
my ($jh, $sh) = park_on($qa, 'held', 'NULL');
is($sh, 'waiting', 'a job waits for an old event never signalled');
$q->("SELECT wf_signal('old-news')");
$q->("ALTER SYSTEM SET wf.retention = '1s'; SELECT pg_reload_conf()");
ok($c->wait_for("SELECT count(*) FROM wf.event WHERE name = 'old-news'", '0'),
	'the coordinator deletes an event signalled longer than wf.retention ago');
is(join(',', map { $c->sql_on($_, "SELECT string_agg(name, ' ' ORDER BY name) FROM wf.event WHERE name IN ('old-news', 'held')") } $c->all_nodes),
	'held,held,held', "from every node's copy; the one a job waits for is kept");
$q->("ALTER SYSTEM RESET wf.retention; SELECT pg_reload_conf()");

# ---- wf_sweep by hand reaches every group ----
# The workers pass every hour only: what happens next is wf_sweep's.
for my $node ($c->all_nodes)
{
	$c->sql_on($node, "ALTER SYSTEM SET wf.sweep_interval = '1h'; SELECT pg_reload_conf()");
}
Time::HiRes::usleep(1_500_000);    # a pass that had started is over
my ($js) = park_on($qa, 'slow', q{'200 ms'});
my $late = $q->("SELECT wf_enqueue('$qd', '{}', start_by => now() + interval '200 ms')");
$q->("SELECT wf_schedule('swept', '* * * * *', '$qc', '{}')");
$q->("UPDATE wf.schedule SET next_run_at = now() - interval '1 second' WHERE name = 'swept'");
Time::HiRes::usleep(1_000_000);
is($q->("SELECT string_agg(status, ' ' ORDER BY id) FROM wf.jobs WHERE id IN ($js, $late)"),
	'waiting pending', 'past their deadlines, nothing has acted yet');
is($q->("SELECT count(*) FROM wf.jobs WHERE idempotency_key LIKE 'schedule:swept:%'"), '0',
	'and the due schedule has not fired');
$q->('SELECT wf_sweep()');
is($q->("SELECT string_agg(status, ' ' ORDER BY id) FROM wf.jobs WHERE id IN ($js, $late)"),
	'pending failed', 'wf_sweep: the timeout on one worker, the start_by on the other');
is($q->("SELECT count(*) FROM wf.jobs WHERE queue = '$qc' AND idempotency_key LIKE 'schedule:swept:%'"), '1',
	'and the schedule fired');
($ret, $out, $err) = $coord->psql('postgres', 'SET ROLE tenant; SELECT wf_sweep()');
like($err, qr/permission denied/, 'wf_sweep needs administer on every queue');

# ---- wf_recover_lost_claims: claims lost without a crash (a dump restored) ----
my @lost;
for my $queue ($qa, $qb)
{
	my $id = $q->("SELECT wf_enqueue('$queue', '{\"lost\": true}')");
	my $client = $coord->background_psql('postgres');
	my $got = '';
	for (1 .. 50)
	{
		my ($cid, $attempt) = split /\|/, $client->query_safe("SELECT id, attempt FROM wf_claim('$queue')");
		$got = $cid // '';
		last if $got eq $id || $got eq '';
		$client->query_safe("SELECT wf_complete('$queue', $cid, $attempt)");
	}
	is($got, $id, "claimed in $queue");
	# As after a restore: the job is pending, its claim row is not there.
	$q->("DELETE FROM wf.claim WHERE queue = '$queue' AND id = $id");
	$client->quit;
	push @lost, $id;
}
is($q->("SELECT count(*) FROM wf.ready WHERE id IN (" . join(',', @lost) . ")"), '0',
	'two jobs pending without a ready row or a claim: nobody would claim them');
is($q->('SELECT wf_recover_lost_claims()'), '2', 'wf_recover_lost_claims gives back both, one on each worker');
is($q->("SELECT string_agg(status || ' ' || attempt, ', ') FROM wf.jobs WHERE id IN (" . join(',', @lost) . ")"),
	'pending 1, pending 1', 'pending again, their attempt counted');
is($q->("SELECT count(*) FROM wf.ready WHERE id IN (" . join(',', @lost) . ")"), '2', 'and claimable');

$c->stop_all;
done_testing();
