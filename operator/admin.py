"""An asyncio face for confluent-kafka's AdminClient, returning plain values the planners can read.

librdkafka runs requests on its own threads and hands back concurrent futures; `asyncio.wrap_future`
lets kopf handlers await them without blocking the operator's event loop. Every call is bounded in time.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import ssl
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from confluent_kafka import (
    ConsumerGroupTopicPartitions,
    ElectionType,
    KafkaError,
    KafkaException,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from kafkette.broker.protocol.errors import ErrorCode
from kafkette.broker.protocol.framing import expect
from kafkette.broker.protocol.messages.describe_configs_request import DescribeConfigsRequest, DescribeConfigsResource
from kafkette.broker.protocol.messages.describe_configs_response import DescribeConfigsResponse
from kafkette.broker.protocol.messages.incremental_alter_configs_request import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from kafkette.broker.protocol.messages.incremental_alter_configs_response import IncrementalAlterConfigsResponse
from kafkette.broker.protocol.types import Message
from kafkette.operator.local import reassign as reassignment
from kafkette.operator.local.probe import QUORUM_VERSION, describe_quorum_request, quorum_state, request_once
from kafkette.operator.planning.roll import QuorumState

DEFAULT_TIMEOUT = 5.0
MIN_ISR_KEY = "min.insync.replicas"
BROKER_RESOURCE = 4  # Kafka's ConfigResource type code
CLUSTER_DEFAULT = ""  # the BROKER resource that names the cluster-wide default
CLIENT_ID = "kafkette-operator"
# librdkafka forgets every broker a Metadata answer leaves out (2.10 on), and one answer listing none can leave it
# with no broker to ask for good (confluentinc/librdkafka#5301): three of the operator's observations of a cluster.
RENEW_UNANSWERED_CLIENT_S = 30.0
SCRAM_ITERATIONS = 8192  # Kafka's tools' default; the broker takes 4096 to 16384
# Kafka's CLUSTER resource type is BROKER in librdkafka's enum; every other name is the same in both.
_LIBRDKAFKA_RESOURCE = {"CLUSTER": "BROKER"}
_KAFKA_RESOURCE = {"BROKER": "CLUSTER"}


@dataclass(frozen=True)
class ClientTls:
    """Mutual TLS for the admin client (a secured cluster's REPLICATION listener): PEM text, as the Secret holds it."""

    ca: str
    cert: str
    key: str

    def librdkafka(self) -> dict[str, str]:
        return {
            "security.protocol": "SSL",
            "ssl.ca.pem": self.ca,
            "ssl.certificate.pem": self.cert,
            "ssl.key.pem": self.key,
        }

    def context(self) -> ssl.SSLContext:
        """The same for the operator's own requests (request_once). Python's ssl loads a key from a file only: a
        private one that exists while it reads."""
        context = ssl.create_default_context(cadata=self.ca)
        with tempfile.TemporaryDirectory(prefix="kafkette-admin-") as scratch:
            path = Path(scratch) / "client.pem"
            with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as out:
                out.write(self.key + self.cert)
            context.load_cert_chain(path)
        return context


class AdminError(Exception):
    """A Kafka admin request failed; `code` is Kafka's error code when the broker gave one."""

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class TopicState:
    name: str
    topic_id: str
    partitions: int
    replicas: int


@dataclass(frozen=True, order=True)
class AclEntry:
    """One ACL of one principal, in Kafka's names (TOPIC, LITERAL, READ, ALLOW)."""

    resource_type: str
    name: str
    pattern_type: str
    operation: str
    host: str
    permission: str

    def binding(self, principal: str) -> AclBinding:
        return AclBinding(
            ResourceType[_LIBRDKAFKA_RESOURCE.get(self.resource_type, self.resource_type)],
            self.name,
            ResourcePatternType[self.pattern_type],
            principal,
            self.host,
            AclOperation[self.operation],
            AclPermissionType[self.permission],
        )

    def filter(self, principal: str) -> AclBindingFilter:
        """A DeleteAcls filter that matches exactly this ACL."""
        binding = self.binding(principal)
        return AclBindingFilter(
            binding.restype,
            binding.name,
            binding.resource_pattern_type,
            binding.principal,
            binding.host,
            binding.operation,
            binding.permission_type,
        )


@dataclass(frozen=True)
class PartitionInfo:
    topic: str
    partition: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int  # -1: none


@dataclass(frozen=True)
class ClusterState:
    cluster_id: str | None
    controller_id: int | None
    brokers: tuple[int, ...]
    under_replicated_partitions: int
    partitions: tuple[PartitionInfo, ...] = ()


@dataclass(frozen=True)
class PartitionLag:
    topic: str
    partition: int
    committed: int | None
    end_offset: int
    log_start: int = 0

    @property
    def lag(self) -> int:
        """Records not yet consumed; with nothing committed, everything from the log start (KEDA's arithmetic)."""
        return max(0, self.end_offset - (self.committed if self.committed is not None else self.log_start))


@dataclass(frozen=True)
class GroupState:
    group_id: str
    state: str
    members: int
    lag: tuple[PartitionLag, ...]


class Admin:
    """One AdminClient for one cluster; cheap to keep, safe to share between handlers. Its librdkafka client is
    started afresh once its calls have gone unanswered for RENEW_UNANSWERED_CLIENT_S."""

    def __init__(self, bootstrap: str, timeout: float = DEFAULT_TIMEOUT, tls: ClientTls | None = None) -> None:
        self.bootstrap = bootstrap
        self.timeout = timeout
        self._tls = tls.context() if tls is not None else None
        # librdkafka logs every failed reconnect (several a second) as an error; the failure reaches
        # the resource's status through the call's exception, so only critical logs are kept.
        self._config: dict[str, str | int | float | bool] = {
            "bootstrap.servers": bootstrap,
            "socket.timeout.ms": int(timeout * 1000),
            "log_level": 2,
            **(tls.librdkafka() if tls is not None else {}),
        }
        self._client = AdminClient(self._config)
        # When its calls began going unanswered (time.monotonic), None while the last one was answered.
        self._unanswered_since: float | None = None

    async def _await(self, future: concurrent.futures.Future[Any], what: str) -> Any:
        try:
            result = await asyncio.wait_for(asyncio.wrap_future(future), self.timeout)
        except TimeoutError:
            self._unanswered()
            raise AdminError(f"{what}: no answer from {self.bootstrap} within {self.timeout:g}s") from None
        except KafkaException as exc:
            raise self._failed(exc.args[0], what) from None
        self._unanswered_since = None
        return result

    async def _metadata(self, topic: str | None = None) -> Any:
        # list_topics blocks its thread until the answer comes; keep it off the event loop.
        loop = asyncio.get_running_loop()
        try:
            metadata = await loop.run_in_executor(None, lambda: self._client.list_topics(topic, timeout=self.timeout))
        except KafkaException as exc:
            raise self._failed(exc.args[0], f"metadata from {self.bootstrap}") from None
        self._unanswered_since = None
        return metadata

    def _failed(self, error: KafkaError, what: str) -> AdminError:
        """The error to raise for `what`. An error the cluster answered (a Kafka error code) is an answer;
        librdkafka's own (negative codes: no broker to ask, timed out) is none."""
        if error.code() < 0:
            self._unanswered()
        else:
            self._unanswered_since = None
        return AdminError(f"{what}: {error.str()}", error.code())

    def _unanswered(self) -> None:
        now = time.monotonic()
        if self._unanswered_since is None:
            self._unanswered_since = now
        elif now - self._unanswered_since >= RENEW_UNANSWERED_CLIENT_S:
            # Dropping the old client (its threads joined) took 4 ms.
            self._client = AdminClient(self._config)
            self._unanswered_since = None

    async def cluster(self) -> ClusterState:
        metadata = await self._metadata()
        partitions = tuple(
            PartitionInfo(topic.topic, partition.id, tuple(partition.replicas), tuple(partition.isrs), partition.leader)
            for topic in metadata.topics.values()
            if topic.error is None
            for partition in topic.partitions.values()
        )
        return ClusterState(
            cluster_id=metadata.cluster_id,
            controller_id=metadata.controller_id if metadata.controller_id >= 0 else None,
            brokers=tuple(sorted(metadata.brokers)),
            under_replicated_partitions=sum(len(p.isr) < len(p.replicas) for p in partitions),
            partitions=partitions,
        )

    async def min_insync_replicas(self, topics: Sequence[str]) -> dict[str, int]:
        """Each topic's effective min.insync.replicas; a topic deleted meanwhile is left out."""
        resources = [ConfigResource(ConfigResource.Type.TOPIC, topic) for topic in topics]
        futures = self._client.describe_configs(resources, request_timeout=self.timeout) if resources else {}
        found = {}
        for resource, future in futures.items():
            try:
                entries: dict[str, ConfigEntry] = await self._await(future, f"describe configs of {resource.name!r}")
            except AdminError as exc:
                if exc.code == KafkaError.UNKNOWN_TOPIC_OR_PART:
                    continue
                raise
            entry = entries.get(MIN_ISR_KEY)
            found[resource.name] = int(entry.value) if entry is not None and entry.value else 1
        return found

    async def quorum(self) -> QuorumState | None:
        """The metadata quorum as its leader describes it. None when no broker answers DescribeQuorum at all:
        brokers older than it close the connection (the roll of an upgrade then goes by the broker rules
        alone); AdminError when the answer is an error."""
        try:
            answer = await self._ask(describe_quorum_request(), QUORUM_VERSION, "describe the metadata quorum")
        except AdminError:
            return None
        try:
            return quorum_state(answer)
        except ValueError as exc:
            raise AdminError(f"describe the metadata quorum: {exc}") from None

    async def elect_preferred(self, partitions: Sequence[tuple[str, int]]) -> int:
        """ElectLeaders PREFERRED for `partitions`; returns how many moved (a preferred replica that cannot
        lead now leaves its partition as it is)."""
        if not partitions:
            return 0
        request = [TopicPartition(topic, partition) for topic, partition in partitions]
        # No request_timeout: confluent-kafka 2.16 fails on any keyword here; _await bounds the wait instead.
        future = self._client.elect_leaders(ElectionType.PREFERRED, request)
        results: dict[TopicPartition, KafkaException | None] = await self._await(future, "elect preferred leaders")
        return sum(error is None for error in results.values())

    async def describe_topic(self, name: str) -> TopicState | None:
        """The topic's id, partition count and replication factor; None when it does not exist."""
        futures = self._client.describe_topics(TopicCollection([name]), request_timeout=self.timeout)
        try:
            description = await self._await(futures[name], f"describe topic {name!r}")
        except AdminError as exc:
            if exc.code == KafkaError.UNKNOWN_TOPIC_OR_PART:
                return None
            raise
        partitions = description.partitions
        return TopicState(
            name=name,
            topic_id=str(description.topic_id),
            partitions=len(partitions),
            replicas=len(partitions[0].replicas) if partitions else 0,
        )

    async def create_topic(self, name: str, partitions: int, replicas: int | None, config: Mapping[str, str]) -> None:
        topic = NewTopic(name, num_partitions=partitions, replication_factor=replicas or -1, config=dict(config))
        futures = self._client.create_topics([topic], request_timeout=self.timeout, operation_timeout=self.timeout)
        await self._await(futures[name], f"create topic {name!r}")

    async def create_partitions(self, name: str, total: int) -> None:
        futures = self._client.create_partitions([NewPartitions(name, total)], request_timeout=self.timeout)
        await self._await(futures[name], f"add partitions to {name!r}")

    async def delete_topic(self, name: str) -> None:
        """Delete the topic; a topic that is already gone counts as deleted."""
        futures = self._client.delete_topics([name], request_timeout=self.timeout, operation_timeout=self.timeout)
        try:
            await self._await(futures[name], f"delete topic {name!r}")
        except AdminError as exc:
            if exc.code != KafkaError.UNKNOWN_TOPIC_OR_PART:
                raise

    async def topic_overrides(self, name: str) -> dict[str, str]:
        """The topic's own config overrides (not broker defaults)."""
        resource = ConfigResource(ConfigResource.Type.TOPIC, name)
        futures = self._client.describe_configs([resource], request_timeout=self.timeout)
        entries: dict[str, ConfigEntry] = await self._await(futures[resource], f"describe configs of {name!r}")
        return {
            key: entry.value
            for key, entry in entries.items()
            if entry.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value and entry.value is not None
        }

    async def alter_topic_config(self, name: str, set_: Mapping[str, str], delete: frozenset[str]) -> None:
        """Set some overrides and remove others in one IncrementalAlterConfigs request."""
        entries = [
            ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET) for key, value in set_.items()
        ] + [ConfigEntry(key, None, incremental_operation=AlterConfigOpType.DELETE) for key in sorted(delete)]
        resource = ConfigResource(ConfigResource.Type.TOPIC, name, incremental_configs=entries)
        futures = self._client.incremental_alter_configs([resource], request_timeout=self.timeout)
        await self._await(futures[resource], f"alter configs of {name!r}")

    # librdkafka refuses a BROKER resource with an empty name, which is how Kafka names the cluster-wide default
    # (Kafka's Java AdminClient and kafka-configs.sh --entity-default send it): these two go over the wire.

    async def default_broker_configs(self) -> dict[str, str]:
        """The cluster-wide dynamic broker defaults (source DYNAMIC_DEFAULT_BROKER_CONFIG)."""
        resource = DescribeConfigsResource(
            resource_type=BROKER_RESOURCE, resource_name=CLUSTER_DEFAULT, configuration_keys=None
        )
        what = "describe the cluster-wide broker defaults"
        answer = await self._ask(DescribeConfigsRequest(resources=[resource]), 4, what)
        (result,) = expect(answer, DescribeConfigsResponse).results
        _check(what, result.error_code, result.error_message)
        return {
            entry.name: entry.value
            for entry in result.configs
            if entry.config_source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value and entry.value is not None
        }

    async def alter_default_broker_configs(self, set_: Mapping[str, str], delete: frozenset[str]) -> None:
        """Set some cluster-wide broker defaults and remove others in one IncrementalAlterConfigs request."""
        changes = [AlterableConfig(name=key, config_operation=0, value=value) for key, value in set_.items()] + [
            AlterableConfig(name=key, config_operation=1, value=None) for key in sorted(delete)
        ]
        resource = AlterConfigsResource(resource_type=BROKER_RESOURCE, resource_name=CLUSTER_DEFAULT, configs=changes)
        what = "alter the cluster-wide broker defaults"
        answer = await self._ask(IncrementalAlterConfigsRequest(resources=[resource]), 1, what)
        (result,) = expect(answer, IncrementalAlterConfigsResponse).responses
        _check(what, result.error_code, result.error_message)

    async def reassign(self, targets: Mapping[tuple[str, int], Sequence[int]]) -> None:
        """AlterPartitionReassignments (any broker hands it to the active controller); AdminError naming each
        refused partition. librdkafka has no call for it, so it goes over the wire."""
        answer = await self._ask(reassignment.alter_request(targets), reassignment.ALTER_VERSION, "reassign partitions")
        try:
            reassignment.check_altered(answer)
        except reassignment.ReassignError as exc:
            raise AdminError(str(exc), exc.code) from None

    async def reassignments(self) -> reassignment.InFlight:
        """The partition moves in flight (ListPartitionReassignments)."""
        answer = await self._ask(reassignment.list_request(), reassignment.LIST_VERSION, "list partition reassignments")
        try:
            return reassignment.in_flight_from(answer)
        except reassignment.ReassignError as exc:
            raise AdminError(str(exc), exc.code) from None

    async def alter_configs(self, changes: reassignment.ConfigChanges) -> None:
        """One IncrementalAlterConfigs over the wire (a BROKER resource per broker id, TOPIC resources): SET or,
        for None, DELETE each key; AdminError naming each refused resource."""
        answer = await self._ask(reassignment.alter_configs_request(changes), 1, "alter configs")
        try:
            reassignment.check_configs_altered(answer)
        except reassignment.ReassignError as exc:
            raise AdminError(str(exc), exc.code) from None

    async def replica_sizes(self) -> dict[tuple[tuple[str, int], int], int]:
        """((topic, partition), broker) -> bytes of that replica (DescribeLogDirs, asked of each broker the
        metadata lists); a broker that does not answer is left out."""
        metadata = await self._metadata()
        sizes: dict[tuple[tuple[str, int], int], int] = {}
        for node_id, broker in sorted(metadata.brokers.items()):
            request = reassignment.log_dirs_request()
            try:
                answer = await asyncio.to_thread(
                    request_once,
                    broker.host,
                    broker.port,
                    request,
                    reassignment.LOG_DIRS_VERSION,
                    self.timeout,
                    CLIENT_ID,
                    self._tls,
                )
            except OSError:
                continue
            sizes |= reassignment.sizes_from(answer, node_id)
        return sizes

    async def _ask(self, request: Message, version: int, what: str) -> Message:
        """One request to the first bootstrap server that answers; AdminError without a code when none does."""
        for server in self.bootstrap.split(","):
            host, port = server.strip().rsplit(":", 1)
            try:
                return await asyncio.to_thread(
                    request_once, host, int(port), request, version, self.timeout, CLIENT_ID, self._tls
                )
            except OSError:
                continue
        raise AdminError(f"{what}: no answer from {self.bootstrap} within {self.timeout:g}s")

    async def has_scram_sha_512(self, user: str) -> bool:
        """Whether Kafka holds a SCRAM-SHA-512 credential for `user`."""
        futures = self._client.describe_user_scram_credentials([user], request_timeout=self.timeout)
        if not isinstance(futures, dict):  # confluent-kafka answers a list of users with a future per user
            raise AdminError(f"describe SCRAM credentials of {user!r}: unexpected answer {futures!r}")
        try:
            description = await self._await(futures[user], f"describe SCRAM credentials of {user!r}")
        except AdminError as exc:
            if exc.code == KafkaError.RESOURCE_NOT_FOUND:
                return False
            raise
        return any(info.mechanism == ScramMechanism.SCRAM_SHA_512 for info in description.scram_credential_infos)

    async def set_scram_sha_512(self, user: str, password: str) -> None:
        """AlterUserScramCredentials: the user's SCRAM-SHA-512 credential from `password` (the client salts it)."""
        info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, SCRAM_ITERATIONS)
        upsertion = UserScramCredentialUpsertion(user, info, password.encode())
        futures = self._client.alter_user_scram_credentials([upsertion], request_timeout=self.timeout)
        await self._await(futures[user], f"set the SCRAM-SHA-512 credential of {user!r}")

    async def delete_scram_sha_512(self, user: str) -> None:
        """Remove the user's SCRAM-SHA-512 credential; one already gone counts as removed."""
        deletion = UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_512)
        futures = self._client.alter_user_scram_credentials([deletion], request_timeout=self.timeout)
        try:
            await self._await(futures[user], f"delete the SCRAM-SHA-512 credential of {user!r}")
        except AdminError as exc:
            if exc.code != KafkaError.RESOURCE_NOT_FOUND:
                raise

    async def acls_of(self, principal: str) -> frozenset[AclEntry]:
        """Every ACL naming `principal` (DescribeAcls with ANY filters but the principal)."""
        # None matches any name and host; confluent-kafka's stubs say str, its code takes None as Kafka's null.
        query = AclBindingFilter(
            ResourceType.ANY,
            None,  # type: ignore[arg-type]
            ResourcePatternType.ANY,
            principal,
            None,  # type: ignore[arg-type]
            AclOperation.ANY,
            AclPermissionType.ANY,
        )
        future = self._client.describe_acls(query, request_timeout=self.timeout)
        bindings: list[AclBinding] = await self._await(future, f"describe the ACLs of {principal}")
        return frozenset(
            AclEntry(
                _KAFKA_RESOURCE.get(_enum_name(binding.restype), _enum_name(binding.restype)),
                binding.name,
                _enum_name(binding.resource_pattern_type),
                _enum_name(binding.operation),
                binding.host,
                _enum_name(binding.permission_type),
            )
            for binding in bindings
        )

    async def create_acls(self, principal: str, entries: frozenset[AclEntry]) -> None:
        if not entries:
            return
        futures = self._client.create_acls(
            [entry.binding(principal) for entry in sorted(entries)], request_timeout=self.timeout
        )
        for future in futures.values():
            await self._await(future, f"create ACLs of {principal}")

    async def delete_acls(self, principal: str, entries: frozenset[AclEntry]) -> None:
        if not entries:
            return
        futures = self._client.delete_acls(
            [entry.filter(principal) for entry in sorted(entries)], request_timeout=self.timeout
        )
        for future in futures.values():
            await self._await(future, f"delete ACLs of {principal}")

    async def group(self, group_id: str, topics: frozenset[str] = frozenset()) -> GroupState:
        """The group's state, members and lag per partition: of every partition of `topics` when given (those
        without a commit lag by their whole log), else of the partitions the group has committed offsets for."""
        described = self._client.describe_consumer_groups([group_id], request_timeout=self.timeout)
        description = await self._await(described[group_id], f"describe group {group_id!r}")
        listed = self._client.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group_id)], request_timeout=self.timeout
        )
        offsets = await self._await(listed[group_id], f"committed offsets of {group_id!r}")
        committed = {
            (tp.topic, tp.partition): (tp.offset if tp.offset >= 0 else None)
            for tp in offsets.topic_partitions
            if not topics or tp.topic in topics
        }
        for topic in sorted(topics):
            metadata = await self._metadata(topic)
            found = metadata.topics.get(topic)
            for partition in found.partitions if found is not None and found.error is None else ():
                committed.setdefault((topic, partition), None)
        ends = await self._offsets(list(committed), OffsetSpec.latest())
        starts = await self._offsets(
            [key for key, offset in committed.items() if offset is None], OffsetSpec.earliest()
        )
        lag = tuple(
            PartitionLag(
                topic, partition, committed[topic, partition], ends[topic, partition], starts.get((topic, partition), 0)
            )
            for topic, partition in sorted(committed)
        )
        return GroupState(group_id, str(description.state.name), len(description.members), lag)

    async def _offsets(self, partitions: list[tuple[str, int]], spec: OffsetSpec) -> dict[tuple[str, int], int]:
        """The latest or earliest offset of each partition."""
        if not partitions:
            return {}
        request = {TopicPartition(topic, partition): spec for topic, partition in partitions}
        futures = self._client.list_offsets(request, request_timeout=self.timeout)
        offsets = {}
        for tp, future in futures.items():
            info = await self._await(future, f"offset of {tp.topic}-{tp.partition}")
            offsets[tp.topic, tp.partition] = info.offset
        return offsets


def _enum_name(value: Enum | str | int) -> str:
    """An AclBinding field's enum name (the constructor turns every field into its enum; the stubs allow more)."""
    if not isinstance(value, Enum):
        raise TypeError(f"expected an enum, got {value!r}")
    return value.name


def _check(what: str, code: int, message: str | None) -> None:
    if code != 0:
        raise AdminError(f"{what}: {message or ErrorCode(code).name}", code)
