"""Leaders' ISR proposals to the controller, as Kafka's AlterPartitionManager sends them: one AlterPartition in
flight at a time, carrying every proposal made since the last one went out.

After a stall (a follower's broker paused, an event loop held by thousands of new logs) thousands of partitions
propose at once. Sent one request apiece they were thousands of Raft commits and metadata images, every broker's
heartbeat queued behind them at the controller, and each leader's shrinks trickled out at 50 a second for minutes
while the followers caught up and asked to be let back in.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from uuid import UUID

from kafkette.broker.protocol.errors import ErrorCode, error_name
from kafkette.broker.protocol.messages.alter_partition_request import (
    AlterPartitionRequest,
    BrokerState,
    TopicData,
)
from kafkette.broker.protocol.messages.alter_partition_request import (
    PartitionData as ProposedPartition,
)
from kafkette.broker.protocol.messages.alter_partition_response import AlterPartitionResponse
from kafkette.broker.protocol.messages.alter_partition_response import PartitionData as AlteredPartition
from kafkette.broker.replication.partition import ISR_RETRY_BACKOFF_MS, Partition
from kafkette.broker.tasks import cancel_and_wait

logger = logging.getLogger(__name__)

AlterPartition = Callable[[AlterPartitionRequest], Awaitable[AlterPartitionResponse]]
# AlterPartition errors after which the controller has certainly not applied the change: back to the committed ISR.
ISR_RESET = frozenset({ErrorCode.INELIGIBLE_REPLICA, ErrorCode.OPERATION_NOT_ATTEMPTED})
# Errors saying this leader's state is stale (another leader or partition epoch, the topic gone): the change may
# have been committed by an earlier attempt, so it stays pending until the image replaces it (Kafka's partition).
ISR_AWAITS_IMAGE = frozenset(
    {
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.INVALID_UPDATE_VERSION,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.UNKNOWN_TOPIC_ID,
        ErrorCode.INVALID_REQUEST,
    }
)
_AnswerKey = tuple[UUID | str, int]


@dataclass(frozen=True, slots=True)
class _Proposal:
    """Proposal ``token`` of ``partition``, with the epochs it was made at: a resend must not claim newer ones."""

    partition: Partition
    isr: tuple[int, ...]
    token: int
    leader_epoch: int
    partition_epoch: int

    @property
    def pending(self) -> bool:
        return self.partition.awaits_isr_answer(self.token)


class IsrSender:
    """Sends proposals until an answer settles each, or a newer image or leadership replaces it (a request that
    failed or timed out may have been committed, so it is sent again after ISR_RETRY_BACKOFF_MS)."""

    def __init__(self, node_id: int, alter_partition: AlterPartition, broker_epoch: Callable[[], int]) -> None:
        self._node_id = node_id
        self._alter_partition = alter_partition
        self._broker_epoch = broker_epoch
        self._waiting: dict[tuple[str, int], _Proposal] = {}
        self._sending: asyncio.Task[None] | None = None

    def submit(self, partition: Partition, isr: tuple[int, ...], token: int) -> None:
        proposal = _Proposal(partition, isr, token, partition.leader_epoch, partition.partition_epoch)
        self._waiting[(partition.topic, partition.index)] = proposal
        if self._sending is None:
            self._sending = asyncio.get_running_loop().create_task(self._send_waiting(), name="alter-partition")

    async def stop(self) -> None:
        await cancel_and_wait(self._sending)

    async def _send_waiting(self) -> None:
        try:
            while self._waiting:
                batch = [proposal for proposal in self._waiting.values() if proposal.pending]
                self._waiting = {}
                again = await self._send(batch) if batch else []
                if again:
                    await asyncio.sleep(ISR_RETRY_BACKOFF_MS / 1000)
                for proposal in again:
                    # A proposal made during the backoff is newer than the one it would replace.
                    self._waiting.setdefault((proposal.partition.topic, proposal.partition.index), proposal)
        finally:
            self._sending = None

    async def _send(self, batch: list[_Proposal]) -> list[_Proposal]:
        """Send ``batch`` once; the proposals to send again."""
        try:
            response = await self._alter_partition(self._request(batch))
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            logger.warning("AlterPartition of %d partitions failed, sending it again: %s", len(batch), exc)
            return batch
        if response.error_code != ErrorCode.NONE:
            logger.warning(
                "AlterPartition of %d partitions refused: %s; sending it again",
                len(batch),
                error_name(response.error_code),
            )
            return batch
        answers = _answers(response)
        return [proposal for proposal in batch if not _settle(proposal, answers)]

    def _request(self, batch: list[_Proposal]) -> AlterPartitionRequest:
        topics: dict[UUID, TopicData] = {}
        for proposal in batch:
            partition = proposal.partition
            topic = topics.get(partition.topic_id)
            if topic is None:
                topic = topics[partition.topic_id] = TopicData(
                    topic_name=partition.topic, topic_id=partition.topic_id, partitions=[]
                )
            topic.partitions.append(
                ProposedPartition(
                    partition_index=partition.index,
                    leader_epoch=proposal.leader_epoch,
                    new_isr=list(proposal.isr),
                    new_isr_with_epochs=[
                        BrokerState(broker_id=replica, broker_epoch=self._member_epoch(partition, replica))
                        for replica in proposal.isr
                    ],
                    partition_epoch=proposal.partition_epoch,
                )
            )
        return AlterPartitionRequest(
            broker_id=self._node_id, broker_epoch=self._broker_epoch(), topics=list(topics.values())
        )

    def _member_epoch(self, partition: Partition, replica: int) -> int:
        """An ISR member's broker epoch for AlterPartition (KIP-903): ours, or the one a follower last fetched with."""
        return self._broker_epoch() if replica == self._node_id else partition.follower_broker_epoch(replica)


