# A workflow of 1,101 steps (eleven layers of 100 with fan-in, and a sink
# after the whole last layer) run by four workers that are killed at random:
# SIGKILL of the psql client (its backend notices through
# client_connection_check_interval and ends mid-transaction),
# pg_terminate_backend of a worker's backend, and SIGKILL of a backend (a
# crash restart of the whole server). Each worker completes a step in one
# transaction with its side effect (a row in a table with UNIQUE(step_name)
# and a row in a log without a constraint). At the end every step is done
# exactly once: one effect per step, inputs as the predecessors' results, the
# workflow done.
use strict;
use warnings FATAL => 'all';
use FindBin;
use lib $FindBin::RealBin;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);
use WfTap;

my $node = wf_node('workflow_crash', sweep_interval => '200ms',
	conf => "client_connection_check_interval = '100ms'\n");
ok(wait_reapers($node, 'postgres', 1), 'a reaper serves the database');

my ($layers, $width) = (11, 100);
my $steps = $layers * $width + 1;

$node->safe_psql('postgres', qq{
	CREATE TABLE effects (step_name text PRIMARY KEY, job_id bigint NOT NULL,
	                      attempt int NOT NULL, inputs jsonb);
	CREATE TABLE effects_log (step_name text NOT NULL, attempt int NOT NULL);
	CREATE TABLE claims_seen (step_name text NOT NULL, attempt int NOT NULL,
	                          had_checkpoints boolean NOT NULL);
	-- Attempts are spent by every kill; none may run out.
	SELECT wf_configure_queue('crash_wf', max_attempts => 1000);
});
my $w = $node->safe_psql('postgres', qq{
	SELECT wf_submit(jsonb_build_object('name', 'crash', 'queue', 'crash_wf', 'steps',
	  (SELECT jsonb_agg(s ORDER BY l, i) FROM (
	     SELECT l, i, jsonb_build_object(
	       'name', 's' || l || '_' || i,
	       'payload', jsonb_build_object('l', l, 'i', i),
	       'after', CASE WHEN l = 0 THEN '[]'::jsonb
	                ELSE jsonb_build_array('s' || (l - 1) || '_' || i,
	                                       's' || (l - 1) || '_' || ((i + 1) % $width),
	                                       's' || (l - 1) || '_' || ((i + 37) % $width)) END) AS s
	       FROM generate_series(0, $layers - 1) l, generate_series(0, $width - 1) i) x)
	  || jsonb_build_array(jsonb_build_object('name', 'sink',
	       'after', (SELECT jsonb_agg('s' || ($layers - 1) || '_' || i) FROM generate_series(0, $width - 1) i)))))});
ok($w =~ /^[0-9a-f-]{36}$/, 'wf_submit returned a workflow id');
is($node->safe_psql('postgres', "SELECT steps || ' ' || pending || ' ' || blocked FROM wf.workflows WHERE workflow_id = '$w'"),
	"$steps $width " . ($steps - $width), "$steps steps: the first layer pending, the rest blocked");

# One worker: a DO block that loops until the workflow is over, committing
# the claim, then a checkpoint, then the effect together with wf_complete.
# Now and then a step fails once (wf_fail with a retry at once).
my $worker_sql = q{
DO $$
DECLARE
    r record;
BEGIN
  LOOP
    SELECT * INTO r FROM wf_claim('crash_wf', worker => current_setting('application_name'),
                                  wait => '200 milliseconds');
    IF r.id IS NULL THEN
      COMMIT;
      EXIT WHEN NOT EXISTS (SELECT 1 FROM wf.workflows WHERE status = 'running');
      CONTINUE;
    END IF;
    INSERT INTO claims_seen VALUES (r.step_name, r.attempt, r.checkpoints IS NOT NULL);
    COMMIT;
    IF r.checkpoints IS NULL OR NOT r.checkpoints ? 'prepared' THEN
      PERFORM wf_checkpoint('crash_wf', r.id, r.attempt, 'prepared', jsonb_build_object('attempt', r.attempt));
      COMMIT;
    END IF;
    PERFORM pg_sleep(0.02 + random() * 0.06);
    IF random() < 0.03 THEN
      PERFORM wf_fail('crash_wf', r.id, r.attempt, 'transient', retry_in => '0 seconds');
      COMMIT;
      CONTINUE;
    END IF;
    INSERT INTO effects VALUES (r.step_name, r.id, r.attempt, r.inputs);
    INSERT INTO effects_log VALUES (r.step_name, r.attempt);
    IF wf_complete('crash_wf', r.id, r.attempt, jsonb_build_object('step', r.step_name)) THEN
      COMMIT;
    ELSE
      ROLLBACK;
    END IF;
  END LOOP;
END
$$;
};

