"""The chaos run and the harness's own checks."""

from __future__ import annotations

from pathlib import Path

import pytest
from harness import (
    Ack,
    ChaosConfig,
    check_acks,
    config_from_env,
    divergence,
    epoch_conflicts,
    leader_changes,
    leader_claims,
    log_prefix,
    loop_holds,
    offset_problems,
    run_chaos,
    split_epoch_bump_resends,
    truncations,
)

from kafkette.broker.protocol.batch import patch_leader_epoch
from kafkette.broker.protocol.records import Record, encode_batch

CONFIG = config_from_env()


def batch(base_offset: int, count: int, tag: bytes = b"v", epoch: int = 0) -> bytes:
    records = [
        Record(offset=base_offset + i, timestamp=1, key=None, value=tag + bytes([i]), headers=[]) for i in range(count)
    ]
    data = bytearray(encode_batch(records, base_offset=base_offset))
    patch_leader_epoch(data, 0, epoch)
    return bytes(data)


@pytest.mark.timeout(int(CONFIG.seconds) + 420)
def test_no_acknowledged_write_is_lost_under_chaos(tmp_path: Path) -> None:
    report = run_chaos(tmp_path / "cluster", CONFIG)
    print(report.summary())
    assert report.acked > 0, report.summary()
    assert report.faults, report.summary()
    assert report.ok, (
        f"{report.summary()}\nlost {report.lost[:10]}\nduplicates {report.duplicates[:10]}\n"
        f"misplaced {report.misplaced[:10]}\nreused {report.reused_offsets[:10]}\n"
        f"divergent {report.divergent_replicas}"
    )


def test_check_acks_finds_each_kind_of_failure() -> None:
    acked = [Ack(0, 0, b"a"), Ack(0, 1, b"b"), Ack(1, 0, b"c"), Ack(1, 1, b"d"), Ack(1, 1, b"e"), Ack(0, 2, b"f")]
    consumed = {0: [(0, b"a"), (1, b"f"), (2, b"b")], 1: [(0, b"c"), (1, b"d"), (2, b"c")]}
    check = check_acks(acked, consumed)
    assert check.lost == [b"e"]
    assert check.duplicates == {b"c": [(1, 0), (1, 2)]}
    assert [(ack.value, where) for ack, where in check.misplaced] == [(b"b", [(0, 2)]), (b"f", [(0, 1)])]
    assert check.reused_offsets == [(1, 1)]
    clean = check_acks(acked[:4], {0: [(0, b"a"), (1, b"b"), (2, b"x")], 1: [(0, b"c"), (1, b"d")]})
    assert clean == type(clean)([], {}, [], [])


def test_an_implicit_acknowledgement_is_checked_for_its_partition_not_an_offset() -> None:
    """librdkafka acknowledges a batch whose request timed out once a later batch succeeds, with no offset."""
    acked = [Ack(0, None, b"a"), Ack(0, None, b"b"), Ack(1, None, b"c"), Ack(1, None, b"d"), Ack(0, 2, b"e")]
    consumed = {0: [(0, b"a"), (1, b"b"), (2, b"e"), (3, b"c")], 1: [(0, b"d"), (1, b"d")]}
    check = check_acks(acked, consumed)
    assert check.lost == []
    assert check.duplicates == {b"d": [(1, 0), (1, 1)]}
    assert [(ack.value, where) for ack, where in check.misplaced] == [(b"c", [(0, 3)])]
    assert check.reused_offsets == []


def test_a_value_resent_under_a_bumped_producer_epoch_is_told_from_a_duplicate_the_broker_let_through() -> None:
    # Partition 0: producer 7 wrote offsets 0-3 at epoch 0, then after bumping its epoch offsets 4-5 at epoch 1;
    # producer 8 wrote offset 6 at epoch 0 and offset 7 again at epoch 0.
    producers = {0: [(0, 3, 7, 0), (4, 5, 7, 1), (6, 6, 8, 0), (7, 7, 8, 0)], 1: [(0, 1, 7, 1)]}
    duplicates = {
        b"resent": [(0, 2), (0, 4)],  # producer 7, epochs 0 and 1
        b"same-epoch": [(0, 6), (0, 7)],  # producer 8 twice at epoch 0: the broker's sequence check failed
        b"two-producers": [(0, 1), (0, 6)],
        b"two-partitions": [(0, 3), (1, 0)],  # producer 7 at epochs 0 and 1, but a re-send keeps its partition
        b"unknown": [(0, 2), (0, 9)],  # past the replica's log: no producer to tell
    }
    kept, resent = split_epoch_bump_resends(duplicates, producers)
    assert resent == [b"resent"]
    assert kept == [b"same-epoch", b"two-producers", b"two-partitions", b"unknown"]
    assert split_epoch_bump_resends({}, producers) == ([], [])


