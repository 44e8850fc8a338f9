"""LogManager over several log directories: placement, checkpoints, clean-shutdown marker, deletion."""

from __future__ import annotations

import asyncio
import gc
import os
import threading
import tracemalloc
import uuid
from pathlib import Path

import pytest
from small_disk import fill, small_tmpfs

from kafkette.broker.storage import (
    CorruptLogError,
    EpochEntry,
    Log,
    LogConfig,
    LogManager,
    StorageError,
    TopicPartition,
)
from kafkette.broker.storage import manager as manager_module
from kafkette.broker.storage.checkpoint import (
    read_offset_checkpoint,
    read_topic_id_checkpoint,
    write_offset_checkpoint,
)
from kafkette.broker.storage.leader_epoch import LEADER_EPOCH_CHECKPOINT, read_leader_epoch_checkpoint
from kafkette.broker.storage.manager import TOPIC_ID_CHECKPOINT
from kafkette.broker.storage.naming import (
    deleted_dir_name,
    is_deleted_dir_name,
    log_dir_name,
    parse_log_dir_name,
)

CONFIG = LogConfig(segment_bytes=2000, index_interval_bytes=200)
TOPICS = ["orders", "my.topic-with-dashes_and.dots", "a-1", "x"]


def populate(manager: LogManager, make_batch) -> dict[TopicPartition, int]:
    ends = {}
    for n, topic in enumerate(TOPICS):
        for partition in (0, 1, 12):
            log = manager.get_or_create(topic, partition)
            for i in range(n + partition + 1):
                log.append(make_batch([b"%d" % i] * 3), leader_epoch=0)
            ends[TopicPartition(topic, partition)] = log.log_end_offset
    return ends


def test_checkpoint_file_format(tmp_path: Path) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    offsets = {TopicPartition("b.x-y", 3): 42, TopicPartition("a", 0): 0}
    write_offset_checkpoint(path, offsets)
    assert path.read_text() == "0\n2\na 0 0\nb.x-y 3 42\n"
    assert read_offset_checkpoint(path) == offsets
    assert read_offset_checkpoint(tmp_path / "missing") == {}
    assert not list(tmp_path.glob("*.tmp"))
    for bad in ("", "1\n0\n", "0\n2\na 0 1\n", "0\n1\na zero 1\n"):
        path.write_text(bad)
        with pytest.raises(CorruptLogError):
            read_offset_checkpoint(path)


def test_dir_names() -> None:
    for topic in TOPICS:
        for partition in (0, 7, 120):
            name = log_dir_name(TopicPartition(topic, partition))
            assert parse_log_dir_name(name) == (topic, partition)
            assert parse_log_dir_name(deleted_dir_name(name)) is None
            assert is_deleted_dir_name(deleted_dir_name(name))
            assert not is_deleted_dir_name(name)
    for name in ("orders", "orders-", "orders-x", "orders-01", "-3", "bad topic-1", "..-1"):
        assert parse_log_dir_name(name) is None, name
    for topic in ("", ".", "..", "a/b", "é", "x" * 250):
        with pytest.raises(ValueError):
            log_dir_name(TopicPartition(topic, 0))


def test_clean_restart_round_trip(tmp_path: Path, make_batch) -> None:
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    manager = LogManager.open(dirs, CONFIG)
    ends = populate(manager, make_batch)
    # New partitions go to the emptier directory, so they end up evenly spread.
    counts = [len([p for p in d.iterdir() if p.is_dir()]) for d in dirs]
    assert counts == [6, 6]
    manager.close()

    for d in dirs:
        assert (d / ".kafka_cleanshutdown").exists()
        points = read_offset_checkpoint(d / "recovery-point-offset-checkpoint")
        starts = read_offset_checkpoint(d / "log-start-offset-checkpoint")
        on_disk = {parse_log_dir_name(p.name) for p in d.iterdir() if p.is_dir()}
        assert set(points) == set(starts) == on_disk
        assert all(points[tp] == ends[tp] for tp in points)
        assert all(offset == 0 for offset in starts.values())

    reopened = LogManager.open(dirs, CONFIG)
    assert not any((d / ".kafka_cleanshutdown").exists() for d in dirs)
    assert {tp: log.log_end_offset for tp, log in reopened.all_logs().items()} == ends
    dotted = TopicPartition("my.topic-with-dashes_and.dots", 12)
    log = reopened.get(*dotted)
    assert log is not None
    assert log.directory.name == "my.topic-with-dashes_and.dots-12"
    assert log.append(make_batch(), leader_epoch=1).first_offset == ends[dotted]
    assert reopened.get("absent", 0) is None
    assert reopened.get_or_create("a-1", 0) is reopened.get("a-1", 0)


