"""The metadata image: the cluster as the committed metadata records describe it, immutable.

``replay`` is a pure function from an image and one record to the next image;
``image_records`` turns an image back into the records that rebuild it, which is
what a snapshot holds. Every voter and (next increment) every broker folds the
same log into the same image.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import IntEnum
from functools import lru_cache
from types import MappingProxyType
from typing import Any, TypeVar
from uuid import UUID

from kafkette.broker.config import DynamicBrokerConfigs
from kafkette.broker.controller.records.access_control_entry_record import AccessControlEntryRecord
from kafkette.broker.controller.records.broker_registration_change_record import BrokerRegistrationChangeRecord
from kafkette.broker.controller.records.config_record import ConfigRecord
from kafkette.broker.controller.records.feature_level_record import FeatureLevelRecord
from kafkette.broker.controller.records.fence_broker_record import FenceBrokerRecord
from kafkette.broker.controller.records.partition_change_record import PartitionChangeRecord
from kafkette.broker.controller.records.partition_record import PartitionRecord
from kafkette.broker.controller.records.producer_ids_record import ProducerIdsRecord
from kafkette.broker.controller.records.register_broker_record import BrokerEndpoint, RegisterBrokerRecord
from kafkette.broker.controller.records.remove_access_control_entry_record import RemoveAccessControlEntryRecord
from kafkette.broker.controller.records.remove_topic_record import RemoveTopicRecord
from kafkette.broker.controller.records.remove_user_scram_credential_record import RemoveUserScramCredentialRecord
from kafkette.broker.controller.records.topic_record import TopicRecord
from kafkette.broker.controller.records.unfence_broker_record import UnfenceBrokerRecord
from kafkette.broker.controller.records.user_scram_credential_record import UserScramCredentialRecord
from kafkette.broker.protocol.types import Message
from kafkette.broker.security.acl import AclBinding, AclOperation, PatternType, PermissionType, ResourceType
from kafkette.broker.security.scram import ScramCredential

K = TypeVar("K")
V = TypeVar("V")

# PartitionChangeRecord's "leader unchanged" marker.
NO_LEADER_CHANGE = -2


class ConfigResourceType(IntEnum):
    """ConfigResource types as ConfigRecord and the config APIs number them."""

    TOPIC = 2
    BROKER = 4


def _frozen(mapping: dict[K, V]) -> Mapping[K, V]:
    return MappingProxyType(mapping)


_NO_CONFIGS: Mapping[str, str] = _frozen({})


@dataclass(frozen=True, slots=True)
class Endpoint:
    name: str
    host: str
    port: int
    security_protocol: int


@dataclass(frozen=True, slots=True)
class BrokerImage:
    broker_id: int
    epoch: int
    incarnation_id: UUID
    endpoints: tuple[Endpoint, ...]
    rack: str | None
    fenced: bool
    # Set by a controlled-shutdown request; a new registration clears it.
    in_controlled_shutdown: bool = False

    def endpoint(self, listener: str) -> Endpoint | None:
        """The endpoint on `listener`, else the first one (a broker registered before that listener existed)."""
        return next((e for e in self.endpoints if e.name == listener), self.endpoints[0] if self.endpoints else None)

    @property
    def eligible(self) -> bool:
        """May lead partitions and join ISRs: unfenced and not shutting down."""
        return not self.fenced and not self.in_controlled_shutdown


@dataclass(frozen=True, slots=True)
class PartitionImage:
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int
    # An in-flight reassignment (KIP-455): replicas being added (catching up) and being removed (once they have).
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()
    # KIP-966: replicas out of the ISR that still hold every committed record (they left it while it was below
    # min.insync.replicas, so the high watermark could not pass them), and the last leader of a partition whose
    # ISR and ELR both emptied (elected again when nothing better comes back).
    elr: tuple[int, ...] = ()
    last_known_elr: tuple[int, ...] = ()

    @property
    def reassigning(self) -> bool:
        return bool(self.adding or self.removing)

    @property
    def target(self) -> tuple[int, ...]:
        """The replicas the partition ends with: all of them unless some are being removed."""
        return tuple(r for r in self.replicas if r not in self.removing)


@dataclass(frozen=True, slots=True)
class TopicImage:
    name: str
    topic_id: UUID
    partitions: Mapping[int, PartitionImage] = field(default_factory=lambda: _frozen({}))


@dataclass(frozen=True, slots=True)
class MetadataImage:
    brokers: Mapping[int, BrokerImage] = field(default_factory=lambda: _frozen({}))
    topics: Mapping[UUID, TopicImage] = field(default_factory=lambda: _frozen({}))
    # (resource type, resource name) -> config name -> value
    configs: Mapping[tuple[int, str], Mapping[str, str]] = field(default_factory=lambda: _frozen({}))
    next_producer_id: int = 0
    features: Mapping[str, int] = field(default_factory=lambda: _frozen({}))
    # (user name, SCRAM mechanism number) -> credential
    scram: Mapping[tuple[str, int], ScramCredential] = field(default_factory=lambda: _frozen({}))
    # ACL binding id -> binding
    acls: Mapping[UUID, AclBinding] = field(default_factory=lambda: _frozen({}))

    def topic_configs(self, name: str) -> Mapping[str, str]:
        """The topic's config overrides (not the broker defaults)."""
        return self.configs.get((ConfigResourceType.TOPIC, name), _NO_CONFIGS)

    def broker_configs(self, node_id: int) -> DynamicBrokerConfigs:
        """Broker configs changed at run time that apply to `node_id`: its own, then the cluster default."""
        return DynamicBrokerConfigs(
            self.configs.get((ConfigResourceType.BROKER, str(node_id)), _NO_CONFIGS),
            self.configs.get((ConfigResourceType.BROKER, ""), _NO_CONFIGS),
        )

    def topic_by_name(self, name: str) -> TopicImage | None:
        return next((t for t in self.topics.values() if t.name == name), None)

    def is_eligible(self, broker_id: int) -> bool:
        """Whether ``broker_id`` is registered, unfenced and not in controlled shutdown."""
        broker = self.brokers.get(broker_id)
        return broker is not None and broker.eligible

    def eligible_brokers(self) -> list[int]:
        return sorted(b.broker_id for b in self.brokers.values() if b.eligible)

    def partitions_led_by(self, broker_id: int) -> list[tuple[UUID, int]]:
        return [
            (topic.topic_id, index)
            for topic in self.topics.values()
            for index, partition in topic.partitions.items()
            if partition.leader == broker_id
        ]

    def partitions_with_replica(self, broker_id: int) -> list[tuple[UUID, int]]:
        return [
            (topic.topic_id, index)
            for topic in self.topics.values()
            for index, partition in topic.partitions.items()
            if broker_id in partition.replicas
        ]

    def leader_counts(self) -> dict[int, int]:
        """Partitions led per broker (offline partitions count for nobody)."""
        counts: dict[int, int] = {}
        for topic in self.topics.values():
            for partition in topic.partitions.values():
                if partition.leader >= 0:
                    counts[partition.leader] = counts.get(partition.leader, 0) + 1
        return counts


