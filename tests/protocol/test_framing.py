"""Request/response framing: header versions, size prefixes, rejections, and frames of real clients."""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import confluent_kafka
import kafka
import pytest
from kafka.errors import KafkaError

from kafkette.broker.protocol.codec import DecodeError
from kafkette.broker.protocol.framing import (
    UnknownApiError,
    UnsupportedApiVersionError,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    request_header_version,
    response_header_version,
)
from kafkette.broker.protocol.messages import (
    REQUESTS,
    ApiVersionsRequest,
    ApiVersionsResponse,
    FetchResponse,
    MetadataRequest,
    MetadataResponse,
    ProduceRequest,
)
from kafkette.broker.protocol.messages.fetch_response import FetchableTopicResponse, PartitionData
from kafkette.broker.protocol.types import FileRegion

CAPTURE_TIMEOUT_S = 10.0


def _body(frame: bytes) -> memoryview:
    """The frame without its size prefix, checking that the prefix is right."""
    (size,) = struct.unpack_from(">i", frame)
    assert size == len(frame) - 4
    return memoryview(frame)[4:]


def test_header_versions_follow_the_flexible_versions() -> None:
    assert [request_header_version(18, version) for version in range(5)] == [1, 1, 1, 2, 2]
    assert request_header_version(0, 8) == 1
    assert request_header_version(0, 9) == 2
    assert response_header_version(3, 8) == 0
    assert response_header_version(3, 9) == 1
    # ApiVersions answers with header v0 even in its flexible versions.
    assert [response_header_version(18, version) for version in range(5)] == [0] * 5


def test_flexible_request_header_keeps_a_legacy_client_id() -> None:
    frame = encode_request(ApiVersionsRequest(), 3, correlation_id=7, client_id="cl-ü")
    client_id = "cl-ü".encode()
    header = struct.pack(">hhih", 18, 3, 7, len(client_id)) + client_id + b"\x00"  # v2: + tagged fields
    body = b"\x01" + b"\x01" + b"\x00"  # empty compact strings, no tagged fields
    assert frame == struct.pack(">i", len(header) + len(body)) + header + body
    request = decode_request(_body(frame))
    assert (request.api_key, request.api_version, request.correlation_id) == (18, 3, 7)
    assert request.header.client_id == "cl-ü"
    assert request.body == ApiVersionsRequest()


def test_non_flexible_request_header_has_no_tagged_fields() -> None:
    frame = encode_request(MetadataRequest(topics=[]), 1, correlation_id=-5, client_id=None)
    header = struct.pack(">hhih", 3, 1, -5, -1)  # null client id
    assert frame == struct.pack(">i", len(header) + 4) + header + struct.pack(">i", 0)
    request = decode_request(_body(frame))
    assert request.header.client_id is None
    assert request.body == MetadataRequest(topics=[])


@pytest.mark.parametrize(("version", "tags"), [(8, b""), (9, b"\x00")])
def test_response_header_v0_and_v1(version: int, tags: bytes) -> None:
    body = MetadataResponse(cluster_id="c")
    out, splices = encode_response(3, version, 42, body)
    assert splices == []
    frame = bytes(out)
    assert frame[4:] == struct.pack(">i", 42) + tags + body.encode(version)
    assert decode_response(_body(frame), 3, version) == (42, body)


@pytest.mark.parametrize("version", range(5))
def test_api_versions_response_always_uses_header_v0(version: int) -> None:
    body = ApiVersionsResponse(error_code=35)
    out, _ = encode_response(18, version, 9, body)
    assert bytes(out[4:]) == struct.pack(">i", 9) + body.encode(version)
    assert decode_response(_body(bytes(out)), 18, version) == (9, body)


@dataclass
class Region:
    file: Any
    position: int
    size: int


def test_file_regions_are_spliced_and_counted_in_the_size() -> None:
    region = Region(file=None, position=100, size=5000)
    assert isinstance(region, FileRegion)
    body = FetchResponse(responses=[FetchableTopicResponse(partitions=[PartitionData(records=region)])])
    out, splices = encode_response(1, 12, 1, body)
    assert splices == [(len(out) - 3, region)]  # then the partition's and topic's and body's tag sections
    assert struct.unpack_from(">i", out)[0] == len(out) - 4 + region.size
    assert out[splices[0][0] - 2 : splices[0][0]] == b"\x89\x27"  # compact length 5001 as a uvarint


