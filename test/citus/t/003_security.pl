# The security model on a distributed pg_wf: rights granted per queue hold
# on the workers (a tenant's call runs there, as the tenant, and pg_wf's SQL
# as wf_owner); a role without the right is refused with 42501 and changes
# nothing; wf_distribute is a superuser's; a trigger planted on a shard of
# pg_wf's tables is refused, and one that got there stops pg_wf on that node
# rather than run with pg_wf's rights.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::RealBin/..";
use CitusTap;
use PostgreSQL::Test::Utils;
use Test::More;

my $c = citus_cluster('c003');
my $coord = $c->coordinator;
my @workers = $c->workers;
my $q = sub { $c->sql_on($coord, $_[0]) };

# A role that exists on each worker only, created first: from then on a
# role's OID on the workers is one ahead of its OID on the coordinator, and
# a copy of wf.grant that kept the coordinator's OIDs would hand tenant_a's
# rights to w_local there.
for my $w (@workers)
{
	$c->sql_on($w, "SET citus.enable_ddl_propagation = off; CREATE ROLE w_local LOGIN");
}
# Roles and rights before distributing (Citus creates the roles on the
# workers).
$q->("CREATE ROLE tenant_a LOGIN; CREATE ROLE tenant_b LOGIN; CREATE ROLE nobody LOGIN");
$q->("SELECT wf_grant('tenant_a', 'produce', 'a_*'); SELECT wf_grant('tenant_a', 'work', 'a_*')");
$q->("SELECT wf_grant('tenant_b', 'produce', 'b_*'); SELECT wf_grant('tenant_b', 'work', 'b_*')");

my ($ret, $out, $err) = $coord->psql('postgres', 'SELECT wf_distribute()', extra_params => [ '-U', 'tenant_a' ]);
like($err, qr/permission denied|only a superuser/, 'a tenant may not distribute pg_wf');
is($q->("SELECT count(*) FROM pg_dist_partition WHERE logicalrelid::text LIKE 'wf.%'"), '0',
	'and nothing was distributed');
$q->('SELECT wf_distribute()');

sub as_role
{
	my ($role, $sql) = @_;
	my ($r, $o, $e) = $coord->psql('postgres', $sql, extra_params => [ '-U', $role ]);
	return ($r, $o, $e);
}

# A tenant works its own queues through the coordinator.
(my $r, my $id, $err) = as_role('tenant_a', "SELECT wf_enqueue('a_mail', '{\"to\":\"x\"}')");
like($id, qr/^\d+$/, 'tenant_a enqueues into its queue') or diag($err);
my $session = $coord->background_psql('postgres', extra_params => [ '-U', 'tenant_a' ]);
my $claimed = $session->query_safe("SELECT id || '|' || attempt FROM wf_claim('a_mail')");
is($claimed, "$id|1", 'tenant_a claims it');
is($session->query_safe("SELECT wf_complete('a_mail', $id, 1, '{\"sent\":true}')"), 't',
	'and completes it');
$session->quit;

# Another tenant, and a role with no right: 42501, nothing changed.
my $before = $q->("SELECT count(*) || ' ' || string_agg(status, ',' ORDER BY id) FROM wf.jobs");
($r, $out, $err) = as_role('tenant_b', "SELECT wf_enqueue('a_mail', '{}')");
like($err, qr/permission denied|42501|may not/, 'tenant_b may not enqueue into a_mail');
($r, $out, $err) = as_role('tenant_b', "SELECT * FROM wf_claim('a_mail')");
like($err, qr/permission denied|may not/, 'nor claim from it');
($r, $out, $err) = as_role('nobody', "SELECT wf_enqueue('a_mail', '{}')");
like($err, qr/permission denied/, 'a role without any right is refused');
is($q->("SELECT count(*) || ' ' || string_agg(status, ',' ORDER BY id) FROM wf.jobs"), $before,
	'the refused calls changed nothing');

