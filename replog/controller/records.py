"""The controller's metadata records: what it writes to its metadata log, and how replay rebuilds its state.

Like KRaft's metadata records, each record carries a whole entity's new state (a broker registration, a
topic, a partition registration), so replaying them in order rebuilds the controller's state exactly, and
a snapshot is just one record per live entity. Records are plain JSON-ready dicts; quorum.py stores
them without looking inside.
"""

import base64
import uuid
from collections.abc import Iterable
from typing import Any

from replog.security.acls import AclBinding
from replog.server.sasl import ScramCredential

from .cluster import BrokerRegistration, ClusterMetadata, ControllerError, TopicRegistration
from .registry import LeaderRecoveryState, PartitionRegistration

Record = dict[str, Any]


class CorruptMetadataError(Exception):
    """A record that is well-formed JSON but not a record this controller wrote: it refuses to start."""


def controller_epoch_record(epoch: int) -> Record:
    return {"type": "controller_epoch", "epoch": epoch}


def broker_record(b: BrokerRegistration) -> Record:
    return {"type": "broker", "broker_id": b.broker_id, "host": b.host, "port": b.port, "epoch": b.epoch,
            "incarnation_id": None if b.incarnation_id is None else str(b.incarnation_id), "rack": b.rack,
            "fenced": b.fenced, "in_controlled_shutdown": b.in_controlled_shutdown,
            "listeners": [list(listener) for listener in b.listeners]}


def topic_record(t: TopicRegistration) -> Record:
    return {"type": "topic", "name": t.name, "topic_id": str(t.topic_id), "configs": t.configs}


def partition_record(p: PartitionRegistration) -> Record:
    return {"type": "partition", "topic": p.topic, "topic_id": str(p.topic_id), "partition": p.partition,
            "replicas": list(p.replicas), "isr": list(p.isr), "leader": p.leader, "leader_epoch": p.leader_epoch,
            "partition_epoch": p.partition_epoch, "leader_recovery_state": int(p.leader_recovery_state),
            "adding_replicas": list(p.adding_replicas), "removing_replicas": list(p.removing_replicas)}


def remove_topic_record(name: str) -> Record:
    return {"type": "remove_topic", "name": name}


def config_record(resource_type: str, name: str, configs: dict[str, str]) -> Record:
    """An entity's whole set of overrides: resource_type "topic" or "broker" (name "" is the cluster default)."""
    return {"type": "config", "resource_type": resource_type, "name": name, "configs": dict(configs)}


def scram_credential_record(mechanism: str, user: str, c: ScramCredential) -> Record:
    """KRaft's UserScramCredentialRecord, with the stored and server keys in place of the salted password."""
    b64 = base64.b64encode
    return {"type": "scram_credential", "mechanism": mechanism, "name": user, "salt": b64(c.salt).decode(),
            "stored_key": b64(c.stored_key).decode(), "server_key": b64(c.server_key).decode(),
            "iterations": c.iterations}


def remove_scram_credential_record(mechanism: str, user: str) -> Record:
    """KRaft's RemoveUserScramCredentialRecord."""
    return {"type": "remove_scram_credential", "mechanism": mechanism, "name": user}


def bootstrap_record() -> Record:
    """Marks the cluster's first records (bootstrap.scram.credentials) as written: never again."""
    return {"type": "bootstrap"}
def acl_record(binding: AclBinding) -> Record:
    """A binding created (KRaft's AccessControlEntryRecord). A binding is its own identity: replog keeps
    each once, as Kafka ignores the creation of one that exists."""
    return {"type": "acl", "binding": binding.to_json()}


def remove_acl_record(binding: AclBinding) -> Record:
    """A binding deleted (KRaft's RemoveAccessControlEntryRecord)."""
    return {"type": "remove_acl", "binding": binding.to_json()}


def new_topic_records(topic: TopicRegistration) -> list[Record]:
    return [topic_record(topic)] + [partition_record(p) for p in topic.partitions.values()]