def _answers(response: AlterPartitionResponse) -> Mapping[_AnswerKey, AlteredPartition]:
    """The answers by topic id (AlterPartition v2+) and by topic name (v0-v1) with partition index."""
    found: dict[_AnswerKey, AlteredPartition] = {}
    for topic in response.topics:
        for answer in topic.partitions:
            found[(topic.topic_id, answer.partition_index)] = answer
            if topic.topic_name:
                found[(topic.topic_name, answer.partition_index)] = answer
    return found


def _settle(proposal: _Proposal, answers: Mapping[_AnswerKey, AlteredPartition]) -> bool:
    """Apply the controller's answer to ``proposal``; False when it is to be sent again."""
    partition, isr, token = proposal.partition, proposal.isr, proposal.token
    answer = answers.get((partition.topic_id, partition.index)) or answers.get((partition.topic, partition.index))
    code = answer.error_code if answer is not None else ErrorCode.UNKNOWN_SERVER_ERROR
    if code in ISR_RESET:
        logger.warning("%s: AlterPartition to ISR %s refused: %s", partition, list(isr), error_name(code))
        partition.isr_change_done(token, partition.leader_epoch, None, -1)
        return True
    if code in ISR_AWAITS_IMAGE:
        logger.info(
            "%s: AlterPartition to ISR %s refused: %s; pending until the metadata shows why",
            partition,
            list(isr),
            error_name(code),
        )
        return True
    if code != ErrorCode.NONE or answer is None:
        logger.warning(
            "%s: AlterPartition to ISR %s failed: %s; sending it again", partition, list(isr), error_name(code)
        )
        return False
    if answer.leader_id != partition.node_id:
        logger.info(
            "%s: ISR %s committed with broker %d leading at epoch %d; awaiting the image",
            partition,
            list(isr),
            answer.leader_id,
            answer.leader_epoch,
        )
    else:
        logger.info("%s: ISR now %s (partition epoch %d)", partition, answer.isr, answer.partition_epoch)
    partition.isr_change_done(token, answer.leader_epoch, answer.isr, answer.partition_epoch)
    return True
