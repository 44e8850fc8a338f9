"""Crash-recovery fuzz: cut and flip bytes of the active segment and its indexes, then reopen; with transactions
and leader epochs, also lose or garble the epoch checkpoint or the transaction index.

A seeded loop (the seed is in the test id) keeps failures reproducible. Each case
must reopen without help, keep exactly the batches before the first damaged one,
and keep accepting appends. ``make fuzz-storage`` runs many more cases through
KAFKETTE_FUZZ_CASES.

A batch's baseOffset and partitionLeaderEpoch sit outside its CRC in the record
format, so flips there are invisible to any reader (Kafka's too); the fuzz leaves them be.
"""

from __future__ import annotations

import os
import random
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import build_marker, build_txn_batch

from kafkette.broker.storage import Log, LogConfig, ReadResult
from kafkette.broker.storage.file_batches import BatchSpan, iter_file_batches

CONFIG = LogConfig(segment_bytes=6000, index_interval_bytes=150)
CASES = int(os.environ.get("KAFKETTE_FUZZ_CASES", "40"))
UNPROTECTED = (range(0, 8), range(12, 16))


@dataclass(frozen=True)
class Template:
    directory: Path
    values: dict[int, bytes]  # offset -> value
    active_base: int
    active_spans: list[BatchSpan]


def built_template(
    directory: Path, count: int, append: Callable[[Log, int], dict[int, bytes]], check: Callable[[Log], None]
) -> Template:
    """A closed log of at least ``count`` batches, older segments and then an active one at least half full to
    damage; ``append(log, i)`` writes the i-th batch and returns the values it wrote by offset, and ``check`` sees
    the log before it closes."""
    directory.parent.mkdir()
    log = Log.open(directory, CONFIG)
    values: dict[int, bytes] = {}
    i = 0
    while i < count or log.segments[-1].size_bytes < CONFIG.segment_bytes // 2:
        values.update(append(log, i))
        i += 1
    check(log)
    active = log.segments[-1]
    log.close()
    fd = os.open(active.path, os.O_RDONLY)
    try:
        spans = list(iter_file_batches(fd, 0, active.size_bytes, validate=True))
    finally:
        os.close(fd)
    assert len(spans) > 10 and len(log.segments) >= 3
    return Template(directory, values, active.base_offset, spans)


def random_values(rng: random.Random, i: int) -> list[bytes]:
    return [bytes([97 + i % 26]) * rng.randint(1, 60) for _ in range(rng.randint(1, 4))]


@pytest.fixture
def template(tmp_path: Path, make_batch: Callable[..., bytearray]) -> Template:
    rng = random.Random(4)

    def append(log: Log, i: int) -> dict[int, bytes]:
        batch = random_values(rng, i)
        first = log.append(make_batch(batch, base_timestamp=1000 + i), leader_epoch=0).first_offset
        return {first + j: value for j, value in enumerate(batch)}

    return built_template(tmp_path / "template" / "t-0", 80, append, lambda log: None)


def damage(rng: random.Random, directory: Path, template: Template) -> int:
    """Damage the copy; return the first offset that may be lost (everything below must survive)."""
    log_file = directory / f"{template.active_base:020d}.log"
    choice = rng.choice(["cut", "flip", "index", "cut+index"])
    lost_from = max(template.values) + 1
    if choice in ("cut", "cut+index"):
        size = log_file.stat().st_size
        cut = rng.randrange(size)
        os.truncate(log_file, cut)
        lost_from = next(span.base_offset for span in template.active_spans if span.position + span.size > cut)
    if choice == "flip":
        span = rng.choice(template.active_spans)
        relative = rng.choice([i for i in range(span.size) if not any(i in r for r in UNPROTECTED)])
        data = bytearray(log_file.read_bytes())
        data[span.position + relative] ^= 1 << rng.randrange(8)
        log_file.write_bytes(data)
        lost_from = span.base_offset
    if choice in ("index", "cut+index"):
        index = directory / f"{template.active_base:020d}{rng.choice(['.index', '.timeindex'])}"
        data = bytearray(index.read_bytes())
        if data and rng.random() < 0.5:
            data[rng.randrange(len(data))] ^= 0xFF
        else:
            data = data[: rng.randrange(len(data) + 1)] + os.urandom(rng.randrange(4))
        index.write_bytes(data)
    return lost_from


def served(log: Log, decode_region: Callable[[ReadResult], list[Any]]) -> dict[int, bytes]:
    out: dict[int, bytes] = {}
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        region = log.read(offset, 1 << 20)
        assert region is not None
        for _, last, _, rows in decode_region(region):
            out.update({row_offset: value for row_offset, _, value in rows})
            offset = last + 1
    return out


