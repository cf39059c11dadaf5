# pg_wf distributed by wf_distribute() on a coordinator and two workers:
# every hot-path call made through the coordinator is one command to the
# node holding its queue's shard (no two-phase commit), the job lifecycle
# works as on one server (inside transaction blocks too), job ids are unique
# across the nodes, what is not served yet is refused with 0A000, and the
# owner of a claim is the client's session: a live client keeps its job when
# Citus's connection to the worker closes under it (an error there, a
# statement_timeout, the connection's lifetime), a killed client's job comes
# back within about a second, and a worker's crash restart loses nothing.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::RealBin/..";
use CitusTap;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes ();

my $c = citus_cluster('c002', distribute => 1);
my $coord = $c->coordinator;
my @workers = $c->workers;
my $q = sub { $c->sql_on($coord, $_[0]) };

# ---- wf_distribute: idempotent, tables and functions where they belong ----
$q->('SELECT wf_distribute()');
is($q->("SELECT count(*) FROM pg_dist_partition WHERE logicalrelid::text LIKE 'wf.%' AND partmethod = 'h'"),
	'12', 'twelve tables distributed by queue');
is($q->("SELECT count(DISTINCT colocationid) FROM pg_dist_partition WHERE logicalrelid::text LIKE 'wf.%' AND partmethod = 'h'"),
	'1', 'all colocated');
is($q->("SELECT count(*) FROM pg_dist_partition WHERE logicalrelid::text LIKE 'wf.%' AND partmethod = 'n'"),
	'6', 'six reference tables');
is($q->("SELECT count(*) FROM pg_dist_object o JOIN pg_proc p ON o.classid = 'pg_proc'::regclass AND o.objid = p.oid"
	  . " WHERE p.proname LIKE 'wf\\_%' AND o.force_delegation"),
	'19', 'nineteen functions delegated by queue');

# Queues whose shards are on different workers.
my %node_of;
my @queues;
for my $n (1 .. 40)
{
	my $queue = "q$n";
	my $port = $q->("SELECT nodeport FROM pg_dist_placement p JOIN pg_dist_node n USING (groupid)"
		  . " WHERE shardid = get_shard_id_for_distribution_column('wf.job', '$queue')");
	$node_of{$queue} = $port;
	push @queues, $queue;
}
my ($qa, $qidle) = grep { $node_of{$_} == $workers[0]->port } @queues;
my ($qb, $qdead) = grep { $node_of{$_} == $workers[1]->port } @queues;
ok($qa && $qb && $qdead, "queue $qa on one worker, $qb and $qdead on the other");

# ---- each hot-path call is one command to one node, no 2PC ----
# One session (a claim is its session's), Citus's remote commands logged;
# \warn marks where each call's log starts.
my @calls = (
	[ 'wf_enqueue', "SELECT wf_enqueue('$qa', '{\"n\":1}')" ],
	[ 'wf_enqueue_batch', "SELECT wf_enqueue_batch('$qa', '[{},{}]')" ],
	[ 'wf_claim', "SELECT id FROM wf_claim('$qa', worker => 'w')" ],
	[ 'wf_heartbeat', "SELECT wf_heartbeat('$qa', 1::bigint << 48 | 1, 1)" ],
	[ 'wf_checkpoint', "SELECT wf_checkpoint('$qa', 1::bigint << 48 | 1, 1, 'step', '{}')" ],
	[ 'wf_complete', "SELECT wf_complete('$qa', 1::bigint << 48 | 1, 1, '{\"r\":1}')" ],
	[ 'wf_complete_and_claim', "SELECT id FROM wf_complete_and_claim('$qa', 0, 0, NULL, 'w')" ],
	[ 'wf_fail', "SELECT wf_fail('$qa', (1::bigint << 48) + 2, 1, 'boom', retry_in => '0')" ],
	[ 'wf_snooze', "SELECT wf_snooze('$qa', 0, 1, '1 s')" ],
	[ 'wf_cancel', "SELECT wf_cancel('$qa', (1::bigint << 48) + 3)" ],
	[ 'wf_retry', "SELECT wf_retry('$qa', (1::bigint << 48) + 3)" ]);
