"""Who may perform cluster actions (server/auth.py ClusterMembers) and how a node logs in to another's listener
(server/inter_broker.py), as table tests; and the broker's and controller's config keys for them."""

import pytest

from replog.broker.config import config_from_properties
from replog.controller.process import controller_config
from replog.server.auth import ClusterMembers, Session
from replog.server.inter_broker import NodeIdentity, node_sasl_credentials
from replog.server.listener_config import SecurityProtocol
from replog.server.sasl import Authenticated

NODES = frozenset({"User:broker", "User:controller", "User:admin"})


@pytest.mark.parametrize("members, principal, allowed", [
    (ClusterMembers(NODES, restricted=True), "User:broker", True),
    (ClusterMembers(NODES, restricted=True), "User:alice", False),
    (ClusterMembers(NODES, restricted=True), "User:ANONYMOUS", False),
    (ClusterMembers(frozenset(), restricted=True), "User:broker", False),  # only inter.broker.secret makes a node
    (ClusterMembers(frozenset(), restricted=False), "User:alice", True),  # no authorizer: Kafka allows all
    (ClusterMembers(frozenset({"User:CN=broker"}), restricted=True), "User:CN=broker", True),
])
def test_cluster_members(members, principal, allowed):
    assert members.may_act_for_cluster(principal) is allowed


def test_a_session_acts_for_the_cluster_by_its_principal_or_the_shared_secret():
    members = ClusterMembers(NODES, restricted=True)
    session = Session(members=members)
    session.authenticated(Authenticated("User:alice"), now=0.0)
    assert not session.cluster_action
    session = Session(members=members)
    session.authenticated(Authenticated("User:broker-2", cluster_action=True), now=0.0)  # inter.broker.secret
    assert session.cluster_action
    session = Session(members=members)
    session.identified_by_certificate("User:broker")
    assert session.principal == "User:broker" and session.cluster_action


SASL_USER = NodeIdentity("broker-1", "broker", "pw")
SECRET_ONLY = NodeIdentity("broker-1", secret="shared")
NOTHING = NodeIdentity("broker-1")


@pytest.mark.parametrize("protocol, identity, mechanism, expected", [
    (SecurityProtocol.SASL_SSL, SASL_USER, "SCRAM-SHA-512", ("SCRAM-SHA-512", "broker", "pw")),
    (SecurityProtocol.SASL_PLAINTEXT, SASL_USER, "PLAIN", ("PLAIN", "broker", "pw")),
    (SecurityProtocol.SASL_SSL, SECRET_ONLY, "PLAIN", ("PLAIN", "broker-1", "shared")),
    (SecurityProtocol.PLAINTEXT, SECRET_ONLY, "PLAIN", ("PLAIN", "broker-1", "shared")),  # optional SASL
    (SecurityProtocol.SSL, SASL_USER, "PLAIN", None),  # mTLS: the certificate is the login
    (SecurityProtocol.SSL, NOTHING, "PLAIN", None),
    (SecurityProtocol.PLAINTEXT, NOTHING, "PLAIN", None),
])
def test_node_logins(protocol, identity, mechanism, expected):
    credentials = node_sasl_credentials(protocol, identity, mechanism, link="l")
    assert (None if credentials is None else (credentials.mechanism, credentials.username,
                                              credentials.password)) == expected


@pytest.mark.parametrize("identity, mechanism", [(SECRET_ONLY, "SCRAM-SHA-512"), (NOTHING, "PLAIN")])
def test_a_sasl_listener_needs_a_credential_it_takes(identity, mechanism):
    with pytest.raises(ValueError, match="inter.broker.sasl.username"):
        node_sasl_credentials(SecurityProtocol.SASL_SSL, identity, mechanism, link="l")


SCRAM_BROKER = {"controller.quorum.bootstrap.servers": "h:2", "listeners": "SASL_SSL://h:1",
                "sasl.enabled.mechanisms": "SCRAM-SHA-512", "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
                "inter.broker.sasl.username": "broker", "inter.broker.sasl.password": "pw",
                "super.users": "User:broker;User:controller",
                "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"}


def test_a_broker_logs_in_to_brokers_with_scram_and_needs_no_secret():
    config = config_from_properties(SCRAM_BROKER)
    assert config.inter_broker_secret is None and config.unknown_keys == ()
    assert config.cluster_members() == ClusterMembers(frozenset({"User:broker", "User:controller"}), True)
    assert config.controller_protocol() == ("CONTROLLER", SecurityProtocol.PLAINTEXT)


@pytest.mark.parametrize("change, message", [
    ({"sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256"}, "log in with SCRAM-SHA-256"),
    ({"inter.broker.sasl.password": ""}, "inter.broker.sasl.username and inter.broker.sasl.password go together"),
    ({"sasl.mechanism.controller.protocol": "GSSAPI"}, "expected one of"),
    ({"controller.listener.names": "CONTROLLER", "listener.security.protocol.map":
      "SASL_SSL:SASL_SSL,CONTROLLER:SASL_SSL", "sasl.mechanism.controller.protocol": "SCRAM-SHA-512",
      "inter.broker.sasl.username": "", "inter.broker.sasl.password": "", "inter.broker.secret": "s",
      "sasl.mechanism.inter.broker.protocol": "PLAIN", "sasl.enabled.mechanisms": "PLAIN"},
     "controller listener is SASL_SSL with SCRAM-SHA-512"),
])
def test_a_broker_refuses_node_logins_that_cannot_work(change, message):
    with pytest.raises(ValueError, match=message):
        config_from_properties({k: v for k, v in {**SCRAM_BROKER, **change}.items() if v})


def test_a_controller_without_a_secret_logs_in_as_its_own_user():
    config = controller_config({"metadata.log.dir": "/tmp/replog-meta", "listeners": "CONTROLLER://127.0.0.1:9093",
                                "inter.broker.sasl.username": "controller", "inter.broker.sasl.password": "pw",
                                "super.users": "User:broker;User:controller"})
    assert config.inter_broker_secret is None
    assert config.controller_link.sasl is None and config.broker_link.sasl is None  # PLAINTEXT links: no SASL
    assert config.members == ClusterMembers(frozenset({"User:broker", "User:controller"}), restricted=False)
    with pytest.raises(ValueError, match="must log in to the other nodes"):
        controller_config({"metadata.log.dir": "/tmp/replog-meta"})


def test_a_link_whose_tls_keys_cannot_load_is_named():
    config = config_from_properties({"controller.quorum.bootstrap.servers": "h:2", "inter.broker.secret": "s",
                                     "controller.listener.names": "CONTROLLER",
                                     "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:SSL",
                                     "ssl.truststore.location": "/nonexistent/ca.pem"})
    with pytest.raises(ValueError, match="TLS to the controller listener CONTROLLER: No such file"):
        config.controller_link_security()
