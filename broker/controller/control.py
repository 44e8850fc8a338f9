"""The active controller's decisions, pure: committed image (+ settings) in, (records, response) out.

Nothing here does I/O or reads a clock; ``cluster_controller.py`` proposes the
records and sends the response once they commit. The operations live in small
modules by subject and are re-exported here as one surface:

- topics:     create_topics, delete_topics, create_partitions  (control_topics)
- configs:    incremental_alter_configs, alter_configs          (control_configs)
- brokers:    register_broker, heartbeat, fence_brokers, BrokerLiveness,
              allocate_producer_ids                             (control_brokers)
- partitions: alter_partition, elect_leaders, preferred_leader_moves (control_partitions)
- security:   alter_user_scram_credentials, create_acls, delete_acls (control_security)
- moves:      alter_partition_reassignments, list_partition_reassignments,
              completed_reassignments                           (control_reassignments)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from kafkette.broker.config import BrokerConfig, topic_config_defaults


@dataclass(frozen=True, slots=True)
class ControllerSettings:
    """The broker configuration the controller's decisions depend on."""

    num_partitions: int = 1
    default_replication_factor: int = 1
    min_insync_replicas: int = 1
    unclean_leader_election_enable: bool = False
    delete_topic_enable: bool = True
    # Topic config key -> broker default value, for APPEND/SUBTRACT on keys the topic does not override.
    topic_defaults: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({"cleanup.policy": "delete"}))

    @classmethod
    def from_config(cls, config: BrokerConfig) -> ControllerSettings:
        defaults = {name: default.value for name, default in topic_config_defaults(config).items()}
        return cls(
            num_partitions=config.num_partitions,
            default_replication_factor=config.default_replication_factor,
            min_insync_replicas=config.min_insync_replicas,
            unclean_leader_election_enable=config.unclean_leader_election_enable,
            delete_topic_enable=config.delete_topic_enable,
            topic_defaults=MappingProxyType(defaults),
        )


# Re-exported after ControllerSettings exists; the operation modules import it only for type checking.
from kafkette.broker.controller.control_brokers import (  # noqa: E402
    PRODUCER_ID_BLOCK_SIZE,
    BrokerLiveness,
    allocate_producer_ids,
    fence_brokers,
    heartbeat,
    register_broker,
)
from kafkette.broker.controller.control_configs import alter_configs, incremental_alter_configs  # noqa: E402
from kafkette.broker.controller.control_partitions import (  # noqa: E402
    alter_partition,
    elect_leaders,
    preferred_leader_moves,
)
from kafkette.broker.controller.control_reassignments import (  # noqa: E402
    alter_partition_reassignments,
    completed_reassignments,
    list_partition_reassignments,
)
from kafkette.broker.controller.control_security import (  # noqa: E402
    alter_user_scram_credentials,
    create_acls,
    delete_acls,
)
from kafkette.broker.controller.control_topics import create_partitions, create_topics, delete_topics  # noqa: E402

__all__ = [
    "PRODUCER_ID_BLOCK_SIZE",
    "BrokerLiveness",
    "ControllerSettings",
    "allocate_producer_ids",
    "alter_configs",
    "alter_partition",
    "alter_partition_reassignments",
    "alter_user_scram_credentials",
    "completed_reassignments",
    "create_acls",
    "create_partitions",
    "create_topics",
    "delete_acls",
    "delete_topics",
    "elect_leaders",
    "fence_brokers",
    "heartbeat",
    "incremental_alter_configs",
    "list_partition_reassignments",
    "preferred_leader_moves",
    "register_broker",
]
