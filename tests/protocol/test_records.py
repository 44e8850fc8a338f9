"""Record-level batch codec: round trips, properties, corruption, and agreement with real clients.

The clients are kafka-python (pure Python), aiokafka (Cython) and librdkafka (confluent-kafka).
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Callable
from typing import Any

import confluent_kafka
import pytest
from aiokafka.record.default_records import DefaultRecordBatch as AioBatch
from aiokafka.record.default_records import DefaultRecordBatchBuilder as AioBuilder
from hypothesis import given
from hypothesis import strategies as st
from kafka import codec as kafka_python_codec
from kafka.record.default_records import DefaultRecordBatch as KpBatch
from kafka.record.default_records import DefaultRecordBatchBuilder as KpBuilder

from kafkette.broker.protocol.batch import (
    HEADER_SIZE,
    CorruptBatchError,
    UnsupportedMagicError,
    batch_crc,
    patch_base_offset,
    set_log_append_time,
    validate_batch,
)
from kafkette.broker.protocol.compression import Codec, UnsupportedCompressionError
from kafkette.broker.protocol.records import (
    ControlRecord,
    ControlRecordType,
    Header,
    Record,
    RecordBatch,
    decode_batch,
    decode_batches,
    decode_control_record,
    encode_batch,
    encode_control_record_key,
    encode_end_txn_marker,
)
from kafkette.broker.protocol.varint import decode_varint, decode_varlong, encode_varint, encode_varlong

CODECS = list(Codec)
T0 = 1_700_000_000_000


def sample_records(base_offset: int = 0) -> list[Record]:
    """Keys, null keys, null values, headers (one with a null value), and a timestamp before the first."""
    return [
        Record(base_offset, T0, b"key-0", b"value " * 40, [Header("trace", b"abc"), Header("empty", b"")]),
        Record(base_offset + 1, T0 - 5_000, None, b"no key " * 40, []),
        Record(base_offset + 2, T0 + 7, b"tombstone", None, [Header("null-value", None)]),
        Record(base_offset + 3, T0 + 1, b"", b"", [Header("\u00e9t\u00e9", b"\x00\xff")]),
    ]


def _reencode_crc(batch: bytearray) -> None:
    struct.pack_into(">I", batch, 17, batch_crc(batch, 0, len(batch)))


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip(codec: Codec) -> None:
    records = sample_records(base_offset=100)
    data = encode_batch(records, compression=codec, partition_leader_epoch=3)
    batch = decode_batch(data)
    assert batch.records == records
    assert batch.compression == codec
    assert batch.base_offset == 100
    assert batch.last_offset == 103
    assert batch.record_count == 4
    assert batch.base_timestamp == T0
    assert batch.max_timestamp == T0 + 7
    assert batch.partition_leader_epoch == 3
    assert batch.size == len(data)
    assert batch.timestamp_type == 0
    assert not batch.is_control and not batch.is_transactional
    assert batch.delete_horizon is None
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (-1, -1, -1)
    assert validate_batch(data).crc == batch.crc


@pytest.mark.parametrize("codec", [Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD])
def test_compression_shrinks_the_records_section(codec: Codec) -> None:
    records = sample_records()
    assert len(encode_batch(records, compression=codec)) < len(encode_batch(records))


def test_record_attributes_survive() -> None:
    record = Record(0, T0, b"k", b"v", [], attributes=0x7F)
    assert decode_batch(encode_batch([record])).records == [record]


def test_producer_and_flags() -> None:
    data = encode_batch(
        sample_records(),
        producer_id=4242,
        producer_epoch=7,
        base_sequence=2_147_483_646,
        transactional=True,
        timestamp_type=1,
        max_timestamp=T0 + 99,
    )
    batch = decode_batch(data)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (4242, 7, 2_147_483_646)
    assert batch.is_transactional
    assert batch.timestamp_type == 1
    # Sequences wrap at int32 max, as Kafka's do.
    assert batch.last_sequence == 1


def test_log_append_time_applies_max_timestamp_to_every_record() -> None:
    data = bytearray(encode_batch(sample_records()))
    set_log_append_time(data, 0, len(data), T0 + 1_000_000)
    batch = decode_batch(data)
    assert [record.timestamp for record in batch.records] == [T0 + 1_000_000] * 4
    kafka_python_batch = KpBatch(bytes(data))
    assert [record.timestamp for record in kafka_python_batch] == [T0 + 1_000_000] * 4


def test_base_offset_defaults_to_first_record_and_gaps_are_kept() -> None:
    records = [Record(50, T0, None, b"a", []), Record(53, T0, None, b"b", [])]
    batch = decode_batch(encode_batch(records))
    assert batch.base_offset == 50
    assert batch.last_offset_delta == 3
    assert [record.offset for record in batch.records] == [50, 53]


def test_compacted_batch_keeps_its_last_offset() -> None:
    """Compaction keeps a batch's offset range (for producer state) even when records go."""
    kept = [Record(11, T0, b"k", b"v", [])]
    batch = decode_batch(encode_batch(kept, base_offset=10, last_offset_delta=4, producer_id=9, producer_epoch=0))
    assert (batch.base_offset, batch.last_offset, batch.records) == (10, 14, kept)
    empty = decode_batch(encode_batch([], base_offset=10, last_offset_delta=4))
    assert (empty.base_offset, empty.last_offset, empty.record_count, empty.records) == (10, 14, 0, [])
    assert empty.max_timestamp == -1


