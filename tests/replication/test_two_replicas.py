"""Two replicas over real sockets: the follower fetches from the leader through the real handlers."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Any

from waiting import wait_for_async

from kafkette.broker.controller.image import replay
from kafkette.broker.protocol.codec import decode, encode
from kafkette.broker.protocol.errors import ErrorCode
from kafkette.broker.protocol.messages.alter_partition_request import AlterPartitionRequest
from kafkette.broker.protocol.messages.alter_partition_response import AlterPartitionResponse
from kafkette.broker.protocol.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic
from kafkette.broker.protocol.messages.fetch_response import FetchResponse
from kafkette.broker.protocol.messages.produce_request import PartitionProduceData, ProduceRequest, TopicProduceData
from kafkette.broker.protocol.messages.produce_response import PartitionProduceResponse, ProduceResponse
from kafkette.broker.protocol.records import Record, encode_batch
from kafkette.broker.protocol.types import Message
from kafkette.broker.server.handlers.fetch import handle_fetch
from kafkette.broker.server.handlers.produce import handle_produce
from kafkette.broker.storage import Log, LogConfig

from .cluster import HOST, TOPIC, TOPIC_ID, Cluster, Node
from .helpers import batch


def with_cluster(
    tmp_path: Path, body: Callable[[Cluster], Awaitable[None]], node_ids: tuple[int, ...] = (1, 2)
) -> None:
    async def run() -> None:
        cluster = Cluster(tmp_path, node_ids)
        try:
            await asyncio.wait_for(body(cluster), 60)
        finally:
            await cluster.stop()

    asyncio.run(run())


async def produce_answer(
    node: Node, acks: int = -1, count: int = 3, timeout_ms: int = 15_000, version: int = 9, partition: int = 0
) -> ProduceResponse:
    """The whole answer, as a client of ``version`` reads it off the wire."""
    request = ProduceRequest(
        acks=acks,
        timeout_ms=timeout_ms,
        topic_data=[
            TopicProduceData(name=TOPIC, partition_data=[PartitionProduceData(index=partition, records=batch(count))])
        ],
    )
    answer = handle_produce(node.context(0, version), request)
    response = answer if isinstance(answer, ProduceResponse) else await answer  # type: ignore[misc]
    assert isinstance(response, ProduceResponse)
    return decode(ProduceResponse, encode(response, version), version)


async def produce(node: Node, acks: int = -1, count: int = 3, timeout_ms: int = 15_000) -> PartitionProduceResponse:
    return (await produce_answer(node, acks, count, timeout_ms)).responses[0].partition_responses[0]


async def consume(node: Node, offset: int = 0) -> Any:
    request = FetchRequest(
        replica_id=-1,
        max_wait_ms=0,
        topics=[
            FetchTopic(
                topic=TOPIC, partitions=[FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=1 << 20)]
            )
        ],
    )
    answer = handle_fetch(node.context(1, 12), request)
    response = answer if isinstance(answer, FetchResponse) else await answer
    return response.responses[0].partitions[0]


async def fetch_answer(node: Node, version: int, current_leader_epoch: int = -1) -> FetchResponse:
    """A consumer's fetch of the partition by topic id, as a client of ``version`` reads the answer."""
    wanted = FetchPartition(
        partition=0, current_leader_epoch=current_leader_epoch, fetch_offset=0, partition_max_bytes=1 << 20
    )
    request = FetchRequest(replica_id=-1, max_wait_ms=0, topics=[FetchTopic(topic_id=TOPIC_ID, partitions=[wanted])])
    answer = handle_fetch(node.context(1, version), request)
    response = answer if isinstance(answer, FetchResponse) else await answer
    return decode(FetchResponse, encode(response, version), version)


def partition_of(node: Node, index: int = 0) -> Any:
    partition = node.replicas.partition(TOPIC, index)
    assert partition is not None
    return partition


def test_the_follower_copies_the_log_and_acks_all_waits_for_it(tmp_path: Path) -> None:
    async def body(cluster: Cluster) -> None:
        await cluster.start(leader=1, isr=(1, 2))
        leader, follower = cluster.nodes[1], cluster.nodes[2]
        first = await produce(leader)
        assert (first.error_code, first.base_offset) == (ErrorCode.NONE, 0)
        # acks=all answered: the follower has the batch and the leader's high watermark covers it.
        assert partition_of(leader).high_watermark == 3
        assert partition_of(follower).log_end_offset == 3
        second = await produce(leader, count=2)
        assert (second.error_code, second.base_offset) == (ErrorCode.NONE, 3)
        await wait_for_async(lambda: partition_of(follower).high_watermark == 5, "the follower's high watermark at 5")
        assert follower.log_bytes() == leader.log_bytes()
        read = await consume(leader)
        assert read.error_code == ErrorCode.NONE and read.high_watermark == 5
        assert (await consume(follower)).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert (await produce(follower, acks=1)).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER

    with_cluster(tmp_path, body)


