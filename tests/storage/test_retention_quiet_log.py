"""Time-based retention on a quiet log, as Kafka: once every record, the active segment's too, is older than
retention.ms, the active segment is rolled and deleted, the log start reaches the log end, and offsets go on
from there. A segment with a record still young keeps the log as it is."""

from __future__ import annotations

from pathlib import Path

from kafkette.broker.storage import Log, LogConfig
from kafkette.broker.storage.retention import active_segment_expired

CONFIG = LogConfig(retention_ms=60_000)


def test_a_quiet_log_past_retention_is_emptied_and_keeps_counting(tmp_path: Path, make_batch) -> None:
    log = Log.open(tmp_path / "t-0", CONFIG, clock=lambda: 10_000)
    log.append(make_batch([b"a", b"b"], base_timestamp=1_000), leader_epoch=0)
    log.append(make_batch([b"c"], base_timestamp=2_000), leader_epoch=0)
    assert len(log.segments) == 1
    # Within retention: nothing goes, not even with the active segment alone.
    assert log.delete_expired_segments(now=2_000 + 60_000) == []
    assert log.log_start_offset == 0

    deleted = log.delete_expired_segments(now=2_001 + 60_000)
    assert any(path.name.endswith(".log.deleted") for path in deleted)
    assert (log.log_start_offset, log.log_end_offset) == (3, 3)
    assert [seg.base_offset for seg in log.segments] == [3]
    result = log.append(make_batch([b"d"], base_timestamp=70_000), leader_epoch=0)
    assert result.first_offset == 3
    log.close()

    reopened = Log.open(tmp_path / "t-0", CONFIG, clean_shutdown=True, recovery_point=4, log_start_offset=3)
    assert (reopened.log_start_offset, reopened.log_end_offset) == (3, 4)
    reopened.close()


def test_the_rule_needs_every_segment_expired_and_a_non_empty_active_one(tmp_path: Path, make_batch) -> None:
    log = Log.open(tmp_path / "t-0", LogConfig(retention_ms=60_000, segment_bytes=200), clock=lambda: 0)
    assert not active_segment_expired(log.segments, log.config, now=10**9)  # empty
    for timestamp in (1_000, 2_000, 50_000):
        log.append(make_batch([b"x" * 120], base_timestamp=timestamp), leader_epoch=0)
    assert len(log.segments) == 3
    assert not active_segment_expired(log.segments, log.config, now=100_000)  # the newest is 50 s old
    assert active_segment_expired(log.segments, log.config, now=110_001)
    assert not active_segment_expired(log.segments, LogConfig(retention_ms=-1), now=10**9)
    assert not active_segment_expired(log.segments, LogConfig(retention_ms=1, delete=False, compact=True), now=10**9)
    log.close()
