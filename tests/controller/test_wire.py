"""Every quorum message survives the trip through Kafka's Raft RPCs and their codec."""

from __future__ import annotations

import pytest

from kafkette.broker.controller import messages as m
from kafkette.broker.controller.messages import OffsetAndEpoch
from kafkette.broker.controller.wire import (
    VERSIONS,
    request_from_wire,
    request_to_wire,
    response_from_wire,
    response_to_wire,
)
from kafkette.broker.protocol.framing import decode_request, decode_response, encode_request, encode_response

REQUESTS = [
    (3, m.VoteRequest(7, 3, 6, 120)),
    (1, m.BeginEpochRequest(7, 1)),
    (1, m.EndEpochRequest(7, 1, (2, 0))),
    (2, m.FetchRequest(7, 2, 55, 6, 500)),
    (2, m.FetchSnapshotRequest(7, 2, OffsetAndEpoch(40, 5), 4096, 1 << 20)),
]
RESPONSES = [
    m.VoteResponse(7, None, True),
    m.VoteResponse(7, 2, False),
    m.BeginEpochResponse(7, 1),
    m.EndEpochResponse(8, None),
    m.FetchResponse(7, 1, 50, b"batch-bytes"),
    m.FetchResponse(7, 1, 50),
    m.FetchResponse(7, 1, 50, diverging=OffsetAndEpoch(30, 4)),
    m.FetchResponse(7, 1, 50, snapshot_id=OffsetAndEpoch(40, 5)),
    m.FetchResponse(9, None, -1, fenced=True),
    m.FetchSnapshotResponse(7, 1, OffsetAndEpoch(40, 5), 10, 30, b"0123456789"),
    m.FetchSnapshotResponse(7, 1, OffsetAndEpoch(40, 5), 0, 0, b"", missing=True),
]


@pytest.mark.parametrize(("source", "request_"), REQUESTS)
def test_requests(source: int, request_: m.Request) -> None:
    body = request_to_wire(request_, "cluster")
    version = VERSIONS[body.API_KEY]
    frame = encode_request(body, version, 1, "controller-0")
    decoded = decode_request(memoryview(frame)[4:])
    assert request_from_wire(decoded.body) == (source, request_)


@pytest.mark.parametrize("response", RESPONSES)
def test_responses(response: m.Response) -> None:
    body = response_to_wire(response)
    api_key = body.API_KEY
    frame, splices = encode_response(api_key, VERSIONS[api_key], 1, body)
    assert not splices
    _, decoded = decode_response(memoryview(bytes(frame))[4:], api_key, VERSIONS[api_key])
    assert response_from_wire(decoded) == response


def test_a_diverging_epoch_below_zero_is_refused_rather_than_sent_as_no_divergence() -> None:
    # On the wire -1 is DivergingEpoch's default: the follower would read "not diverging" and keep its tail.
    with pytest.raises(ValueError, match="diverging epoch"):
        response_to_wire(m.FetchResponse(7, 1, 50, None, diverging=OffsetAndEpoch(0, -1)))
    answer = response_to_wire(m.FetchResponse(7, 1, 50, None, diverging=OffsetAndEpoch(0, 4)))
    assert response_from_wire(answer) == m.FetchResponse(7, 1, 50, None, diverging=OffsetAndEpoch(0, 4))