class _Draft:
    """The mappings one run of records has copied so far. Each is copied the first time a record changes it and
    then changed in place, as nothing outside the run has seen the copy yet: copied per record, a
    10,000-partition topic's records copied 50 million partition entries and held the event loop for minutes."""

    def __init__(self) -> None:
        # By the copy's identity; the proxy is kept here as well, so that its id is not reused during the run.
        self._copies: dict[int, tuple[Mapping[Any, Any], dict[Any, Any]]] = {}

    def with_(self, mapping: Mapping[K, V], key: K, value: V | None) -> Mapping[K, V]:
        """``mapping`` with ``key`` set, or removed when ``value`` is None."""
        owned = self._copies.get(id(mapping))
        if owned is None:
            copy: dict[Any, Any] = dict(mapping)
            proxy = _frozen(copy)
            self._copies[id(proxy)] = (proxy, copy)
        else:
            proxy, copy = owned
        if value is None:
            copy.pop(key, None)
        else:
            copy[key] = value
        return proxy


def _set_fenced(image: MetadataImage, broker_id: int, epoch: int, fenced: bool, draft: _Draft) -> MetadataImage:
    broker = image.brokers.get(broker_id)
    if broker is None or broker.epoch != epoch:
        return image  # about an older registration of that broker
    return replace(image, brokers=draft.with_(image.brokers, broker_id, replace(broker, fenced=fenced)))


def _change_registration(image: MetadataImage, record: BrokerRegistrationChangeRecord, draft: _Draft) -> MetadataImage:
    broker = image.brokers.get(record.broker_id)
    if broker is None or broker.epoch != record.broker_epoch:
        return image
    # Kafka's tri-states: fenced 1 = fence, -1 = unfence, 0 = unchanged; in_controlled_shutdown 1 = enter.
    fenced = broker.fenced if record.fenced == 0 else record.fenced > 0
    shutting_down = broker.in_controlled_shutdown or record.in_controlled_shutdown == 1
    changed = replace(broker, fenced=fenced, in_controlled_shutdown=shutting_down)
    return replace(image, brokers=draft.with_(image.brokers, record.broker_id, changed))


