"""ACLs through a change of active controller: three controllers in a quorum and a broker with an authorizer.
A standby has replayed the acl records, so after failover it holds the same bindings, pushes them to the
broker, and carries out DeleteAcls. The broker's PLAINTEXT listener (User:ANONYMOUS) is the super user."""

from replog.client import acl_admin
from replog.client.admin import Admin
from replog.harness.local_cluster import LocalCluster
from replog.security.acls import (
    AclBinding,
    AclBindingFilter,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from tests.acl_cluster import STANDARD_AUTHORIZER

FAILOVER_DEADLINE_S = 15.0
BOB_READS = AclBinding(ResourceType.TOPIC, "orders", PatternType.LITERAL, "User:bob", "*", Operation.READ,
                       Permission.ALLOW)
EVERY_ACL = AclBindingFilter(ResourceType.ANY, None, PatternType.ANY, None, None, Operation.ANY, Permission.ANY)


async def test_a_new_active_controller_has_the_acls_and_changes_them(tmp_path):
    cluster = LocalCluster(tmp_path, brokers=1, controllers=3, overrides={
        "authorizer.class.name": STANDARD_AUTHORIZER, "super.users": "User:ANONYMOUS"})
    try:
        await cluster.start()
        async with Admin(cluster.bootstrap) as admin:
            await acl_admin.create_acls(admin, [BOB_READS])
        old = cluster.controller
        await cluster.wait_for(lambda: all(list(c.metadata.acls) == [BOB_READS]
                                           for i, c in cluster.controllers.items() if i in cluster.running_controllers),
                               FAILOVER_DEADLINE_S, "every controller to replay the acl record")
        await cluster.stop_controller(old.controller_id)
        new = await cluster.wait_for_active_controller(FAILOVER_DEADLINE_S)
        assert new is not old and list(new.metadata.acls) == [BOB_READS]
        await cluster.wait_for(lambda: (new.sessions.last_contact_ms(1) or 0) > new.activated_at_ms,
                               FAILOVER_DEADLINE_S, "the broker to heartbeat with the new active controller")
        async with Admin(cluster.bootstrap) as admin:
            assert await acl_admin.describe_acls(admin, EVERY_ACL) == [BOB_READS]
            assert await acl_admin.delete_acls(admin, [EVERY_ACL]) == [BOB_READS]
            assert await acl_admin.describe_acls(admin, EVERY_ACL) == []
        assert list(new.metadata.acls) == []
    finally:
        await cluster.stop()
