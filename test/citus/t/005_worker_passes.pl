# Each worker node's background worker serves the shard groups placed on
# it: a lease that runs out gives the job back (the client still alive), and
# retention deletes finished jobs with what they leave behind (checkpoints,
# dedup keys), group by group, on both workers.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::RealBin/..";
use CitusTap;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes ();

my $c = citus_cluster('c005', distribute => 1, conf => "wf.retention = '2s'\n");
my $coord = $c->coordinator;
my @workers = $c->workers;
my $q = sub { $c->sql_on($coord, $_[0]) };

# A queue on each worker.
my %on;
for my $n (1 .. 60)
{
	my $port = $q->("SELECT nodeport FROM pg_dist_placement p JOIN pg_dist_node n USING (groupid)"
		  . " WHERE shardid = get_shard_id_for_distribution_column('wf.job', 'p$n')");
	$on{$port} //= "p$n";
}
my @queues = map { $on{ $_->port } } @workers;
ok(@queues == 2 && $queues[0] && $queues[1], "queues @queues, one on each worker");

# ---- leases: the client lives, its lease runs out ----
my $client = $coord->background_psql('postgres');
for my $queue (@queues)
{
	my $id = $q->("SELECT wf_enqueue('$queue', '{\"lease\":1}')");
	is($client->query_safe("SELECT id FROM wf_claim('$queue', lease => '1 s')"), $id,
		"claimed in $queue with a 1 s lease");
	ok($c->wait_for("SELECT status FROM wf.jobs WHERE id = $id", 'pending', 15),
		"the lease ran out: the job in $queue is pending again, its client alive");
	like($q->("SELECT last_error FROM wf.jobs WHERE id = $id"), qr/lease/, 'for its lease');
}
$client->quit;

# ---- retention: finished jobs go, with their checkpoints and dedup keys ----
my $worker = $coord->background_psql('postgres');
for my $queue (@queues)
{
	$q->("SELECT wf_enqueue('$queue', '{\"r\":1}', dedup_key => 'd-$queue')");
	my $row = $worker->query_safe("SELECT id || '|' || attempt FROM wf_claim('$queue')");
	# The lease job of above may come first: complete what comes.
	while ($row ne '')
	{
		my ($id, $attempt) = split /\|/, $row;
		$worker->query_safe("SELECT wf_checkpoint('$queue', $id, $attempt, 'step', '{}')");
		$worker->query_safe("SELECT wf_complete('$queue', $id, $attempt)");
		$row = $worker->query_safe("SELECT id || '|' || attempt FROM wf_claim('$queue')");
	}
}
$worker->quit;
is($q->("SELECT count(*) FROM wf.jobs WHERE queue IN ('$queues[0]', '$queues[1]') AND status <> 'done'"),
	'0', 'every job of both queues done');
ok($q->("SELECT count(*) FROM wf.checkpoint") > 0, 'with checkpoints recorded');
ok($c->wait_for("SELECT count(*) FROM wf.jobs WHERE queue IN ('$queues[0]', '$queues[1]')", '0', 30),
	'retention deleted the finished jobs on both workers');
ok($c->wait_for("SELECT count(*) FROM wf.checkpoint", '0', 30), 'and their checkpoints');
ok($c->wait_for("SELECT count(*) FROM wf.dedup", '0', 30), 'and their dedup keys');

$c->stop_all;
done_testing();
