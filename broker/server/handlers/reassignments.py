"""AlterPartitionReassignments and ListPartitionReassignments: decided by the active controller, which keeps
the moves in flight in the metadata log (``broker/controller/control_reassignments.py``)."""

from __future__ import annotations

from collections.abc import Awaitable

from kafkette.broker.protocol.messages.alter_partition_reassignments_request import (
    AlterPartitionReassignmentsRequest,
)
from kafkette.broker.protocol.messages.alter_partition_reassignments_response import (
    AlterPartitionReassignmentsResponse,
)
from kafkette.broker.protocol.messages.list_partition_reassignments_request import ListPartitionReassignmentsRequest
from kafkette.broker.protocol.messages.list_partition_reassignments_response import ListPartitionReassignmentsResponse
from kafkette.broker.server.context import RequestContext


def handle_alter_partition_reassignments(
    ctx: RequestContext, request: AlterPartitionReassignmentsRequest
) -> Awaitable[AlterPartitionReassignmentsResponse]:
    return ctx.broker.controller.forward(request, AlterPartitionReassignmentsResponse)


def handle_list_partition_reassignments(
    ctx: RequestContext, request: ListPartitionReassignmentsRequest
) -> Awaitable[ListPartitionReassignmentsResponse]:
    # Asked of the controller rather than read from this broker's image, which may lag behind it.
    return ctx.broker.controller.forward(request, ListPartitionReassignmentsResponse)
