"""Kafka's rules for topic names (Topic.validate), the same for every client and server."""

import re

MAX_TOPIC_NAME_LENGTH = 249
# The group coordinator's internal topic (Kafka's Topic.GROUP_METADATA_TOPIC_NAME).
OFFSETS_TOPIC = "__consumer_offsets"
_LEGAL_TOPIC_NAME = re.compile(r"^[a-zA-Z0-9._-]+$")


def topic_name_error(name: str) -> str | None:
    """Why a topic name is illegal (Kafka's Topic.validate rules), or None."""
    if not name or name in (".", ".."):
        return f"topic name {name!r} is illegal"
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        return f"topic name is longer than {MAX_TOPIC_NAME_LENGTH} characters"
    if not _LEGAL_TOPIC_NAME.match(name):
        return f"topic name {name!r} has characters other than ASCII alphanumerics, '.', '_' and '-'"
    return None