def test_a_diverged_follower_truncates_to_the_leaders_log(tmp_path: Path) -> None:
    async def body(cluster: Cluster) -> None:
        leader, follower = cluster.nodes[1], cluster.nodes[2]
        common = bytes(batch(2, "common"))
        for node in (leader, follower):
            node.logs.get_or_create(TOPIC, 0).append(bytearray(common), 0)
        # Node 2 led epoch 1 alone for a moment and wrote what nobody else has.
        follower.logs.get_or_create(TOPIC, 0).append(batch(3, "lost"), 1)
        await cluster.start(leader=1, isr=(1, 2), leader_epoch=2)
        assert (await produce(leader, count=4)).base_offset == 2
        await wait_for_async(lambda: partition_of(follower).log_end_offset == 6, "the follower's log end at 6")
        assert follower.log_bytes() == leader.log_bytes()
        assert b"lost" not in follower.log_bytes()

    with_cluster(tmp_path, body)


def test_the_isr_shrinks_without_the_dead_follower_and_acks_all_completes(tmp_path: Path) -> None:
    async def body(cluster: Cluster) -> None:
        await cluster.start(leader=1, isr=(1, 2))
        leader = cluster.nodes[1]
        assert (await produce(leader)).error_code == ErrorCode.NONE
        await cluster.kill(2)
        answer = await produce(leader)  # waits until the lag check drops node 2
        assert (answer.error_code, answer.base_offset) == (ErrorCode.NONE, 3)
        assert cluster.state()[1] == (1,)
        assert partition_of(leader).isr == (1,)

    with_cluster(tmp_path, body)


def test_min_insync_replicas_refuses_acks_all_once_the_isr_is_too_small(tmp_path: Path) -> None:
    async def body(cluster: Cluster) -> None:
        await cluster.start(leader=1, isr=(1, 2), configs={"min.insync.replicas": "2"})
        leader = cluster.nodes[1]
        assert (await produce(leader)).error_code == ErrorCode.NONE
        await cluster.kill(2)
        after = await produce(leader)
        assert after.error_code == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        assert (await produce(leader)).error_code == ErrorCode.NOT_ENOUGH_REPLICAS
        assert partition_of(leader).log_end_offset == 6  # the refused batch was not written
        assert (await produce(leader, acks=1)).error_code == ErrorCode.NONE

    with_cluster(tmp_path, body)


def test_acks_all_times_out_while_the_follower_is_in_the_isr(tmp_path: Path) -> None:
    async def body(cluster: Cluster) -> None:
        await cluster.start(leader=1, isr=(1, 2))
        await cluster.kill(2)
        answer = await produce(cluster.nodes[1], timeout_ms=50)
        assert answer.error_code == ErrorCode.REQUEST_TIMED_OUT

    with_cluster(tmp_path, body)