my (@workers, @errors);
my $serial = 0;

sub start_worker
{
	my ($slot) = @_;
	my $app = 'crash-worker-' . (++$serial);
	my %wk = (app => $app, out => '', err => '');
	$wk{h} = IPC::Run::start(
		[ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d',
			$node->connstr('postgres') . " application_name=$app", '-c', $worker_sql ],
		'<', \undef, '>', \$wk{out}, '2>', \$wk{err});
	$workers[$slot] = \%wk;
	return;
}

sub reap_worker
{
	my ($slot) = @_;
	my $wk = $workers[$slot];
	return unless $wk;
	eval { $wk->{h}->finish; };
	push @errors, map { "$wk->{app}: $_" } grep { /ERROR/ } split /\n/, $wk->{err};
	$workers[$slot] = undef;
	return;
}

sub psql_pid
{
	my ($wk) = @_;
	return $wk->{h}{KIDS}[0]{PID};
}

sub backend_of
{
	my ($wk) = @_;
	my ($ret, $out) = $node->psql('postgres',
		"SELECT pid FROM pg_stat_activity WHERE application_name = '$wk->{app}'");
	return $ret == 0 && $out =~ /^(\d+)$/ ? $1 : undef;
}

sub server_up
{
	# A psql started while the server is still in crash recovery can exit
	# before its query is written to it: IPC::Run then dies of EPIPE
	# ("Broken pipe: write( .., 'SELECT true' )", seen once in CI). Again.
	for my $try (1 .. 60)
	{
		my $up = eval { $node->poll_query_until('postgres', 'SELECT true') };
		return $up if defined $up;
		sleep(1);
	}
	return 0;
}

start_worker($_) for 0 .. 3;

my %kills = (client => 0, terminate => 0, crash => 0);
my $t_end = time() + 60;
my $round = 0;
while (time() < $t_end)
{
	sleep(0.2 + rand(0.4));
	$round++;
	my ($ret, $status) = $node->psql('postgres', "SELECT status FROM wf.workflows WHERE workflow_id = '$w'");
	last if $ret == 0 && $status ne 'running';
	my $slot = int(rand(4));
	my $wk = $workers[$slot];
	my $dice = rand();
	if ($round == 5 || $round == 15)
	{
		# SIGKILL of a backend: the postmaster restarts every session.
		my ($pid) = grep { defined } map { backend_of($_) } grep { defined } ($wk, @workers);
		next unless $pid;
		kill 'KILL', $pid;
		$kills{crash}++;
		server_up();
		for my $s (0 .. 3) { reap_worker($s); start_worker($s); }
		next;
	}
	elsif ($dice < 0.5)
	{
		kill 'KILL', psql_pid($wk);
		$kills{client}++;
	}
	else
	{
		my $pid = backend_of($wk);
		next unless $pid;
		$node->psql('postgres', "SELECT pg_terminate_backend($pid)");
		$kills{terminate}++;
	}
	reap_worker($slot);
	start_worker($slot);
	# Workers that ended on their own (the workflow is over, or an error).
	for my $s (0 .. 3)
	{
		next if $workers[$s]{h}->pumpable;
		reap_worker($s);
		start_worker($s);
	}
}
diag(sprintf('kills: %d clients (SIGKILL), %d backends terminated, %d crash restarts',
		$kills{client}, $kills{terminate}, $kills{crash}));
ok($kills{client} + $kills{terminate} + $kills{crash} >= 10, 'workers were killed at least ten times');
ok($kills{crash} >= 1, 'the server went through a crash restart');

# Let the last workers finish the workflow (restarting any that died).
ok( $node->poll_query_until('postgres',
		"SELECT status <> 'running' FROM wf.workflows WHERE workflow_id = '$w'"),
	'the workflow finished');
