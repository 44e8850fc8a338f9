"""The quorum's listener never leaves a peer's connection waiting for an answer that cannot come.

A follower that gets no answer in time sends its Fetch again on the same connection. The state machine
keeps one parked fetch per peer, so the older request would never be answered and, with answers written
in request order, the connection would stall for good (seen in the chaos test: a whole quorum unable to
elect a leader that stays). The listener drops such a connection instead; a new one works at once.
"""

from __future__ import annotations

import asyncio
import socket
import struct
from pathlib import Path

from waiting import wait_for_async

from kafkette.broker.config import Voter
from kafkette.broker.controller import messages as m
from kafkette.broker.controller.quorum import QuorumController
from kafkette.broker.controller.raft import Timing
from kafkette.broker.controller.wire import VERSIONS, request_to_wire, response_from_wire
from kafkette.broker.protocol.framing import decode_response, encode_request

CLUSTER_ID = "quorum-connections"
OBSERVER = 7
_SIZE = struct.Struct(">i")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


async def _leader(directory: Path) -> QuorumController:
    voter = Voter(0, "127.0.0.1", _free_port())
    controller = QuorumController(0, {0: voter}, directory, CLUSTER_ID, Timing(pre_vote=False))
    await controller.start()
    await wait_for_async(
        lambda: controller.raft.is_leader and controller.raft.high_watermark > 0, "the single voter to lead", 2, 0.01
    )
    return controller


def _fetch_frame(controller: QuorumController, correlation: int, max_wait_ms: int) -> bytes:
    raft = controller.raft
    request = m.FetchRequest(raft.epoch, OBSERVER, raft.log.end_offset, raft.log.last_epoch(), max_wait_ms)
    body = request_to_wire(request, CLUSTER_ID)
    return encode_request(body, VERSIONS[body.API_KEY], correlation, "observer")  # type: ignore[index]


async def _answer(reader: asyncio.StreamReader, api_key: int) -> m.Response:
    (size,) = _SIZE.unpack(await reader.readexactly(4))
    return response_from_wire(
        decode_response(memoryview(await reader.readexactly(size)), api_key, VERSIONS[api_key])[1]
    )


def test_a_resent_fetch_closes_the_stalled_connection_and_a_new_one_is_served(tmp_path: Path) -> None:
    asyncio.run(_resend_then_reconnect(tmp_path))


async def _resend_then_reconnect(directory: Path) -> None:
    leader = await _leader(directory)
    try:
        await _exchange(leader)
    finally:
        await leader.stop()


async def _exchange(leader: QuorumController) -> None:
    me = leader.voters[0]
    reader, writer = await asyncio.open_connection(me.host, me.port)
    # Told the high watermark first: a fetch from a replica that was not is answered at once.
    writer.write(_fetch_frame(leader, 0, max_wait_ms=0))
    await writer.drain()
    await asyncio.wait_for(_answer(reader, 1), 5)
    # Nothing new at the log end: the next fetch is parked for a long time, the resend replaces it.
    writer.write(_fetch_frame(leader, 1, max_wait_ms=60_000))
    await writer.drain()
    await asyncio.sleep(0.1)  # the leader reads and parks the first fetch before the resend arrives
    writer.write(_fetch_frame(leader, 2, max_wait_ms=0))
    await writer.drain()
    closed = await asyncio.wait_for(reader.read(), 5)
    assert closed == b"", "the stalled connection must be closed, not left waiting"
    writer.close()

    reader, writer = await asyncio.open_connection(me.host, me.port)
    writer.write(_fetch_frame(leader, 3, max_wait_ms=0))
    await writer.drain()
    answer = await asyncio.wait_for(_answer(reader, 1), 5)
    assert isinstance(answer, m.FetchResponse) and answer.leader_id == 0 and not answer.fenced
    writer.close()