def test_crash_recovers_from_checkpointed_recovery_points(tmp_path: Path, make_batch) -> None:
    dirs = [tmp_path / "d1"]
    manager = LogManager.open(dirs, CONFIG)
    log = manager.get_or_create("events", 0)
    for _ in range(10):
        log.append(make_batch([b"x" * 50]), leader_epoch=0)
    log.flush()
    manager.checkpoint()
    flushed = log.log_end_offset
    for _ in range(3):
        log.append(make_batch([b"y" * 50]), leader_epoch=0)
    active = Path(log.segments[-1].path)
    # The process dies here: no close, no marker; the tail write was torn.
    os.truncate(active, active.stat().st_size - 10)

    assert read_offset_checkpoint(dirs[0] / "recovery-point-offset-checkpoint") == {
        TopicPartition("events", 0): flushed
    }
    reopened = LogManager.open(dirs, CONFIG)
    recovered = reopened.get("events", 0)
    assert recovered is not None
    assert recovered.log_end_offset == flushed + 2
    # The open checkpoints the recovery point it kept: the recovered tail is not fsynced until the next flush, so
    # another crash before it validates the tail again.
    points = read_offset_checkpoint(dirs[0] / "recovery-point-offset-checkpoint")
    assert points == {TopicPartition("events", 0): flushed}
    recovered.flush()
    reopened.checkpoint()
    points = read_offset_checkpoint(dirs[0] / "recovery-point-offset-checkpoint")
    assert points == {TopicPartition("events", 0): flushed + 2}


def test_an_idle_checkpoint_writes_nothing_and_a_change_is_written(tmp_path: Path, make_batch) -> None:
    """The periodic checkpoint of a broker with many idle partitions must not rewrite (and fsync) the files."""
    log_dir = tmp_path / "d1"
    manager = LogManager.open([log_dir], CONFIG)
    for partition in range(300):
        manager.get_or_create("idle", partition)
    busy = manager.get_or_create("busy", 0)
    manager.checkpoint()
    names = ("recovery-point-offset-checkpoint", "log-start-offset-checkpoint", "replication-offset-checkpoint")

    def inodes() -> list[int]:
        # Each write replaces the file by a rename: a new inode.
        return [(log_dir / name).stat().st_ino for name in names]

    written = inodes()
    manager.checkpoint()
    assert inodes() == written
    busy.append(make_batch(), leader_epoch=0)
    busy.high_watermark = busy.log_end_offset
    manager.checkpoint()
    assert read_offset_checkpoint(log_dir / names[2])[TopicPartition("busy", 0)] == busy.log_end_offset
    # Each column, and the topic ids, count as a change of their own.
    busy.delete_records_before(1)
    manager.checkpoint()
    assert read_offset_checkpoint(log_dir / names[1])[TopicPartition("busy", 0)] == 1
    named = manager.get("idle", 3)
    assert named is not None
    named.topic_id = topic_id = uuid.uuid4()
    manager.checkpoint()
    assert read_topic_id_checkpoint(log_dir / TOPIC_ID_CHECKPOINT) == {TopicPartition("idle", 3): topic_id}
    manager.delete("idle", 7)
    manager.checkpoint()
    assert TopicPartition("idle", 7) not in read_offset_checkpoint(log_dir / names[0])
    assert len(read_offset_checkpoint(log_dir / names[0])) == 300


