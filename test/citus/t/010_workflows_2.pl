# Workflows 2 on a distributed pg_wf, through the coordinator, with steps
# in queues on both workers: workflow keys (one workflow per key, also for
# two racing starts; a key is free again once its workflow ended; a key
# held in queues the caller may not produce in), wf_signal_with_start,
# wf_wait_workflow (woken within its poll by a completion on a worker; the
# wait in the submitting transaction refused), wf_complete_with_steps (a
# fan-out whose new steps are in both groups, read the completing step's
# result, and end the workflow with the join's), wf_enqueue into a
# workflow, and child workflows (1.9: started across the groups, awaited,
# their outcome delivered to the parent's group by the worker of the node
# where their last step ended; cancelled with their parent).
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::RealBin/..";
use CitusTap;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes ();

my $c = citus_cluster('c010', distribute => 1);
my $coord = $c->coordinator;
my $q = sub { $c->sql_on($coord, $_[0]) };

my ($on_first, $on_second) = $c->queues_on_workers(2);
my ($qa, $qc) = @$on_first;
my ($qb, $qd) = @$on_second;
ok($qa && $qb && $qc && $qd, "queues $qa, $qc on one worker, $qb, $qd on the other");

# Claims a step of $workflow named $name from $queue (waiting for the
# relay to release it) and ends it with $end ("wf_complete(%q, %id, %a)").
sub step_and
{
	my ($queue, $workflow, $name, $end) = @_;
	my $id = $q->("SELECT id FROM wf.jobs WHERE workflow_id = '$workflow' AND step_name = '$name'");
	ok($c->wait_for("SELECT status FROM wf.jobs WHERE id = $id", 'pending'), "step $name is ready");
	my $client = $coord->background_psql('postgres', on_error_stop => 0);
	my ($got, $attempt, $inputs) = $c->claim_job($client, $queue, $id);
	die "could not claim $name ($id) of $queue" unless $got eq $id;
	(my $sql = $end) =~ s/%q/'$queue'/g;
	$sql =~ s/%id/$id/g;
	$sql =~ s/%a/$attempt/g;
	# In a transaction of its own, rolled back when it fails.
	$client->query_safe('BEGIN');
	my $result = $client->query("SELECT $sql");
	my $err = $client->{stderr};
	$client->query($err =~ /ERROR/ ? 'ROLLBACK' : 'COMMIT');
	$client->quit;
	return { out => $result // '', err => $err, id => $id, attempt => $attempt, inputs => $inputs };
}

my $two_steps = sub {
	my ($key) = @_;
	my $k = $key ? qq("key": "$key", ) : '';
	return qq({$k"steps": [{"name": "a", "queue": "$qa"}, {"name": "b", "queue": "$qb", "after": ["a"]}]});
};

# ---- workflow keys ----
my $w1 = $q->("SELECT wf_submit('" . $two_steps->('order-1') . "')");
is($q->("SELECT wf_submit('" . $two_steps->('order-1') . "')"), $w1, 'the same key: the same workflow');
is($q->("SELECT count(*) FROM wf.workflows WHERE key = 'order-1'"), '1', 'one workflow holds it');
is($q->("SELECT workflow_id FROM wf.workflow_key WHERE key = 'order-1'"), $w1, 'recorded on every node');
is($c->sql_on(($c->workers)[0], "SELECT workflow_id FROM wf.workflow_key WHERE key = 'order-1'"), $w1,
	"a worker's copy too");

# Two racing starts: the second waits for the first, and takes its workflow.
{
	my $s1 = $coord->background_psql('postgres');
	my $s2 = $coord->background_psql('postgres');
	$s1->query_safe('BEGIN');
	my $first = $s1->query_safe("SELECT wf_submit('" . $two_steps->('race') . "')");
	$s2->query_until(qr/started/, "\\echo started\nSELECT wf_submit('" . $two_steps->('race') . "');\n");
	Time::HiRes::usleep(300_000);
	$s1->query_safe('COMMIT');
	my $out = $s2->query_safe("SELECT 'after'");
	my ($second) = split /\n/, $out;
	is($second, $first, 'a start racing another with the same key gets its workflow');
	is($q->("SELECT count(*) FROM wf.workflows WHERE key = 'race'"), '1', 'one workflow started');
	$s1->quit;
	$s2->quit;
}

# Ended, the key is free.
step_and($qa, $w1, 'a', 'wf_complete(%q, %id, %a)');
step_and($qb, $w1, 'b', 'wf_complete(%q, %id, %a)');
is($q->("SELECT status FROM wf.workflows WHERE workflow_id = '$w1'"), 'done', 'the keyed workflow is done');
my $w1b = $q->("SELECT wf_submit('" . $two_steps->('order-1') . "')");
isnt($w1b, $w1, 'its key starts a new workflow once it has ended');

# A key held in queues the caller may not produce in.
$q->('CREATE ROLE tenant LOGIN');
$q->("SELECT wf_grant('tenant', 'produce', '$qa')");
my ($ret, $out, $err) = $coord->psql('postgres',
	qq(SET ROLE tenant; SELECT wf_submit('{"key": "order-1", "steps": [{"name": "a", "queue": "$qa"}]}')));
like($err, qr/workflow key "order-1" is held by a workflow in queues you may not produce in/,
	'a key held by a workflow in queues the caller may not produce in: 42501');

# ---- wf_signal_with_start ----
my $ws = $q->("SELECT wf_signal_with_start('" . $two_steps->('order-1') . "', 'paid', '{\"amount\": 5}')");
is($ws, $w1b, 'wf_signal_with_start signals the workflow that holds the key');
is($q->("SELECT payload FROM wf.event WHERE name = 'paid'"), '{"amount": 5}', 'the event is signalled');
my $wn = $q->("SELECT wf_signal_with_start('" . $two_steps->('order-9') . "', 'paid-9', NULL)");
is($q->("SELECT key || ' ' || status FROM wf.workflows WHERE workflow_id = '$wn'"), 'order-9 running',
	'or starts one');
{
	# A step of it awaits the event signalled already: it goes on at once.
	my $r = step_and($qa, $wn, 'a', "wf_await_event(%q, %id, %a, 'paid-9')");
	is($r->{out}, 'pending', "an await of the signalled event: ready again");
}

# ---- wf_wait_workflow ----
{
	my $w = $q->("SELECT wf_submit('" . $two_steps->() . "')");
	is($q->("SELECT status FROM wf_wait_workflow('$w', '0.3 s')"), 'running', 'a timeout says running');
	my $waiter = $coord->background_psql('postgres');
	$waiter->query_until(qr/waiting/, "\\echo waiting\nSELECT status, result FROM wf_wait_workflow('$w', '30 s');\n");
	step_and($qa, $w, 'a', q{wf_complete(%q, %id, %a, '{"x": 1}')});
	step_and($qb, $w, 'b', q{wf_complete(%q, %id, %a, '{"y": 2}')});
	my $t0 = Time::HiRes::time();
	my $got = $waiter->query_safe("SELECT 'after'");
	my $took = Time::HiRes::time() - $t0;
	is((split /\n/, $got)[0], 'done|{"b": {"y": 2}}', 'the waiter gets the workflow done, with its result');
	cmp_ok($took, '<', 5, 'soon after the last step');
	$waiter->quit;

	($ret, $out, $err) = $coord->psql('postgres',
		"BEGIN; SELECT wf_wait_workflow(wf_submit('" . $two_steps->() . "'), '5 s')");
	like($err, qr/the workflow was submitted in this transaction/, 'a wait in the submitting transaction is refused');
	($ret, $out, $err) = $coord->psql('postgres', "SELECT wf_wait_workflow(gen_random_uuid())");
	like($err, qr/does not exist/, 'an unknown workflow: 42704');
}

# ---- wf_complete_with_steps: a fan-out across the groups ----
my $wf = $q->(qq(SELECT wf_submit('{"name": "fan", "steps": [{"name": "split", "queue": "$qa", "payload": {}}]}')));
my $fan_out = qq([{"name": "p1", "queue": "$qb", "after": ["split"]},)
  . qq({"name": "p2", "after": ["split"]},)
  . qq({"name": "join", "queue": "$qd", "after": ["p1", "p2"]}]);
my $r = step_and($qa, $wf, 'split', qq{wf_complete_with_steps(%q, %id, %a, '{"parts": 2}', '$fan_out')});
is($r->{out}, 't', 'the step completes with three new steps');
is($q->("SELECT string_agg(step_name || ':' || queue, ' ' ORDER BY id) FROM wf.jobs WHERE workflow_id = '$wf'"),
	"split:$qa p1:$qb p2:$qa join:$qd", 'in both groups (a step without a queue in the completing one\'s)');
is($q->("SELECT steps FROM wf.workflows WHERE workflow_id = '$wf'"), '4', 'the workflow counts them');
my $p1 = step_and($qb, $wf, 'p1', q{wf_complete(%q, %id, %a, '{"p": 1}')});
is($p1->{inputs}, '{"split": {"parts": 2}}', "a new step in another group reads the completing step's result");
my $p2 = step_and($qa, $wf, 'p2', q{wf_complete(%q, %id, %a, '{"p": 2}')});
is($p2->{inputs}, '{"split": {"parts": 2}}', 'and one in its group');
my $join = step_and($qd, $wf, 'join', q{wf_complete(%q, %id, %a, '{"joined": true}')});
is($join->{inputs}, '{"p1": {"p": 1}, "p2": {"p": 2}}', 'the join reads both');
is($q->("SELECT status || ' ' || result FROM wf_wait_workflow('$wf', '5 s')"), 'done {"join": {"joined": true}}',
	"the workflow's result is the join's");

# After steps done already, in another group; and what is refused.
{
	my $w = $q->("SELECT wf_submit('" . $two_steps->() . "')");
	step_and($qa, $w, 'a', q{wf_complete(%q, %id, %a, '{"a": 1}')});
	my $more = step_and($qb, $w, 'b',
		qq{wf_complete_with_steps(%q, %id, %a, NULL, '[{"name": "c", "queue": "$qc", "after": ["a", "b"]}]')});
	is($more->{out}, 't', 'a step after a done step of another group and the completing one');
	my $cstep = step_and($qc, $w, 'c', 'wf_complete(%q, %id, %a)');
	is($cstep->{inputs}, '{"a": {"a": 1}, "b": null}', 'reads both');
	is($q->("SELECT status FROM wf_wait_workflow('$w', '5 s')"), 'done', 'done');

	my $w2 = $q->("SELECT wf_submit('" . $two_steps->() . "')");
	my $bad = step_and($qa, $w2, 'a', qq{wf_complete_with_steps(%q, %id, %a, NULL, '[{"name": "x", "queue": "$qb", "after": ["b"]}]')});
	like($bad->{err}, qr/step "x" runs after step "b", which is not done/, 'after an unfinished step: 22023');
	is($q->("SELECT count(*) FROM wf.jobs WHERE workflow_id = '$w2'"), '2', 'nothing was added');
	my $id = $bad->{id};
	# (Its worker's session ended since: it is back in line.)
	isnt($q->("SELECT status FROM wf.jobs WHERE id = $id"), 'done', 'the step did not complete');
	is($q->("SELECT wf_complete_with_steps('$qa', $id, 99, NULL, '[]')"), 'f', 'a stale token: false');
	my $plain = $q->("SELECT wf_enqueue('$qa', '{}')");
	my $solo = step_and($qa, $w2, 'a', "wf_complete(%q, %id, %a)");
	my $client = $coord->background_psql('postgres');
	my ($pid, $pattempt) = split /\|/, $client->query_safe("SELECT id, attempt FROM wf_claim('$qa')");
	is($pid, $plain, 'a job of no workflow claimed');
	($ret, $out, $err) = $coord->psql('postgres',
		"SELECT wf_complete_with_steps('$qa', $pid, $pattempt, NULL, '[{\"name\": \"x\"}]')");
	like($err, qr/job $pid is not a workflow step/, 'a job of no workflow adds no steps: 55000');
	$client->quit;
}

# A worker role that may work the step's queue and produce in the new
# steps' queue only: its new step after the completing one (in another
# group) runs, as on one server -- an edge inside a workflow needs no right
# on the parent's queue.
{
	$q->('CREATE ROLE fan_worker LOGIN');
	$q->("SELECT wf_grant('fan_worker', 'work', '$qc')");
	$q->("SELECT wf_grant('fan_worker', 'produce', '$qd')");
	my $w = $q->(qq(SELECT wf_submit('{"steps": [{"name": "s", "queue": "$qc"}]}')));
	my $sid = $q->("SELECT id FROM wf.jobs WHERE workflow_id = '$w'");
	my $client = $coord->background_psql('postgres');
	$client->query_safe('SET ROLE fan_worker');
	my ($id, $attempt) = $c->claim_job($client, $qc, $sid);
	is($id, $sid, 'the step claimed by a role with work on its queue');
	is($client->query_safe(qq{SELECT wf_complete_with_steps('$qc', $id, $attempt, '{"s": 1}', '[{"name": "n", "queue": "$qd", "after": ["s"]}]')}),
		't', 'it adds a step in a queue it may produce in');
	$client->quit;
	ok($c->wait_for("SELECT status FROM wf.jobs WHERE workflow_id = '$w' AND step_name = 'n'", 'pending'),
		"the new step is released by the completing one, on the other node");

	# A step whose cancellation was requested ends cancelled, adds nothing,
	# and says true, as on one server.
	my $w2 = $q->(qq(SELECT wf_submit('{"steps": [{"name": "s", "queue": "$qc"}]}')));
	my $s2 = $q->("SELECT id FROM wf.jobs WHERE workflow_id = '$w2'");
	$client = $coord->background_psql('postgres');
	($id, $attempt) = $c->claim_job($client, $qc, $s2);
	is($q->("SELECT wf_cancel_workflow('$w2')"), '1', 'the running step flagged (and counted)');
	is($client->query_safe(qq{SELECT wf_complete_with_steps('$qc', $id, $attempt, NULL, '[{"name": "n", "queue": "$qd", "after": ["s"]}]')}),
		't', 'a flagged step completing with steps: true');
	$client->quit;
	is($q->("SELECT string_agg(step_name || ':' || status, ' ') FROM wf.jobs WHERE workflow_id = '$w2'"), 's:cancelled',
		'it ended cancelled and added nothing');
}

# ---- wf_enqueue into a workflow ----
{
	my $w = $q->("SELECT wf_submit('" . $two_steps->() . "')");
	my $extra = $q->("SELECT wf_enqueue('$qc', '{}', workflow_id => '$w', step_name => 'extra')");
	is($q->("SELECT workflow_id || ' ' || step_name FROM wf.jobs WHERE id = $extra"), "$w extra",
		'a job enqueued into a workflow is its step');
	is($q->("SELECT steps FROM wf.workflows WHERE workflow_id = '$w'"), '3', 'counted');
}

# ---- child workflows ----
# A parent in one group starts a child whose steps are in both; it waits
# for it, and is back in line with the child's outcome in its events.
{
	my $client = $coord->background_psql('postgres');
	my $pw = $q->(qq(SELECT wf_submit('{"steps": [{"name": "parent", "queue": "$qa"}]}')));
	my $parent = $q->("SELECT id FROM wf.jobs WHERE workflow_id = '$pw'");
	my ($id, $attempt) = $c->claim_job($client, $qa, $parent);
	is($id, $parent, 'the parent claimed');
	my $spec = qq({"steps": [{"name": "c1", "queue": "$qb"}, {"name": "c2", "queue": "$qc", "after": ["c1"]}]});
	my $kid = $client->query_safe("SELECT wf_start_child('$qa', $id, $attempt, 'kid', '$spec')");
	like($kid, qr/^[0-9a-f-]{36}$/, 'wf_start_child through the coordinator');
	is($client->query_safe("SELECT wf_start_child('$qa', $id, $attempt, 'kid', '$spec')"), $kid,
		'started once: the same name gives the same child');
	is($q->("SELECT string_agg(step_name || ':' || queue || ':' || child_of, ' ' ORDER BY id) FROM wf.jobs"
		  . " WHERE workflow_id = '$kid'"), "c1:$qb:$parent c2:$qc:$parent", "its steps, in both groups, carry the parent's id");
	is($q->("SELECT child_of FROM wf.workflows WHERE workflow_id = '$kid'"), $parent, "the workflow names its parent");
	is($client->query_safe("SELECT wf_await_children('$qa', $id, $attempt)"), 'waiting', 'the parent waits');
	is($client->query_safe("SELECT wf_start_child('$qa', $id, $attempt, 'late', '$spec')"), '',
		'a token the wait ended is stale: NULL');
	step_and($qb, $kid, 'c1', q{wf_complete(%q, %id, %a, '{"one": 1}')});
	is($q->("SELECT status FROM wf.jobs WHERE id = $parent"), 'waiting', 'still waiting with a step of the child left');
	step_and($qc, $kid, 'c2', q{wf_complete(%q, %id, %a, '{"two": 2}')});
	ok($c->wait_for("SELECT status FROM wf.jobs WHERE id = $parent", 'pending'),
		"the child done, its parent is back in line (the child's last step on another node)");
	is($q->("SELECT events -> 'wf:child:kid' ->> 'status' FROM wf.jobs WHERE id = $parent"), 'done',
		"with the child's outcome in its events");
	is($q->("SELECT events -> 'wf:child:kid' -> 'results' FROM wf.jobs WHERE id = $parent"), '{"c2": {"two": 2}}',
		"and its result");
	is($q->("SELECT status || ' ' || delivered FROM wf.child WHERE workflow_id = '$kid'"), 'done true',
		'recorded and delivered once');
	is($q->("SELECT wf_workflow('$pw') -> 'steps' -> 0 -> 'children'"),
		qq([{"name": "kid", "status": "done", "workflow_id": "$kid"}]), "wf_workflow lists a step's children");
	# The parent's next attempt reads the outcome and may await again:
	# nothing is left undelivered, so it goes on at once.
	($id, $attempt) = split /\|/, $client->query_safe("SELECT id, attempt FROM wf_claim('$qa')");
	is($id, $parent, 'the parent claimed again');
	is($client->query_safe("SELECT wf_await_children('$qa', $id, $attempt)"), 'pending',
		'with every child delivered, wf_await_children goes on at once');
	$client->quit;
}

# A parent cancelled: its child is cancelled in every group.
{
	my $parent = $q->("SELECT wf_submit('{\"steps\": [{\"name\": \"boss\", \"queue\": \"$qd\"}]}')");
	my $boss = $q->("SELECT id FROM wf.jobs WHERE workflow_id = '$parent'");
	my $client = $coord->background_psql('postgres');
	my ($id, $attempt) = $c->claim_job($client, $qd, $boss);
	is($id, $boss, 'the parent step claimed');
	my $spec = qq({"steps": [{"name": "x", "queue": "$qa"}, {"name": "y", "queue": "$qb", "after": ["x"]}]});
	my $kid = $client->query_safe("SELECT wf_start_child('$qd', $id, $attempt, 'work', '$spec')");
	is($client->query_safe("SELECT wf_await_children('$qd', $id, $attempt)"), 'waiting', 'a parent waits');
	$client->quit;
	is($q->("SELECT wf_cancel_workflow('$parent')"), '1', "the parent's workflow cancelled");
	ok($c->wait_for("SELECT string_agg(step_name || ':' || status, ' ' ORDER BY id) FROM wf.jobs WHERE workflow_id = '$kid'",
			'x:cancelled y:cancelled'), "its child's steps are cancelled, on both nodes")
	  or diag(join("\n", map { $c->sql_on($_, "SELECT string_agg(kind || ' ' || coalesce(workflow_id::text, '-'), '; ') FROM wf.outbox") } $c->workers),
		$q->("SELECT string_agg(parent_queue || ':' || parent_id || ':' || coalesce(status, 'null'), ' ') FROM wf.child WHERE workflow_id = '$kid'"),
		$q->("SELECT string_agg(id || ':' || status, ' ') FROM wf.jobs WHERE workflow_id = '$parent'"));
	ok($c->wait_for("SELECT status FROM wf.child WHERE workflow_id = '$kid'", 'cancelled'), 'the child ended cancelled');
	is($q->("SELECT cancelled_at IS NOT NULL FROM wf.workflows WHERE workflow_id = '$kid'"), 't', 'as a cancelled workflow');
}

# Rights: a tenant who may not work the parent's queue starts nothing.
{
	$q->("SELECT wf_grant('tenant', 'work', '$qa')");
	my ($ret2, $out2, $err2) = $coord->psql('postgres',
		"SET ROLE tenant; SELECT wf_start_child('$qb', 1, 1, 'x', '{\"steps\": [{\"name\": \"a\", \"queue\": \"$qa\"}]}')");
	like($err2, qr/permission denied to work in queue "\Q$qb\E"/, 'wf_start_child without the right to work: 42501');
	$q->('GRANT EXECUTE ON FUNCTION wf._deliver_child(text, bigint, uuid, text, jsonb) TO tenant');
	($ret2, $out2, $err2) = $coord->psql('postgres',
		"SET ROLE tenant; SELECT wf._deliver_child('$qa', 1, gen_random_uuid(), 'x', '{}')");
	like($err2, qr/permission denied for function wf\._deliver_child/, 'wf._deliver_child refuses a tenant granted EXECUTE');
}

# ---- an outbox entry that cannot be relayed holds back no other ----
{
	my ($w1) = $c->workers;
	# A 'child' entry naming no workflow: its relay fails every time.
	$c->sql_on($w1, "INSERT INTO wf.outbox (kind, parent_ids) VALUES ('child', '{}')");
	my $first_node_queue = $q->("SELECT nodeport FROM pg_dist_placement p JOIN pg_dist_node n USING (groupid)"
		  . " WHERE shardid = get_shard_id_for_distribution_column('wf.job', '$qa')") eq $w1->port ? $qa : $qb;
	my $other = $first_node_queue eq $qa ? $qb : $qa;
	my $spec = qq({"steps": [{"name": "a", "queue": "$first_node_queue"},)
	  . qq({"name": "b", "queue": "$other", "after": ["a"]}]});
	my $w = $q->("SELECT wf_submit('$spec')");
	step_and($first_node_queue, $w, 'a', 'wf_complete(%q, %id, %a)');
	step_and($other, $w, 'b', 'wf_complete(%q, %id, %a)');
	is($q->("SELECT status FROM wf.workflows WHERE workflow_id = '$w'"), 'done',
		"the worker of a node with an entry it cannot relay relays the others");
	is($c->sql_on($w1, "SELECT count(*) FROM wf.outbox WHERE kind = 'child' AND workflow_id IS NULL"), '1',
		'the bad entry stays, tried again later (its error in the log)');
}

$c->stop_all;
done_testing();