def test_not_leader_answers_name_the_leader_and_its_address(tmp_path: Path) -> None:
    """KIP-951 (Produce v10+): refused by a follower, or by a leader deposed while acks=all waited, the answer
    names the leader and epoch the broker knows of, and that leader's address on the request's listener."""

    async def body(cluster: Cluster) -> None:
        await cluster.start(leader=1, isr=(1, 2))
        first, second = cluster.nodes[1], cluster.nodes[2]
        refused = await produce_answer(second, acks=1, version=10)
        answer = refused.responses[0].partition_responses[0]
        assert answer.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert (answer.current_leader.leader_id, answer.current_leader.leader_epoch) == (1, 1)
        assert [(e.node_id, e.host, e.port) for e in refused.node_endpoints] == [(1, HOST, first.port)]
        # Below v10 the fields do not exist on the wire.
        old = (await produce_answer(second, acks=1, version=9)).responses[0].partition_responses[0]
        assert old.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER and old.current_leader.leader_id == -1
        # Fetch v16 the same.
        refused_fetch = await fetch_answer(second, version=16)
        data = refused_fetch.responses[0].partitions[0]
        assert data.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert (data.current_leader.leader_id, data.current_leader.leader_epoch) == (1, 1)
        assert [(e.node_id, e.host, e.port) for e in refused_fetch.node_endpoints] == [(1, HOST, first.port)]

        # The follower stops fetching, so acks=all waits; leadership moves to it meanwhile.
        await cluster.kill(2)
        waiting = asyncio.ensure_future(produce_answer(first, acks=-1, version=11))
        await asyncio.sleep(0.05)
        assert not waiting.done()
        cluster.elect(2)
        deposed = await waiting
        answer = deposed.responses[0].partition_responses[0]
        assert answer.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert (answer.current_leader.leader_id, answer.current_leader.leader_epoch) == (2, 2)
        assert [(e.node_id, e.host, e.port) for e in deposed.node_endpoints] == [(2, HOST, second.port)]
        # A success names no leader.
        cluster.elect(1)
        done = await produce_answer(first, acks=1, version=11)
        assert done.responses[0].partition_responses[0].current_leader.leader_id == -1 and done.node_endpoints == []

        # Fetch v16 too: a fetch fenced by an old epoch learns the leader's new one.
        fenced = await fetch_answer(first, version=16, current_leader_epoch=1)
        data = fenced.responses[0].partitions[0]
        assert data.error_code == ErrorCode.FENCED_LEADER_EPOCH
        assert (data.current_leader.leader_id, data.current_leader.leader_epoch) == (1, 3)
        assert [(e.node_id, e.host, e.port) for e in fenced.node_endpoints] == [(1, HOST, first.port)]
        served = await fetch_answer(first, version=16, current_leader_epoch=3)
        assert served.responses[0].partitions[0].error_code == ErrorCode.NONE and served.node_endpoints == []

    with_cluster(tmp_path, body)


class LostAnswer(Cluster):
    """A controller whose first AlterPartition is committed but its answer lost, and whose images reach the
    nodes only once released: the window in which the leader cannot know whether its ISR change happened."""

    def __init__(self, data: Path, node_ids: tuple[int, ...] = (1, 2)) -> None:
        super().__init__(data, node_ids)
        self.held = False
        self.answers_lost = 0

    def publish(self, *records: Message) -> None:
        if not self.held:
            super().publish(*records)
            return
        for record in records:
            self.image = replay(self.image, record)

    def release(self) -> None:
        self.held = False
        super().publish()

    async def alter_partition(self, request: AlterPartitionRequest) -> AlterPartitionResponse:
        response = await super().alter_partition(request)
        if self.held and self.answers_lost == 0:
            self.answers_lost += 1
            raise ConnectionError("the controller's answer is lost")
        return response


def test_an_isr_change_whose_answer_is_lost_stays_pending_until_the_image_shows_it(tmp_path: Path) -> None:
    async def body(cluster: Cluster) -> None:
        assert isinstance(cluster, LostAnswer)
        await cluster.start(leader=1, isr=(1,))
        cluster.held = True
        leader = cluster.nodes[1]
        assert (await produce(leader, count=5)).error_code == ErrorCode.NONE
        # Broker 2 catches up: the expansion to (1, 2) is committed, its answer lost; sent again, it is refused as
        # stale (INVALID_UPDATE_VERSION), and the image showing it is held back.
        await wait_for_async(lambda: len(cluster.alter_requests) >= 2, "the expansion sent again")
        assert cluster.answers_lost == 1 and cluster.state()[1] == (1, 2)
        assert (partition_of(leader).isr, partition_of(leader).pending_isr) == ((1,), (1, 2))
        # The controller counts broker 2 in sync, so an acks=all record must wait for it (were the change dropped,
        # the leader alone would commit it, and broker 2 could be elected without it).
        await cluster.kill(2)
        waiting = asyncio.create_task(produce(leader, count=1))
        await asyncio.sleep(1.5)
        assert not waiting.done() and partition_of(leader).high_watermark == 5
        cluster.release()
        # The image shows the ISR (1, 2); broker 2 is gone, so the leader shrinks it and the record commits.
        assert (await waiting).error_code == ErrorCode.NONE
        assert cluster.state()[1] == (1,) and partition_of(leader).pending_isr is None

    async def run() -> None:
        cluster = LostAnswer(tmp_path)
        try:
            await asyncio.wait_for(body(cluster), 60)
        finally:
            await cluster.stop()

    asyncio.run(run())