def test_delete_horizon_is_the_base_timestamp() -> None:
    records = sample_records()
    batch = decode_batch(encode_batch(records, delete_horizon=T0 + 86_400_000))
    assert batch.delete_horizon == T0 + 86_400_000
    assert batch.base_timestamp == T0 + 86_400_000
    assert batch.records == records


@pytest.mark.parametrize(
    ("records", "kwargs", "message"),
    [
        ([Record(5, T0, None, b"a", []), Record(5, T0, None, b"b", [])], {}, "increase"),
        ([Record(3, T0, None, b"a", [])], {"base_offset": 4}, "increase"),
        ([Record(1 << 31, T0, None, b"a", [])], {"base_offset": 0}, "int32"),
        ([Record(3, T0, None, b"a", [])], {"base_offset": 0, "last_offset_delta": 2}, "last record"),
        ([Record(0, T0, None, b"a", [])], {"timestamp_type": 2}, "timestamp type"),
        ([], {"last_offset_delta": -1}, "last record"),
    ],
)
def test_encode_rejects_invalid_input(records: list[Record], kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        encode_batch(records, **kwargs)


def test_encode_rejects_unknown_codec() -> None:
    with pytest.raises(UnsupportedCompressionError):
        encode_batch(sample_records(), compression=5)


def test_decode_batches_walks_a_buffer() -> None:
    first = encode_batch(sample_records(0), compression=Codec.LZ4)
    second = encode_batch(sample_records(4))
    batches = list(decode_batches(first + second))
    assert [batch.base_offset for batch in batches] == [0, 4]
    assert [record.offset for batch in batches for record in batch.records] == list(range(8))
    assert list(decode_batches(b"")) == []
    with pytest.raises(CorruptBatchError):
        list(decode_batches(first + second[:-1]))


def test_decode_at_position_after_patching_base_offset() -> None:
    data = bytearray(b"\x00" * 7 + encode_batch(sample_records()))
    patch_base_offset(data, 7, 1000)
    batch = decode_batch(data, 7)
    assert [record.offset for record in batch.records] == [1000, 1001, 1002, 1003]


# Corruption: header-level errors come from batch.py, record-level ones become CorruptBatchError.


@pytest.mark.parametrize("codec", CODECS)
def test_corrupt_crc(codec: Codec) -> None:
    data = bytearray(encode_batch(sample_records(), compression=codec))
    data[-1] ^= 0x01
    with pytest.raises(CorruptBatchError, match="CRC"):
        decode_batch(data)


def test_truncated_batch() -> None:
    data = encode_batch(sample_records())
    with pytest.raises(CorruptBatchError, match="declares"):
        decode_batch(data[:-1])
    with pytest.raises(CorruptBatchError, match="header"):
        decode_batch(data[: HEADER_SIZE - 1])


def test_magic_1_is_unsupported() -> None:
    data = bytearray(encode_batch(sample_records()))
    data[16] = 1
    with pytest.raises(UnsupportedMagicError):
        decode_batch(data)


def test_record_count_larger_than_records() -> None:
    data = bytearray(encode_batch(sample_records()))
    struct.pack_into(">i", data, 57, 5)
    _reencode_crc(data)
    with pytest.raises(CorruptBatchError, match="malformed record"):
        decode_batch(data)


def test_bytes_left_after_the_records() -> None:
    data = bytearray(encode_batch(sample_records()))
    struct.pack_into(">i", data, 57, 3)
    _reencode_crc(data)
    with pytest.raises(CorruptBatchError, match="left after 3 records"):
        decode_batch(data)


def test_record_length_disagreeing_with_fields() -> None:
    data = bytearray(encode_batch([Record(0, T0, b"k", b"v", [])]))
    data[HEADER_SIZE] += 2  # the record's zig-zag length varint: one more byte than its fields
    data += b"\x00"
    struct.pack_into(">i", data, 8, len(data) - 12)
    _reencode_crc(data)
    with pytest.raises(CorruptBatchError, match="fields take"):
        decode_batch(data)


def test_undecodable_compressed_section() -> None:
    data = bytearray(encode_batch(sample_records(), compression=Codec.ZSTD))
    data[HEADER_SIZE : HEADER_SIZE + 4] = b"\x00\x00\x00\x00"
    _reencode_crc(data)
    with pytest.raises(CorruptBatchError, match="records section"):
        decode_batch(data)


# Control records (transaction markers).


@pytest.mark.parametrize("kind", [ControlRecordType.ABORT, ControlRecordType.COMMIT])
def test_transaction_marker(kind: ControlRecordType) -> None:
    marker = Record(30, T0, encode_control_record_key(kind), encode_end_txn_marker(17), [])
    data = encode_batch([marker], base_offset=30, producer_id=5, producer_epoch=2, transactional=True, control=True)
    batch = decode_batch(data)
    assert batch.is_control and batch.is_transactional
    assert decode_control_record(batch.records[0]) == ControlRecord(kind, 17)
    assert encode_control_record_key(kind) == struct.pack(">hh", 0, kind)
    # kafka-python reads the same marker.
    (theirs,) = list(KpBatch(data))
    assert (theirs.commit, theirs.abort) == (
        kind == ControlRecordType.COMMIT,
        kind == ControlRecordType.ABORT,
    )


def test_other_control_records_have_no_coordinator_epoch() -> None:
    record = Record(0, T0, encode_control_record_key(ControlRecordType.LEADER_CHANGE), b"\x00\x00", [])
    assert decode_control_record(record) == ControlRecord(ControlRecordType.LEADER_CHANGE, None)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        (b"\x00\x00\x00", b"", "key shorter"),
        (None, None, "key shorter"),
        (struct.pack(">hh", -1, 0), None, "version"),
        (struct.pack(">hh", 0, 99), None, "unknown control record type 99"),
        (struct.pack(">hh", 0, 1), b"\x00\x00\x00", "marker value shorter"),
    ],
)
def test_malformed_control_records(key: bytes | None, value: bytes | None, message: str) -> None:
    with pytest.raises(CorruptBatchError, match=message):
        decode_control_record(Record(0, T0, key, value, []))


