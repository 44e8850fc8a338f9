"""Request and response framing: size prefix, header versions, and the ApiVersions exception."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import TypeVar

from kafkette.broker.protocol.codec import DecodeError, Splices, decode_from, encode_into
from kafkette.broker.protocol.messages import REQUESTS, RESPONSES
from kafkette.broker.protocol.messages.request_header import RequestHeader
from kafkette.broker.protocol.messages.response_header import ResponseHeader
from kafkette.broker.protocol.types import Message

API_VERSIONS_KEY = 18
_KEY_VERSION_CORRELATION = struct.Struct(">hhi")
_SIZE = struct.Struct(">i")
M = TypeVar("M", bound=Message)


class UnexpectedResponseError(Exception):
    """A request was answered with a message other than that request's response."""


def expect(answer: Message, response_type: type[M]) -> M:
    """``answer`` as the response type the request called for."""
    if not isinstance(answer, response_type):
        raise UnexpectedResponseError(f"expected {response_type.__name__}, got {type(answer).__name__}")
    return answer


class UnknownApiError(DecodeError):
    """A request for an API key this protocol does not define."""


class UnsupportedApiVersionError(DecodeError):
    """A request version outside the versions this protocol defines for the key."""


def request_header_version(api_key: int, api_version: int) -> int:
    return 2 if REQUESTS[api_key].is_flexible(api_version) else 1


def response_header_version(api_key: int, api_version: int) -> int:
    # ApiVersions answers with header v0 always, so that a client can read the
    # error even when it asked for a version the broker does not know.
    if api_key == API_VERSIONS_KEY:
        return 0
    return 1 if RESPONSES[api_key].is_flexible(api_version) else 0


@dataclass(slots=True)
class Request:
    header: RequestHeader
    body: Message

    @property
    def api_key(self) -> int:
        return self.header.request_api_key

    @property
    def api_version(self) -> int:
        return self.header.request_api_version

    @property
    def correlation_id(self) -> int:
        return self.header.correlation_id


def peek_header(frame: memoryview) -> tuple[int, int, int]:
    """(api_key, api_version, correlation_id) of a request frame (without its size prefix)."""
    if len(frame) < _KEY_VERSION_CORRELATION.size:
        raise DecodeError(f"request of {len(frame)} bytes is shorter than a header")
    return _KEY_VERSION_CORRELATION.unpack_from(frame, 0)


def decode_request(frame: memoryview) -> Request:
    """Decode a request frame (without its size prefix)."""
    api_key, api_version, _ = peek_header(frame)
    request_cls = REQUESTS.get(api_key)
    if request_cls is None:
        raise UnknownApiError(f"unknown API key {api_key}")
    low, high = request_cls.VALID_VERSIONS
    if not low <= api_version <= high:
        raise UnsupportedApiVersionError(f"{request_cls.NAME} v{api_version} is not in v{low}-v{high}")
    header, pos = decode_from(RequestHeader, frame, 0, request_header_version(api_key, api_version))
    body, _ = decode_from(request_cls, frame, pos, api_version)
    return Request(header, body)


def encode_request(body: Message, api_version: int, correlation_id: int, client_id: str | None) -> bytes:
    """A whole request frame with its size prefix (for clients and tests)."""
    api_key = body.API_KEY
    if api_key is None:
        raise ValueError(f"{body.NAME} is not a request: it has no API key")
    header = RequestHeader(
        request_api_key=api_key,
        request_api_version=api_version,
        correlation_id=correlation_id,
        client_id=client_id,
    )
    out = bytearray(4)
    splices: Splices = []
    encode_into(header, request_header_version(api_key, api_version), out, splices)
    encode_into(body, api_version, out, splices)
    _SIZE.pack_into(out, 0, len(out) - 4)
    return bytes(out)


def encode_response(api_key: int, api_version: int, correlation_id: int, body: Message) -> tuple[bytearray, Splices]:
    """A response frame with its size prefix; file regions in ``splices`` are counted in the size."""
    out = bytearray(4)
    splices: Splices = []
    encode_into(
        ResponseHeader(correlation_id=correlation_id),
        response_header_version(api_key, api_version),
        out,
        splices,
    )
    encode_into(body, api_version, out, splices)
    total = len(out) - 4 + sum(region.size for _, region in splices)
    _SIZE.pack_into(out, 0, total)
    return out, splices


def decode_response(frame: memoryview, api_key: int, api_version: int) -> tuple[int, Message]:
    """(correlation_id, body) of a response frame without its size prefix (for clients and tests)."""
    header, pos = decode_from(ResponseHeader, frame, 0, response_header_version(api_key, api_version))
    body, _ = decode_from(RESPONSES[api_key], frame, pos, api_version)
    return header.correlation_id, body
