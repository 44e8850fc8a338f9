"""LeaderEpochCache on its own: Kafka's LeaderEpochFileCache semantics and its checkpoint file."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterable
from pathlib import Path

import pytest

from kafkette.broker.storage import CorruptLogError, EpochEntry, LeaderEpochCache, leader_epoch
from kafkette.broker.storage.leader_epoch import (
    LEADER_EPOCH_CHECKPOINT,
    read_leader_epoch_checkpoint,
    write_leader_epoch_checkpoint,
)

E = EpochEntry


def cache_with(tmp_path: Path, *entries: tuple[int, int]) -> LeaderEpochCache:
    """A cache holding ``entries``, synced to its file as a log's flush leaves it."""
    cache = LeaderEpochCache(tmp_path)
    for epoch, start in entries:
        cache.assign(epoch, start)
    cache.sync()
    return cache


def on_disk(cache: LeaderEpochCache) -> list[EpochEntry] | None:
    """The file once the log's next flush has synced the cache."""
    cache.sync()
    return read_leader_epoch_checkpoint(cache.path)


# --- end_offset_for ----------------------------------------------------------------------------

# (entries, requested epoch, log end offset, expected (epoch, end offset)); mostly Kafka's LeaderEpochFileCacheTest.
END_OFFSET_CASES = [
    pytest.param([], 0, 0, (-1, -1), id="empty"),
    pytest.param([], 7, 0, (-1, -1), id="empty-any-epoch"),
    pytest.param([(2, 6)], -1, 73, (-1, -1), id="undefined-epoch"),
    pytest.param([(2, 6)], 2, 7, (2, 7), id="latest-is-log-end"),
    pytest.param([(5, 11), (6, 12), (7, 13)], 4, 0, (4, 11), id="below-first-epoch"),
    pytest.param([(1, 5), (2, 8)], 1, 11, (1, 8), id="previous-epoch-ends-at-next-start"),
    pytest.param([(0, 10), (2, 13), (4, 17)], 0, 20, (0, 13), id="gap-exact-first"),
    pytest.param([(0, 10), (2, 13), (4, 17)], 1, 20, (0, 13), id="gap-missing-epoch-floors"),
    pytest.param([(0, 10), (2, 13), (4, 17)], 2, 20, (2, 17), id="gap-exact-middle"),
    pytest.param([(0, 10), (2, 13), (4, 17)], 3, 20, (2, 17), id="gap-missing-before-latest"),
    pytest.param([(0, 10), (2, 13), (4, 17)], 4, 20, (4, 20), id="gap-latest"),
    pytest.param([(2, 100)], 3, 100, (-1, -1), id="above-latest"),
]


@pytest.mark.parametrize(("entries", "requested", "log_end", "expected"), END_OFFSET_CASES)
def test_end_offset_for(
    tmp_path: Path, entries: list[tuple[int, int]], requested: int, log_end: int, expected: tuple[int, int]
) -> None:
    assert cache_with(tmp_path, *entries).end_offset_for(requested, log_end) == expected


def test_kafka_follower_example_many_messages_per_epoch(tmp_path: Path) -> None:
    cache = cache_with(tmp_path, (0, 0), (0, 1), (0, 2), (1, 3), (1, 4), (2, 5))
    assert cache.entries == (E(0, 0), E(1, 3), E(2, 5))
    assert cache.end_offset_for(0, 6) == (0, 3)
    assert cache.end_offset_for(1, 6) == (1, 5)
    assert cache.end_offset_for(2, 6) == (2, 6)
    assert cache.epoch_for_offset(4) == 1
    assert cache.epoch_for_offset(-5) == -1


# --- assign --------------------------------------------------------------------------------------


def test_latest_epoch(tmp_path: Path) -> None:
    cache = cache_with(tmp_path)
    assert cache.latest_epoch == -1
    cache.assign(3, 10)
    assert cache.latest_epoch == 3


def test_same_epoch_later_offset_changes_nothing_and_writes_nothing(tmp_path: Path) -> None:
    cache = cache_with(tmp_path, (2, 6))
    cache.path.unlink()
    assert cache.assign(2, 10) is False
    assert cache.entries == (E(2, 6),)
    assert cache.sync() is False
    assert not cache.path.exists()


def test_changes_wait_in_memory_for_sync(tmp_path: Path) -> None:
    cache = cache_with(tmp_path, (2, 6))
    assert cache.assign(3, 9) is True
    assert read_leader_epoch_checkpoint(cache.path) == [E(2, 6)]
    assert cache.sync() is True
    assert read_leader_epoch_checkpoint(cache.path) == [E(2, 6), E(3, 9)]
    assert cache.sync() is False


