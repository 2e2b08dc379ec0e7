"""The group coordinator's settings, under Kafka's names and with Kafka's defaults
(GroupCoordinatorConfig)."""

from __future__ import annotations

from dataclasses import dataclass, fields

INT32_MAX = 2**31 - 1


@dataclass(frozen=True, slots=True)
class GroupCoordinatorConfig:
    group_initial_rebalance_delay_ms: int = 3000
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1_800_000
    group_max_size: int = INT32_MAX
    offsets_retention_minutes: int = 10080
    offsets_retention_check_interval_ms: int = 600_000
    offsets_topic_num_partitions: int = 50
    offsets_topic_replication_factor: int = 3
    offsets_topic_segment_bytes: int = 104_857_600
    offsets_commit_timeout_ms: int = 5000
    offset_metadata_max_bytes: int = 4096
    # replog's own bound, not Kafka's: the most protocol metadata (all of a member's protocols) one
    # JoinGroup may carry. Kafka has none and fails later, when the group's record is too large for
    # __consumer_offsets; refusing at the join keeps a member from growing the group's state unchecked.
    group_max_member_metadata_bytes: int = 1_048_576
    # Kafka's GroupCoordinator.NewMemberJoinTimeoutMs, a constant there: a new member's JoinGroup waits
    # at most this long, as it cannot heartbeat before it knows its member id.
    group_new_member_join_timeout_ms: int = 300_000

    def __post_init__(self) -> None:
        assert 0 <= self.group_initial_rebalance_delay_ms
        assert 0 < self.group_min_session_timeout_ms <= self.group_max_session_timeout_ms
        assert 0 < self.group_max_size <= INT32_MAX
        assert 0 < self.offsets_topic_num_partitions
        assert 0 < self.offsets_retention_minutes

    @property
    def offsets_retention_ms(self) -> int:
        return self.offsets_retention_minutes * 60_000

    @classmethod
    def property_names(cls) -> frozenset[str]:
        return frozenset(f.name.replace("_", ".") for f in fields(cls))

    @classmethod
    def from_properties(cls, properties: dict[str, str]) -> GroupCoordinatorConfig:
        """From server.properties-style names (group.max.size=...); names of other components are ignored."""
        known = {f.name.replace("_", "."): f.name for f in fields(cls)}
        values = {}
        for name, value in properties.items():
            if name in known:
                try:
                    values[known[name]] = int(value)
                except ValueError as e:
                    raise ValueError(f"invalid value for {name}: {value!r}") from e
        try:
            return cls(**values)
        except AssertionError as e:
            raise ValueError(f"group coordinator settings out of range: {values}") from e
