"""A forwarded answer is read for NOT_CONTROLLER at any depth (carries_error), so a broker whose forwarding
connection is on a standby moves on to the next controller instead of relaying the refusal for good."""

import pytest
from kio.schema.errors import ErrorCode

from replog.broker.controller_client import carries_error
from replog.protocol.apis import ApiKey
from replog.protocol.messages import decode_response, encode_response

CREATE_TOPICS_VERSION = 5


def _create_topics_answer(*errors: ErrorCode) -> object:
    body = encode_response(ApiKey.CREATE_TOPICS, CREATE_TOPICS_VERSION, {"throttle_time": 0, "topics": [
        {"name": f"t{i}", "topic_id": None, "error_code": error, "error_message": None, "topic_config_error_code": 0,
         "num_partitions": -1, "replication_factor": -1, "configs": []} for i, error in enumerate(errors)]})
    return decode_response(ApiKey.CREATE_TOPICS, CREATE_TOPICS_VERSION, body, 0)


@pytest.mark.parametrize(
    ("errors", "expected"),
    [
        ((ErrorCode.none,), False),
        ((ErrorCode.topic_already_exists,), False),
        ((ErrorCode.not_controller,), True),
        ((ErrorCode.none, ErrorCode.not_controller), True),  # one topic of several
        ((), False),
    ],
)
def test_not_controller_is_found_in_a_nested_error_code(errors, expected):
    assert carries_error(_create_topics_answer(*errors), ErrorCode.not_controller) is expected


def test_a_top_level_error_code_counts_too():
    body = encode_response(ApiKey.ELECT_LEADERS, 2, {"throttle_time": 0, "error_code": ErrorCode.not_controller,
                                                     "replica_election_results": []})
    assert carries_error(decode_response(ApiKey.ELECT_LEADERS, 2, body, 0), ErrorCode.not_controller)