def _set_partition(
    image: MetadataImage, topic_id: UUID, index: int, partition: PartitionImage, draft: _Draft
) -> MetadataImage:
    topic = image.topics[topic_id]
    partitions = draft.with_(topic.partitions, index, partition)
    if partitions is topic.partitions:
        # The run's own copy, changed in place: the topic and the image holding it are the run's too (a topic's
        # 5,000 PartitionRecords made 10,000 objects with `replace`, 20 of the 47 ms their replay took).
        return image
    return replace(image, topics=draft.with_(image.topics, topic_id, replace(topic, partitions=partitions)))


def _brokers(ids: list[int]) -> tuple[int, ...]:
    """The first equal tuple seen: partitions share their replica and ISR tuples, of which a cluster has few
    distinct ones (two tuples apiece cost 0.1 KB per partition, 1 MB at 10,000 partitions)."""
    return _first_seen(tuple(ids))


@lru_cache(maxsize=4096)
def _first_seen(ids: tuple[int, ...]) -> tuple[int, ...]:
    return ids


def _change_partition(image: MetadataImage, record: PartitionChangeRecord, draft: _Draft) -> MetadataImage:
    current = image.topics[record.topic_id].partitions[record.partition_id]
    leader_moved = record.leader != NO_LEADER_CHANGE
    changed = replace(
        current,
        replicas=current.replicas if record.replicas is None else _brokers(record.replicas),
        isr=current.isr if record.isr is None else _brokers(record.isr),
        leader=record.leader if leader_moved else current.leader,
        leader_epoch=current.leader_epoch + 1 if leader_moved else current.leader_epoch,
        partition_epoch=current.partition_epoch + 1,
        adding=current.adding if record.adding_replicas is None else _brokers(record.adding_replicas),
        removing=current.removing if record.removing_replicas is None else _brokers(record.removing_replicas),
        elr=current.elr if record.eligible_leader_replicas is None else _brokers(record.eligible_leader_replicas),
        last_known_elr=current.last_known_elr if record.last_known_elr is None else _brokers(record.last_known_elr),
    )
    return _set_partition(image, record.topic_id, record.partition_id, changed, draft)


def replay(image: MetadataImage, record: Message) -> MetadataImage:
    """The image after ``record``; records this image does not model leave it unchanged."""
    return _replay(image, record, _Draft())


def replay_all(image: MetadataImage, records: Iterable[Message]) -> MetadataImage:
    """The image after each of ``records`` in turn, each mapping copied once for them all."""
    replayer = Replayer(image)
    for record in records:
        replayer.replay(record)
    return replayer.image


class Replayer:
    """Records replayed one at a time for a decision that reads the image after each, every mapping copied
    once for the run as in ``replay_all``: an image it gave is changed in place by the next record, so read
    it before replaying another."""

    def __init__(self, image: MetadataImage) -> None:
        self.image = image
        self._draft = _Draft()

    def replay(self, record: Message) -> MetadataImage:
        self.image = _replay(self.image, record, self._draft)
        return self.image


def _replay(image: MetadataImage, record: Message, draft: _Draft) -> MetadataImage:
    match record:
        case RegisterBrokerRecord():
            endpoints = tuple(Endpoint(e.name, e.host, e.port, e.security_protocol) for e in record.end_points)
            broker = BrokerImage(
                record.broker_id,
                record.broker_epoch,
                record.incarnation_id,
                endpoints,
                record.rack,
                record.fenced,
                record.in_controlled_shutdown,
            )
            return replace(image, brokers=draft.with_(image.brokers, record.broker_id, broker))
        case BrokerRegistrationChangeRecord():
            return _change_registration(image, record, draft)
        case FenceBrokerRecord():
            return _set_fenced(image, record.id, record.epoch, True, draft)
        case UnfenceBrokerRecord():
            return _set_fenced(image, record.id, record.epoch, False, draft)
        case TopicRecord():
            topic = TopicImage(record.name, record.topic_id)
            return replace(image, topics=draft.with_(image.topics, record.topic_id, topic))
        case PartitionRecord():
            partition = PartitionImage(
                _brokers(record.replicas),
                _brokers(record.isr),
                record.leader,
                record.leader_epoch,
                record.partition_epoch,
                _brokers(record.adding_replicas),
                _brokers(record.removing_replicas),
                _brokers(record.eligible_leader_replicas or []),
                _brokers(record.last_known_elr or []),
            )
            return _set_partition(image, record.topic_id, record.partition_id, partition, draft)
        case PartitionChangeRecord():
            return _change_partition(image, record, draft)
        case RemoveTopicRecord():
            return replace(image, topics=draft.with_(image.topics, record.topic_id, None))
        case ConfigRecord():
            key = (record.resource_type, record.resource_name)
            entries = draft.with_(image.configs.get(key, _frozen({})), record.name, record.value)
            return replace(image, configs=draft.with_(image.configs, key, entries or None))
        case ProducerIdsRecord():
            return replace(image, next_producer_id=record.next_producer_id)
        case FeatureLevelRecord():
            return replace(image, features=draft.with_(image.features, record.name, record.feature_level))
        case UserScramCredentialRecord():
            credential = ScramCredential(record.salt, record.stored_key, record.server_key, record.iterations)
            return replace(image, scram=draft.with_(image.scram, (record.name, record.mechanism), credential))
        case RemoveUserScramCredentialRecord():
            return replace(image, scram=draft.with_(image.scram, (record.name, record.mechanism), None))
        case AccessControlEntryRecord():
            return replace(image, acls=draft.with_(image.acls, record.id, acl_binding(record)))
        case RemoveAccessControlEntryRecord():
            return replace(image, acls=draft.with_(image.acls, record.id, None))
    return image


