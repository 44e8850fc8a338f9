"""Round trips of every message in every version, tagged-field rules, zero-copy records, bad input."""

from __future__ import annotations

import contextlib
import json
import random
import re
import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from message_factory import MessageFactory, every_message_class, versions_of

from kafkette.broker.protocol.codec import DecodeError, decode_from
from kafkette.broker.protocol.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    FetchRequest,
    FetchResponse,
    MetadataRequest,
    MetadataResponse,
    ProduceRequest,
    ProduceResponse,
)
from kafkette.broker.protocol.messages.api_versions_response import ApiVersion, FinalizedFeatureKey
from kafkette.broker.protocol.messages.produce_request import PartitionProduceData, TopicProduceData
from kafkette.broker.protocol.types import Message

SPEC_DIR = Path("/work/shared/kafka-protocol/message")
ALL_CLASSES = every_message_class()
INSTANCES_PER_VERSION = 4
KEY_MESSAGES = [
    ProduceRequest,
    ProduceResponse,
    FetchRequest,
    FetchResponse,
    MetadataRequest,
    MetadataResponse,
    ApiVersionsRequest,
    ApiVersionsResponse,
]
KEY_PAIRS = [(cls, version) for cls in KEY_MESSAGES for version in versions_of(cls)]
TRUNCATED = [
    (ProduceRequest, 3),
    (ProduceRequest, 9),
    (FetchRequest, 13),
    (FetchResponse, 16),
    (MetadataRequest, 0),
    (MetadataResponse, 12),
    (ApiVersionsResponse, 3),
]


def assert_round_trip(obj: Message, version: int) -> bytes:
    """Encode, decode (consuming every byte), compare, and re-encode to the same bytes."""
    encoded = obj.encode(version)
    decoded, end = decode_from(type(obj), memoryview(encoded), 0, version)
    assert end == len(encoded), f"{obj.NAME} v{version}: decoded {end} of {len(encoded)} bytes"
    assert decoded == obj, f"{obj.NAME} v{version}"
    assert decoded.encode(version) == encoded, f"{obj.NAME} v{version}"
    return encoded


def _declared_versions(path: Path) -> range:
    text = re.sub(r"^\s*//.*$", "", path.read_text(), flags=re.MULTILINE)
    low, _, high = json.loads(text)["validVersions"].partition("-")
    return range(int(low), int(high or low) + 1)


def test_every_definition_and_version_is_covered() -> None:
    declared = {json_path.stem: _declared_versions(json_path) for json_path in sorted(SPEC_DIR.glob("*.json"))}
    assert {cls.NAME: versions_of(cls) for cls in ALL_CLASSES} == declared
    assert sum(len(versions) for versions in declared.values()) == 674


@pytest.mark.parametrize("cls", ALL_CLASSES, ids=lambda cls: cls.NAME)
def test_every_version_round_trips(cls: type[Message]) -> None:
    rng = random.Random(cls.NAME)
    factory = MessageFactory(rng)
    for version in versions_of(cls):
        assert_round_trip(cls(), version)
        for _ in range(INSTANCES_PER_VERSION):
            assert_round_trip(factory.build(cls, version), version)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(KEY_PAIRS), st.randoms(use_true_random=False))
def test_key_messages_round_trip(pair: tuple[type[Message], int], rng: random.Random) -> None:
    cls, version = pair
    assert_round_trip(MessageFactory(rng).build(cls, version), version)


def test_tagged_field_at_default_is_not_written() -> None:
    response = ApiVersionsResponse(api_keys=[ApiVersion(api_key=18, min_version=0, max_version=4)])
    encoded = response.encode(3)
    # error_code, compact array (1 + 1) of one ApiVersion with its empty tag section, throttle, no tags.
    assert encoded == bytes.fromhex("000002001200000004000000000000")
    assert encoded[-1] == 0


