"""spec.config split into the keys a restart applies and those set live, and the change that brings the cluster-wide
dynamic defaults to the spec."""

from __future__ import annotations

import pytest

from kafkette.operator.planning.dynamic_config import DefaultsChange, SplitConfig, defaults_change, split_config


@pytest.mark.parametrize(
    ("config", "split"),
    [
        ({}, SplitConfig({}, {})),
        ({"log.retention.ms": "1000"}, SplitConfig({}, {"log.retention.ms": "1000"})),
        # log.retention.hours is static in Kafka too: log.retention.ms is its dynamic synonym.
        ({"log.retention.hours": "1"}, SplitConfig({"log.retention.hours": "1"}, {})),
        (
            {
                "replica.lag.time.max.ms": "10000",
                "min.insync.replicas": "2",
                "num.partitions": "3",
                "log.segment.bytes": "1048576",
                "offsets.topic.replication.factor": "3",
            },
            SplitConfig(
                {"replica.lag.time.max.ms": "10000", "num.partitions": "3", "offsets.topic.replication.factor": "3"},
                {"min.insync.replicas": "2", "log.segment.bytes": "1048576"},
            ),
        ),
        # Operator-owned keys never reach spec.config, but the render hashes whole properties through the split.
        (
            {"node.id": "0", "log.dirs": "/data", "unclean.leader.election.enable": "true"},
            SplitConfig({"node.id": "0", "log.dirs": "/data"}, {"unclean.leader.election.enable": "true"}),
        ),
    ],
)
def test_split_config(config: dict[str, str], split: SplitConfig) -> None:
    assert split_config(config) == split
    # Order kept: the ConfigMap and the hash read the static keys in the spec's order.
    assert list(split_config(config).static) == [key for key in config if key in split.static]


@pytest.mark.parametrize(
    ("wanted", "current", "change"),
    [
        ({}, {}, None),
        ({"log.retention.ms": "1000"}, {"log.retention.ms": "1000"}, None),
        ({"log.retention.ms": "1000"}, {}, DefaultsChange({"log.retention.ms": "1000"}, frozenset())),
        (
            {"log.retention.ms": "2000"},
            {"log.retention.ms": "1000"},
            DefaultsChange({"log.retention.ms": "2000"}, frozenset()),
        ),
        # Removed from the spec, or set by hand and never in it: the spec owns the defaults.
        ({}, {"log.retention.ms": "1000"}, DefaultsChange({}, frozenset({"log.retention.ms"}))),
        (
            {"min.insync.replicas": "2", "log.segment.bytes": "1048576"},
            {"min.insync.replicas": "2", "log.retention.ms": "1"},
            DefaultsChange({"log.segment.bytes": "1048576"}, frozenset({"log.retention.ms"})),
        ),
        # The broker keeps values trimmed: a padded spec value equal once trimmed is no change.
        ({"log.retention.ms": " 1000 "}, {"log.retention.ms": "1000"}, None),
        ({"log.retention.ms": " 1000 "}, {}, DefaultsChange({"log.retention.ms": "1000"}, frozenset())),
        # A default the broker reports that is not a dynamic key is not the operator's to delete.
        ({}, {"some.plugin.key": "x"}, None),
    ],
)
def test_defaults_change(wanted: dict[str, str], current: dict[str, str], change: DefaultsChange | None) -> None:
    assert defaults_change(wanted, current) == change


def test_change_names_every_key_once_in_order() -> None:
    change = DefaultsChange({"min.insync.replicas": "2", "log.retention.ms": "1"}, frozenset({"log.segment.bytes"}))
    assert change.keys == ["log.retention.ms", "log.segment.bytes", "min.insync.replicas"]
