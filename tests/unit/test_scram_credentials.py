"""SCRAM credentials in the metadata log (KIP-554): Kafka's rules for Describe/AlterUserScramCredentials, keys
derived from a client's salted password that log a real SCRAM client in, records that replay, the UpdateMetadata
field that carries them, and the bootstrap credentials of a new cluster."""

import base64

import pytest
import scramp

from replog.broker.local_controller import STATE_FILE, LocalController
from replog.broker.metadata import MetadataImage
from replog.controller import records
from replog.controller.cluster import ClusterMetadata
from replog.controller.scram import bootstrap_records, change_records
from replog.protocol.control import (
    UpdateMetadataRequest,
    decode_update_metadata_request,
    encode_update_metadata_request,
)
from replog.server.sasl import ScramExchange
from replog.server.scram_credentials import (
    DUPLICATE_RESOURCE,
    NONE,
    RESOURCE_NOT_FOUND,
    UNACCEPTABLE_CREDENTIAL,
    UNSUPPORTED_SASL_MECHANISM,
    Deletion,
    ScramCredentialTable,
    Upsertion,
    decide_alterations,
    derive_credential,
    describe,
    parse_bootstrap_credentials,
    salted_password,
)

SHA256, SHA512 = 1, 2
SALT = b"s" * 32


def upsert(name: str, mechanism: int = SHA512, iterations: int = 4096, password: str = "pw") -> Upsertion:
    name_of = {SHA256: "SCRAM-SHA-256", SHA512: "SCRAM-SHA-512"}
    salted = salted_password(name_of.get(mechanism, "SCRAM-SHA-512"), password, SALT, iterations)
    return Upsertion(name, mechanism, iterations, SALT, salted)


def table_with(*entries: tuple[str, str]) -> ScramCredentialTable:
    table = ScramCredentialTable()
    for mechanism, user in entries:
        table.put(mechanism, user, derive_credential(mechanism, SALT, b"x" * 32, 4096))
    return table


def login(table, mechanism: str, user: str, password: str) -> str:
    """A full SCRAM exchange of scramp's client against the server's exchange; returns the principal."""
    client = scramp.ScramClient([mechanism], user, password)
    exchange = ScramExchange(mechanism, table)
    server_first, _ = exchange.step(client.get_client_first().encode())
    client.set_server_first(server_first.decode())
    server_final, who = exchange.step(client.get_client_final().encode())
    client.set_server_final(server_final.decode())
    return who.principal


@pytest.mark.parametrize("mechanism, code", [("SCRAM-SHA-256", SHA256), ("SCRAM-SHA-512", SHA512)])
def test_keys_derived_from_the_salted_password_log_a_scram_client_in(mechanism, code):
    table = ScramCredentialTable()
    for change in decide_alterations(table, [], [upsert("alice", code, 8192, "alice-secret")])[1]:
        credential = derive_credential(mechanism, change.salt, change.salted_password, change.iterations)
        table.put(mechanism, "alice", credential)
    assert login(table, mechanism, "alice", "alice-secret") == "User:alice"


@pytest.mark.parametrize("deletions, upsertions, existing, expected", [
    ([], [upsert("alice")], [], [("alice", NONE)]),
    ([], [upsert("alice", iterations=4095)], [], [("alice", UNACCEPTABLE_CREDENTIAL)]),
    ([], [upsert("alice", iterations=16385)], [], [("alice", UNACCEPTABLE_CREDENTIAL)]),
    ([], [upsert("alice", mechanism=0)], [], [("alice", UNSUPPORTED_SASL_MECHANISM)]),
    ([], [upsert("alice", mechanism=3)], [], [("alice", UNSUPPORTED_SASL_MECHANISM)]),
    ([], [upsert("")], [], [("", UNACCEPTABLE_CREDENTIAL)]),
    ([Deletion("bob", SHA512)], [], [], [("bob", RESOURCE_NOT_FOUND)]),
    ([Deletion("bob", SHA512)], [], [("SCRAM-SHA-512", "bob")], [("bob", NONE)]),
    # Kafka: one change per user per request, whatever the mechanisms; the user's changes all fail.
    ([], [upsert("alice", SHA256), upsert("alice", SHA512)], [], [("alice", DUPLICATE_RESOURCE)]),
    ([Deletion("bob", SHA256)], [upsert("bob")], [("SCRAM-SHA-256", "bob")], [("bob", DUPLICATE_RESOURCE)]),
    # Users are judged one by one.
    ([Deletion("bob", SHA512)], [upsert("alice")], [], [("alice", NONE), ("bob", RESOURCE_NOT_FOUND)]),
])
def test_alterations_follow_kafkas_rules(deletions, upsertions, existing, expected):
    results, changes = decide_alterations(table_with(*existing), deletions, upsertions)
    assert sorted((r.user, r.error_code) for r in results) == sorted(expected)
    assert sorted(c.name for c in changes) == sorted(user for user, code in expected if code == NONE)


