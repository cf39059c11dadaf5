# A distributed pg_wf created at schema 1.7, in use, then updated to 1.8
# and distributed again: the sessions and workers that already route calls
# to their shard groups (the nodes' reapers, the backends that serve
# Citus's cached connections, a client's own session) see the tables the
# update added once wf_distribute() has handed them to Citus, and serve
# dependencies between groups from then on; before that, a 1.7 group keeps
# its single-group behaviour and wf_submit refuses.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::RealBin/..";
use CitusTap;
use PostgreSQL::Test::Utils;
use Test::More;

my $c = citus_cluster('c009', no_extension => 1);
my $coord = $c->coordinator;
my $q = sub { $c->sql_on($coord, $_[0]) };

$q->("CREATE EXTENSION pg_wf VERSION '1.7'");
$q->('SELECT wf_distribute()');
is($q->("SELECT extversion FROM pg_extension WHERE extname = 'pg_wf'"), '1.7', 'created at 1.7');

my ($on_first, $on_second) = $c->queues_on_workers(1);
my ($qa) = @$on_first;
my ($qb) = @$on_second;

# A client's session that works before and after the update, and warms
# every cache on the way: the coordinator's, and the workers' backends
# that serve its calls.
my $client = $coord->background_psql('postgres');
for my $queue ($qa, $qb)
{
	my $id = $client->query_safe("SELECT wf_enqueue('$queue', '{}')");
	my ($got, $attempt) = split /\|/, $client->query_safe("SELECT id, attempt FROM wf_claim('$queue')");
	is($got, $id, "claimed in $queue at 1.7");
	is($client->query_safe("SELECT wf_complete('$queue', $got, $attempt)"), 't', 'completed');
}
# Let every node's worker run passes over its groups (wf.sweep_interval
# is 200ms here).
sleep 1;

$q->('ALTER EXTENSION pg_wf UPDATE');
is($q->("SELECT extversion FROM pg_extension WHERE extname = 'pg_wf'"), '1.12', 'updated to the current version');
my ($ok, $out, $err) = ('', '', '');
$coord->psql('postgres',
	qq{SELECT wf_submit('{"steps": [{"name": "a", "queue": "$qa", "payload": {}}]}')},
	stdout => \$out, stderr => \$err);
like($err, qr/pg_wf's 1\.8 tables are not distributed yet/, 'wf_submit waits for wf_distribute()');

$q->('SELECT wf_distribute()');
is($q->("SELECT count(*) FROM pg_dist_partition WHERE logicalrelid::text IN"
		. " ('wf.remote_input', 'wf.remote_dependent')"), '2', 'the 1.8 tables distributed');

# A dependency between the two groups, through the session that routed
# calls before: the child is released with the parent's result.
my $parent = $client->query_safe("SELECT wf_enqueue('$qa', '{}', step_name => 'fetch')");
my $child = $client->query_safe("SELECT wf_enqueue('$qb', '{}', depends_on => ARRAY[$parent])");
ok($c->wait_for("SELECT count(*) FROM wf.remote_dependent WHERE parent_id = $parent", '1'),
	"the node's worker subscribes the child in the parent's group");
my ($got, $attempt) = split /\|/, $client->query_safe("SELECT id, attempt FROM wf_claim('$qa')");
is($got, $parent, 'the parent claimed');
is($client->query_safe(qq{SELECT wf_complete('$qa', $got, $attempt, '{"rows": 3}')}), 't',
	'and completed');
ok($c->wait_for("SELECT status FROM wf.jobs WHERE id = $child", 'pending'),
	'the child released on the other node');
my ($cid, $inputs) = split /\|/, $client->query_safe("SELECT id, inputs FROM wf_claim('$qb')");
is("$cid $inputs", qq{$child {"fetch": {"rows": 3}}}, "claimed with its parent's result");

# And a workflow across the two groups.
my $wf = $client->query_safe(qq{SELECT wf_submit('{"steps": [
	{"name": "a", "queue": "$qa", "payload": {}},
	{"name": "b", "queue": "$qb", "payload": {}, "after": ["a"]}]}')});
for my $queue ($qa, $qb)
{
	my ($id, $att);
	for (1 .. 100)
	{
		($id, $att) = split /\|/, $client->query_safe("SELECT id, attempt FROM wf_claim('$queue')");
		last if defined $id;
		select(undef, undef, undef, 0.05);
	}
	ok(defined $id, "a step claimed in $queue");
	$client->query_safe("SELECT wf_complete('$queue', $id, $att)") if defined $id;
}
is($q->("SELECT status FROM wf.workflows WHERE workflow_id = '$wf'"), 'done', 'the workflow is done');

$client->quit;
$c->stop_all;
done_testing();