@pytest.mark.parametrize("seed", range(CASES))
def test_recovery_serves_exactly_the_valid_prefix(
    template: Template, tmp_path: Path, seed: int, make_batch: Callable[..., bytearray], decode_region: Any
) -> None:
    rng = random.Random(seed)
    directory = tmp_path / "copy" / "t-0"
    shutil.copytree(template.directory, directory)
    lost_from = damage(rng, directory, template)

    # A crash: the active segment was never flushed, so recovery starts at its base.
    log = Log.open(directory, CONFIG, recovery_point=template.active_base, clean_shutdown=False)

    data = served(log, decode_region)
    assert log.log_end_offset >= lost_from
    assert data == {offset: value for offset, value in template.values.items() if offset < log.log_end_offset}
    # Recovery cut at a batch boundary: the log takes new batches right after what it kept.
    end = log.log_end_offset
    assert log.append(make_batch([b"after"]), leader_epoch=0).first_offset == end
    log.close()
    assert served(Log.open(directory, CONFIG, clean_shutdown=True), decode_region)[end] == b"after"


@dataclass(frozen=True)
class TxnTemplate:
    """A log of plain and transactional batches, markers and several leader epochs, and its batches' bytes."""

    base: Template
    batches: list[bytes]


@pytest.fixture
def txn_template(tmp_path: Path, make_batch: Callable[..., bytearray]) -> TxnTemplate:
    rng = random.Random(6)
    # Transactions end within a few batches, as the scan without producer snapshots (a bare Log writes none)
    # assumes: it reads the newest two segments.
    open_since: dict[int, int] = {}

    def append(log: Log, i: int) -> dict[int, bytes]:
        epoch = i // 25
        producer = rng.choice([7, 8, 9])
        if producer in open_since and (i - open_since[producer] >= 3 or rng.random() < 0.4):
            log.append(build_marker(producer, rng.random() < 0.5), leader_epoch=epoch)
            del open_since[producer]
            return {}
        batch = random_values(rng, i)
        transactional = rng.random() < 0.5
        data = build_txn_batch(producer, i, batch) if transactional else make_batch(batch, base_timestamp=1000 + i)
        first = log.append(data, leader_epoch=epoch).first_offset
        if transactional:
            open_since.setdefault(producer, i)
        return {first + j: value for j, value in enumerate(batch)}

    def check(log: Log) -> None:
        assert log.aborted_transactions(0, log.log_end_offset) and len(log.leader_epoch_entries) >= 4

    directory = tmp_path / "txn-template" / "t-0"
    base = built_template(directory, 120, append, check)
    batches: list[bytes] = []
    for segment in sorted(directory.glob("*.log")):
        fd = os.open(segment, os.O_RDONLY)
        try:
            batches += [os.pread(fd, s.size, s.position) for s in iter_file_batches(fd, 0, os.fstat(fd).st_size, True)]
        finally:
            os.close(fd)
    return TxnTemplate(base, batches)


@pytest.mark.parametrize("seed", range(CASES))
def test_recovery_rebuilds_the_epochs_and_transactions_of_exactly_the_valid_prefix(
    txn_template: TxnTemplate, tmp_path: Path, seed: int
) -> None:
    """After the same damage, and also a lost or garbled leader-epoch checkpoint or transaction index, the
    reopened log's leader epochs, aborted and open transactions are those of a log that took the kept batches
    one by one as a follower does."""
    rng = random.Random(seed)
    directory = tmp_path / "copy" / "t-0"
    shutil.copytree(txn_template.base.directory, directory)
    damage(rng, directory, txn_template.base)
    extra = rng.choice(["none", "epochs-lost", "epochs-garbled", "txnindex"])
    epochs_file = directory / "leader-epoch-checkpoint"
    if extra == "epochs-lost":
        epochs_file.unlink()
    elif extra == "epochs-garbled":
        epochs_file.write_bytes(os.urandom(rng.randrange(1, 40)))
    elif extra == "txnindex":
        for index in directory.glob(f"{txn_template.base.active_base:020d}.txnindex"):
            index.write_bytes(os.urandom(rng.randrange(1, 60)))

    log = Log.open(directory, CONFIG, recovery_point=txn_template.base.active_base, clean_shutdown=False)
    end = log.log_end_offset
    (tmp_path / "reference").mkdir()
    reference = Log.open(tmp_path / "reference" / "t-0", CONFIG)
    for data in txn_template.batches:
        if int.from_bytes(data[:8], "big") < end:
            reference.append_as_follower(data)

    assert reference.log_end_offset == end
    assert log.leader_epoch_entries == reference.leader_epoch_entries
    assert log.aborted_transactions(0, end) == reference.aborted_transactions(0, end)
    assert log.open_transactions() == reference.open_transactions()
    assert log.first_unstable_offset == reference.first_unstable_offset
    log.close()
    reference.close()