for my $s (0 .. 3) { reap_worker($s); }
my @bad = grep { !/terminating connection|server closed the connection|connection to server|administrator command|crash of another server process|no connection to the server|the database system is/ } @errors;
is(scalar(@bad), 0, 'workers saw no error other than their own deaths')
  or diag(join("\n", @bad));

is($node->safe_psql('postgres', "SELECT status, steps, done, failed, cancelled FROM wf.workflows WHERE workflow_id = '$w'"),
	"done|$steps|$steps|0|0", 'the workflow is done: every step done, none failed or cancelled');
is($node->safe_psql('postgres', "SELECT wf_workflow('$w')->>'status'"), 'done', 'wf_workflow says done');
is($node->safe_psql('postgres', 'SELECT count(*), count(DISTINCT step_name) FROM effects'),
	"$steps|$steps", 'one side effect per step');
is($node->safe_psql('postgres', 'SELECT count(*), count(DISTINCT step_name) FROM effects_log'),
	"$steps|$steps", 'the log without a constraint has one row per step too (no step completed twice)');
is( $node->safe_psql('postgres', qq{
	SELECT count(*) FROM effects e JOIN wf.jobs j ON j.id = e.job_id
	 WHERE j.workflow_id = '$w' AND j.step_name = e.step_name AND j.status = 'done'
	   AND j.attempt = e.attempt AND j.result = jsonb_build_object('step', e.step_name)}),
	$steps, 'each effect was written by the attempt that completed its step');
# Every step's inputs: exactly its predecessors' results, by name.
is( $node->safe_psql('postgres', qq{
	SELECT count(*) FROM effects e JOIN wf.jobs j ON j.id = e.job_id
	 WHERE coalesce((SELECT array_agg(k ORDER BY k) FROM jsonb_object_keys(e.inputs) k), '{}')
	       = coalesce((SELECT array_agg(p.step_name ORDER BY p.step_name)
	                     FROM wf.jobs p WHERE p.id = ANY (j.depends_on)), '{}')
	   AND NOT EXISTS (SELECT 1 FROM jsonb_each(coalesce(e.inputs, '{}')) x
	                    WHERE x.value <> jsonb_build_object('step', x.key))}),
	$steps, "every step's inputs are its predecessors' results, keyed by step name");
is($node->safe_psql('postgres', "SELECT jsonb_typeof(inputs) = 'object' AND (SELECT count(*) FROM jsonb_object_keys(inputs)) = $width FROM effects WHERE step_name = 'sink'"),
	't', "the sink got all $width results of the last layer");
# No step started before its predecessors were done.
is( $node->safe_psql('postgres', qq{
	SELECT count(*) FROM wf.jobs j JOIN wf.jobs p ON p.id = ANY (j.depends_on)
	 WHERE j.workflow_id = '$w' AND j.started_at < p.finished_at}),
	'0', 'no step started before a predecessor finished');
my $recovered = $node->safe_psql('postgres',
	"SELECT count(*) FROM wf.jobs WHERE workflow_id = '$w' AND attempt > 1");
my $with_checkpoints = $node->safe_psql('postgres',
	"SELECT count(*) FROM claims_seen WHERE attempt > 1 AND had_checkpoints");
diag("steps that ran more than once: $recovered; later claims that got checkpoints back: $with_checkpoints");
ok($recovered > 0, 'some steps were recovered and ran again');
is( $node->safe_psql('postgres', qq{
	SELECT count(*) FROM claims_seen c JOIN wf.jobs j ON j.step_name = c.step_name AND j.workflow_id = '$w'
	 WHERE c.attempt > 1 AND NOT c.had_checkpoints
	   AND EXISTS (SELECT 1 FROM wf.checkpoint k WHERE k.queue = 'crash_wf' AND k.job_id = j.id
	                                               AND k.attempt < c.attempt)}),
	'0', 'a claim after a checkpointed attempt always got the checkpoints back');
is($node->safe_psql('postgres', "SELECT count(*) FROM wf.jobs WHERE queue = 'crash_wf' AND status <> 'done'"),
	'0', 'nothing left in the queue');
is($node->safe_psql('postgres', "SELECT count(*) FROM wf.ready WHERE queue = 'crash_wf'"),
	'0', 'nothing left in the ready set');

$node->stop;
done_testing();
