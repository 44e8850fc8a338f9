"""The quorum's messages as Kafka's Raft RPCs on ``__cluster_metadata-0``, both ways.

Versions: Vote, BeginQuorumEpoch, EndQuorumEpoch and FetchSnapshot v0 (static
voters, no directory ids), Fetch v12 (the first with LastFetchedEpoch and
DivergingEpoch that still names topics). The definitions we generate from stop at
Vote v1, before KIP-996 added PreVote, so the shell runs without pre-vote.
"""

from __future__ import annotations

from kafkette.broker.controller import messages as m
from kafkette.broker.controller.messages import OffsetAndEpoch
from kafkette.broker.controller.metadata_log import METADATA_PARTITION
from kafkette.broker.protocol.errors import ErrorCode
from kafkette.broker.protocol.messages import (
    begin_quorum_epoch_request as bqe,
)
from kafkette.broker.protocol.messages import (
    begin_quorum_epoch_response as bqe_r,
)
from kafkette.broker.protocol.messages import (
    end_quorum_epoch_request as eqe,
)
from kafkette.broker.protocol.messages import (
    end_quorum_epoch_response as eqe_r,
)
from kafkette.broker.protocol.messages import fetch_request as fr
from kafkette.broker.protocol.messages import fetch_response as fr_r
from kafkette.broker.protocol.messages import fetch_snapshot_request as fs
from kafkette.broker.protocol.messages import fetch_snapshot_response as fs_r
from kafkette.broker.protocol.messages import vote_request as vr
from kafkette.broker.protocol.messages import vote_response as vr_r
from kafkette.broker.protocol.types import Message

METADATA_TOPIC = METADATA_PARTITION.rsplit("-", 1)[0]
VERSIONS = {vr.VoteRequest.API_KEY: 0, bqe.BeginQuorumEpochRequest.API_KEY: 0, eqe.EndQuorumEpochRequest.API_KEY: 0}
VERSIONS |= {fr.FetchRequest.API_KEY: 12, fs.FetchSnapshotRequest.API_KEY: 0}
SNAPSHOT_NOT_FOUND = 98


def _leader(leader_id: int | None) -> int:
    return -1 if leader_id is None else leader_id


def _known(leader_id: int) -> int | None:
    return None if leader_id < 0 else leader_id


# --- requests -------------------------------------------------------------------------------


def request_to_wire(request: m.Request, cluster_id: str) -> Message:
    match request:
        case m.VoteRequest():
            part = vr.PartitionData(
                candidate_epoch=request.epoch,
                candidate_id=request.candidate_id,
                last_offset_epoch=request.last_epoch,
                last_offset=request.end_offset,
            )
            return vr.VoteRequest(
                cluster_id=cluster_id, topics=[vr.TopicData(topic_name=METADATA_TOPIC, partitions=[part])]
            )
        case m.BeginEpochRequest():
            bpart = bqe.PartitionData(leader_id=request.leader_id, leader_epoch=request.epoch)
            topic = bqe.TopicData(topic_name=METADATA_TOPIC, partitions=[bpart])
            return bqe.BeginQuorumEpochRequest(cluster_id=cluster_id, topics=[topic])
        case m.EndEpochRequest():
            epart = eqe.PartitionData(
                leader_id=request.leader_id,
                leader_epoch=request.epoch,
                preferred_successors=list(request.preferred_successors),
            )
            return eqe.EndQuorumEpochRequest(
                cluster_id=cluster_id, topics=[eqe.TopicData(topic_name=METADATA_TOPIC, partitions=[epart])]
            )
        case m.FetchRequest():
            fpart = fr.FetchPartition(
                current_leader_epoch=request.epoch,
                fetch_offset=request.fetch_offset,
                last_fetched_epoch=request.last_fetched_epoch,
                partition_max_bytes=2**31 - 1,
            )
            return fr.FetchRequest(
                cluster_id=cluster_id,
                replica_id=request.replica_id,
                max_wait_ms=request.max_wait_ms,
                min_bytes=1,
                topics=[fr.FetchTopic(topic=METADATA_TOPIC, partitions=[fpart])],
            )
        case m.FetchSnapshotRequest():
            spart = fs.PartitionSnapshot(
                current_leader_epoch=request.epoch,
                snapshot_id=fs.SnapshotId(end_offset=request.snapshot_id.offset, epoch=request.snapshot_id.epoch),
                position=request.position,
            )
            return fs.FetchSnapshotRequest(
                cluster_id=cluster_id,
                replica_id=request.replica_id,
                max_bytes=request.max_bytes,
                topics=[fs.TopicSnapshot(name=METADATA_TOPIC, partitions=[spart])],
            )
    raise TypeError(request)


def request_from_wire(body: Message, source: int | None = None) -> tuple[int, m.Request]:
    """(the sender's replica id, the request); Vote and epoch RPCs name their sender inside."""
    match body:
        case vr.VoteRequest():
            p = body.topics[0].partitions[0]
            return p.candidate_id, m.VoteRequest(p.candidate_epoch, p.candidate_id, p.last_offset_epoch, p.last_offset)
        case bqe.BeginQuorumEpochRequest():
            b = body.topics[0].partitions[0]
            return b.leader_id, m.BeginEpochRequest(b.leader_epoch, b.leader_id)
        case eqe.EndQuorumEpochRequest():
            e = body.topics[0].partitions[0]
            return e.leader_id, m.EndEpochRequest(e.leader_epoch, e.leader_id, tuple(e.preferred_successors))
        case fr.FetchRequest():
            f = body.topics[0].partitions[0]
            return body.replica_id, m.FetchRequest(
                f.current_leader_epoch, body.replica_id, f.fetch_offset, f.last_fetched_epoch, body.max_wait_ms
            )
        case fs.FetchSnapshotRequest():
            s = body.topics[0].partitions[0]
            snapshot_id = OffsetAndEpoch(s.snapshot_id.end_offset, s.snapshot_id.epoch)
            return body.replica_id, m.FetchSnapshotRequest(
                s.current_leader_epoch, body.replica_id, snapshot_id, s.position, body.max_bytes
            )
    raise TypeError(body)


