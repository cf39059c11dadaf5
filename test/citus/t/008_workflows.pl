# Workflows on a distributed pg_wf (1.8): wf_submit through the coordinator
# of a DAG whose steps are in queues on both workers, run to the end by
# claims (each step's inputs are its parents' results, wherever they ran),
# a failure that cancels what follows on the other node, wf_cancel_workflow
# across the nodes (a running step flagged), wf_workflow and wf.workflows
# read across them, rights and refusals; a 200-step chain
# that crosses between the nodes at every step.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::RealBin/..";
use CitusTap;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes ();

my $c = citus_cluster('c008', distribute => 1);
my $coord = $c->coordinator;
my @workers = $c->workers;
my $q = sub { $c->sql_on($coord, $_[0]) };

my ($on_first, $on_second) = $c->queues_on_workers(2);
my ($qa, $qc) = @$on_first;
my ($qb, $qd) = @$on_second;
ok($qa && $qb && $qc && $qd, "queues $qa, $qc on one worker, $qb, $qd on the other");

# A worker: claims from each queue until the workflow has nothing
# pending; completes each step with {"step": name, "inputs": its inputs}.
sub run_steps
{
	my ($workflow, $fail) = @_;
	my $client = $coord->background_psql('postgres');
	my %inputs;
	for (1 .. 500)
	{
		my $claimed = 0;
		for my $queue ($qa, $qb, $qc, $qd)
		{
			my $row = $client->query_safe(
				"SELECT id, attempt, step_name, coalesce(inputs, '{}') FROM wf_claim('$queue')");
			next if $row eq '';
			my ($id, $attempt, $name, $in) = split /\|/, $row, 4;
			$claimed++;
			$inputs{$name} = $in;
			if ($fail && $name eq $fail)
			{
				$client->query_safe("SELECT wf_fail('$queue', $id, $attempt, 'no', permanent => true)");
				next;
			}
			$client->query_safe("SELECT wf_complete('$queue', $id, $attempt, jsonb_build_object('step', '$name'))");
		}
		last if $q->("SELECT count(*) FROM wf.jobs WHERE workflow_id = '$workflow'"
			  . " AND status IN ('blocked', 'pending', 'running')") eq '0';
		Time::HiRes::usleep(20_000) unless $claimed;
	}
	$client->quit;
	return \%inputs;
}

my $spec = sub {
	my ($name) = @_;
	return qq({"name": "$name", "steps": [
  {"name": "extract", "queue": "$qa", "payload": {"n": 1.50}},
  {"name": "transform", "queue": "$qb", "after": ["extract"]},
  {"name": "audit", "queue": "$qc", "after": ["extract"]},
  {"name": "enrich", "queue": "$qd", "after": ["transform"]},
  {"name": "load", "queue": "$qa", "after": ["enrich", "audit"]}]});
};

# ---- a DAG across the nodes, to the end ----
my $w = $q->("SELECT wf_submit('" . $spec->('etl') . "')");
like($w, qr/^[0-9a-f-]{36}$/, 'wf_submit through the coordinator');
is($q->("SELECT string_agg(step_name || ':' || status, ' ' ORDER BY id) FROM wf.jobs WHERE workflow_id = '$w'"),
	'extract:pending transform:blocked audit:blocked enrich:blocked load:blocked',
	'the first step pending, the others blocked, on both workers');
is($q->("SELECT count(DISTINCT get_shard_id_for_distribution_column('wf.job', queue)) FROM wf.jobs WHERE workflow_id = '$w'"),
	'4', 'in four shard groups');
is($q->("SELECT payload FROM wf.jobs WHERE workflow_id = '$w' AND step_name = 'extract'"), '{"n": 1.50}',
	'the payload as given');
my $doc = $q->("SELECT wf_workflow('$w')");
like($doc, qr/"name": "load".*"after": \["audit", "enrich"\]|"after": \["enrich", "audit"\].*"name": "load"/s,
	"wf_workflow names each step's predecessors, across the nodes");
is($q->("SELECT wf_workflow('$w') -> 'counts' ->> 'steps'"), '5', 'and counts them');
my $inputs = run_steps($w);
is($q->("SELECT status FROM wf.workflows WHERE workflow_id = '$w'"), 'done', 'the workflow is done');
is($inputs->{load}, '{"audit": {"step": "audit"}, "enrich": {"step": "enrich"}}',
	"the last step's inputs: its parents' results, from the other node and its own");
is($inputs->{transform}, '{"extract": {"step": "extract"}}', 'a step on the other node reads its parent');
ok($c->wait_for_relays, 'nothing left to relay');

# ---- a failure cancels what follows, on both nodes ----
my $wf = $q->("SELECT wf_submit('" . $spec->('fails') . "')");
run_steps($wf, 'transform');
is($q->("SELECT string_agg(step_name || ':' || status, ' ' ORDER BY id) FROM wf.jobs WHERE workflow_id = '$wf'"),
	'extract:done transform:failed audit:done enrich:cancelled load:cancelled',
	'the failed step cancels its successors on the other node, and theirs back on the first');
