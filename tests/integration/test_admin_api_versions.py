"""Every version of every admin API replog offers answers a well-formed request with a response that decodes
as that version, on a real broker (each version has its own fields; the handlers serve them all)."""

import pytest

from replog.client.admin import Admin, NewTopic
from replog.protocol.apis import SUPPORTED_APIS, ApiKey

REQUESTS = {
    ApiKey.DESCRIBE_CONFIGS: {"resources": [{"resource_type": 2, "resource_name": "versions",
                                             "configuration_keys": None}],
                              "include_synonyms": True, "include_documentation": True},
    ApiKey.ALTER_CONFIGS: {"resources": [{"resource_type": 2, "resource_name": "versions",
                                          "configs": [{"name": "retention.ms", "value": "1000"}]}],
                           "validate_only": True},
    ApiKey.INCREMENTAL_ALTER_CONFIGS: {"resources": [{"resource_type": 2, "resource_name": "versions", "configs": [
        {"name": "retention.ms", "config_operation": 0, "value": "1000"}]}], "validate_only": True},
    ApiKey.CREATE_PARTITIONS: {"topics": [{"name": "versions", "count": 2, "assignments": None}], "timeout": 5000,
                               "validate_only": True},
    ApiKey.ELECT_LEADERS: {"election_type": 0, "timeout": 5000,
                           "topic_partitions": [{"topic": "versions", "partitions": [0]}]},
    ApiKey.DESCRIBE_CLUSTER: {"include_cluster_authorized_operations": False},
    ApiKey.DELETE_RECORDS: {"topics": [{"name": "versions", "partitions": [{"partition_index": 0, "offset": 0}]}],
                            "timeout": 5000},
    ApiKey.DESCRIBE_LOG_DIRS: {"topics": None},
}
EXPECTED_ERROR = {ApiKey.ELECT_LEADERS: 84}  # ELECTION_NOT_NEEDED: a single node leads already


def _errors(response) -> list[int]:
    """Every error code in a response, wherever the version puts them."""
    codes = []

    def walk(value):
        if isinstance(value, tuple):
            for item in value:
                walk(item)
        elif hasattr(value, "__dataclass_fields__"):
            for name in value.__dataclass_fields__:
                field = getattr(value, name)
                if name == "error_code":
                    codes.append(int(field))
                else:
                    walk(field)
    walk(response)
    return codes


@pytest.mark.parametrize("api_key", sorted(REQUESTS), ids=lambda k: ApiKey(k).name)
async def test_every_version_answers(broker, api_key):
    async with Admin(broker.bootstrap) as admin:
        await admin.create_topics([NewTopic("versions", 1, 1, {})])
        connection = await admin.cluster.any_connection()
        spec = SUPPORTED_APIS[api_key]
        for version in range(spec.min_version, spec.max_version + 1):
            response = await connection.send(api_key, REQUESTS[api_key], version=version)
            assert set(_errors(response)) <= {0, EXPECTED_ERROR.get(api_key, 0)}, (version, response)
            assert _errors(response), (version, response)  # every answer here carries some error code
