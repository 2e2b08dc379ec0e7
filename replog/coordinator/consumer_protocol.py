"""Just enough of the consumer's embedded protocol (ConsumerProtocolSubscription) to learn which topics a
consumer group subscribes to. The coordinator otherwise passes member metadata through untouched.

Layout: int16 version, then in every version the topics (int32 count, int16-length strings) first; later
versions only append fields, so reading the prefix works for all of them, as Kafka's coordinator does.
"""

from replog.protocol.primitives import DecodeError, Reader


def subscription_topics(metadata: bytes) -> list[str]:
    """The topics of a ConsumerProtocolSubscription; DecodeError if the bytes are not one."""
    r = Reader(metadata)
    if r.int16() < 0:
        raise DecodeError("negative consumer protocol version")
    count = r.array_length(compact=False)
    if count < 0:
        raise DecodeError("null topics array")
    return [r.string(compact=False) for _ in range(count)]
