# Dependencies between queues in different shard groups, on different
# workers (1.8, jobs/remote_dependencies.hpp): a job waits on a job of
# another node's queue and is released (with its result as input) when that
# one is done, cancelled when it fails or is cancelled (and what waits on
# it, across the nodes again), cancelled when the job it names does not
# exist or is in a queue its enqueuer may not produce in; wf_retry asks
# again; a job waiting on many, and many on one; enqueues racing the
# parents' completions leave nothing blocked; a release Citus runs on the
# wrong node is logged and tried again within a second; nothing is left
# behind.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::RealBin/..";
use CitusTap;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes ();

my $c = citus_cluster('c007', distribute => 1);
my $coord = $c->coordinator;
my @workers = $c->workers;
my $q = sub { $c->sql_on($coord, $_[0]) };

my ($on_first, $on_second) = $c->queues_on_workers(2);
my ($qa, $qc) = @$on_first;
my ($qb, $qd) = @$on_second;
ok($qa && $qb && $qc && $qd, "queues $qa, $qc on one worker, $qb, $qd on the other");

# Claims job $id of $queue (completing what comes before it) and ends it
# with $sql_end (e.g. "wf_complete(%q, %id, %a, '{}')").
sub claim_and
{
	my ($queue, $id, $end) = @_;
	my $client = $coord->background_psql('postgres');
	my $got = '';
	my $attempt;
	($got, $attempt) = $c->claim_job($client, $queue, $id);
	die "could not claim $id of $queue" unless $got eq $id;
	(my $sql = $end) =~ s/%q/'$queue'/g;
	$sql =~ s/%id/$id/g;
	$sql =~ s/%a/$attempt/g;
	my $out = $client->query_safe("SELECT $sql");
	$client->quit;
	return $out;
}
my $status = sub { $q->("SELECT string_agg(status, ' ' ORDER BY id) FROM wf.jobs WHERE id IN ($_[0])") };

# ---- released with the parent's result ----
my $p1 = $q->("SELECT wf_enqueue('$qa', '{}', step_name => 'fetch')");
my $local = $q->("SELECT wf_enqueue('$qb', '{}', step_name => 'local')");
my $c1 = $q->("SELECT wf_enqueue('$qb', '{}', step_name => 'join', depends_on => ARRAY[$p1, $local])");
ok($c->wait_for("SELECT count(*) FROM wf.remote_dependent WHERE parent_id = $p1", '1'),
	'the child is recorded with its parent in the other group');
is($q->("SELECT status || ' ' || pending_deps FROM wf.job WHERE id = $c1"), 'blocked 2',
	'blocked on both (one here, one elsewhere)');
claim_and($qa, $p1, q{wf_complete(%q, %id, %a, '{"rows": 7}')});
ok($c->wait_for("SELECT pending_deps FROM wf.job WHERE id = $c1", '1'),
	'the remote parent done: one left');
is($status->($c1), 'blocked', 'still blocked on the local one');
claim_and($qb, $local, q{wf_complete(%q, %id, %a, '{"rows": 1}')});
is($status->($c1), 'pending', 'both done: pending');
is(claim_and($qb, $c1, q{wf_complete(%q, %id, %a)}), 't', 'claimed and completed');
{
	# The claim's inputs, read again by a fresh claim of a copy.
	my $c1b = $q->("SELECT wf_enqueue('$qb', '{}', step_name => 'join2', depends_on => ARRAY[$p1, $local])");
	ok($c->wait_for("SELECT status FROM wf.jobs WHERE id = $c1b", 'pending'),
		'a job on parents done already goes pending once the worker asked');
	my $client = $coord->background_psql('postgres');
	my $inputs = '';
	for (1 .. 50)
	{
		my ($id, $in) = split /\|/, $client->query_safe("SELECT id, inputs FROM wf_claim('$qb')");
		last if !defined $id;
		if ($id eq $c1b) { $inputs = $in; last; }
	}
	$client->quit;
	is($inputs, '{"fetch": {"rows": 7}, "local": {"rows": 1}}',
		"inputs: the remote parent's result with the local one's, by step name");
}

