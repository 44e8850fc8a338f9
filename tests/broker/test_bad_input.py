"""Malformed and hostile input closes only the offending connection; everyone else keeps working."""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator

import pytest
from raw_client import RawClient

from kafkette.broker.protocol.errors import ErrorCode
from kafkette.broker.protocol.messages import ApiVersionsRequest, MetadataRequest
from kafkette.broker.protocol.messages.api_versions_response import ApiVersionsResponse
from kafkette.broker.testing import InProcessBroker, in_process_broker

MAX_REQUEST = 1 << 20


@pytest.fixture(scope="module")
def broker() -> Iterator[InProcessBroker]:
    with in_process_broker({"socket.request.max.bytes": str(MAX_REQUEST)}) as running:
        yield running


@pytest.fixture
def bystander(broker: InProcessBroker) -> Iterator[RawClient]:
    """A well-behaved client connected before the bad one, checked after it."""
    with RawClient(broker.bootstrap) as client:
        client.request(ApiVersionsRequest(), 3)
        yield client
        response = client.request(MetadataRequest(topics=None), 12)
        assert response.brokers[0].port == broker.address[1]


def _connect(broker: InProcessBroker) -> socket.socket:
    return socket.create_connection(broker.address, timeout=5)


def _closed_by_broker(sock: socket.socket) -> bool:
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


def _frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


@pytest.mark.usefixtures("bystander")
@pytest.mark.parametrize(
    "payload",
    [
        pytest.param(b"\x00\x00\x00\x0c" + b"\xde\xad\xbe\xef" * 3, id="garbage"),
        pytest.param(_frame(struct.pack(">hhi", 9999, 0, 7) + b"\x00\x00"), id="unknown-api-key"),
        pytest.param(_frame(struct.pack(">hhi", 3, 99, 7) + b"\x00\x00"), id="unsupported-version"),
        pytest.param(_frame(struct.pack(">hhi", 3, 12, 7) + b"\x00"), id="truncated-request"),
        pytest.param(_frame(b"\x00\x03"), id="shorter-than-a-header"),
        pytest.param(struct.pack(">i", -5), id="negative-size"),
        pytest.param(struct.pack(">i", MAX_REQUEST + 1), id="frame-over-socket-request-max-bytes"),
    ],
)
def test_bad_frame_closes_only_that_connection(broker: InProcessBroker, payload: bytes) -> None:
    with _connect(broker) as sock:
        sock.sendall(payload)
        assert _closed_by_broker(sock)


@pytest.mark.usefixtures("bystander")
def test_oversized_frame_is_refused_before_its_body_arrives(broker: InProcessBroker) -> None:
    with _connect(broker) as sock:
        sock.sendall(struct.pack(">i", 50 * MAX_REQUEST) + b"\x00" * 1024)
        assert _closed_by_broker(sock)


def test_api_versions_with_unknown_version_answers_v0_with_the_supported_range(
    broker: InProcessBroker,
) -> None:
    with _connect(broker) as sock:
        # A future ApiVersions version: header v2 with compact client id the broker cannot know about.
        sock.sendall(_frame(struct.pack(">hhi", 18, 42, 77) + b"\x00\x05hello\x00"))
        size = struct.unpack(">i", sock.recv(4))[0]
        body = b""
        while len(body) < size:
            body += sock.recv(size - len(body))
    correlation_id = struct.unpack(">i", body[:4])[0]
    response = ApiVersionsResponse.decode(body[4:], 0)
    assert correlation_id == 77
    assert response.error_code == ErrorCode.UNSUPPORTED_VERSION
    versions = {api.api_key: (api.min_version, api.max_version) for api in response.api_keys}
    assert versions[18] == (0, 4)
    assert versions[0][0] == 3


def test_pipelined_requests_are_answered_in_order(broker: InProcessBroker) -> None:
    with RawClient(broker.bootstrap) as client:
        sent = [
            client.send(ApiVersionsRequest(), 3) if i % 2 else client.send(MetadataRequest(), 12) for i in range(20)
        ]
        received = [client.receive(18 if i % 2 else 3, 3 if i % 2 else 12)[0] for i in range(20)]
    assert received == sent