def test_a_file_written_in_the_background_is_left_to_a_closes_syncfs_and_made_durable_by_a_flush(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = cache_with(tmp_path, (2, 6))
    assert cache.write_unwritten() is False  # nothing changed since the flush
    cache.assign(3, 9)
    assert cache.unwritten
    writes: list[bool] = []
    write = leader_epoch.write_leader_epoch_checkpoint

    def recorded(path: Path, entries: Iterable[EpochEntry], durable: bool = True) -> None:
        writes.append(durable)
        write(path, entries, durable)

    monkeypatch.setattr(leader_epoch, "write_leader_epoch_checkpoint", recorded)
    assert cache.write_unwritten() is True
    assert read_leader_epoch_checkpoint(cache.path) == [E(2, 6), E(3, 9)]
    assert not cache.unwritten
    assert writes == [False]
    # A close that syncs the file system after its logs finds nothing left to write.
    assert cache.sync(durable=False) is False
    # A flush makes the file durable: written again, with its fsyncs.
    assert cache.sync(durable=True) is True
    assert cache.sync(durable=True) is False
    assert writes == [False, True]


def test_a_change_made_while_the_background_writes_is_written_later(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker thread writes the entries it read; a change on the loop meanwhile must leave the cache
    unwritten, or the close would skip a file that lacks it."""
    cache = cache_with(tmp_path, (2, 6))
    cache.assign(3, 9)
    writing, release = threading.Event(), threading.Event()
    write = leader_epoch.write_leader_epoch_checkpoint

    def slow(path: Path, entries: Iterable[EpochEntry], durable: bool = True) -> None:
        entries = list(entries)
        writing.set()
        assert release.wait(5)
        write(path, entries, durable)

    monkeypatch.setattr(leader_epoch, "write_leader_epoch_checkpoint", slow)
    background = threading.Thread(target=cache.write_unwritten)
    background.start()
    assert writing.wait(5)
    changer = threading.Thread(target=cache.assign, args=(4, 12))
    changer.start()
    changer.join(0.2)  # the change, as far as it gets while the write holds the cache
    release.set()
    background.join(5)
    changer.join(5)
    monkeypatch.setattr(leader_epoch, "write_leader_epoch_checkpoint", write)
    assert cache.entries == (E(2, 6), E(3, 9), E(4, 12))
    assert cache.unwritten
    assert cache.sync(durable=False) is True
    assert read_leader_epoch_checkpoint(cache.path) == [E(2, 6), E(3, 9), E(4, 12)]


def test_same_epoch_earlier_offset_moves_its_start(tmp_path: Path) -> None:
    cache = cache_with(tmp_path, (2, 6))
    assert cache.assign(2, 5) is True
    assert cache.entries == (E(2, 5),)
    assert on_disk(cache) == [E(2, 5)]


def test_non_monotonic_entries_are_replaced(tmp_path: Path) -> None:
    # Kafka's shouldEnforceMonotonicallyIncreasingStartOffsets: the newest entry describes the log's tail.
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    assert cache_with(tmp_path / "a", (2, 6), (3, 5)).entries == (E(3, 5),)
    assert cache_with(tmp_path / "b", (1, 0), (4, 10), (3, 20)).entries == (E(1, 0), E(3, 20))


def test_negative_entries_are_rejected(tmp_path: Path) -> None:
    cache = cache_with(tmp_path)
    with pytest.raises(ValueError):
        cache.assign(-1, 0)
    with pytest.raises(ValueError):
        cache.assign(0, -1)


def test_assign_all(tmp_path: Path) -> None:
    cache = cache_with(tmp_path)
    assert cache.assign_all([(0, 0), (0, 3), (1, 5), (4, 9)]) is True
    assert cache.entries == (E(0, 0), E(1, 5), E(4, 9))
    assert on_disk(cache) == [E(0, 0), E(1, 5), E(4, 9)]
    assert cache.assign_all([(4, 12)]) is False
    assert cache.sync() is False


# --- truncation ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("end_offset", "expected"),
    [
        (9, [E(2, 6), E(3, 8)]),
        (8, [E(2, 6)]),
        (6, []),
        (12, [E(2, 6), E(3, 8), E(4, 11)]),
        (-1, [E(2, 6), E(3, 8), E(4, 11)]),
    ],
)
def test_truncate_from_end(tmp_path: Path, end_offset: int, expected: list[EpochEntry]) -> None:
    cache = cache_with(tmp_path, (2, 6), (3, 8), (4, 11))
    changed = cache.truncate_from_end(end_offset)
    assert list(cache.entries) == expected
    assert changed == (len(expected) < 3)
    assert on_disk(cache) == expected


@pytest.mark.parametrize(
    ("start_offset", "expected"),
    [
        (15, [E(4, 15)]),
        (9, [E(3, 9), E(4, 11)]),
        (8, [E(3, 8), E(4, 11)]),
        (6, [E(2, 6), E(3, 8), E(4, 11)]),
        (5, [E(2, 6), E(3, 8), E(4, 11)]),
    ],
)
def test_truncate_from_start(tmp_path: Path, start_offset: int, expected: list[EpochEntry]) -> None:
    cache = cache_with(tmp_path, (2, 6), (3, 8), (4, 11))
    changed = cache.truncate_from_start(start_offset)
    assert list(cache.entries) == expected
    assert changed == (start_offset > 6)
    assert on_disk(cache) == expected


def test_truncation_of_an_empty_cache_is_a_no_op(tmp_path: Path) -> None:
    cache = cache_with(tmp_path)
    assert not cache.truncate_from_end(5)
    assert not cache.truncate_from_start(5)
    assert not cache.clear()
    assert not cache.sync()
    assert not cache.path.exists()


def test_clear(tmp_path: Path) -> None:
    cache = cache_with(tmp_path, (1, 0), (2, 4))
    assert cache.clear()
    assert cache.entries == ()
    assert on_disk(cache) == []


# --- the file ------------------------------------------------------------------------------------


def test_file_is_kafkas_format(tmp_path: Path) -> None:
    cache = cache_with(tmp_path, (0, 0), (1, 3), (5, 100))
    assert cache.path.read_text() == "0\n3\n0 0\n1 3\n5 100\n"
    assert not cache.path.with_name(LEADER_EPOCH_CHECKPOINT + ".tmp").exists()


def test_entries_survive_a_new_instance(tmp_path: Path) -> None:
    cache = cache_with(tmp_path, (0, 0), (1, 3))
    again = LeaderEpochCache(cache.directory, read_leader_epoch_checkpoint(cache.path) or [])
    assert again.entries == cache.entries
    assert again.end_offset_for(0, 9) == (0, 3)


def test_missing_file_reads_as_none(tmp_path: Path) -> None:
    assert read_leader_epoch_checkpoint(tmp_path / LEADER_EPOCH_CHECKPOINT) is None


def test_kafka_whitespace_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / LEADER_EPOCH_CHECKPOINT
    path.write_text("0\n2\n0  0\n1\t3\n")
    assert read_leader_epoch_checkpoint(path) == [E(0, 0), E(1, 3)]


@pytest.mark.parametrize(
    "text",
    [
        "",
        "1\n0\n",
        "0\n2\n0 0\n",
        "0\n1\n0\n",
        "0\n1\nx 0\n",
        "0\n2\n3 0\n2 5\n",
        "0\n2\n1 5\n2 4\n",
        "0\n1\n-1 0\n",
    ],
    ids=["empty", "version", "count", "short-row", "not-a-number", "epochs-down", "offsets-down", "negative"],
)
def test_malformed_file_is_corrupt(tmp_path: Path, text: str) -> None:
    path = tmp_path / LEADER_EPOCH_CHECKPOINT
    path.write_text(text)
    with pytest.raises(CorruptLogError):
        read_leader_epoch_checkpoint(path)


def test_write_then_read_round_trip(tmp_path: Path) -> None:
    path = tmp_path / LEADER_EPOCH_CHECKPOINT
    write_leader_epoch_checkpoint(path, [E(3, 7), E(9, 12)])
    assert read_leader_epoch_checkpoint(path) == [E(3, 7), E(9, 12)]


def test_the_entries_are_one_tuple_replaced_on_each_change(tmp_path: Path) -> None:
    """Held as a tuple: an idle follower's empty cache holds Python's one empty tuple, a leader's one entry a
    48 B tuple (a list apiece was 56 and 88 B), and entries read before a change stay as they were."""
    cache = LeaderEpochCache(tmp_path)

    def held() -> list[object]:
        return [ref for ref in gc.get_referents(cache) if isinstance(ref, list | tuple)]

    assert held() == [()]
    cache.assign(1, 0)
    before = cache.entries
    cache.assign(2, 10)
    cache.assign(3, 20)
    assert before == (EpochEntry(1, 0),)
    assert held() == [cache.entries] and len(cache.entries) == 3
    cache.truncate_from_start(15)
    cache.truncate_from_end(20)
    assert cache.entries == (EpochEntry(2, 15),) and held() == [cache.entries]
    assert cache.replace_from(15, [(4, 15)]) and cache.entries == (EpochEntry(4, 15),)
    assert cache.clear() and held() == [()]
