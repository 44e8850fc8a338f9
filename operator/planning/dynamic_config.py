"""Which of a KafkaCluster's spec.config keys a running cluster takes live and which need a restart, and what
to change so the brokers' cluster-wide dynamic defaults match the spec: pure decisions, no I/O.

Kafka's dynamic broker keys (log.retention.ms, min.insync.replicas, ...) are set on running brokers with
IncrementalAlterConfigs; every other key is read from server.properties at start only. The brokers' pods
carry a hash of the static keys alone (kube/render.py), so a change of a dynamic key restarts nobody."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kafkette.broker.config import DYNAMIC_BROKER_KEYS


@dataclass(frozen=True)
class SplitConfig:
    static: dict[str, str]  # applied by a restart
    dynamic: dict[str, str]  # applied live, as cluster-wide defaults


def split_config(config: Mapping[str, str]) -> SplitConfig:
    """spec.config split by whether a running broker takes the key (the broker's own DYNAMIC_BROKER_KEYS)."""
    return SplitConfig(
        static={key: value for key, value in config.items() if key not in DYNAMIC_BROKER_KEYS},
        dynamic={key: value for key, value in config.items() if key in DYNAMIC_BROKER_KEYS},
    )


@dataclass(frozen=True)
class DefaultsChange:
    """One IncrementalAlterConfigs on the cluster-wide default (BROKER resource ""): SET these, DELETE those."""

    set: dict[str, str]
    delete: frozenset[str]

    @property
    def keys(self) -> list[str]:
        return sorted({*self.set, *self.delete})


def defaults_change(wanted: Mapping[str, str], current: Mapping[str, str]) -> DefaultsChange | None:
    """What makes the cluster-wide dynamic defaults (`current`, as DescribeConfigs reports them) equal the spec's
    dynamic keys (`wanted`); None when they already are. The spec owns the defaults: one set by hand
    (kafka-configs.sh --entity-default) and not in the spec is removed, as a topic's own override is."""
    # The broker keeps values trimmed; compared untrimmed, a padded spec value would be set again at every look.
    to_set = {key: value.strip() for key, value in wanted.items() if current.get(key) != value.strip()}
    to_delete = frozenset(key for key in current if key not in wanted and key in DYNAMIC_BROKER_KEYS)
    return DefaultsChange(to_set, to_delete) if to_set or to_delete else None