# On the worker holding a_mail, w_local has the OID tenant_a has on the
# coordinator; given EXECUTE there, it is still refused: rights are checked
# by name on a distributed pg_wf.
{
	my $port = $q->("SELECT nodeport FROM pg_dist_placement p JOIN pg_dist_node n USING (groupid)"
		  . " WHERE shardid = get_shard_id_for_distribution_column('wf.job', 'a_mail')");
	my ($w) = grep { $_->port == $port } @workers;
	my $coord_oid = $q->("SELECT 'tenant_a'::regrole::oid");
	is($c->sql_on($w, "SELECT rolname FROM pg_roles WHERE oid = $coord_oid"), 'w_local',
		"on that worker, tenant_a's coordinator OID is w_local's");
	$c->sql_on($w, "SET citus.enable_ddl_propagation = off;"
		  . " GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA public TO w_local");
	my ($r2, $o2, $e2) = $w->psql('postgres', "SELECT wf_enqueue('a_mail', '{}')",
		extra_params => [ '-U', 'w_local' ]);
	like($e2, qr/permission denied to produce/, 'w_local may not produce in a_mail');
}

# Rights granted and revoked after distributing, by a superuser: at once on
# the workers (no node keeps a cached answer).
$q->("SELECT wf_grant('tenant_b', 'produce', 'a_shared')");
($r, $out, $err) = as_role('tenant_b', "SELECT wf_enqueue('a_shared', '{}')");
like($out, qr/^\d+$/, 'a grant made after distributing holds on the workers') or diag($err);
$q->("SELECT wf_revoke('tenant_b', 'produce', 'a_shared')");
($r, $out, $err) = as_role('tenant_b', "SELECT wf_enqueue('a_shared', '{}')");
like($err, qr/permission denied|may not/, 'and its revoke at once');
$q->("SELECT wf_grant('tenant_a', 'administer', 'a_*')");
($r, $out, $err) = as_role('tenant_a', "SELECT wf_grant('tenant_b', 'produce', 'a_mail')");
like($err, qr/granted and revoked by a superuser/, 'a tenant administrator may not grant on a distributed pg_wf');

($r, $out, $err) = $workers[0]->psql('postgres', "SELECT wf_grant('tenant_b', 'produce', 'b_other')");
like($err, qr/run on the Citus coordinator/, 'grants are made on the coordinator only');

# A trigger planted on a shard of wf.job, on the worker that holds it.
my $port = $q->("SELECT nodeport FROM pg_dist_placement p JOIN pg_dist_node n USING (groupid)"
	  . " WHERE shardid = get_shard_id_for_distribution_column('wf.job', 'a_mail')");
my ($w) = grep { $_->port == $port } @workers;
my $shard = 'wf.job_' . $q->("SELECT get_shard_id_for_distribution_column('wf.job', 'a_mail')");
$c->sql_on($w, "SET citus.enable_ddl_propagation = off; CREATE TABLE public.stolen (who text); GRANT ALL ON public.stolen TO PUBLIC;"
	  . " CREATE FUNCTION public.steal() RETURNS trigger LANGUAGE plpgsql AS"
	  . " \$\$BEGIN INSERT INTO public.stolen VALUES (current_user); RETURN NEW; END\$\$");
($r, $out, $err) = $w->psql('postgres', "SET citus.enable_ddl_propagation = off;"
	  . " CREATE TRIGGER steal BEFORE INSERT OR UPDATE ON $shard FOR EACH ROW EXECUTE FUNCTION public.steal()");
like($err, qr/take no triggers/, "CREATE TRIGGER on the shard $shard is refused");
# A superuser gets one there anyway (event triggers off): pg_wf stops.
$w->safe_psql('postgres', "SET citus.enable_ddl_propagation = off; ALTER EVENT TRIGGER wf_guard DISABLE;"
	  . " CREATE TRIGGER steal BEFORE INSERT OR UPDATE ON $shard FOR EACH ROW EXECUTE FUNCTION public.steal();"
	  . " ALTER EVENT TRIGGER wf_guard ENABLE");
($r, $out, $err) = as_role('tenant_a', "SELECT wf_enqueue('a_mail', '{}')");
like($err, qr/trigger on wf\.job_/, 'with the trigger there, pg_wf refuses to run on that node');
is($c->sql_on($w, 'SELECT count(*) FROM public.stolen'), '0', 'the planted trigger never ran');

$c->stop_all;
done_testing();
