# A claim writes no job row: its running state is in the unlogged claim
# table, and the only durable trace of it is the job's ready row, gone. This
# checks what that must still guarantee across crashes:
# - a committed claim lost in a crash is recovered with its attempt counted,
#   and the token its worker holds is never valid again;
# - a job that crashes the server every time it runs (a poison pill) ends
#   failed after max_attempts, like any other;
# - a claim not committed at the crash counts nothing, nor does a pending
#   job that nobody claimed;
# - a clean restart keeps live claims (the claim table survives it).
use strict;
use warnings FATAL => 'all';
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use WfTap;

my $node = wf_node('lost', sweep_interval => '200ms');
ok(wait_reapers($node, 'postgres', 1), 'a reaper serves the database');

sub job
{
	my ($id) = @_;
	return $node->safe_psql('postgres',
		"SELECT status || ' ' || attempt || ' ' || coalesce(last_error, '-') FROM wf.jobs WHERE id = $id");
}

# Sessions the server ended are closed without complaint.
my @sessions;
sub session
{
	my $s = $node->background_psql('postgres', on_error_stop => 0);
	push @sessions, $s;
	return $s;
}

sub crash
{
	# An immediate shutdown: no checkpoint, unlogged tables reset.
	$node->stop('immediate');
	$node->start;
	ok(wait_reapers($node, 'postgres', 1), 'the reaper is back after the crash');
}

my $pill = $node->safe_psql('postgres', "SELECT wf_enqueue('pill', '{}', max_attempts => 2)");
my $idle = $node->safe_psql('postgres', "SELECT wf_enqueue('idle', '{}')");
my $open = $node->safe_psql('postgres', "SELECT wf_enqueue('open', '{}')");

# The claim leaves the job row alone: same row version before and after.
my $xmin = $node->safe_psql('postgres', "SELECT xmin FROM wf.job WHERE id = $pill");
my $worker = session();
is($worker->query_safe("SELECT id || ' ' || attempt FROM wf_claim('pill', worker => 'w1')"),
	"$pill 1", 'the pill is claimed at attempt 1');
is($node->safe_psql('postgres', "SELECT xmin FROM wf.job WHERE id = $pill"), $xmin,
	'the claim wrote no job row');
is(job($pill), 'running 1 -', 'wf.jobs shows it running at attempt 1');
my $other = session();
$other->query_safe("BEGIN; SELECT id FROM wf_claim('open')");

# Crash 1: the pill's claim was committed, the other one was not.
crash();
ok( $node->poll_query_until('postgres', "SELECT status = 'pending' FROM wf.job WHERE id = $pill AND attempt = 1"),
	'the lost claim is recovered');
is(job($pill), 'pending 1 worker lost: the server restarted during attempt 1',
	'its attempt is counted');
is(job($open), 'pending 0 -', 'a claim not committed at the crash counts nothing');
is(job($idle), 'pending 0 -', 'nor does a job nobody claimed');

$worker = session();
is($worker->query_safe("SELECT id || ' ' || attempt FROM wf_claim('pill', worker => 'w2')"),
	"$pill 2", 'claimed again at attempt 2');
is($node->safe_psql('postgres', "SELECT wf_complete('pill', $pill, 1)"), 'f',
	'the token of the lost attempt is stale');
is($node->safe_psql('postgres', "SELECT wf_heartbeat('pill', $pill, 1)"), 'f',
	'its heartbeat too');
is($worker->query_safe("SELECT wf_heartbeat('pill', $pill, 2)"), 't', 'the new one holds');

# A clean restart keeps the claim table: the attempt runs on (its session
# is gone, so the reaper gives it back, counted like any lost session).
$node->restart;
ok(wait_reapers($node, 'postgres', 1), 'the reaper is back after the restart');
ok( $node->poll_query_until('postgres', "SELECT status <> 'running' FROM wf.jobs WHERE id = $pill"),
	'the attempt of the session the restart ended is given back');
like(job($pill), qr/^failed 2 worker lost: session \(pid \d+\) ended during attempt 2$/,
	'the pill has used its 2 attempts: failed');

# Crash 2 with a claim in place: the poison pill case proper.
my $pill2 = $node->safe_psql('postgres', "SELECT wf_enqueue('pill2', '{}', max_attempts => 1)");
$worker = session();
is($worker->query_safe("SELECT attempt FROM wf_claim('pill2')"), '1', 'a second pill is claimed');
crash();
ok( $node->poll_query_until('postgres', "SELECT status = 'failed' FROM wf.jobs WHERE id = $pill2"),
	'a job whose only attempt was lost in a crash ends failed');
is($node->safe_psql('postgres', "SELECT count(*) FROM wf_claim('pill2')"), '0',
	'and is not handed out again');
is(job($open), 'pending 0 -', 'the untouched jobs are still pending at attempt 0');
is($node->safe_psql('postgres', "SELECT count(*) FROM wf_claim('open')"), '1', 'and claimable');

eval { $_->quit; } for @sessions;
$node->stop;
done_testing();