def snapshot_records(controller_epoch: int, metadata: ClusterMetadata) -> list[Record]:
    """Records that rebuild `metadata` and the controller epoch on their own."""
    records = [controller_epoch_record(controller_epoch)]
    records += [broker_record(b) for _, b in sorted(metadata.brokers.items())]
    records += [config_record("broker", name, configs) for name, configs in sorted(metadata.broker_configs.items())]
    records += [bootstrap_record()] if metadata.bootstrapped else []
    records += [scram_credential_record(m, user, c) for m, user, c in metadata.scram.items()]
    for topic in metadata.topics.values():
        records += new_topic_records(topic)
    records += [acl_record(binding) for binding in sorted(metadata.acls)]
    return records


def replay(records: Iterable[Record], metadata: ClusterMetadata) -> int:
    """Apply `records` in order to an empty `metadata`; returns the last controller epoch (0 if none)."""
    controller_epoch = 0
    for record in records:
        try:
            kind = record["type"]
            if kind == "controller_epoch":
                controller_epoch = int(record["epoch"])
            elif kind == "broker":
                metadata.brokers[record["broker_id"]] = _broker(record)
            elif kind == "topic":
                metadata.add_topic(TopicRegistration(record["name"], uuid.UUID(record["topic_id"]),
                                                     dict(record["configs"])))
            elif kind == "partition":
                metadata.apply([_partition(record)])
            elif kind == "config":
                _apply_config(record, metadata)
            elif kind == "remove_topic":
                metadata.delete_topic(record["name"])
            elif kind == "scram_credential":
                metadata.scram.put(record["mechanism"], record["name"], ScramCredential(
                    *(base64.b64decode(record[k], validate=True) for k in ("salt", "stored_key", "server_key")),
                    int(record["iterations"])))
            elif kind == "remove_scram_credential":
                metadata.scram.remove(record["mechanism"], record["name"])
            elif kind == "bootstrap":
                metadata.bootstrapped = True
            elif kind == "acl":
                metadata.acls.add(AclBinding.from_json(record["binding"]))
            elif kind == "remove_acl":
                metadata.acls.remove(AclBinding.from_json(record["binding"]))
            else:
                raise CorruptMetadataError(f"unknown record type {kind!r}")
        except (KeyError, TypeError, ValueError, AssertionError, ControllerError) as e:
            raise CorruptMetadataError(f"cannot replay {record!r}: {e!r}") from e
    return controller_epoch


def _apply_config(r: Record, metadata: ClusterMetadata) -> None:
    configs = {str(k): str(v) for k, v in r["configs"].items()}
    if r["resource_type"] == "topic":
        metadata.topics[r["name"]].configs = configs
    elif r["resource_type"] == "broker":
        if configs:
            metadata.broker_configs[str(r["name"])] = configs
        else:
            metadata.broker_configs.pop(str(r["name"]), None)
    else:
        raise ValueError(f"unknown config resource type {r['resource_type']!r}")


def _broker(r: Record) -> BrokerRegistration:
    incarnation = r["incarnation_id"]
    return BrokerRegistration(int(r["broker_id"]), r["host"], int(r["port"]), int(r["epoch"]),
                              None if incarnation is None else uuid.UUID(incarnation), r["rack"], bool(r["fenced"]),
                              bool(r["in_controlled_shutdown"]),
                              # absent from records written before brokers registered every listener
                              tuple((str(n), str(h), int(p), int(s)) for n, h, p, s in r.get("listeners", ())))


def _partition(r: Record) -> PartitionRegistration:
    return PartitionRegistration(r["topic"], uuid.UUID(r["topic_id"]), int(r["partition"]), tuple(r["replicas"]),
                                 tuple(r["isr"]), int(r["leader"]), int(r["leader_epoch"]), int(r["partition_epoch"]),
                                 LeaderRecoveryState(r["leader_recovery_state"]),
                                 # absent from records written before reassignments (KIP-455) existed
                                 tuple(r.get("adding_replicas", ())), tuple(r.get("removing_replicas", ())))
