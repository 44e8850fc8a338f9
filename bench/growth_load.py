"""The protocol-level workloads of bench/growth.py: many connections, many consumer groups, metadata polls.

Requests go through kafkette's own client transport (`BrokerClient`, one connection each) and codec, which
speak Kafka's protocol to any broker; every version used here is one Apache Kafka 4.x and kafkette both serve.
A thousand librdkafka clients would cost this two-core machine more than the brokers being measured.
"""

from __future__ import annotations

import asyncio
import random
import struct
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from kafkette.broker.net.client import BrokerClient
from kafkette.broker.protocol.codec import encode
from kafkette.broker.protocol.errors import ErrorCode
from kafkette.broker.protocol.messages.api_versions_request import ApiVersionsRequest
from kafkette.broker.protocol.messages.api_versions_response import ApiVersionsResponse
from kafkette.broker.protocol.messages.consumer_protocol_assignment import ConsumerProtocolAssignment, TopicPartition
from kafkette.broker.protocol.messages.consumer_protocol_subscription import ConsumerProtocolSubscription
from kafkette.broker.protocol.messages.find_coordinator_request import FindCoordinatorRequest
from kafkette.broker.protocol.messages.find_coordinator_response import FindCoordinatorResponse
from kafkette.broker.protocol.messages.heartbeat_request import HeartbeatRequest
from kafkette.broker.protocol.messages.heartbeat_response import HeartbeatResponse
from kafkette.broker.protocol.messages.join_group_request import JoinGroupRequest, JoinGroupRequestProtocol
from kafkette.broker.protocol.messages.join_group_response import JoinGroupResponse
from kafkette.broker.protocol.messages.leave_group_request import LeaveGroupRequest, MemberIdentity
from kafkette.broker.protocol.messages.leave_group_response import LeaveGroupResponse
from kafkette.broker.protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from kafkette.broker.protocol.messages.metadata_response import MetadataResponse
from kafkette.broker.protocol.messages.offset_commit_request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from kafkette.broker.protocol.messages.offset_commit_response import OffsetCommitResponse
from kafkette.broker.protocol.messages.offset_fetch_request import OffsetFetchRequest, OffsetFetchRequestGroup
from kafkette.broker.protocol.messages.offset_fetch_response import OffsetFetchResponse
from kafkette.broker.protocol.messages.produce_request import PartitionProduceData, ProduceRequest, TopicProduceData
from kafkette.broker.protocol.messages.produce_response import ProduceResponse
from kafkette.broker.protocol.messages.sync_group_request import SyncGroupRequest, SyncGroupRequestAssignment
from kafkette.broker.protocol.messages.sync_group_response import SyncGroupResponse
from kafkette.broker.protocol.records import Record, encode_batch

TIMEOUT_S = 60.0
CONNECT_WAVE = 100  # connections opened at once: a thousand SYNs together overflow a listen backlog
# Long enough for a member to wait for every other group to join first (a thousand joins on a loaded machine).
SESSION_TIMEOUT_MS = 300_000
REBALANCE_TIMEOUT_MS = 60_000
# librdkafka's defaults: heartbeat.interval.ms and auto.commit.interval.ms.
HEARTBEAT_INTERVAL_S = 3.0
COMMIT_INTERVAL_S = 5.0
_VERSION_PREFIX = struct.Struct(">h")
_T = TypeVar("_T")


def _check(error_code: int, what: str) -> None:
    if error_code:
        raise RuntimeError(f"{what}: {ErrorCode(error_code).name}")


def client_for(bootstrap: str) -> BrokerClient:
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    return BrokerClient(host, int(port), "growth-bench", connect_timeout_s=TIMEOUT_S)


async def open_clients(bootstrap: str, count: int) -> list[BrokerClient]:
    """``count`` connections, each past its ApiVersions exchange (what every Kafka client sends first)."""
    clients = [client_for(bootstrap) for _ in range(count)]
    hello = ApiVersionsRequest(client_software_name="growth-bench", client_software_version="1")
    for start in range(0, count, CONNECT_WAVE):
        wave = clients[start : start + CONNECT_WAVE]
        answers = await asyncio.gather(*(c.request(hello, 3, TIMEOUT_S, ApiVersionsResponse) for c in wave))
        for answer in answers:
            _check(answer.error_code, "ApiVersions")
    return clients


async def close_clients(clients: Sequence[BrokerClient]) -> None:
    await asyncio.gather(*(c.close() for c in clients))