def test_describe_lists_every_user_or_the_named_ones_with_kafkas_errors():
    table = table_with(("SCRAM-SHA-256", "alice"), ("SCRAM-SHA-512", "alice"), ("SCRAM-SHA-512", "bob"))
    assert [(r.user, infos) for r, infos in describe(table, None)] == [
        ("alice", [(SHA256, 4096), (SHA512, 4096)]), ("bob", [(SHA512, 4096)])]
    named = {r.user: (r.error_code, r.error_message) for r, _ in describe(table, ["bob", "carol", "alice", "alice"])}
    assert named["bob"] == (NONE, None)
    assert named["carol"] == (RESOURCE_NOT_FOUND, "Attempt to describe a user credential that does not exist: carol")
    assert named["alice"][0] == DUPLICATE_RESOURCE


def test_records_keep_keys_not_passwords_and_replay_to_the_same_table():
    changes = decide_alterations(ScramCredentialTable(), [], [upsert("alice", password="alice-secret")])[1]
    written = change_records(changes)
    assert "alice-secret" not in repr(written)
    assert base64.b64encode(changes[0].salted_password).decode() not in repr(written)
    metadata = ClusterMetadata()
    records.replay(written, metadata)
    assert login(metadata.scram, "SCRAM-SHA-512", "alice", "alice-secret") == "User:alice"
    rebuilt = ClusterMetadata()
    records.replay(records.snapshot_records(1, metadata), rebuilt)
    assert rebuilt.scram == metadata.scram
    records.replay(change_records([Deletion("alice", SHA512)]), metadata)
    assert len(metadata.scram) == 0


def test_bootstrap_is_marked_so_that_it_is_written_once():
    metadata = ClusterMetadata()
    assert not metadata.bootstrapped
    credentials = parse_bootstrap_credentials("SCRAM-SHA-512=[name=admin,password=admin-secret,iterations=8192]")
    records.replay(bootstrap_records(credentials), metadata)
    assert metadata.bootstrapped
    rebuilt = ClusterMetadata()
    records.replay(records.snapshot_records(1, metadata), rebuilt)
    assert rebuilt.bootstrapped
    assert login(rebuilt.scram, "SCRAM-SHA-512", "admin", "admin-secret") == "User:admin"


def test_bootstrap_credentials_from_a_salted_password_as_kafka_storage_takes_them():
    salted = salted_password("SCRAM-SHA-256", "s3cret", SALT, 4096)
    text = (f"SCRAM-SHA-256=[name=svc,salt={base64.b64encode(SALT).decode()},"
            f"saltedpassword={base64.b64encode(salted).decode()},iterations=4096]")
    [(mechanism, user, credential)] = parse_bootstrap_credentials(text)
    table = ScramCredentialTable()
    table.put(mechanism, user, credential)
    assert login(table, "SCRAM-SHA-256", "svc", "s3cret") == "User:svc"


@pytest.mark.parametrize("text", ["SCRAM-SHA-1=[name=a,password=b]", "SCRAM-SHA-512=[password=b]",
                                  "SCRAM-SHA-512=[name=a]", "SCRAM-SHA-512=[name=a,password=b,iterations=100]"])
def test_bad_bootstrap_credentials_are_refused(text):
    with pytest.raises(ValueError):
        parse_bootstrap_credentials(text)


def test_update_metadata_carries_the_credentials():
    entry = ("SCRAM-SHA-512", "alice", b"salt", b"stored", b"server", 8192)
    request = UpdateMetadataRequest(3000, 1, 5, [], [], scram_credentials=[entry])
    decoded = decode_update_metadata_request(encode_update_metadata_request(request), 0)
    assert decoded.scram_credentials == [entry]


def test_a_single_node_keeps_keys_not_passwords_in_its_state_file_across_restarts(tmp_path):
    first = LocalController(tmp_path, MetadataImage("cluster", 1), node_id=1)
    results = first.alter_scram_credentials([], [upsert("alice", SHA256, password="alice-secret"),
                                                 upsert("bob", password="bob-secret")])
    assert [(r.user, r.error_code) for r in results] == [("alice", NONE), ("bob", NONE)]
    state = (tmp_path / STATE_FILE).read_text()
    assert "alice-secret" not in state and "bob-secret" not in state

    restarted = LocalController(tmp_path, MetadataImage("cluster", 1), node_id=1)
    assert login(restarted.image.scram, "SCRAM-SHA-256", "alice", "alice-secret") == "User:alice"
    assert restarted.image.scram == first.image.scram

    refused = restarted.alter_scram_credentials([Deletion("alice", SHA512)], [])
    assert [(r.user, r.error_code) for r in refused] == [("alice", RESOURCE_NOT_FOUND)]
    restarted.alter_scram_credentials([Deletion("alice", SHA256)], [])
    assert LocalController(tmp_path, MetadataImage("cluster", 1), node_id=1).image.scram.users() == ["bob"]