def acl_binding(record: AccessControlEntryRecord) -> AclBinding:
    return AclBinding(
        ResourceType(record.resource_type),
        record.resource_name,
        PatternType(record.pattern_type),
        record.principal,
        record.host,
        AclOperation(record.operation),
        PermissionType(record.permission_type),
    )


def acl_record(acl_id: UUID, acl: AclBinding) -> AccessControlEntryRecord:
    return AccessControlEntryRecord(
        id=acl_id,
        resource_type=acl.resource_type,
        resource_name=acl.resource_name,
        pattern_type=acl.pattern_type,
        principal=acl.principal,
        host=acl.host,
        operation=acl.operation,
        permission_type=acl.permission,
    )


def scram_record(name: str, mechanism: int, credential: ScramCredential) -> UserScramCredentialRecord:
    return UserScramCredentialRecord(
        name=name,
        mechanism=mechanism,
        salt=credential.salt,
        stored_key=credential.stored_key,
        server_key=credential.server_key,
        iterations=credential.iterations,
    )


def image_records(image: MetadataImage) -> list[Message]:
    """Records that rebuild ``image`` from an empty one (a snapshot's content)."""
    out: list[Message] = [
        FeatureLevelRecord(name=n, feature_level=level) for n, level in sorted(image.features.items())
    ]
    for b in sorted(image.brokers.values(), key=lambda b: b.broker_id):
        endpoints = [
            BrokerEndpoint(name=e.name, host=e.host, port=e.port, security_protocol=e.security_protocol)
            for e in b.endpoints
        ]
        out.append(
            RegisterBrokerRecord(
                broker_id=b.broker_id,
                broker_epoch=b.epoch,
                incarnation_id=b.incarnation_id,
                end_points=endpoints,
                rack=b.rack,
                fenced=b.fenced,
                in_controlled_shutdown=b.in_controlled_shutdown,
            )
        )
    for t in sorted(image.topics.values(), key=lambda t: t.name):
        out.append(TopicRecord(name=t.name, topic_id=t.topic_id))
        for index, p in sorted(t.partitions.items()):
            out.append(
                PartitionRecord(
                    partition_id=index,
                    topic_id=t.topic_id,
                    replicas=list(p.replicas),
                    isr=list(p.isr),
                    leader=p.leader,
                    leader_epoch=p.leader_epoch,
                    partition_epoch=p.partition_epoch,
                    adding_replicas=list(p.adding),
                    removing_replicas=list(p.removing),
                    # Tagged fields: left out of the snapshot when empty.
                    eligible_leader_replicas=list(p.elr) or None,
                    last_known_elr=list(p.last_known_elr) or None,
                )
            )
    for (resource_type, resource_name), entries in sorted(image.configs.items()):
        for name, value in sorted(entries.items()):
            out.append(ConfigRecord(resource_type=resource_type, resource_name=resource_name, name=name, value=value))
    out.extend(scram_record(name, mechanism, c) for (name, mechanism), c in sorted(image.scram.items()))
    out.extend(acl_record(acl_id, acl) for acl_id, acl in sorted(image.acls.items()))
    if image.next_producer_id:
        out.append(ProducerIdsRecord(broker_id=-1, broker_epoch=-1, next_producer_id=image.next_producer_id))
    return out
