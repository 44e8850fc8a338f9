"""DescribeQuorum from a client (`kafka-metadata-quorum.sh --bootstrap-server`): forwarded to the quorum's
leader, which alone knows how far each replica has fetched (``broker/controller/describe_quorum.py``)."""

from __future__ import annotations

from collections.abc import Awaitable

from kafkette.broker.protocol.messages.describe_quorum_request import DescribeQuorumRequest
from kafkette.broker.protocol.messages.describe_quorum_response import DescribeQuorumResponse
from kafkette.broker.server.context import RequestContext


def handle_describe_quorum(ctx: RequestContext, request: DescribeQuorumRequest) -> Awaitable[DescribeQuorumResponse]:
    return ctx.broker.controller.forward(request, DescribeQuorumResponse)