def test_checkpoint_writers_on_several_threads_do_not_rename_each_others_files(
    tmp_path: Path, make_batch, caplog: pytest.LogCaptureFixture
) -> None:
    """Retention and DeleteRecords write checkpoints from worker threads while the timer writes from the loop;
    through one temporary name per file, unserialised writers renamed each other's (FileNotFoundError, logged)."""
    manager = LogManager.open([tmp_path / "d1"], CONFIG)
    log = manager.get_or_create("t", 0)
    writers = []
    for _ in range(200):
        log.append(make_batch(), leader_epoch=0)
        log.flush()
        writers.append(manager.checkpoint_writer())  # each sees a new recovery point, so each writes
    threads = [
        threading.Thread(target=lambda part=part: [write() for write in part]) for part in (writers[::2], writers[1::2])
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not [r for r in caplog.records if r.levelname == "ERROR"], caplog.text
    assert read_offset_checkpoint(tmp_path / "d1" / "recovery-point-offset-checkpoint")[TopicPartition("t", 0)] > 0


def five_batches(log_dir: Path, make_batch) -> tuple[LogManager, Log]:
    """A manager over ``log_dir`` whose partition t-0 holds five batches."""
    manager = LogManager.open([log_dir], CONFIG)
    log = manager.get_or_create("t", 0)
    for _ in range(5):
        log.append(make_batch(), leader_epoch=0)
    return manager, log


def test_log_start_offset_checkpoint_is_applied(tmp_path: Path, make_batch) -> None:
    dirs = [tmp_path / "d1"]
    manager, _ = five_batches(dirs[0], make_batch)
    manager.close()
    write_offset_checkpoint(dirs[0] / "log-start-offset-checkpoint", {TopicPartition("t", 0): 3})
    reopened = LogManager.open(dirs, CONFIG)
    log = reopened.get("t", 0)
    assert log is not None and log.log_start_offset == 3


def test_high_watermarks_are_checkpointed_and_kept_within_the_log(tmp_path: Path, make_batch) -> None:
    dirs = [tmp_path / "d1"]
    manager, log = five_batches(dirs[0], make_batch)
    end = log.log_end_offset
    log.high_watermark = end - 2
    manager.close()
    assert read_offset_checkpoint(dirs[0] / "replication-offset-checkpoint") == {TopicPartition("t", 0): end - 2}
    reopened = LogManager.open(dirs, CONFIG)
    log = reopened.get("t", 0)
    assert log is not None and log.high_watermark == end - 2
    # A follower truncating below its high watermark takes the high watermark down with it.
    log.truncate_to(end - 4)
    assert log.high_watermark == log.log_end_offset <= end - 4
    reopened.close()
    # A checkpoint written before a crash may run past what recovery kept: it is capped at the log end.
    write_offset_checkpoint(dirs[0] / "replication-offset-checkpoint", {TopicPartition("t", 0): end + 100})
    capped = LogManager.open(dirs, CONFIG).get("t", 0)
    assert capped is not None and capped.high_watermark == capped.log_end_offset


def test_topic_ids_are_checkpointed_and_carried_through_a_log_dir_move(tmp_path: Path, make_batch) -> None:
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    manager, log = five_batches(dirs[0], make_batch)
    unnamed = manager.get_or_create("t", 1)  # a log whose topic nobody has told it yet
    topic_id = uuid.uuid4()
    log.topic_id = topic_id
    manager.close()
    assert read_topic_id_checkpoint(dirs[0] / TOPIC_ID_CHECKPOINT) == {TopicPartition("t", 0): topic_id}

    reopened = LogManager.open(dirs, CONFIG)
    log = reopened.get("t", 0)
    assert log is not None and log.topic_id == topic_id
    assert unnamed.topic_id is None and reopened.get("t", 1).topic_id is None  # type: ignore[union-attr]
    future = reopened.create_future("t", 0, dirs[1])
    assert future.topic_id == topic_id
    for batch in range(log.log_start_offset, log.log_end_offset):
        region = log.read(batch, 1 << 20, max_offset=batch + 1)
        assert region is not None
        future.append_as_follower(os.pread(region.fd, region.size, region.position))
    moved, remove_old = reopened.promote_future("t", 0)
    remove_old()
    assert moved.topic_id == topic_id
    reopened.close()
    assert read_topic_id_checkpoint(dirs[1] / TOPIC_ID_CHECKPOINT) == {TopicPartition("t", 0): topic_id}

    # A damaged file: the logs are taken as their names' topics (as Kafka takes a log without partition.metadata).
    (dirs[1] / TOPIC_ID_CHECKPOINT).write_text("0\n1\nt 0 not-a-uuid\n")
    assert LogManager.open(dirs, CONFIG).get("t", 0).topic_id is None  # type: ignore[union-attr]


def test_corrupt_checkpoint_means_full_recovery(tmp_path: Path, make_batch) -> None:
    dirs = [tmp_path / "d1"]
    manager = LogManager.open(dirs, CONFIG)
    log = manager.get_or_create("t", 0)
    for _ in range(30):
        log.append(make_batch([b"z" * 40]), leader_epoch=0)
    first = Path(log.segments[0].path)
    manager.checkpoint()
    (dirs[0] / "recovery-point-offset-checkpoint").write_text("garbage")
    data = bytearray(first.read_bytes())
    data[len(data) - 5] ^= 1
    first.write_bytes(data)
    reopened = LogManager.open(dirs, CONFIG)
    # Recovery started at offset zero, so the damage in the first segment was found.
    recovered = reopened.get("t", 0)
    assert recovered is not None
    assert len(recovered.segments) == 1
    assert recovered.log_end_offset < 30


def test_per_topic_configs(tmp_path: Path, make_batch) -> None:
    tiny = LogConfig(segment_bytes=200)
    manager = LogManager.open([tmp_path / "d1"], CONFIG, topic_configs={"small": tiny})
    assert manager.get_or_create("small", 0).config == tiny
    assert manager.get_or_create("big", 0).config == CONFIG
    assert manager.get_or_create("other", 0, LogConfig(segment_ms=5)).config.segment_ms == 5
    manager.close()
    reopened = LogManager.open([tmp_path / "d1"], CONFIG, topic_configs={"small": tiny})
    small = reopened.get("small", 0)
    assert small is not None and small.config == tiny


def test_delete_partition(tmp_path: Path, make_batch) -> None:
    dirs = [tmp_path / "d1"]
    manager = LogManager.open(dirs, CONFIG)
    populate(manager, make_batch)
    manager.delete("a-1", 12)
    assert manager.get("a-1", 12) is None
    assert not (dirs[0] / "a-1-12").exists()
    assert (dirs[0] / "a-1-1").exists()
    manager.delete("a-1", 12)
    manager.close()
    assert TopicPartition("a-1", 12) not in read_offset_checkpoint(dirs[0] / "recovery-point-offset-checkpoint")


def test_delete_many_leaves_the_renames_to_its_function_and_a_log_made_meanwhile_starts_empty(
    tmp_path: Path, make_batch
) -> None:
    """The event loop closes the deleted logs and a worker thread renames their directories: a topic made again
    under its name before the thread came to it must not open the deleted log's records, nor lose its own."""
    log_dir = tmp_path / "d1"
    manager = LogManager.open([log_dir], CONFIG)
    for partition in (0, 1):
        manager.get_or_create("again", partition).append(make_batch([b"old"] * 3), leader_epoch=0)
    rename_and_remove = manager.delete_many([("again", 0), ("again", 1)])
    assert manager.get("again", 0) is None and manager.get("again", 1) is None
    assert (log_dir / "again-0").exists() and (log_dir / "again-1").exists()  # the renames are the function's
    remade = manager.get_or_create("again", 0)
    assert remade.log_end_offset == 0
    remade.append(make_batch([b"new"]), leader_epoch=0)
    assert [p.name for p in log_dir.iterdir() if is_deleted_dir_name(p.name)] != []  # the old one, renamed first
    rename_and_remove()
    assert sorted(p.name for p in log_dir.iterdir() if p.is_dir()) == ["again-0"]
    assert remade.log_end_offset == 1
    manager.close()
    reopened = LogManager.open([log_dir], CONFIG)
    assert reopened.get("again", 0) is not None and reopened.get("again", 0).log_end_offset == 1
    assert reopened.get("again", 1) is None


def test_interrupted_delete_is_finished_at_open(tmp_path: Path, make_batch) -> None:
    dirs = [tmp_path / "d1"]
    manager = LogManager.open(dirs, CONFIG)
    populate(manager, make_batch)
    manager.close()
    # As if the broker died between the rename and the removal.
    doomed = dirs[0] / deleted_dir_name("orders-1")
    os.rename(dirs[0] / "orders-1", doomed)
    (dirs[0] / "not-a-partition").write_text("left alone")
    reopened = LogManager.open(dirs, CONFIG)
    assert not doomed.exists()
    assert reopened.get("orders", 1) is None
    assert reopened.get("orders", 0) is not None
    assert (dirs[0] / "not-a-partition").read_text() == "left alone"


def test_same_partition_in_two_dirs_is_refused(tmp_path: Path, make_batch) -> None:
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    for d in dirs:
        d.mkdir()
        Log.open(d / "t-0", CONFIG).close()
    with pytest.raises(StorageError):
        LogManager.open(dirs, CONFIG)


def test_close_flushes_on_several_threads_per_directory(tmp_path: Path, make_batch, monkeypatch) -> None:
    """Two directories with two threads each: four logs close at once (a close waits for the other three)."""
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    manager = LogManager.open(dirs, CONFIG, recovery_threads_per_dir=2)
    ends = populate(manager, make_batch)
    together = threading.Barrier(4, timeout=10)
    close = Log.close

    def close_with_three_others(log: Log, sync_parent: bool = True, durable: bool = True) -> None:
        together.wait()  # BrokenBarrierError (timeout) if fewer than four logs are closing at once
        close(log, sync_parent, durable)

    monkeypatch.setattr(Log, "close", close_with_three_others)
    manager.close()
    monkeypatch.undo()
    assert all((d / ".kafka_cleanshutdown").exists() for d in dirs)
    assert {tp: log.log_end_offset for tp, log in LogManager.open(dirs, CONFIG).all_logs().items()} == ends


def test_a_disk_full_at_close_leaves_its_directory_to_recovery_and_closes_the_rest(tmp_path: Path, make_batch) -> None:
    with small_tmpfs(tmp_path / "small", 1024 * 1024) as small:
        roomy = tmp_path / "roomy"
        # One segment a log, so nothing rolls (which would flush) before the close.
        manager = LogManager.open([roomy, small], LogConfig(), recovery_threads_per_dir=2)
        ends = {}
        for partition in range(8):
            manager.prefer("orders", partition, small if partition % 2 else roomy)
            log = manager.get_or_create("orders", partition)
            for epoch in range(3):  # new leader epochs, kept in memory until the close writes their checkpoint
                log.append(make_batch([b"x" * 300] * 3), leader_epoch=epoch)
            ends[TopicPartition("orders", partition)] = log.log_end_offset
        assert {log.directory.parent for log in manager.all_logs().values()} == {roomy, small}
        filler = fill(small)

        manager.close()

        assert manager.online_dirs() == [roomy]
        assert (roomy / ".kafka_cleanshutdown").exists() and not (small / ".kafka_cleanshutdown").exists()
        filler.unlink()
        reopened = LogManager.open([roomy, small], LogConfig())
        assert {tp: log.log_end_offset for tp, log in reopened.all_logs().items()} == ends
        assert all(log.latest_leader_epoch == 2 for log in reopened.all_logs().values())
        reopened.close()


def test_logs_created_in_a_thread_are_spread_over_the_log_dirs_and_kept_where_asked(tmp_path: Path, make_batch) -> None:
    first, second = tmp_path / "d1", tmp_path / "d2"
    manager = LogManager.open([first, second], CONFIG)
    try:
        manager.get_or_create("t", 0)  # already one log in the first directory
        manager.prefer("t", 1, second)
        wanted = [(TopicPartition("t", i), CONFIG) for i in range(8)]
        asyncio.run(manager.create_in_thread(wanted))
        placed = {tp.partition: log.directory.parent for tp, log in manager.all_logs().items()}
        assert sorted(placed) == list(range(8))
        assert placed[1] == second
        assert sorted(list(placed.values()).count(d) for d in (first, second)) == [4, 4]
        for log in manager.all_logs().values():
            assert log.append(make_batch(), leader_epoch=0).first_offset == 0  # each serves as a log
    finally:
        manager.close()


def test_what_the_checkpoint_keeps_to_compare_is_small(tmp_path: Path) -> None:
    """A pass keeps what it wrote, to skip the next pass's writes when nothing changed: packed, under 64 B a
    partition (the dictionaries it was written from kept 0.2 KB a partition for good)."""
    manager = LogManager.open([tmp_path / "d1"], CONFIG)
    count = 2000
    for partition in range(count):
        manager.get_or_create("many", partition).topic_id = uuid.UUID(int=7)
    source = manager_module.__file__
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(True, source)])
        manager.checkpoint()
        gc.collect()
        after = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(True, source)])
    finally:
        tracemalloc.stop()
    kept = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
    assert 0 < kept / count < 64, kept / count
    manager.close()