def test_log_prefix_stops_at_the_high_watermark_and_a_torn_tail(tmp_path: Path) -> None:
    first, second, third = batch(0, 3), batch(3, 2), batch(5, 4)
    (tmp_path / "00000000000000000000.log").write_bytes(first + second)
    (tmp_path / "00000000000000000005.log").write_bytes(third + third[:20])
    assert log_prefix(tmp_path, 5) == [first, second]
    assert log_prefix(tmp_path, 9) == [first, second, third]
    assert log_prefix(tmp_path, 100) == [first, second, third]
    assert log_prefix(tmp_path, 0) == []


def test_divergence() -> None:
    same = [batch(0, 2), batch(2, 2)]
    assert divergence({0: same, 1: list(same), 2: list(same)}, 4) is None
    other = [same[0], batch(2, 2, tag=b"w")]
    assert "broker 2 differs from broker 0 at batch 1 (offset 2)" in str(divergence({0: same, 1: same, 2: other}, 4))
    assert "broker 1 has 1 batches" in str(divergence({0: same, 1: same[:1]}, 4))


def test_offset_problems() -> None:
    assert offset_problems([batch(0, 3), batch(3, 2, epoch=1), batch(5, 1, epoch=1)]) is None
    assert offset_problems([]) is None
    assert "offset 4 follows one ending at 2" in str(offset_problems([batch(0, 3), batch(4, 1)]))
    assert "offset 2 follows one ending at 2" in str(offset_problems([batch(0, 3), batch(2, 1)]))
    assert "leader epoch 1, after epoch 2" in str(offset_problems([batch(0, 1, epoch=2), batch(1, 1, epoch=1)]))


def test_epoch_conflicts_from_broker_logs() -> None:
    log = (
        "2026-01-01 INFO kafkette.broker.replication.replica_manager: chaos-3: leader at epoch 5, ISR [0, 1]\n"
        "... chaos-3: following broker 1 at epoch 6\n... other-3: leader at epoch 7, ISR [0]\n"
        "... chaos-12: leader at epoch 2, ISR [0, 1, 2]\n"
        "... chaos partitions 0-1,7: leader at epoch 9, ISR [0]\n... other partitions 4-5: leader at epoch 9, ISR [0]\n"
    )
    assert leader_claims(log, "chaos") == {(3, 5), (12, 2), (0, 9), (1, 9), (7, 9)}
    assert (
        truncations(log + "... chaos-3: truncating from 10 to 7\n... other-3: truncating from 9 to 8\n", "chaos") == 1
    )
    assert epoch_conflicts({0: {(3, 5), (12, 2)}, 1: {(3, 6)}, 2: {(3, 6)}}) == ["partition 3 epoch 6: leaders [1, 2]"]
    assert epoch_conflicts({0: {(3, 5)}, 1: {(3, 6)}}) == []


def test_leader_changes() -> None:
    assert leader_changes({}, {0: 1, 1: 2}) == 0
    assert leader_changes({0: 1, 1: 2}, {0: 1, 1: 0, 2: 1}) == 1


def test_config_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKETTE_CHAOS_SECONDS", "600")
    monkeypatch.setenv("KAFKETTE_CHAOS_SEED", "7")
    assert config_from_env() == ChaosConfig(seconds=600.0, seed=7)


def test_loop_holds_from_broker_logs() -> None:
    log = (
        "2026-12-05 18:18:57,263 WARNING kafkette.broker.server.loop_watch: the event loop was held for 3095 ms, "
        "and every client with it; its thread was at:\n  File ...\n"
        "2026-12-05 18:18:57,944 WARNING kafkette.broker.server.loop_watch: the event loop was held for 580 ms, "
        "and every client with it; its thread was at:\n"
    )
    assert loop_holds(log) == [3095, 580]
    assert loop_holds("... quorum: Leader at epoch 271\n") == []