# ---- failure cascades across the nodes ----
my $pf = $q->("SELECT wf_enqueue('$qa', '{}')");
my $cf = $q->("SELECT wf_enqueue('$qb', '{}', depends_on => ARRAY[$pf])");
my $gf = $q->("SELECT wf_enqueue('$qc', '{}', depends_on => ARRAY[$cf])");
ok($c->wait_for("SELECT count(*) FROM wf.remote_dependent WHERE parent_id IN ($pf, $cf)", '2'), 'both subscribed');
claim_and($qa, $pf, q{wf_fail(%q, %id, %a, 'boom', permanent => true)});
ok($c->wait_for("SELECT string_agg(status, ' ' ORDER BY id) FROM wf.jobs WHERE id IN ($cf, $gf)",
		'cancelled cancelled'), 'the failure cancels the child on the other node and its child back on the first');
is($q->("SELECT last_error FROM wf.jobs WHERE id = $cf"), "dependency job $pf failed", 'saying why');

# wf_retry: the parent, then the child, which asks again.
is($q->("SELECT wf_retry('$qa', $pf)"), 't', 'the parent retried');
is($q->("SELECT wf_retry('$qb', $cf)"), 't', 'the child retried');
ok($c->wait_for("SELECT count(*) FROM wf.remote_dependent WHERE parent_id = $pf", '1'),
	'the retried child waits on the parent again');
is($status->($cf), 'blocked', 'blocked');
claim_and($qa, $pf, q{wf_complete(%q, %id, %a)});
ok($c->wait_for("SELECT status FROM wf.jobs WHERE id = $cf", 'pending'), 'released when the parent is done');

# A cancel, too.
my $pk = $q->("SELECT wf_enqueue('$qd', '{}')");
my $ck = $q->("SELECT wf_enqueue('$qa', '{}', depends_on => ARRAY[$pk])");
ok($c->wait_for("SELECT count(*) FROM wf.remote_dependent WHERE parent_id = $pk", '1'), 'subscribed');
is($q->("SELECT wf_cancel('$qd', $pk)"), 't', 'the parent cancelled');
ok($c->wait_for("SELECT status || ' ' || last_error FROM wf.jobs WHERE id = $ck",
		"cancelled dependency job $pk was cancelled"), 'the child on the other node too');

# A job cancelled by a parent in its own group, brought back by that
# parent's retry, still waits on its parent in the other group.
{
	my $l = $q->("SELECT wf_enqueue('$qb', '{}', step_name => 'here')");
	my $p = $q->("SELECT wf_enqueue('$qa', '{}', step_name => 'there')");
	my $child = $q->("SELECT wf_enqueue('$qb', '{}', depends_on => ARRAY[$l, $p])");
	ok($c->wait_for("SELECT count(*) FROM wf.remote_dependent WHERE child_id = $child", '1'), 'subscribed');
	claim_and($qb, $l, q{wf_fail(%q, %id, %a, 'no', permanent => true)});
	is($status->($child), 'cancelled', 'cancelled by its parent in the same group');
	is($q->("SELECT wf_retry('$qb', $l)"), 't', 'that parent retried');
	is($q->("SELECT status || ' ' || pending_deps FROM wf.job WHERE id = $child"), 'blocked 2',
		'the job is back, counting the parent elsewhere too');
	claim_and($qb, $l, q{wf_complete(%q, %id, %a)});
	ok($c->wait_for_relays, 'relayed');
	is($q->("SELECT status || ' ' || pending_deps FROM wf.job WHERE id = $child"), 'blocked 1',
		'its local parent done: it still waits on the one in the other group');
	claim_and($qa, $p, q{wf_complete(%q, %id, %a)});
	ok($c->wait_for("SELECT status FROM wf.jobs WHERE id = $child", 'pending'), 'both done: pending');
}

