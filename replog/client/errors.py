"""Errors the bundled client raises: one exception type carrying the Kafka error code.

Retriability follows Kafka's error table (kio's ErrorCode carries the same flag, generated from Kafka's
Errors.java); the set below only adds codes that the Java client treats as retriable through its
InvalidMetadataException hierarchy or its own network handling.
"""

from kio.schema.errors import ErrorCode

NETWORK_EXCEPTION = ErrorCode.network_exception.value
REQUEST_TIMED_OUT = ErrorCode.request_timed_out.value
UNSUPPORTED_VERSION = ErrorCode.unsupported_version.value
CLUSTER_AUTHORIZATION_FAILED = ErrorCode.cluster_authorization_failed.value

# Codes after which the cached leader is probably wrong: the caller should refresh metadata before a retry.
STALE_METADATA_CODES = frozenset(
    code.value
    for code in (
        ErrorCode.not_leader_or_follower,
        ErrorCode.leader_not_available,
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.fenced_leader_epoch,
        ErrorCode.unknown_leader_epoch,
        ErrorCode.kafka_storage_error,
        ErrorCode.replica_not_available,
        ErrorCode.network_exception,
    )
)

_EXTRA_RETRIABLE = frozenset(
    code.value
    for code in (
        ErrorCode.fenced_leader_epoch,
        ErrorCode.unknown_leader_epoch,
        ErrorCode.not_enough_replicas,
        ErrorCode.not_enough_replicas_after_append,
        ErrorCode.kafka_storage_error,
        ErrorCode.network_exception,
        ErrorCode.request_timed_out,
    )
)


def error_name(code: int) -> str:
    try:
        return ErrorCode(code).name.upper()
    except ValueError:
        return f"UNKNOWN_ERROR_CODE_{code}"


def is_retriable(code: int) -> bool:
    if code in _EXTRA_RETRIABLE:
        return True
    try:
        return ErrorCode(code).retriable
    except ValueError:
        return False


class KafkaError(Exception):
    """A Kafka error code from a broker, or one the client assigns to a local failure (timeouts, disconnects)."""

    def __init__(self, code: int, message: str = "") -> None:
        assert code != 0, "error code 0 means success"
        self.code = int(code)
        self.name = error_name(self.code)
        self.retriable = is_retriable(self.code)
        self.message = message
        super().__init__(f"{self.name} ({self.code}){': ' + message if message else ''}")


def check(code: int, message: str = "") -> None:
    """Raise KafkaError unless code is 0 (NONE)."""
    if code != 0:
        raise KafkaError(code, message)