# Property: whatever we encode decodes to the same records and header fields.

headers_st = st.lists(st.builds(Header, st.text(max_size=8), st.none() | st.binary(max_size=8)), max_size=3)


@st.composite
def record_lists(draw: st.DrawFn) -> list[Record]:
    base_offset = draw(st.integers(0, 1 << 40))
    gaps = draw(st.lists(st.integers(1, 1000), max_size=6))
    offsets = [base_offset]
    for gap in gaps:
        offsets.append(offsets[-1] + gap)
    return [
        Record(
            offset,
            draw(st.integers(-(1 << 40), 1 << 41)),
            draw(st.none() | st.binary(max_size=40)),
            draw(st.none() | st.binary(max_size=300)),
            draw(headers_st),
            draw(st.integers(0, 255)),
        )
        for offset in offsets
    ]


@given(
    records=record_lists(),
    codec=st.sampled_from(CODECS),
    producer=st.tuples(st.integers(-1, (1 << 63) - 1), st.integers(-1, 32767), st.integers(-1, (1 << 31) - 1)),
    leader_epoch=st.integers(-1, (1 << 31) - 1),
)
def test_property_round_trip(
    records: list[Record], codec: Codec, producer: tuple[int, int, int], leader_epoch: int
) -> None:
    producer_id, producer_epoch, base_sequence = producer
    data = encode_batch(
        records,
        compression=codec,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        partition_leader_epoch=leader_epoch,
    )
    batch = decode_batch(data)
    assert batch.records == records
    assert batch.size == len(data)
    assert batch.record_count == len(records)
    assert batch.base_offset == records[0].offset
    assert batch.last_offset == records[-1].offset
    assert batch.max_timestamp == max(record.timestamp for record in records)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == producer
    assert batch.partition_leader_epoch == leader_epoch
    assert batch.compression == codec


# Zig-zag varints.


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, b"\x00"),
        (-1, b"\x01"),
        (1, b"\x02"),
        (63, b"\x7e"),
        (-64, b"\x7f"),
        (64, b"\x80\x01"),
        (-65, b"\x81\x01"),
    ],
)
def test_varint_known_encodings(value: int, encoded: bytes) -> None:
    assert encode_varint(value) == encoded
    assert encode_varlong(value) == encoded
    assert decode_varint(encoded, 0) == (value, len(encoded))