async def partitions_led(client: BrokerClient, topic: str, partitions: int, in_sync: int = 0) -> bool:
    """Whether the broker's Metadata names ``partitions`` partitions of ``topic``, each with a leader (and at least
    ``in_sync`` replicas in its ISR)."""
    request = MetadataRequest(topics=[MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False)
    answer = await client.request(request, 12, TIMEOUT_S, MetadataResponse)
    listed = [p for t in answer.topics if t.name == topic and not t.error_code for p in t.partitions]
    return len(listed) == partitions and all(
        p.error_code == 0 and p.leader_id >= 0 and len(p.isr_nodes) >= in_sync for p in listed
    )


def _percentiles(samples_ms: list[float]) -> tuple[float, float]:
    ordered = sorted(samples_ms)
    if not ordered:
        return float("nan"), float("nan")
    return ordered[len(ordered) // 2], ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


@dataclass
class Latencies:
    samples_ms: list[float] = field(default_factory=list)

    async def timed(self, request: Awaitable[_T]) -> _T:
        started = time.perf_counter()
        answer = await request
        self.samples_ms.append((time.perf_counter() - started) * 1000)
        return answer

    @property
    def p50_p99(self) -> tuple[float, float]:
        return _percentiles(self.samples_ms)


async def produce_at_rate(clients: Sequence[BrokerClient], topic: str, rate: int, seconds: float) -> Latencies:
    """Produce requests (acks=1, one 100-byte record) at ``rate`` a second, each on the next connection in turn,
    sent on schedule whether or not earlier ones were answered; the latency of each, request to answer."""
    batch = encode_batch([Record(0, int(time.time() * 1000), None, b"v" * 100, [])])
    request = ProduceRequest(
        acks=1,
        timeout_ms=30_000,
        topic_data=[TopicProduceData(name=topic, partition_data=[PartitionProduceData(index=0, records=batch)])],
    )
    latencies = Latencies()

    async def one(client: BrokerClient) -> None:
        answer = await latencies.timed(client.request(request, 9, TIMEOUT_S, ProduceResponse))
        _check(answer.responses[0].partition_responses[0].error_code, "Produce")

    sent: list[asyncio.Task[None]] = []
    started = time.perf_counter()
    for index in range(int(rate * seconds)):
        delay = started + index / rate - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        sent.append(asyncio.create_task(one(clients[index % len(clients)])))
    await asyncio.gather(*sent)
    return latencies


def _subscription(topic: str) -> bytes:
    return _VERSION_PREFIX.pack(0) + encode(ConsumerProtocolSubscription(topics=[topic]), 0)


def _assignment(topic: str) -> bytes:
    owned = ConsumerProtocolAssignment(assigned_partitions=[TopicPartition(topic=topic, partitions=[0])])
    return _VERSION_PREFIX.pack(0) + encode(owned, 0)


async def wait_for_coordinators(client: BrokerClient, groups: Sequence[str]) -> None:
    """Ask until every group's coordinator answers (unmeasured): the first ask creates __consumer_offsets, and
    Kafka then loads each of its partitions, answering NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS for
    their groups until it has. OffsetFetch v8 asks for many groups at once."""
    deadline = time.monotonic() + TIMEOUT_S
    waiting = list(groups)
    while True:
        found = await client.request(FindCoordinatorRequest(key=groups[0]), 3, TIMEOUT_S, FindCoordinatorResponse)
        if not found.error_code:
            request = OffsetFetchRequest(groups=[OffsetFetchRequestGroup(group_id=g, topics=None) for g in waiting])
            fetched = await client.request(request, 8, TIMEOUT_S, OffsetFetchResponse)
            waiting = [g.group_id for g in fetched.groups if g.error_code]
            if not waiting:
                return
        if time.monotonic() > deadline:
            raise RuntimeError(f"the coordinators of {len(waiting)} groups not available within {TIMEOUT_S} s")
        await asyncio.sleep(0.1)


@dataclass
class Member:
    """The one member of a consumer group, joined and synced (a classic-protocol consumer)."""

    client: BrokerClient
    group: str
    topic: str
    member_id: str = ""
    generation: int = -1
    committed: int = 0

    async def join(self) -> None:
        """JoinGroup (twice: the first answer only names the member, as since v4), then SyncGroup as leader."""
        protocols = [JoinGroupRequestProtocol(name="range", metadata=_subscription(self.topic))]
        while True:
            request = JoinGroupRequest(
                group_id=self.group,
                session_timeout_ms=SESSION_TIMEOUT_MS,
                rebalance_timeout_ms=REBALANCE_TIMEOUT_MS,
                member_id=self.member_id,
                protocol_type="consumer",
                protocols=protocols,
            )
            joined = await self.client.request(request, 5, TIMEOUT_S, JoinGroupResponse)
            if joined.error_code == ErrorCode.MEMBER_ID_REQUIRED:
                self.member_id = joined.member_id
                continue
            _check(joined.error_code, "JoinGroup")
            break
        self.member_id, self.generation = joined.member_id, joined.generation_id
        sync = SyncGroupRequest(
            group_id=self.group,
            generation_id=self.generation,
            member_id=self.member_id,
            assignments=[SyncGroupRequestAssignment(member_id=self.member_id, assignment=_assignment(self.topic))],
        )
        _check((await self.client.request(sync, 3, TIMEOUT_S, SyncGroupResponse)).error_code, "SyncGroup")

    async def commit(self) -> None:
        self.committed += 1
        partition = OffsetCommitRequestPartition(partition_index=0, committed_offset=self.committed)
        request = OffsetCommitRequest(
            group_id=self.group,
            generation_id_or_member_epoch=self.generation,
            member_id=self.member_id,
            topics=[OffsetCommitRequestTopic(name=self.topic, partitions=[partition])],
        )
        answer = await self.client.request(request, 8, TIMEOUT_S, OffsetCommitResponse)
        _check(answer.topics[0].partitions[0].error_code, "OffsetCommit")

    async def heartbeat(self) -> None:
        request = HeartbeatRequest(group_id=self.group, generation_id=self.generation, member_id=self.member_id)
        _check((await self.client.request(request, 3, TIMEOUT_S, HeartbeatResponse)).error_code, "Heartbeat")

    async def leave(self) -> None:
        request = LeaveGroupRequest(group_id=self.group, members=[MemberIdentity(member_id=self.member_id)])
        answer = await self.client.request(request, 4, TIMEOUT_S, LeaveGroupResponse)
        _check(answer.error_code or answer.members[0].error_code, "LeaveGroup")


@dataclass
class GroupsRun:
    first_join_ms: Latencies  # the warm-up's: each connection's first join and sync
    join_ms: Latencies
    commit_ms: Latencies  # the steady state's commits
    steady_requests: int
    steady_cpu_s: float
    client_cpu_s: float  # this process's, in the steady state: a load near a core means the client limits
    steady_s: float


async def run_groups(
    clients: Sequence[BrokerClient], topic: str, count: int, steady_s: float, cpu_seconds: Callable[[], float]
) -> GroupsRun:
    """``count`` groups of one member each over the shared ``clients`` (as many joins at once as connections):
    each joins, syncs and commits once; then for ``steady_s`` every member heartbeats and commits at
    librdkafka's default intervals, from a random phase, while the broker's CPU time is taken.

    First, unmeasured but for its joins (``first_join_ms``), one group per connection joins, syncs, commits,
    heartbeats and leaves: what a broker does only the first time (Kafka's JIT, Kafkette's codec compiles)
    then stays out of the joins of every size, and the single join of one group is not a cold one."""
    warm_up = [Member(client, f"growth-warm-up-{i}", topic) for i, client in enumerate(clients)]
    members = [Member(clients[i % len(clients)], f"growth-{i}", topic) for i in range(count)]
    await wait_for_coordinators(clients[0], [member.group for member in [*warm_up, *members]])
    first_join_ms = Latencies()

    async def first_use(member: Member) -> None:
        await first_join_ms.timed(member.join())
        await member.commit()
        await member.heartbeat()
        await member.leave()

    await asyncio.gather(*(first_use(member) for member in warm_up))
    join_ms = Latencies()

    async def lane(lane_members: Sequence[Member]) -> None:
        for member in lane_members:
            await join_ms.timed(member.join())
            await member.commit()

    await asyncio.gather(*(lane(members[i :: len(clients)]) for i in range(len(clients))))

    commit_ms = Latencies()
    requests = 0
    deadline = time.perf_counter() + steady_s

    async def steady(member: Member) -> None:
        nonlocal requests
        now = time.perf_counter()
        beat, commit = now + random.uniform(0, HEARTBEAT_INTERVAL_S), now + random.uniform(0, COMMIT_INTERVAL_S)
        while (due := min(beat, commit)) < deadline:
            await asyncio.sleep(max(0.0, due - time.perf_counter()))
            if due == beat:
                await member.heartbeat()
                beat += HEARTBEAT_INTERVAL_S
            else:
                await commit_ms.timed(member.commit())
                commit += COMMIT_INTERVAL_S
            requests += 1

    before, started, own = cpu_seconds(), time.perf_counter(), time.process_time()
    await asyncio.gather(*(steady(member) for member in members))
    steady_cpu_s, steady_s = cpu_seconds() - before, time.perf_counter() - started
    return GroupsRun(first_join_ms, join_ms, commit_ms, requests, steady_cpu_s, time.process_time() - own, steady_s)