@pytest.mark.parametrize("api_key", [-1, 93, 1000, 32767])
def test_unknown_api_keys_are_rejected(api_key: int) -> None:
    frame = struct.pack(">hhih", api_key, 0, 1, -1)
    with pytest.raises(UnknownApiError):
        decode_request(memoryview(frame))


@pytest.mark.parametrize("api_key", [0, 3, 18])
def test_versions_out_of_range_are_rejected(api_key: int) -> None:
    low, high = REQUESTS[api_key].VALID_VERSIONS
    for version in (low - 1, high + 1):
        frame = struct.pack(">hhih", api_key, version, 1, -1)
        with pytest.raises(UnsupportedApiVersionError):
            decode_request(memoryview(frame))


@pytest.mark.parametrize("length", range(8))
def test_short_frames_are_decode_errors(length: int) -> None:
    frame = encode_request(ProduceRequest(), 9, correlation_id=1, client_id="x")[4:]
    with pytest.raises(DecodeError):
        decode_request(memoryview(frame[:length]))


# ---------------------------------------------------------------------------
# Frames sent by real clients


def _recv_exactly(conn: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            raise ConnectionError(f"peer closed after {len(data)} of {size} bytes")
        data += chunk
    return data


class FirstFrame:
    """A listener on 127.0.0.1 that records the first request frame of the first connection."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.server.settimeout(CAPTURE_TIMEOUT_S)
        self.bootstrap = f"127.0.0.1:{self.server.getsockname()[1]}"
        self.frame: bytes | None = None
        self.error: BaseException | None = None
        self.done = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)

    def _accept(self) -> None:
        try:
            conn, _ = self.server.accept()
            with conn:
                conn.settimeout(CAPTURE_TIMEOUT_S)
                (size,) = struct.unpack(">i", _recv_exactly(conn, 4))
                self.frame = struct.pack(">i", size) + _recv_exactly(conn, size)
        except BaseException as exc:  # reported by capture()
            self.error = exc
        finally:
            self.done.set()

    def capture(self, run_client: Callable[[FirstFrame], None]) -> bytes:
        self._thread.start()
        try:
            run_client(self)
            self._thread.join(CAPTURE_TIMEOUT_S)
        finally:
            self.server.close()
        assert not self._thread.is_alive(), "listener still waiting"
        if self.error is not None:
            raise self.error
        assert self.frame is not None
        return self.frame


def _assert_reencodes_exactly(frame: bytes) -> None:
    request = decode_request(_body(frame))
    assert isinstance(request.body, ApiVersionsRequest)
    again = encode_request(request.body, request.api_version, request.correlation_id, request.header.client_id)
    assert again == frame


def _run_confluent(listener: FirstFrame) -> None:
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": listener.bootstrap, "socket.timeout.ms": 2000, "client.id": "kafkette-ü"}
    )
    try:
        deadline = time.monotonic() + CAPTURE_TIMEOUT_S
        while not listener.done.is_set() and time.monotonic() < deadline:
            producer.poll(0.05)
    finally:
        del producer  # destroys the librdkafka handle and joins its threads


def test_confluent_kafka_api_versions_frame_is_reencoded_byte_for_byte() -> None:
    frame = FirstFrame().capture(_run_confluent)
    _assert_reencodes_exactly(frame)
    request = decode_request(_body(frame))
    assert request.api_version >= 3
    assert request.header.client_id == "kafkette-ü"
    assert request.body.client_software_name == "confluent-kafka-python"
    assert request.body.client_software_version.startswith(confluent_kafka.version()[0])


def _run_kafka_python(listener: FirstFrame) -> None:
    producer = None
    try:
        producer = kafka.KafkaProducer(
            bootstrap_servers=listener.bootstrap,
            client_id="kafkette-kp",
            request_timeout_ms=3000,
            bootstrap_timeout_ms=3000,
            reconnect_backoff_max_ms=100,
        )
    except KafkaError:
        pass  # nobody answers ApiVersions: the producer gives up after bootstrap_timeout_ms
    finally:
        if producer is not None:
            producer.close(timeout=1)


def test_kafka_python_api_versions_frame_is_reencoded_byte_for_byte() -> None:
    frame = FirstFrame().capture(_run_kafka_python)
    _assert_reencodes_exactly(frame)
    request = decode_request(_body(frame))
    assert request.header.client_id == "kafkette-kp"
    assert request.body.client_software_name == "kafka-python"
