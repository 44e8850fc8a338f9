"""Kafka's group → partition hash and the ``__consumer_offsets`` record formats."""

from __future__ import annotations

import pytest

from kafkette.broker.coordination.placement import java_string_hash, partition_for
from kafkette.broker.group import record_codec
from kafkette.broker.group.record_codec import GroupMetadataValue, MemberMetadata, OffsetCommitValue


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0),
        ("a", 97),
        ("hello", 99162322),
        ("polygenelubricants", -(2**31)),  # Java's hashCode is Integer.MIN_VALUE here
        # Outside the BMP Java hashes the two UTF-16 surrogates: 0xD83D * 31 + 0xDE00.
        ("\U0001f600", 0xD83D * 31 + 0xDE00),
    ],
)
def test_java_string_hash(text: str, expected: int) -> None:
    assert java_string_hash(text) == expected


def test_min_int_hash_maps_to_partition_zero() -> None:
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("hello", 50) == 99162322 % 50


def test_offset_record_round_trip() -> None:
    value = OffsetCommitValue(offset=42, leader_epoch=3, metadata="m", commit_timestamp=1700000000000)
    key = record_codec.offset_key("g", "t", 5)
    # Kafka's layout: int16 key version 1, then group, topic, partition.
    assert key == b"\x00\x01" + b"\x00\x01g" + b"\x00\x01t" + b"\x00\x00\x00\x05"
    decoded = record_codec.decode_record(key, record_codec.offset_value(value))
    assert decoded == record_codec.OffsetRecord("g", "t", 5, value)
    assert record_codec.decode_record(key, None) == record_codec.OffsetRecord("g", "t", 5, None)


def test_group_record_round_trip() -> None:
    member = MemberMetadata(
        member_id="m-1",
        group_instance_id="i",
        client_id="c",
        client_host="/127.0.0.1",
        rebalance_timeout=300000,
        session_timeout=45000,
        subscription=b"sub",
        assignment=b"asg",
    )
    value = GroupMetadataValue(
        protocol_type="consumer",
        generation=7,
        protocol="range",
        leader="m-1",
        current_state_timestamp=1,
        members=[member],
    )
    key = record_codec.group_key("g")
    assert key == b"\x00\x02\x00\x01g"
    assert record_codec.decode_record(key, record_codec.group_value(value)) == record_codec.GroupRecord("g", value)


def test_newer_record_types_are_skipped() -> None:
    assert record_codec.decode_record(b"\x00\x03\x00\x01g", b"\x00\x00") is None