def test_varint_extremes() -> None:
    assert encode_varint((1 << 31) - 1) == b"\xfe\xff\xff\xff\x0f"
    assert encode_varint(-(1 << 31)) == b"\xff\xff\xff\xff\x0f"
    assert decode_varlong(encode_varlong(-(1 << 63)), 0) == (-(1 << 63), 10)
    with pytest.raises(ValueError, match="int32"):
        encode_varint(1 << 31)
    with pytest.raises(ValueError, match="int64"):
        encode_varlong(1 << 63)
    with pytest.raises(ValueError, match="longer than 5"):
        decode_varint(b"\xff" * 6, 0)
    with pytest.raises(ValueError, match="longer than 10"):
        decode_varlong(b"\xff" * 11, 0)
    with pytest.raises(IndexError):
        decode_varint(b"\x80", 0)


@given(st.integers(-(1 << 63), (1 << 63) - 1), st.binary(max_size=3))
def test_varlong_round_trip(value: int, prefix: bytes) -> None:
    encoded = encode_varlong(value)
    assert decode_varlong(prefix + encoded + b"\x00", len(prefix)) == (value, len(prefix) + len(encoded))


# Differential: kafka-python (pure Python) and aiokafka (Cython) builders and readers.

BUILDERS: dict[str, tuple[Callable[..., Any], Callable[[bytes], Any]]] = {
    "kafka-python": (KpBuilder, KpBatch),
    "aiokafka": (AioBuilder, AioBatch),
}
# (offset, timestamp, key, value, headers as (key, value) pairs), the shape clients report records in.
RecordTuple = tuple[int, int, bytes | None, bytes | None, list[tuple[str, Any]]]
KAFKA_PYTHON_HAS = {
    Codec.NONE: lambda: True,
    Codec.GZIP: kafka_python_codec.has_gzip,
    Codec.SNAPPY: kafka_python_codec.has_snappy,
    Codec.LZ4: kafka_python_codec.has_lz4,
    Codec.ZSTD: kafka_python_codec.has_zstd,
}


def _client_classes(client: str, codec: Codec) -> tuple[Callable[..., Any], Callable[[bytes], Any]]:
    if client == "kafka-python" and not KAFKA_PYTHON_HAS[codec]():
        pytest.skip(f"kafka-python has no {codec.name.lower()} library installed (aiokafka covers it)")
    return BUILDERS[client]


def _as_tuples(records: list[Record]) -> list[RecordTuple]:
    return [(r.offset, r.timestamp, r.key, r.value, [(h.key, h.value) for h in r.headers]) for r in records]


def _their_records(batch: Any) -> list[RecordTuple]:
    return [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in batch]


@pytest.mark.parametrize("client", list(BUILDERS))
@pytest.mark.parametrize("codec", CODECS)
def test_their_batches_decode_with_ours(client: str, codec: Codec) -> None:
    builder_class, _ = _client_classes(client, codec)
    records = sample_records()
    builder = builder_class(2, int(codec), 1, 123, 4, 56, 1 << 20)
    for offset, timestamp, key, value, headers in _as_tuples(records):
        assert builder.append(offset, timestamp, key, value, headers) is not None
    data = bytes(builder.build())
    batch = decode_batch(data)
    assert batch.compression == codec, "the builder kept compression (the payload compresses well)"
    assert batch.records == records
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (123, 4, 56)
    assert batch.is_transactional


@pytest.mark.parametrize("client", list(BUILDERS))
@pytest.mark.parametrize("codec", CODECS)
def test_our_batches_decode_with_theirs(client: str, codec: Codec) -> None:
    _, batch_class = _client_classes(client, codec)
    records = sample_records(base_offset=1000)
    data = encode_batch(records, compression=codec, producer_id=77, producer_epoch=1, base_sequence=9)
    theirs = batch_class(data)
    assert theirs.validate_crc()
    assert (theirs.base_offset, theirs.compression_type, theirs.producer_id) == (1000, codec, 77)
    assert (theirs.first_timestamp, theirs.max_timestamp) == (T0, T0 + 7)
    assert _their_records(theirs) == _as_tuples(records)


def test_decode_batch_returns_a_batch_header() -> None:
    batch = decode_batch(encode_batch(sample_records()))
    assert isinstance(batch, RecordBatch)
    assert batch.next_offset == 4


# Differential: librdkafka (confluent-kafka) through its built-in mock cluster, which keeps produced
# batches as they arrive. Raw Fetch v4 / Produce v3 requests carry batches in and out unchanged.

