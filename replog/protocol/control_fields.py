"""Field helpers shared by the hand-written controller-to-broker codecs (control.py): compact arrays that are
never null, int32 lists, the end-of-struct check, and replog's tagged-field extension that carries topic and
broker configs and ACLs (see control.py for why)."""

from .primitives import DecodeError, Reader, Writer

Buffer = bytes | bytearray | memoryview

# replog's extension: a LeaderAndIsr or UpdateMetadata topic state carries the topic's configs
# (min.insync.replicas, retention...) in a tagged field, which Kafka's decoders skip as unknown. ZooKeeper-mode
# brokers read them from ZooKeeper; replog brokers have no other source. A high tag keeps clear of Kafka's own
# numbering.
TAG_TOPIC_CONFIGS = 10_000


def read_count(r: Reader, name: str) -> int:
    """A compact array's length. No array in these schemas is nullable, so a null (-1) is malformed."""
    n = r.array_length(compact=True)
    if n < 0:
        raise DecodeError(f"null {name}, which is not nullable")
    return n


def write_int32s(w: Writer, values: list[int]) -> None:
    w.array_length(len(values), compact=True)
    for v in values:
        w.int32(v)


def read_int32s(r: Reader, name: str) -> list[int]:
    return [r.int32() for _ in range(read_count(r, name))]


def encode_configs(configs: dict[str, str]) -> bytes:
    w = Writer()
    w.array_length(len(configs), compact=True)
    for key, value in sorted(configs.items()):
        w.string(key, compact=True)
        w.string(value, compact=True)
    return bytes(w.buf)


def decode_configs(buf: memoryview) -> dict[str, str]:
    r = Reader(buf)
    configs = {}
    for _ in range(read_count(r, "TopicConfigs")):
        key = r.string(compact=True)
        configs[key] = r.string(compact=True)
    expect_end(r, "TopicConfigs")
    return configs


def encode_broker_configs(by_entity: dict[str, dict[str, str]]) -> bytes:
    w = Writer()
    w.array_length(len(by_entity), compact=True)
    for entity, configs in sorted(by_entity.items()):
        w.string(entity, compact=True)
        w.buf += encode_configs(configs)
    return bytes(w.buf)


def decode_broker_configs(buf: memoryview) -> dict[str, dict[str, str]]:
    r = Reader(buf)
    by_entity = {}
    for _ in range(read_count(r, "BrokerConfigs")):
        entity = r.string(compact=True)
        configs = {}
        for _ in range(read_count(r, "Configs")):
            key = r.string(compact=True)
            configs[key] = r.string(compact=True)
        by_entity[entity] = configs
    expect_end(r, "BrokerConfigs")
    return by_entity


# One SCRAM credential as UpdateMetadata carries it: (mechanism, user, salt, stored key, server key, iterations).
ScramEntry = tuple[str, str, bytes, bytes, bytes, int]


def encode_scram_credentials(entries: list[ScramEntry]) -> bytes:
    w = Writer()
    w.array_length(len(entries), compact=True)
    for mechanism, user, salt, stored_key, server_key, iterations in entries:
        w.string(mechanism, compact=True)
        w.string(user, compact=True)
        for field in (salt, stored_key, server_key):
            w.bytes_length(len(field), compact=True)
            w.buf += field
        w.int32(iterations)
    return bytes(w.buf)


def decode_scram_credentials(buf: memoryview) -> list[ScramEntry]:
    r = Reader(buf)
    entries = []
    for _ in range(read_count(r, "ScramCredentials")):
        mechanism, user = r.string(compact=True), r.string(compact=True)
        fields = []
        for name in ("Salt", "StoredKey", "ServerKey"):
            field = r.nullable_bytes(compact=True)
            if field is None:
                raise DecodeError(f"null {name} in a SCRAM credential")
            fields.append(bytes(field))
        entries.append((mechanism, user, fields[0], fields[1], fields[2], r.int32()))
    expect_end(r, "ScramCredentials")
    return entries
# An ACL binding as UpdateMetadata carries it (tag 10_002): resource type, resource name, pattern type,
# principal, host, operation, permission; the int8 codes of Kafka's AclBinding (replog/security/acls.py).
AclTuple = tuple[int, str, int, str, str, int, int]


def encode_acls(acls: list[AclTuple]) -> bytes:
    w = Writer()
    w.array_length(len(acls), compact=True)
    for resource_type, name, pattern, principal, host, operation, permission in acls:
        w.int8(resource_type)
        w.string(name, compact=True)
        w.int8(pattern)
        w.string(principal, compact=True)
        w.string(host, compact=True)
        w.int8(operation)
        w.int8(permission)
    return bytes(w.buf)


def decode_acls(buf: memoryview) -> list[AclTuple]:
    r = Reader(buf)
    acls = [(r.int8(), r.string(compact=True), r.int8(), r.string(compact=True), r.string(compact=True), r.int8(),
             r.int8()) for _ in range(read_count(r, "Acls"))]
    expect_end(r, "Acls")
    return acls


def expect_end(r: Reader, name: str) -> None:
    if r.remaining:
        raise DecodeError(f"{r.remaining} trailing bytes after {name}")
