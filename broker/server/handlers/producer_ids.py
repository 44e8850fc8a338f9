"""InitProducerId: a new producer id for an idempotent producer, or the transaction coordinator's id and epoch
for a transactional one."""

from __future__ import annotations

from collections.abc import Awaitable

from kafkette.broker.protocol.errors import KafkaError
from kafkette.broker.protocol.messages.init_producer_id_request import InitProducerIdRequest
from kafkette.broker.protocol.messages.init_producer_id_response import InitProducerIdResponse
from kafkette.broker.server.context import RequestContext
from kafkette.broker.server.handlers.transactions import client_error

MAX_PRODUCER_EPOCH = 0x7FFF - 1


def handle_init_producer_id(
    ctx: RequestContext, request: InitProducerIdRequest
) -> InitProducerIdResponse | Awaitable[InitProducerIdResponse]:
    if request.transactional_id is not None:
        return _transactional(ctx, request)
    # KIP-360: an idempotent producer that hit an error asks to bump its epoch and keep its id.
    if request.producer_id >= 0 and 0 <= request.producer_epoch < MAX_PRODUCER_EPOCH:
        return InitProducerIdResponse(producer_id=request.producer_id, producer_epoch=request.producer_epoch + 1)
    return _new_producer(ctx)


async def _transactional(ctx: RequestContext, request: InitProducerIdRequest) -> InitProducerIdResponse:
    error, producer_id, epoch = await ctx.broker.transactions.init_producer_id(
        request.transactional_id or "", request.transaction_timeout_ms, request.producer_id, request.producer_epoch
    )
    return InitProducerIdResponse(
        error_code=client_error(error, ctx.api_version, "init"), producer_id=producer_id, producer_epoch=epoch
    )


async def _new_producer(ctx: RequestContext) -> InitProducerIdResponse:
    try:
        producer_id = await ctx.broker.producer_ids.next_id()
    except KafkaError as exc:
        return InitProducerIdResponse(error_code=exc.code)
    return InitProducerIdResponse(producer_id=producer_id, producer_epoch=0)