my $script = "SET citus.log_remote_commands = on; SET client_min_messages = log;\n";
$script .= "\\warn CALL $_->[0]\n$_->[1];\n" for @calls;
$script .= "\\warn CALL end\n";
my ($stdout, $stderr);
$coord->psql('postgres', $script, stdout => \$stdout, stderr => \$stderr, on_error_die => 1);
my %log;
my $current;
for my $line (split /\n/, $stderr)
{
	if ($line =~ /^CALL (\S+)/) { $current = $1; $log{$current} = []; next; }
	push @{ $log{$current} }, $line if defined $current && $line =~ /issuing/;
}
for my $call (@calls)
{
	my @cmds = @{ $log{ $call->[0] } // [] };
	my @two_phase = grep { /PREPARE TRANSACTION|COMMIT PREPARED/ } @cmds;
	ok(@cmds == 1 && !@two_phase && $cmds[0] =~ /\Q$call->[0]\E\(/,
		"$call->[0]: one command to one node, no two-phase commit")
	  or diag(join("\n", @cmds));
}
is($stdout, join("\n", 281474976710657, 281474976710658, 281474976710659, 281474976710657,
		't', 'recorded', 't', 281474976710658, 'pending', '', 't', 't'),
	'and each did its work') if $node_of{$qa} == $workers[0]->port;

# ---- job ids unique across the cluster ----
my $ida = $q->("SELECT wf_enqueue('$qa', '{}')");
my $idb = $q->("SELECT wf_enqueue('$qb', '{}')");
isnt($ida >> 48, $idb >> 48, 'ids from the two workers come from different ranges');
is($q->('SELECT count(*) = count(DISTINCT id) FROM wf.jobs'), 't', 'no id twice');

# ---- lifecycle through the coordinator ----
$q->("SELECT wf_configure_queue('$qdead', max_attempts => 2, backoff_base => '1 ms', backoff_max => '1 ms')");
my $dl = $q->("SELECT wf_enqueue('$qdead', '{\"dead\":1}')");
{
	my $worker = $coord->background_psql('postgres');
	for my $attempt (1, 2)
	{
		my $got = '';
		for (1 .. 100)
		{
			$got = $worker->query_safe("SELECT id FROM wf_claim('$qdead')");
			last if $got ne '';
			Time::HiRes::usleep(20_000);
		}
		is($got, $dl, "attempt $attempt claimed");
		$worker->query_safe("SELECT wf_fail('$qdead', $got, $attempt, 'try $attempt')");
	}
	$worker->quit;
}
is($q->("SELECT status || ' ' || attempt FROM wf.jobs WHERE id = $dl"), 'failed 2',
	'two attempts, then the dead letter');
is($q->("SELECT wf_retry('$qdead', $dl)"), 't', 'wf_retry brings it back');
is($q->("SELECT status FROM wf.jobs WHERE id = $dl"), 'pending', 'pending again');
is($q->("SELECT wf_cancel('$qdead', $dl)"), 't', 'wf_cancel');

# Idempotency keys: the same key twice is one job.
my $k1 = $q->("SELECT wf_enqueue('$qa', '{}', idempotency_key => 'k-1')");
my $k2 = $q->("SELECT wf_enqueue('$qa', '{}', idempotency_key => 'k-1')");
is($k1, $k2, 'one job per idempotency key');

# Inside a transaction block (force_delegation), and rolled back.
$q->("BEGIN; SELECT wf_enqueue('$qb', '{\"tx\":1}'); COMMIT;");
is($q->("SELECT count(*) FROM wf.jobs WHERE queue = '$qb' AND payload = '{\"tx\":1}'"), '1',
	'enqueued inside a transaction block');
$q->("BEGIN; SELECT wf_enqueue('$qb', '{\"tx\":2}'); ROLLBACK;");
is($q->("SELECT count(*) FROM wf.jobs WHERE payload = '{\"tx\":2}'"), '0',
	'a rolled-back enqueue leaves nothing');

# Views read across the nodes.
is($q->("SELECT count(DISTINCT queue) FROM wf.queue_stats WHERE queue IN ('$qa', '$qb')"), '2',
	'wf.queue_stats shows both queues');

# ---- refusals ----
my ($ret, $out, $err) = $coord->psql('postgres', "SELECT wf_enqueue('$qa', '{}'), wf_enqueue('$qb', '{}')");
like($err, qr/is served by another node/, 'a call Citus cannot delegate is refused, not run elsewhere');
($ret, $out, $err) = $coord->psql('postgres', "SELECT wf_enqueue('$qa', '{}', workflow_id => gen_random_uuid())");
like($err, qr/is served by another node/, 'so is a call with an argument Citus cannot send as a constant');

# ---- ownership: the client's session, not Citus's connection ----
# Reads the job's status until it is $want or 10 s pass; returns seconds.
sub wait_status
{
	my ($job, $want) = @_;
	my $t0 = Time::HiRes::time();
	while (Time::HiRes::time() - $t0 < 10)
	{
		return Time::HiRes::time() - $t0
		  if $q->("SELECT status FROM wf.jobs WHERE id = $job") eq $want;
		Time::HiRes::usleep(20_000);
	}
	return undef;
}
sub worker_backend
{
	my ($client) = @_;
	my $port = $node_of{$qa};
	my ($w) = grep { $_->port == $port } @workers;
	return $c->sql_on($w, "SELECT pid FROM pg_stat_activity WHERE application_name LIKE 'citus_internal gpid=%'"
		  . " AND query LIKE '%wf_%' ORDER BY backend_start DESC LIMIT 1");
}

my ($wa) = grep { $_->port == $node_of{$qa} } @workers;
my %how = (
	'an error raised on the worker' =>
	  sub { $_[0]->query("SELECT wf_heartbeat('$qa', $_[1], 1, '-1 s')") },
	'a statement_timeout' =>
	  sub { $_[0]->query("SET statement_timeout = '50ms'; SELECT * FROM wf_claim('$qidle', wait => '1 s'); RESET statement_timeout") },
	'the connection lifetime' =>
	  sub { $_[0]->query_safe("SET citus.max_cached_connection_lifetime = '10ms'"); Time::HiRes::usleep(300_000); $_[0]->query_safe("SELECT wf_enqueue('$qa', '{}')") },
);
for my $cause (sort keys %how)
{
	my $client = $coord->background_psql('postgres', on_error_stop => 0);
	my $job = $client->query_safe("SELECT wf_enqueue('$qa', '{\"cause\":\"$cause\"}')");
	# The claim takes the oldest pending job of $qa: drain it first.
	my $got;
	for (1 .. 50)
	{
		my ($id, $attempt) = split /\|/, $client->query_safe("SELECT id, attempt FROM wf_claim('$qa')");
		$got = $id // '';
		last if $got eq $job || $got eq '';
		$client->query_safe("SELECT wf_complete('$qa', $id, $attempt)");
	}
	is($got, $job, "claimed the job of '$cause'");
	# The backend on the worker that served the claim (Citus names the
	# client's global pid in its application_name).
	my $gpid = $client->query_safe('SELECT citus_backend_gpid()');
	my $served_by = $c->sql_on($wa,
		"SELECT pid FROM pg_stat_activity WHERE application_name = 'citus_internal gpid=$gpid'");
	like($served_by, qr/^\d+$/, "one backend on the worker serves the client");
	$how{$cause}->($client, $job);
	sleep 2;    # ten sweeps
	is($c->sql_on($wa, "SELECT count(*) FROM pg_stat_activity WHERE pid = $served_by"), '0',
		"$cause closed Citus's connection: that backend is gone");
	is($q->("SELECT status FROM wf.jobs WHERE id = $job"), 'running',
		"after $cause the live client's job is still running");
	# (query, not query_safe: the error the cause raised may still sit in
	# the session's stderr.)
	is(scalar $client->query("SELECT wf_complete('$qa', $job, 1, '{}')"), 't',
		"and its completion is accepted");
	$client->quit;
}

# A killed client: its job comes back within about a second.
{
	my $client = $coord->background_psql('postgres');
	my $job = $client->query_safe("SELECT wf_enqueue('$qb', '{\"victim\":1}')");
	my $got;
	for (1 .. 50)
	{
		$got = $client->query_safe("SELECT id FROM wf_claim('$qb')");
		last if $got eq $job || $got eq '';
		$client->query_safe("SELECT wf_cancel('$qb', $got)");
	}
	is($got, $job, 'the victim claimed its job');
	$client->{run}->kill_kill;
	my $secs = wait_status($job, 'pending');
	ok(defined $secs && $secs < 2.5, 'a killed client\'s job is pending again after '
		  . (defined $secs ? sprintf('%.2f s', $secs) : 'more than 10 s'));
}

# ---- a claim loop on both workers: every job done once ----
{
	my %sessions;
	my $per_queue = 200;
	for my $queue ($qa, $qb)
	{
		my $payloads = join(',', map { "{\"n\":$_}" } 1 .. $per_queue);
		$q->("SELECT count(*) FROM wf_enqueue_batch('$queue-loop', '[$payloads]')");
		$sessions{$queue} = [ map { $coord->background_psql('postgres') } 1 .. 2 ];
	}
	my %done;
	my $idle = 0;
	while ($idle < 2)
	{
		$idle++;
		for my $queue ($qa, $qb)
		{
			for my $s (@{ $sessions{$queue} })
			{
				my $row = $s->query_safe("SELECT id || '|' || attempt FROM wf_claim('$queue-loop')");
				next if $row eq '';
				$idle = 0;
				my ($id, $attempt) = split /\|/, $row;
				$done{$id}++;
				$s->query_safe("SELECT wf_complete('$queue-loop', $id, $attempt)");
			}
		}
	}
	$_->quit for map { @$_ } values %sessions;
	is(scalar(keys %done), 2 * $per_queue, 'every job of the loop claimed');
	is(scalar(grep { $_ != 1 } values %done), 0, 'none claimed twice');
	is($q->("SELECT string_agg(DISTINCT status || ' ' || attempt, ',') FROM wf.jobs WHERE queue IN ('$qa-loop', '$qb-loop')"),
		'done 1', 'all done at their first attempt');
}

# ---- the coordinator restarts: the jobs are on the workers ----
my $before = $q->("SELECT count(*) FROM wf.jobs");
$coord->restart;
is($q->("SELECT count(*) FROM wf.jobs"), $before, 'every job still there after a coordinator restart');
like($q->("SELECT wf_enqueue('$qa', '{\"after\":\"restart\"}')"), qr/^\d+$/, 'and calls go on');

# ---- a worker node's crash restart loses nothing ----
{
	my $client = $coord->background_psql('postgres');
	my $job = $q->("SELECT wf_enqueue('$qb', '{\"crash\":1}')");
	my $got;
	for (1 .. 50)
	{
		$got = $client->query_safe("SELECT id FROM wf_claim('$qb')");
		last if $got eq $job || $got eq '';
		$client->query_safe("SELECT wf_cancel('$qb', $got)");
	}
	is($got, $job, 'claimed before the crash');
	my ($w) = grep { $_->port == $node_of{$qb} } @workers;
	my $victim = $c->sql_on($w, "SELECT pid FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid() LIMIT 1");
	kill 'KILL', $victim if $victim;
	# Until it accepts connections again (a psql that finds it restarting
	# may exit before it reads its input: no poll_query_until here).
	my $up = 0;
	for (1 .. 300)
	{
		my ($ret) = eval { $w->psql('postgres', 'SELECT true', timeout => 5) };
		if (defined $ret && $ret == 0) { $up = 1; last; }
		Time::HiRes::usleep(100_000);
	}
	ok($up, 'the worker node is back after its crash');
	# Pending at once (the crash emptied wf.claim): recovered once the
	# node's worker counted the lost attempt and said why.
	ok($c->wait_for("SELECT status || ' ' || attempt FROM wf.jobs WHERE id = $job", 'pending 1'),
		'the claim lost in the crash is recovered on the worker');
	like($q->("SELECT last_error FROM wf.jobs WHERE id = $job"), qr/worker lost/, 'with its reason');
	is($q->("SELECT count(*) FROM wf.jobs WHERE queue = '$qb' AND status = 'pending'") > 0, 1,
		'nothing else lost');
	eval { $client->quit };
}

$c->stop_all;
done_testing();
