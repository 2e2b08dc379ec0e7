"""CLUSTER_ACTION granted by an ACL (Kafka authorizes it like any operation): what only nodes send is allowed
to a principal the current ACLs allow it, from the hosts they name, unless a DENY says otherwise; unlike a node
principal (a super user), such a principal passes no other check."""

import pytest

from replog.broker.access import Access
from replog.controller.cluster import ClusterMetadata
from replog.controller.server import ClusterController, ControllerConfig
from replog.protocol.headers import RequestHeader
from replog.security.acls import CLUSTER_NAME, AclBinding, Operation, PatternType, Permission, ResourceType
from replog.security.authorizer import AclIndex, Authorizer, AuthorizerConfig, cluster_action_grants
from replog.server.auth import ClusterMembers, Session
from replog.server.dispatch import RequestContext

CONFIG = AuthorizerConfig(True, frozenset({"User:broker"}), allow_everyone_if_no_acl_found=False)


def cluster_acl(principal: str, host: str = "*", operation: Operation = Operation.CLUSTER_ACTION,
                permission: Permission = Permission.ALLOW) -> AclBinding:
    return AclBinding(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL, principal, host, operation, permission)


def context(principal: str, members: ClusterMembers, peer: str = "10.0.0.1:5000") -> RequestContext:
    session = Session(members=members)
    session.identified_by_certificate(principal)
    return RequestContext(RequestHeader(1, 12, 1, "c", 0), bytearray(), peer, lambda: None, session)


def members_with(acls: AclIndex) -> ClusterMembers:
    return ClusterMembers(CONFIG.super_users, acl_allows_cluster_action=cluster_action_grants(Authorizer(CONFIG, acls)))


@pytest.mark.parametrize(
    ("bindings", "principal", "peer", "allowed"),
    [
        ([], "User:broker", "10.0.0.1:1", True),  # a node principal needs no ACL
        ([], "User:alice", "10.0.0.1:1", False),
        ([cluster_acl("User:alice")], "User:alice", "10.0.0.1:1", True),
        ([cluster_acl("User:*")], "User:alice", "10.0.0.1:1", True),
        ([cluster_acl("User:alice", operation=Operation.ALL)], "User:alice", "10.0.0.1:1", True),
        ([cluster_acl("User:alice", host="10.0.0.2")], "User:alice", "10.0.0.1:1", False),
        ([cluster_acl("User:alice", host="10.0.0.2")], "User:alice", "10.0.0.2:1", True),
        ([cluster_acl("User:alice"), cluster_acl("User:alice", permission=Permission.DENY)], "User:alice",
         "10.0.0.1:1", False),
        ([cluster_acl("User:alice", operation=Operation.ALTER)], "User:alice", "10.0.0.1:1", False),
        ([cluster_acl("User:bob")], "User:alice", "10.0.0.1:1", False),
    ],
)
def test_cluster_action_by_acl(bindings, principal, peer, allowed):
    assert context(principal, members_with(AclIndex(bindings)), peer).may_act_for_cluster is allowed


def test_the_grant_follows_the_current_acls():
    acls = AclIndex()
    ctx = context("User:alice", members_with(acls))
    assert not ctx.may_act_for_cluster
    acls.add(cluster_acl("User:alice"))
    assert ctx.may_act_for_cluster
    acls.remove(cluster_acl("User:alice"))
    assert not ctx.may_act_for_cluster


def test_a_granted_principal_passes_no_other_check_unlike_a_node():
    acls = AclIndex([cluster_acl("User:alice")])
    access = Access(Authorizer(CONFIG, acls))
    alice, broker = context("User:alice", members_with(acls)), context("User:broker", members_with(acls))
    assert alice.may_act_for_cluster and broker.may_act_for_cluster
    assert not access.allows(alice, Operation.READ, ResourceType.TOPIC, "payments")
    assert access.allows(broker, Operation.READ, ResourceType.TOPIC, "payments")


def test_without_an_authorizer_no_acl_grants_it():
    members = ClusterMembers(frozenset(), restricted=True)  # inter.broker.secret alone: only its holders
    assert not context("User:alice", members).may_act_for_cluster


def test_a_controller_grants_it_by_the_acls_of_the_metadata_it_has_replayed(tmp_path):
    controller = ClusterController(ControllerConfig(inter_broker_secret="s", metadata_log_dir=tmp_path / "meta",
                                                    authorizer=CONFIG))
    assert not controller.acl_allows_cluster_action("User:alice", "10.0.0.1")  # KIP-801: only super users
    controller.metadata.acls.add(cluster_acl("User:alice"))
    assert controller.acl_allows_cluster_action("User:alice", "10.0.0.1")
    controller.metadata = ClusterMetadata()  # a new active controller's, replayed from the log
    assert not controller.acl_allows_cluster_action("User:alice", "10.0.0.1")