LARGE_VALUE = b"".join(b"line %06d of a large, compressible value\n" % i for i in range(5000))


def _string(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def _kafka_call(address: tuple[str, int], api_key: int, version: int, body: bytes) -> bytes:
    """Send one request, return the response body after its correlation id."""
    header = struct.pack(">hhi", api_key, version, 1) + _string("kafkette-test")
    with socket.create_connection(address, timeout=5) as sock, sock.makefile("rb") as stream:
        sock.sendall(struct.pack(">i", len(header) + len(body)) + header + body)
        (size,) = struct.unpack(">i", stream.read(4))
        return stream.read(size)[4:]


def _fetch_records(address: tuple[str, int], topic: str) -> bytes:
    """Partition 0's record batches from offset 0, by Fetch v4."""
    body = struct.pack(">iiiib", -1, 500, 1, 8 << 20, 0) + struct.pack(">i", 1) + _string(topic)
    body += struct.pack(">iiqi", 1, 0, 0, 8 << 20)
    response = _kafka_call(address, 1, 4, body)
    # throttle, 1 topic, its name, 1 partition
    pos = 4 + 4 + 2 + len(topic) + 4
    _partition, error, _hw, _lso, aborted = struct.unpack_from(">ihqqi", response, pos)
    assert error == 0
    pos += 26 + max(aborted, 0) * 16
    (length,) = struct.unpack_from(">i", response, pos)
    return response[pos + 4 : pos + 4 + length]


def _produce(address: tuple[str, int], topic: str, batch: bytes) -> None:
    """Append ``batch`` to partition 0 by Produce v3 (acks=1)."""
    body = struct.pack(">hhi", -1, 1, 5000) + struct.pack(">i", 1) + _string(topic)
    body += struct.pack(">iii", 1, 0, len(batch)) + batch
    response = _kafka_call(address, 0, 3, body)
    (error,) = struct.unpack_from(">h", response, 4 + 2 + len(topic) + 4 + 4)
    assert error == 0


def _mock_cluster(**config: Any) -> tuple[confluent_kafka.Producer, tuple[str, int]]:
    producer = confluent_kafka.Producer({"test.mock.num.brokers": 1, "log_level": 0, **config})
    broker = next(iter(producer.list_topics(timeout=5).brokers.values()))
    return producer, (broker.host, broker.port)


@pytest.mark.parametrize("codec", CODECS)
def test_librdkafka_batches_decode_with_ours(codec: Codec) -> None:
    producer, address = _mock_cluster(
        **{"compression.type": codec.name.lower(), "linger.ms": 100, "enable.idempotence": True}
    )
    records = [*sample_records(), Record(4, T0 + 2, b"large", LARGE_VALUE, [])]
    for record in records:
        headers = [(header.key, header.value) for header in record.headers]
        producer.produce("t", record.value, record.key, partition=0, timestamp=record.timestamp, headers=headers)
    assert producer.flush(10) == 0

    batches = list(decode_batches(_fetch_records(address, "t")))
    assert {batch.compression for batch in batches} == {codec}
    assert all(batch.producer_id >= 0 for batch in batches)
    assert batches[0].base_sequence == 0
    assert [record for batch in batches for record in batch.records] == records


def test_our_batches_decode_with_librdkafka() -> None:
    producer, address = _mock_cluster()
    records = [*sample_records(base_offset=1), Record(5, T0 + 2, b"large", LARGE_VALUE, [])]
    for codec in CODECS:
        # The mock cluster creates a topic on its first produce; our batch follows a seed record.
        producer.produce(f"ours-{codec}", b"seed", partition=0)
    assert producer.flush(10) == 0
    for codec in CODECS:
        _produce(address, f"ours-{codec}", encode_batch(records, compression=codec))

    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": f"{address[0]}:{address[1]}",
            "group.id": "kafkette",
            "check.crcs": True,
            "log_level": 0,
        }
    )
    consumer.assign([confluent_kafka.TopicPartition(f"ours-{codec}", 0, 1) for codec in CODECS])
    received: dict[str, list[RecordTuple]] = {}
    deadline = time.monotonic() + 10
    try:
        while sum(map(len, received.values())) < len(records) * len(CODECS) and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None:
                continue
            assert message.error() is None, message.error()
            received.setdefault(message.topic(), []).append(
                (
                    message.offset(),
                    message.timestamp()[1],
                    message.key(),
                    message.value(),
                    message.headers() or [],
                )
            )
    finally:
        consumer.close()
    assert received == {f"ours-{codec}": _as_tuples(records) for codec in CODECS}