def test_the_checkpoint_take_keeps_no_collectable_object_per_partition(tmp_path: Path, make_batch) -> None:
    """The take runs on the event loop and what it takes lives until the worker thread has written it: an object a
    partition that the cyclic GC tracks (the tuple of three offsets it took before) made each pass push thousands
    into the collector's oldest generation, whose full collections hold every thread. Packed, the take keeps a few
    whatever the count, and the files still get each partition's offsets."""
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    manager = LogManager.open(dirs, CONFIG)
    count = 500
    for partition in range(count):
        manager.get_or_create("many", partition)
    written_to = manager.get("many", 7)
    assert written_to is not None
    written_to.append(make_batch(), leader_epoch=0)
    written_to.high_watermark = written_to.log_end_offset
    gc.collect()
    gc.disable()
    try:
        before = len(gc.get_objects())
        write = manager.checkpoint_writer()
        kept = len(gc.get_objects()) - before
    finally:
        gc.enable()
    assert kept < 50, kept
    write()
    written = {}
    for log_dir in dirs:
        points = read_offset_checkpoint(log_dir / "recovery-point-offset-checkpoint")
        ends = read_offset_checkpoint(log_dir / "replication-offset-checkpoint")
        assert set(points) == {parse_log_dir_name(p.name) for p in log_dir.iterdir() if p.is_dir()}
        written.update(ends)
    assert len(written) == count
    assert written[TopicPartition("many", 7)] == written_to.log_end_offset > 0
    manager.close()