# A retried job whose parent ends while its new subscription is on its
# way is released of that parent once, not twice.
for my $round (1 .. 5)
{
	my $p1 = $q->("SELECT wf_enqueue('$qa', '{}')");
	my $p2 = $q->("SELECT wf_enqueue('$qc', '{}')");
	my $child = $q->("SELECT wf_enqueue('$qb', '{}', depends_on => ARRAY[$p1, $p2])");
	ok($c->wait_for("SELECT count(*) FROM wf.remote_dependent WHERE child_id = $child", '2'), "round $round: subscribed");
	$q->("SELECT wf_cancel('$qb', $child)");
	my $client = $coord->background_psql('postgres');
	my ($id, $attempt) = (0, 0);
	for (1 .. 100)
	{
		($id, $attempt) = split /\|/, $client->query_safe("SELECT id, attempt FROM wf_claim('$qa')");
		last if !defined $id || $id eq $p1;
		$client->query_safe("SELECT wf_complete('$qa', $id, $attempt)");
	}
	# The retry and the parent's completion commit together: the
	# subscription and the parent's end race to the child.
	$client->query_safe("BEGIN; SELECT wf_retry('$qb', $child); SELECT wf_complete('$qa', $p1, $attempt); COMMIT;");
	$client->quit;
	ok($c->wait_for_relays, "round $round: relayed");
	is($q->("SELECT status || ' ' || pending_deps FROM wf.job WHERE id = $child"), 'blocked 1',
		"round $round: still blocked on the other parent");
}

# ---- a job that does not exist, a queue the enqueuer may not read ----
my $orphan = $q->("SELECT wf_enqueue('$qb', '{}', depends_on => ARRAY[42])");
ok($c->wait_for("SELECT status || ' ' || last_error FROM wf.jobs WHERE id = $orphan",
		'cancelled dependency job 42 does not exist'), 'a dependency that does not exist cancels it');
$q->('CREATE ROLE tenant LOGIN');
$q->("SELECT wf_grant('tenant', 'produce', '$qb')");
my $secret = $q->("SELECT wf_enqueue('$qa', '{}')");
claim_and($qa, $secret, q{wf_complete(%q, %id, %a, '{"secret": 1}')});
my $nosy = $q->("SET ROLE tenant; SELECT wf_enqueue('$qb', '{}', depends_on => ARRAY[$secret])");
ok($c->wait_for("SELECT status FROM wf.jobs WHERE id = $nosy", 'cancelled'),
	"a job on another tenant's job is cancelled");
like($q->("SELECT last_error FROM wf.jobs WHERE id = $nosy"), qr/where the role that enqueued this job may not produce/,
	'saying why');
is($q->("SELECT count(*) FROM wf.remote_input WHERE child_id = $nosy"), '0', 'and it never got the result');

# ---- many on one, one on many ----
my $hub = $q->("SELECT wf_enqueue('$qa', '{}', step_name => 'hub')");
my @many = map { $q->("SELECT wf_enqueue('" . ($_ % 2 ? $qb : $qd) . "', '{}', depends_on => ARRAY[$hub])") } 1 .. 100;
my @parents = map { $q->("SELECT wf_enqueue('" . ($_ % 2 ? $qb : $qc) . "', '{}')") } 1 .. 20;
my $fan_in = $q->("SELECT wf_enqueue('$qa', '{}', depends_on => ARRAY[" . join(',', @parents) . "])");
ok($c->wait_for_relays, 'subscriptions relayed');
claim_and($qa, $hub, q{wf_complete(%q, %id, %a, '{"hub": true}')});
ok($c->wait_for("SELECT count(*) FROM wf.jobs WHERE id IN (" . join(',', @many) . ") AND status = 'pending'", '100'),
	'a hundred jobs on two nodes released by one parent');
is($q->("SELECT count(*) FROM wf.remote_input WHERE parent_id = $hub"), '100', 'each with its input');
for my $p (@parents)
{
	my $queue = $q->("SELECT queue FROM wf.jobs WHERE id = $p");
	claim_and($queue, $p, q{wf_complete(%q, %id, %a)});
}
ok($c->wait_for("SELECT status || ' ' || pending_deps FROM wf.job WHERE id = $fan_in", 'pending 0'),
	'a job on twenty parents in other groups: pending once all are done');