# --- responses ------------------------------------------------------------------------------


def response_to_wire(response: m.Response) -> Message:
    match response:
        case m.VoteResponse():
            vpart = vr_r.PartitionData(
                leader_id=_leader(response.leader_id), leader_epoch=response.epoch, vote_granted=response.granted
            )
            return vr_r.VoteResponse(topics=[vr_r.TopicData(topic_name=METADATA_TOPIC, partitions=[vpart])])
        case m.BeginEpochResponse():
            bpart = bqe_r.PartitionData(leader_id=_leader(response.leader_id), leader_epoch=response.epoch)
            return bqe_r.BeginQuorumEpochResponse(
                topics=[bqe_r.TopicData(topic_name=METADATA_TOPIC, partitions=[bpart])]
            )
        case m.EndEpochResponse():
            epart = eqe_r.PartitionData(leader_id=_leader(response.leader_id), leader_epoch=response.epoch)
            return eqe_r.EndQuorumEpochResponse(topics=[eqe_r.TopicData(topic_name=METADATA_TOPIC, partitions=[epart])])
        case m.FetchResponse():
            return fr_r.FetchResponse(
                responses=[fr_r.FetchableTopicResponse(topic=METADATA_TOPIC, partitions=[_fetch_partition(response)])]
            )
        case m.FetchSnapshotResponse():
            spart = fs_r.PartitionSnapshot(
                error_code=SNAPSHOT_NOT_FOUND if response.missing else 0,
                snapshot_id=fs_r.SnapshotId(end_offset=response.snapshot_id.offset, epoch=response.snapshot_id.epoch),
                current_leader=fs_r.LeaderIdAndEpoch(
                    leader_id=_leader(response.leader_id), leader_epoch=response.epoch
                ),
                size=response.size,
                position=response.position,
                unaligned_records=response.data,
            )
            return fs_r.FetchSnapshotResponse(topics=[fs_r.TopicSnapshot(name=METADATA_TOPIC, partitions=[spart])])
    raise TypeError(response)


def _fetch_partition(response: m.FetchResponse) -> fr_r.PartitionData:
    part = fr_r.PartitionData(
        error_code=ErrorCode.FENCED_LEADER_EPOCH if response.fenced else 0,
        high_watermark=response.high_watermark,
        current_leader=fr_r.LeaderIdAndEpoch(leader_id=_leader(response.leader_id), leader_epoch=response.epoch),
        records=response.records,  # type: ignore[arg-type]
    )
    if response.diverging is not None:
        if response.diverging.epoch < 0:
            # -1 is the field's default: the follower would read "not diverging" and keep its divergent tail.
            raise ValueError(f"a diverging epoch must be at least 0 on the wire, not {response.diverging}")
        part.diverging_epoch = fr_r.EpochEndOffset(epoch=response.diverging.epoch, end_offset=response.diverging.offset)
    if response.snapshot_id is not None:
        part.snapshot_id = fr_r.SnapshotId(end_offset=response.snapshot_id.offset, epoch=response.snapshot_id.epoch)
    return part


def response_from_wire(body: Message) -> m.Response:
    match body:
        case vr_r.VoteResponse():
            v = body.topics[0].partitions[0]
            return m.VoteResponse(v.leader_epoch, _known(v.leader_id), v.vote_granted)
        case bqe_r.BeginQuorumEpochResponse():
            b = body.topics[0].partitions[0]
            return m.BeginEpochResponse(b.leader_epoch, _known(b.leader_id))
        case eqe_r.EndQuorumEpochResponse():
            e = body.topics[0].partitions[0]
            return m.EndEpochResponse(e.leader_epoch, _known(e.leader_id))
        case fr_r.FetchResponse():
            f = body.responses[0].partitions[0]
            diverging = f.diverging_epoch
            snapshot = f.snapshot_id
            records = f.records
            return m.FetchResponse(
                f.current_leader.leader_epoch,
                _known(f.current_leader.leader_id),
                f.high_watermark,
                bytes(records) if records else None,  # type: ignore[arg-type]
                OffsetAndEpoch(diverging.end_offset, diverging.epoch) if diverging.epoch >= 0 else None,
                OffsetAndEpoch(snapshot.end_offset, snapshot.epoch) if snapshot.end_offset >= 0 else None,
                fenced=f.error_code != 0,
            )
        case fs_r.FetchSnapshotResponse():
            s = body.topics[0].partitions[0]
            return m.FetchSnapshotResponse(
                s.current_leader.leader_epoch,
                _known(s.current_leader.leader_id),
                OffsetAndEpoch(s.snapshot_id.end_offset, s.snapshot_id.epoch),
                s.position,
                s.size,
                bytes(s.unaligned_records or b""),  # type: ignore[arg-type]
                missing=s.error_code != 0,
            )
    raise TypeError(body)
