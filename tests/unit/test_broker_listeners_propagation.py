"""Every listener a broker registers reaches every broker: the controller keeps them in the registration (and
its metadata log), sends them all in UpdateMetadata, and a broker's image keeps each broker's address per
listener name, so Metadata can answer with the listener a client came in on."""

from replog.broker.metadata import MetadataImage
from replog.controller import records
from replog.controller.broker_requests import update_metadata_request
from replog.controller.cluster import BrokerRegistration, ClusterMetadata
from replog.protocol import control

SECURED = BrokerRegistration(1, "10.0.0.1", 9092, listeners=(("PLAINTEXT", "10.0.0.1", 9092, 0),
                                                               ("SASL_SSL", "kafka-1.example", 9094, 3)))
OLD = BrokerRegistration(2, "10.0.0.2", 9092)  # registered before brokers sent every listener


def test_registrations_keep_their_listeners_through_the_metadata_log():
    replayed = ClusterMetadata()
    records.replay([records.controller_epoch_record(1), records.broker_record(SECURED)], replayed)
    assert replayed.brokers[1].listeners == SECURED.listeners


def test_a_record_without_listeners_replays_as_before():
    record = records.broker_record(OLD)
    del record["listeners"]
    replayed = ClusterMetadata()
    records.replay([records.controller_epoch_record(1), record], replayed)
    assert replayed.brokers[2].listeners == ()


def update_metadata() -> control.UpdateMetadataRequest:
    metadata = ClusterMetadata()
    metadata.add_broker(SECURED)
    metadata.add_broker(OLD)
    return update_metadata_request(3000, 1, SECURED, metadata)


def test_update_metadata_carries_every_listener_inter_broker_first():
    endpoints = {b.id: [(e.listener, e.host, e.port, e.security_protocol) for e in b.endpoints]
                 for b in update_metadata().live_brokers}
    assert endpoints == {1: [("PLAINTEXT", "10.0.0.1", 9092, 0), ("SASL_SSL", "kafka-1.example", 9094, 3)],
                         2: [("PLAINTEXT", "10.0.0.2", 9092, 0)]}


def test_a_brokers_image_answers_per_listener():
    image = MetadataImage("cluster", 3000)
    wire = control.encode_update_metadata_request(update_metadata())  # as the broker receives it
    image.apply_update_metadata(control.decode_update_metadata_request(memoryview(wire), 0))
    secured, old = image.brokers[1], image.brokers[2]
    assert (secured.host, secured.port) == ("10.0.0.1", 9092)  # the inter-broker address
    assert secured.address_for("SASL_SSL") == ("kafka-1.example", 9094)
    assert secured.address_for("PLAINTEXT") == ("10.0.0.1", 9092)
    assert old.address_for("SASL_SSL") == ("10.0.0.2", 9092)  # only its one address is known