def test_the_epoch_writer_leaves_the_close_nothing_and_never_writes_into_a_log_made_under_a_deleted_name(
    tmp_path: Path,
) -> None:
    """The checkpoint pass takes the logs to write on the loop and writes from a thread: a topic deleted and made
    again under its name meanwhile must not get the deleted log's epochs."""
    log_dir = tmp_path / "d1"
    manager = LogManager.open([log_dir], CONFIG)
    kept, doomed = manager.get_or_create("kept", 0), manager.get_or_create("again", 0)
    kept.assign_leader_epoch(3, 0)
    doomed.assign_leader_epoch(7, 0)
    writer = manager.leader_epoch_writer()
    manager.delete("again", 0)
    remade = manager.get_or_create("again", 0)
    remade.assign_leader_epoch(0, 0)
    assert writer() == 1
    assert read_leader_epoch_checkpoint(kept.directory / LEADER_EPOCH_CHECKPOINT) == [EpochEntry(3, 0)]
    assert not (remade.directory / LEADER_EPOCH_CHECKPOINT).exists()
    assert not kept.leader_epochs_unwritten and remade.leader_epochs_unwritten
    inode = (kept.directory / LEADER_EPOCH_CHECKPOINT).stat().st_ino
    manager.close()
    assert (kept.directory / LEADER_EPOCH_CHECKPOINT).stat().st_ino == inode  # the close wrote it no more
    assert read_leader_epoch_checkpoint(remade.directory / LEADER_EPOCH_CHECKPOINT) == [EpochEntry(0, 0)]


def test_a_checkpoint_writer_that_comes_late_never_puts_older_offsets_back(tmp_path: Path, make_batch) -> None:
    """The periodic pass takes the offsets on the loop and writes them from a worker thread; the close's own
    checkpoint, taken later, must be what the files hold however the two end up ordered."""
    log_dir = tmp_path / "d1"
    manager = LogManager.open([log_dir], CONFIG)
    log = manager.get_or_create("events", 0)
    log.append(make_batch(), leader_epoch=0)
    log.flush()
    log.high_watermark = first_end = log.log_end_offset
    manager.checkpoint()
    log.append(make_batch(), leader_epoch=0)
    log.flush()
    log.high_watermark = log.log_end_offset
    late = manager.checkpoint_writer()  # a pass's take, its write still to come
    # A follower's truncation brings the offsets back to what the files hold: an unchanged directory to the
    # close's comparison, but not to the late writer's.
    log.truncate_to(first_end)
    manager.close()
    late()
    wanted = {TopicPartition("events", 0): first_end}
    assert read_offset_checkpoint(log_dir / "recovery-point-offset-checkpoint") == wanted
    assert read_offset_checkpoint(log_dir / "replication-offset-checkpoint") == wanted