def test_tagged_field_that_differs_is_written_and_read_back() -> None:
    response = ApiVersionsResponse(
        finalized_features_epoch=5,
        finalized_features=[FinalizedFeatureKey(name="mv", max_version_level=7, min_version_level=1)],
    )
    encoded = response.encode(3)
    epoch = b"\x01\x08" + struct.pack(">q", 5)  # tag 1, 8 bytes
    features = b"\x02\x09" + b"\x02" + b"\x03mv" + b"\x00\x07" + b"\x00\x01" + b"\x00"  # tag 2, 9 bytes
    assert encoded == bytes.fromhex("00000100000000") + b"\x02" + epoch + features
    decoded = ApiVersionsResponse.decode(encoded, 3)
    assert decoded.finalized_features_epoch == 5
    assert decoded.finalized_features == response.finalized_features
    assert decoded.supported_features == []
    assert decoded.zk_migration_ready is False


def test_unknown_tags_are_skipped() -> None:
    encoded = ApiVersionsResponse().encode(3)
    with_unknown = encoded[:-1] + b"\x01" + b"\x63\x03abc"  # tag 99, 3 bytes
    assert ApiVersionsResponse.decode(with_unknown, 3) == ApiVersionsResponse()


@pytest.mark.parametrize("version", [3, 9, 11])
def test_records_decode_as_a_view_into_the_input(version: int) -> None:
    batch = bytes(range(200))
    request = ProduceRequest(
        acks=-1,
        timeout_ms=1000,
        topic_data=[TopicProduceData(name="t", partition_data=[PartitionProduceData(index=0, records=batch)])],
    )
    buffer = bytearray(request.encode(version))
    records = ProduceRequest.decode(buffer, version).topic_data[0].partition_data[0].records
    assert isinstance(records, memoryview)
    assert records.obj is buffer
    assert bytes(records) == batch
    buffer[buffer.index(batch)] = 0xFF  # the view sees changes to the input: nothing was copied
    assert records[0] == 0xFF


def _populated(cls: type[Message], version: int) -> tuple[Message, bytes]:
    """A random instance whose encoding is reasonably large (many fields and array elements)."""
    rng = random.Random(f"{cls.NAME}-{version}")
    candidates = [MessageFactory(rng).build(cls, version) for _ in range(20)]
    obj = max(candidates, key=lambda candidate: len(candidate.encode(version)))
    return obj, obj.encode(version)


@pytest.mark.parametrize(("cls", "version"), TRUNCATED, ids=lambda item: getattr(item, "NAME", item))
def test_every_truncation_raises_decode_error(cls: type[Message], version: int) -> None:
    _, encoded = _populated(cls, version)
    assert len(encoded) > 30
    for length in range(len(encoded)):
        with pytest.raises(DecodeError):
            cls.decode(encoded[:length], version)


def _decode_or_reject(cls: type[Message], data: bytes, version: int) -> None:
    """Garbage either decodes to something or raises DecodeError; anything else fails the test."""
    with contextlib.suppress(DecodeError):
        cls.decode(data, version)


@pytest.mark.parametrize("cls", ALL_CLASSES, ids=lambda cls: cls.NAME)
def test_garbage_never_raises_anything_but_decode_error(cls: type[Message]) -> None:
    rng = random.Random(f"garbage-{cls.NAME}")
    for version in versions_of(cls):
        valid = bytearray(MessageFactory(rng).build(cls, version).encode(version))
        for _ in range(10):
            _decode_or_reject(cls, rng.randbytes(rng.randint(0, 64)), version)
            mutated = bytearray(valid)
            for _ in range(rng.randint(1, 3)):
                if mutated:
                    mutated[rng.randrange(len(mutated))] = rng.randrange(256)
            _decode_or_reject(cls, bytes(mutated), version)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(KEY_PAIRS), st.binary(max_size=200))
def test_key_messages_reject_arbitrary_bytes_cleanly(pair: tuple[type[Message], int], data: bytes) -> None:
    cls, version = pair
    _decode_or_reject(cls, data, version)
