"""Storage-layer exceptions; each names the Kafka error code the broker answers with."""

from __future__ import annotations

from kio.schema.errors import ErrorCode


class LogError(Exception):
    error_code: ErrorCode = ErrorCode.unknown_server_error


class OffsetOutOfRangeError(LogError):
    error_code = ErrorCode.offset_out_of_range


class RecordTooLargeError(LogError):
    # Kafka's RecordTooLargeException travels as MESSAGE_TOO_LARGE.
    error_code = ErrorCode.message_too_large


class UnexpectedAppendOffsetError(LogError):
    """A follower append does not start at the log end offset (a fetcher bug)."""

    error_code = ErrorCode.unknown_server_error


class CorruptIndexError(LogError):
    """An index file failed its sanity check; the segment rebuilds it."""

    error_code = ErrorCode.kafka_storage_error


class CorruptCheckpointError(LogError):
    """A checkpoint file is malformed; it is never silently ignored."""

    error_code = ErrorCode.kafka_storage_error


class InconsistentTopicIdError(LogError):
    error_code = ErrorCode.inconsistent_topic_id


class StorageError(LogError, OSError):
    """An OSError from the disk, raised `from` the original one."""

    error_code = ErrorCode.kafka_storage_error


class InvalidProducerEpochError(LogError):
    error_code = ErrorCode.invalid_producer_epoch


class OutOfOrderSequenceError(LogError):
    error_code = ErrorCode.out_of_order_sequence_number