def test_a_follower_outside_the_isr_joins_it_once_caught_up(tmp_path: Path) -> None:
    async def body(cluster: Cluster) -> None:
        await cluster.start(leader=1, isr=(1,))
        leader = cluster.nodes[1]
        assert (await produce(leader, count=5)).error_code == ErrorCode.NONE
        await wait_for_async(lambda: cluster.state()[1] == (1, 2), "the ISR to grow to (1, 2)")
        assert partition_of(leader).isr == (1, 2)
        assert cluster.nodes[2].log_bytes() == leader.log_bytes()
        # KIP-903: the expansion names each member's broker epoch, the follower's as its fetches gave it, so that
        # the controller can refuse a broker that registered again since those fetches.
        expansion = cluster.alter_requests[-1].topics[0].partitions[0]
        assert [(m.broker_id, m.broker_epoch) for m in expansion.new_isr_with_epochs] == [(1, 101), (2, 102)]

    with_cluster(tmp_path, body)


def test_leadership_moves_and_the_old_leader_follows(tmp_path: Path) -> None:
    async def body(cluster: Cluster) -> None:
        await cluster.start(leader=1, isr=(1, 2))
        old, new = cluster.nodes[1], cluster.nodes[2]
        assert (await produce(old)).error_code == ErrorCode.NONE
        cluster.elect(2)
        assert not partition_of(old).is_leader and partition_of(new).is_leader
        answer = await produce(new, count=2)
        assert (answer.error_code, answer.base_offset) == (ErrorCode.NONE, 3)
        await wait_for_async(lambda: old.log_bytes() == new.log_bytes(), "the logs to be byte-identical")
        assert partition_of(new).leader_epoch == 2

    with_cluster(tmp_path, body)


def test_a_follower_drops_an_epoch_it_led_without_writing_and_catches_up(tmp_path: Path) -> None:
    # Node 2 leads epoch 1 without appending, then follows node 1 at epoch 2, whose log never saw epoch 1:
    # its record-less epoch must go, or every fetch is answered "diverged" and it never catches up.
    async def body(cluster: Cluster) -> None:
        await cluster.start(leader=1, isr=(1, 2))
        first, second = cluster.nodes[1], cluster.nodes[2]
        assert (await produce(first)).error_code == ErrorCode.NONE
        await wait_for_async(lambda: first.log_bytes() == second.log_bytes(), "the logs to be byte-identical")
        cluster.elect(2)
        cluster.elect(1)
        assert (await produce(first, acks=1, count=2)).error_code == ErrorCode.NONE
        await wait_for_async(lambda: first.log_bytes() == second.log_bytes(), "the logs to be byte-identical")
        assert partition_of(second).log.leader_epoch_entries == partition_of(first).log.leader_epoch_entries

    with_cluster(tmp_path, body)


def test_a_batch_the_followers_log_refuses_holds_back_its_partition_alone(tmp_path: Path) -> None:
    """A control batch whose CRC holds but whose record is no marker Kafka knows (a damaged or foreign log): the
    follower's log refuses it, and that partition backs off while the others fetched from the same leader are
    still copied. (The refusal had failed the fetcher's every turn, and every partition it fetched stalled.)"""
    (tmp_path / "node-1").mkdir()
    log = Log.open(tmp_path / "node-1" / f"{TOPIC}-0", LogConfig())
    log.append(batch(3), leader_epoch=1)
    log.close()
    unknown = encode_batch(
        [Record(3, 2000, b"\x00\x00\x00\x07", b"", [])], producer_id=8, transactional=True, control=True
    )
    with open(tmp_path / "node-1" / f"{TOPIC}-0" / "00000000000000000000.log", "ab") as segment:
        segment.write(unknown)

    async def body(cluster: Cluster) -> None:
        await cluster.start(leader=1, isr=(1,))
        cluster.publish_partitions(2)
        leader, follower = cluster.nodes[1], cluster.nodes[2]
        assert partition_of(leader).log_end_offset == 4
        for _ in range(3):
            answer = await produce_answer(leader, acks=1, partition=1)
            written = answer.responses[0].partition_responses[0]
            assert written.error_code == ErrorCode.NONE
            copied = partial(lambda end: partition_of(follower, 1).log_end_offset == end, written.base_offset + 3)
            await wait_for_async(copied, "the follower copies partition 1")
        # The batches fetched with it are refused with it.
        assert partition_of(follower).log_end_offset == 0

    with_cluster(tmp_path, body)
