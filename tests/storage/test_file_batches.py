"""Header walks that pick batches by their bytes: only the picked ones are parsed, the rest are still checked."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkette.broker.protocol.batch import (
    CorruptBatchError,
    is_transactional_at,
    parse_header,
)
from kafkette.broker.protocol.records import Record, encode_batch
from kafkette.broker.storage.file_batches import iter_file_headers

RECORDS = [Record(0, 1000, None, b"value", [])]
# (what the batch is, its bytes); each is one record, laid out at offsets 0, 1, 2, ... by `segment_file`.
BATCHES = [
    ("plain", encode_batch(RECORDS)),
    ("idempotent", encode_batch(RECORDS, producer_id=5, producer_epoch=0, base_sequence=0)),
    ("transactional", encode_batch(RECORDS, producer_id=6, producer_epoch=0, base_sequence=0, transactional=True)),
    ("plain", encode_batch(RECORDS)),
    (
        "marker",
        encode_batch(RECORDS, producer_id=6, producer_epoch=0, transactional=True, control=True),
    ),
]


@pytest.fixture
def segment_file(tmp_path: Path) -> Iterator[tuple[int, int]]:
    """A file holding `BATCHES` at offsets 0..4, open for reading: (its descriptor, its size)."""
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(b"".join(with_offset(data, offset) for offset, (_, data) in enumerate(BATCHES)))
    fd = os.open(path, os.O_RDONLY)
    yield fd, path.stat().st_size
    os.close(fd)


def with_offset(data: bytes, offset: int) -> bytes:
    return offset.to_bytes(8, "big") + data[8:]


def positions() -> list[int]:
    starts = [0]
    for _, data in BATCHES:
        starts.append(starts[-1] + len(data))
    return starts[:-1]


def test_the_predicate_agrees_with_the_parsed_header() -> None:
    for _, data in BATCHES:
        header = parse_header(data)
        assert is_transactional_at(data, 0) == header.is_transactional


def test_a_walk_parses_only_the_batches_it_picks(segment_file: tuple[int, int]) -> None:
    fd, size = segment_file
    transactional = list(iter_file_headers(fd, 0, size, is_transactional_at))
    assert [(position, header.base_offset) for position, header in transactional] == [
        (positions()[2], 2),
        (positions()[4], 4),
    ]
    assert transactional[1][1].is_control
    assert [header.base_offset for _, header in iter_file_headers(fd, 0, size)] == [0, 1, 2, 3, 4]


def test_a_batch_passed_over_is_still_checked(tmp_path: Path) -> None:
    """A torn or foreign batch among the unpicked ones ends the walk with an error, as a full walk's would."""
    good = with_offset(BATCHES[2][1], 0)
    plain = bytearray(with_offset(BATCHES[0][1], 1))
    plain[16] = 1  # magic 1: not a batch this broker writes
    for tail in (bytes(plain), with_offset(BATCHES[0][1], 1)[:-3]):
        path = tmp_path / "00000000000000000000.log"
        path.write_bytes(good + tail)
        fd = os.open(path, os.O_RDONLY)
        try:
            walk = iter_file_headers(fd, 0, len(good) + len(tail), is_transactional_at)
            assert next(walk)[1].base_offset == 0
            with pytest.raises(CorruptBatchError):
                next(walk)
        finally:
            os.close(fd)