is($q->("SELECT status FROM wf.workflows WHERE workflow_id = '$wf'"), 'failed', 'the workflow failed');

# ---- wf_cancel_workflow across the nodes ----
my $wc = $q->("SELECT wf_submit('" . $spec->('cancelled') . "')");
my $client = $coord->background_psql('postgres');
my ($id, $attempt) = split /\|/, $client->query_safe("SELECT id, attempt FROM wf_claim('$qa')");
is($q->("SELECT step_name FROM wf.jobs WHERE id = $id"), 'extract', 'the first step running');
is($q->("SELECT wf_cancel_workflow('$wc')"), '5', 'wf_cancel_workflow: four cancelled, the running one flagged');
is($q->("SELECT string_agg(step_name || ':' || status, ' ' ORDER BY id) FROM wf.jobs WHERE workflow_id = '$wc'"),
	'extract:running transform:cancelled audit:cancelled enrich:cancelled load:cancelled',
	'on both workers');
$client->query_safe("SELECT wf_complete('$qa', $id, $attempt)");
$client->quit;
is($q->("SELECT status FROM wf.jobs WHERE id = $id"), 'cancelled', 'the running step ends cancelled');
is(join(',', map { $c->sql_on($_, "SELECT cancelled_at IS NOT NULL FROM wf.workflow WHERE id = '$wc'") } $c->all_nodes),
	't,t,t', "the cancel is in every node's copy of the workflow");
is($q->("SELECT status FROM wf.workflows WHERE workflow_id = '$wc'"), 'cancelled', 'the workflow is cancelled');
ok($c->wait_for("SELECT count(*) FROM wf.remote_dependent r JOIN wf.job p ON p.queue = r.parent_queue"
	  . " AND p.id = r.parent_id WHERE p.workflow_id = '$wc'", '0'),
	'the cancelled steps tell their successors in other groups, and forget them');

# ---- rights and refusals ----
$q->('CREATE ROLE tenant LOGIN');
$q->("SELECT wf_grant('tenant', 'produce', '$qa')");
$q->("SELECT wf_grant('tenant', 'produce', '$qb')");
my ($ret, $out, $err) = $coord->psql('postgres', "SET ROLE tenant; SELECT wf_submit('" . $spec->('nope') . "')");
like($err, qr/permission denied to produce in queue "(\Q$qc\E|\Q$qd\E)"/,
	'a step in a queue the caller may not produce in: 42501');
is($q->("SELECT count(*) FROM wf.workflows WHERE name = 'nope'"), '0', 'nothing was created');
my $mine = $q->(qq(SET ROLE tenant; SELECT wf_submit('{"steps": [{"name": "a", "queue": "$qa"}, {"name": "b", "queue": "$qb", "after": ["a"]}]}')));
ok($mine, 'with rights on every step queue, it is accepted');
($ret, $out, $err) = $coord->psql('postgres', "SET ROLE tenant; SELECT wf_workflow('$w')");
like($err, qr/permission denied/, "another workflow's document is refused");
($ret, $out, $err) = $coord->psql('postgres', qq(SELECT wf_submit('{"steps": [{"name": "a", "queue": "$qa", "afterr": []}]}')));
like($err, qr/unknown key "afterr"/, 'a bad spec is refused as on one server');
($ret, $out, $err) = $coord->psql('postgres', "SELECT wf_cancel_workflow(gen_random_uuid())");
like($err, qr/does not exist/, 'cancelling an unknown workflow: 42704');
$q->('GRANT EXECUTE ON FUNCTION wf._insert_steps(text, uuid, jsonb, text) TO tenant');
($ret, $out, $err) = $coord->psql('postgres',
	"SET ROLE tenant; SELECT wf._insert_steps('$qa', gen_random_uuid(), '[]', 'tenant')");
like($err, qr/permission denied for function wf\._insert_steps/, 'wf._insert_steps refuses a tenant granted EXECUTE');

# ---- a chain that crosses between the nodes at every step ----
my @chain;
for my $n (1 .. 200)
{
	my $queue = $n % 2 ? $qa : $qb;
	push @chain, qq({"name": "s$n", "queue": "$queue") . ($n > 1 ? qq(, "after": ["s) . ($n - 1) . qq("]) : '') . '}';
}
my $t0 = Time::HiRes::time();
my $wchain = $q->("SELECT wf_submit('{\"steps\": [" . join(',', @chain) . "]}')");
my $submitted = Time::HiRes::time() - $t0;
run_steps($wchain);
my $took = Time::HiRes::time() - $t0;
is($q->("SELECT status || ' ' || done FROM wf.workflows WHERE workflow_id = '$wchain'"), 'done 200',
	'a 200-step chain alternating between the nodes runs to the end');
note(sprintf('200-step chain across the nodes: submitted in %.2f s, done in %.1f s', $submitted, $took));
ok($c->wait_for("SELECT count(*) FROM wf.remote_dependent r JOIN wf.job p ON p.queue = r.parent_queue"
	  . " AND p.id = r.parent_id WHERE p.status IN ('done', 'failed', 'cancelled')", '0'),
	'no subscription left on a step that ended');

$c->stop_all;
done_testing();