# ---- enqueues racing completions ----
# One session completes parents while another enqueues jobs on them.
my @race_parents = map { $q->("SELECT wf_enqueue('$qc', '{}')") } 1 .. 30;
my $completer = $coord->background_psql('postgres');
my $enqueuer = $coord->background_psql('postgres');
my @race_children;
for my $p (@race_parents)
{
	push @race_children, $enqueuer->query_safe("SELECT wf_enqueue('$qd', '{}', depends_on => ARRAY[$p])");
	my ($id, $attempt) = split /\|/, $completer->query_safe("SELECT id, attempt FROM wf_claim('$qc')");
	$completer->query_safe("SELECT wf_complete('$qc', $id, $attempt)") if $id;
}
$completer->quit;
$enqueuer->quit;
ok($c->wait_for("SELECT count(*) FROM wf.jobs WHERE id IN (" . join(',', @race_children) . ") AND status = 'pending'", '30'),
	'every job enqueued while its parent completed ends pending');

# ---- a release Citus runs on the wrong node ----
# Citus sends a call to a node only while that node's entry (on the node
# that makes the call) says hasmetadata and metadatasynced. With the second
# worker's entry marked out of sync on the first, the first worker's relay
# of a parent's end runs wf._parent_ended on its own node, which refuses it
# (0A000): the worker logs what Citus sees, tries again within a second,
# and releases the child soon after the entry is back.
{
	my ($first, $second) = @workers;
	my $entry = "UPDATE pg_dist_node SET metadatasynced = %s WHERE nodeport = " . $second->port;
	my $parent = $q->("SELECT wf_enqueue('$qa', '{}')");
	my $child = $q->("SELECT wf_enqueue('$qb', '{}', depends_on => ARRAY[$parent])");
	ok($c->wait_for("SELECT count(*) FROM wf.remote_dependent WHERE parent_id = $parent", '1'),
		'a child subscribed to its parent on the other worker');
	my $log_at = -s $first->logfile;
	$c->sql_on($first, sprintf($entry, 'false'));
	claim_and($qa, $parent, 'wf_complete(%q, %id, %a)');
	my $refused = qr/pg_wf relay: Citus ran a call on a node that does not hold its queue's shard/;
	my $seen = 0;
	for (1 .. 500)
	{
		$seen = substr(slurp_file($first->logfile), $log_at) =~ $refused;
		last if $seen;
		Time::HiRes::usleep(20_000);
	}
	ok($seen, "the misrouted relay call is logged");
	like(substr(slurp_file($first->logfile), $log_at),
		qr/metadatasynced f, isactive t\)/, 'with the entry Citus saw out of sync');
	is($status->($child), 'blocked', 'the child waits meanwhile');
	# Back 3.5 s after the first try: a call refused as misrouted is tried
	# again at least every second (at the worker's passes); with the delays
	# of other failures (1 s, doubling) the next try would come at 7 s.
	Time::HiRes::usleep(3_500_000);
	$c->sql_on($first, sprintf($entry, 'true'));
	ok($c->wait_for("SELECT status FROM wf.jobs WHERE id = $child", 'pending', 2.5),
		'released within a second or two of the entry being back');
}

# ---- nothing left behind ----
ok($c->wait_for_relays, 'the outbox is empty');
is(join(',', map { $c->sql_on($_, 'SELECT count(*) FROM wf.outbox') } $c->all_nodes), '0,0,0',
	"on every node");
is($q->("SELECT count(*) FROM wf.job j WHERE status = 'blocked' AND pending_deps < 0"), '0', 'no count below zero');
is($q->("SELECT count(*) FROM wf.remote_dependent r JOIN wf.job p ON p.queue = r.parent_queue AND p.id = r.parent_id"
	  . " WHERE p.status IN ('done', 'failed', 'cancelled')"), '0', 'no subscription left on an ended parent');

# Retention takes the delivered inputs of the jobs it deletes.
is($q->("SELECT count(*) FROM wf.remote_input WHERE child_id = $c1"), '1', 'a finished job keeps its inputs');
$c->sql_on($_, "ALTER SYSTEM SET wf.retention = '1s'; SELECT pg_reload_conf()") for $c->all_nodes;
ok($c->wait_for("SELECT count(*) FROM wf.remote_input WHERE child_id = $c1", '0'),
	'until retention deletes the job');

$c->stop_all;
done_testing();
