"""The APIs this broker serves, their version ranges, and ApiVersions itself.

Minimum versions follow Kafka 4.0 (KIP-896 removed the pre-2.1 versions,
and versions older than these need the magic 0/1 message formats); maximum
versions are the newest stable ones in the message definitions.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kafkette.broker.protocol.errors import ErrorCode
from kafkette.broker.protocol.messages import REQUESTS
from kafkette.broker.protocol.messages.api_versions_request import ApiVersionsRequest
from kafkette.broker.protocol.messages.api_versions_response import ApiVersion, ApiVersionsResponse
from kafkette.broker.server.context import RequestContext
from kafkette.broker.server.handlers.configs import (
    handle_alter_configs,
    handle_describe_configs,
    handle_incremental_alter_configs,
)
from kafkette.broker.server.handlers.delete_records import handle_delete_records
from kafkette.broker.server.handlers.describe_producers import handle_describe_producers
from kafkette.broker.server.handlers.describe_quorum import handle_describe_quorum
from kafkette.broker.server.handlers.describe_topic_partitions import handle_describe_topic_partitions
from kafkette.broker.server.handlers.fetch import handle_fetch
from kafkette.broker.server.handlers.groups import (
    handle_delete_groups,
    handle_describe_groups,
    handle_find_coordinator,
    handle_heartbeat,
    handle_join_group,
    handle_leave_group,
    handle_list_groups,
    handle_sync_group,
)
from kafkette.broker.server.handlers.list_offsets import handle_list_offsets
from kafkette.broker.server.handlers.log_dirs import handle_alter_replica_log_dirs, handle_describe_log_dirs
from kafkette.broker.server.handlers.metadata import handle_describe_cluster, handle_metadata
from kafkette.broker.server.handlers.offset_for_leader_epoch import handle_offset_for_leader_epoch
from kafkette.broker.server.handlers.offsets import handle_offset_commit, handle_offset_delete, handle_offset_fetch
from kafkette.broker.server.handlers.produce import handle_produce
from kafkette.broker.server.handlers.producer_ids import handle_init_producer_id
from kafkette.broker.server.handlers.reassignments import (
    handle_alter_partition_reassignments,
    handle_list_partition_reassignments,
)
from kafkette.broker.server.handlers.security import (
    handle_alter_user_scram_credentials,
    handle_create_acls,
    handle_delete_acls,
    handle_describe_acls,
    handle_describe_client_quotas,
    handle_describe_user_scram_credentials,
    handle_sasl_authenticate,
    handle_sasl_handshake,
)
from kafkette.broker.server.handlers.topics import (
    handle_create_partitions,
    handle_create_topics,
    handle_delete_topics,
    handle_elect_leaders,
)
from kafkette.broker.server.handlers.transactions import (
    handle_add_offsets_to_txn,
    handle_add_partitions_to_txn,
    handle_describe_transactions,
    handle_end_txn,
    handle_list_transactions,
    handle_txn_offset_commit,
    handle_write_txn_markers,
)

Handler = Callable[[RequestContext, Any], Any]


@dataclass(frozen=True, slots=True)
class Api:
    key: int
    min_version: int
    max_version: int
    handler: Handler


# What a SASL listener serves before the client has authenticated (anything else closes the connection).
PRE_AUTHENTICATION_APIS = frozenset({18, 17, 36})  # ApiVersions, SaslHandshake, SaslAuthenticate


def handle_api_versions(ctx: RequestContext, request: ApiVersionsRequest) -> ApiVersionsResponse:
    return api_versions_response(ErrorCode.NONE)


def api_versions_response(error: ErrorCode) -> ApiVersionsResponse:
    return ApiVersionsResponse(
        error_code=error,
        api_keys=[
            ApiVersion(api_key=a.key, min_version=a.min_version, max_version=a.max_version) for a in APIS.values()
        ],
    )


def _api(key: int, min_version: int, handler: Handler, max_version: int | None = None) -> Api:
    """``max_version`` caps the newest stable version where a newer one means something not served here."""
    request = REQUESTS[key]
    newest = request.VALID_VERSIONS[1] - (1 if request.LATEST_VERSION_UNSTABLE else 0)
    return Api(key, min_version, newest if max_version is None else min(max_version, newest), handler)


APIS: dict[int, Api] = {
    api.key: api
    for api in (
        _api(0, 3, handle_produce),
        _api(1, 4, handle_fetch),
        _api(2, 1, handle_list_offsets),
        _api(3, 0, handle_metadata),
        _api(8, 2, handle_offset_commit),
        _api(9, 1, handle_offset_fetch),
        # v0 (as Kafka 4.x serves it) is what old librdkafka checks to enable LZ4 and its group consumer.
        _api(10, 0, handle_find_coordinator),
        # From v0 as Kafka 4.0.1+ (KAFKA-19444): librdkafka before 2.11 needs v0 to enable its group consumer.
        _api(11, 0, handle_join_group),
        _api(12, 0, handle_heartbeat),
        _api(13, 0, handle_leave_group),
        _api(14, 0, handle_sync_group),
        _api(15, 0, handle_describe_groups),
        _api(16, 0, handle_list_groups),
        # v1+: the SASL tokens travel in SaslAuthenticate (v0's raw tokens outside Kafka framing are not served).
        _api(17, 1, handle_sasl_handshake),
        _api(18, 0, handle_api_versions),
        _api(19, 2, handle_create_topics),
        _api(20, 1, handle_delete_topics),
        _api(21, 0, handle_delete_records),
        _api(22, 0, handle_init_producer_id),
        _api(23, 2, handle_offset_for_leader_epoch),
        # v4+ is the broker-to-broker batched form (KIP-890 verification); clients use v0-v3.
        _api(24, 0, handle_add_partitions_to_txn, max_version=3),
        _api(25, 0, handle_add_offsets_to_txn),
        # v5 bumps the epoch at every transaction (KIP-890 part 2, transaction.version 2), not offered here.
        _api(26, 0, handle_end_txn, max_version=4),
        _api(27, 0, handle_write_txn_markers),
        _api(28, 0, handle_txn_offset_commit),
        _api(29, 1, handle_describe_acls),
        _api(30, 1, handle_create_acls),
        _api(31, 1, handle_delete_acls),
        _api(32, 1, handle_describe_configs),
        _api(33, 0, handle_alter_configs),
        # v0 of both was removed in Kafka 4.0 (KIP-896).
        _api(34, 1, handle_alter_replica_log_dirs),
        _api(35, 1, handle_describe_log_dirs),
        _api(36, 0, handle_sasl_authenticate),
        _api(37, 0, handle_create_partitions),
        _api(42, 1, handle_delete_groups),
        _api(43, 0, handle_elect_leaders),
        _api(44, 0, handle_incremental_alter_configs),
        _api(45, 0, handle_alter_partition_reassignments),
        _api(46, 0, handle_list_partition_reassignments),
        _api(47, 0, handle_offset_delete),
        _api(48, 0, handle_describe_client_quotas),
        _api(50, 0, handle_describe_user_scram_credentials),
        _api(51, 0, handle_alter_user_scram_credentials),
        _api(55, 0, handle_describe_quorum),
        _api(60, 0, handle_describe_cluster),
        _api(61, 0, handle_describe_producers),
        _api(65, 0, handle_describe_transactions),
        _api(66, 0, handle_list_transactions),
        _api(75, 0, handle_describe_topic_partitions),
    )
}
