"""Ending a transaction another process opened: EndTxn for a (transactional id, producer id, epoch) (Kafka I/O).

A Spark task's producer opens a transaction and leaves it open; the driver, once Spark says every task
of the batch succeeded, commits them. Kafka's coordinator accepts EndTxn from any connection that names
the transactional id with its current producer id and epoch (as Flink's Kafka sink relies on), so the
driver sends the request itself over the broker's own client (confluent-kafka cannot end a transaction
it did not open). A producer fenced since then (a newer epoch) is refused with PRODUCER_FENCED.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from kafkette.broker.net.client import BrokerClient
from kafkette.broker.protocol.errors import ErrorCode
from kafkette.broker.protocol.messages.end_txn_request import EndTxnRequest
from kafkette.broker.protocol.messages.end_txn_response import EndTxnResponse
from kafkette.broker.protocol.messages.find_coordinator_request import FindCoordinatorRequest
from kafkette.broker.protocol.messages.find_coordinator_response import FindCoordinatorResponse
from kafkette.broker.protocol.types import Message

_M = TypeVar("_M", bound=Message)

CLIENT_ID = "kafkette-spark-sink"
TRANSACTION_KEY_TYPE = 1
FIND_COORDINATOR_VERSION = 3  # one key per request, flexible: every Kafka 2.4+ broker serves it
END_TXN_VERSION = 3  # transaction protocol v1, which is what librdkafka's producers speak
# The coordinator is busy finishing an earlier state change, or moving, or not yet elected: ask again.
_RETRIABLE = {
    ErrorCode.CONCURRENT_TRANSACTIONS,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_COORDINATOR,
}
# What the coordinator answers for a transaction aborted behind the driver's back.
_ABORTED = {ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.INVALID_TXN_STATE}
RETRY_PAUSE_S = 0.1


@dataclass(frozen=True)
class OpenTransaction:
    """A task's transaction, flushed and left open for the driver to end."""

    transactional_id: str
    producer_id: int
    producer_epoch: int


class TransactionEndError(RuntimeError):
    """The coordinator refused to end a transaction; the message names it and the error."""


def end_transactions(bootstrap: str, open_: Sequence[OpenTransaction], commit: bool, timeout_s: float) -> None:
    """Commit (or abort) each transaction; one that cannot be ended does not stop the others, and raises
    TransactionEndError naming every failure once all were tried."""
    servers = [_address(server) for server in bootstrap.split(",") if server.strip()]
    failures = asyncio.run(_end_all(servers, open_, commit, timeout_s))
    if failures:
        raise TransactionEndError("; ".join(failures))


def _address(server: str) -> tuple[str, int]:
    host, _, port = server.strip().rpartition(":")
    return host.strip("[]"), int(port)


async def _end_all(
    servers: Sequence[tuple[str, int]], open_: Sequence[OpenTransaction], commit: bool, timeout_s: float
) -> list[str]:
    deadline = asyncio.get_running_loop().time() + timeout_s
    failures = [await _end_until_done(servers, transaction, commit, deadline) for transaction in open_]
    return [failure for failure in failures if failure is not None]


async def _end_until_done(
    servers: Sequence[tuple[str, int]], transaction: OpenTransaction, commit: bool, deadline: float
) -> str | None:
    """None once the transaction is ended, else why it could not be (retriable errors retried until deadline)."""
    loop = asyncio.get_running_loop()
    while True:
        try:
            error = await _end_one(servers, transaction, commit, max(deadline - loop.time(), RETRY_PAUSE_S))
        except (ConnectionError, TimeoutError) as exc:
            # A broker down or a coordinator moving: a retried EndTxn is safe (an ended one answers NONE again).
            if loop.time() > deadline:
                return f"{_describe(transaction, commit)}: {exc}"
            error = ErrorCode.COORDINATOR_NOT_AVAILABLE
        if error == ErrorCode.NONE:
            return None
        if error not in _RETRIABLE or loop.time() > deadline:
            hint = (
                " (aborted since: its transaction timeout, kafka.transaction.timeout.ms, passed, or a newer "
                "attempt of the task fenced it; the batch runs again when the query restarts)"
                if commit and error in _ABORTED
                else ""
            )
            return f"{_describe(transaction, commit)}: {error.name}{hint}"
        await asyncio.sleep(RETRY_PAUSE_S)


def _describe(transaction: OpenTransaction, commit: bool) -> str:
    verb = "commit" if commit else "abort"
    return (
        f"cannot {verb} transaction {transaction.transactional_id} (producer {transaction.producer_id}, "
        f"epoch {transaction.producer_epoch})"
    )


async def _end_one(
    servers: Sequence[tuple[str, int]], transaction: OpenTransaction, commit: bool, timeout_s: float
) -> ErrorCode:
    find = FindCoordinatorRequest(key=transaction.transactional_id, key_type=TRANSACTION_KEY_TYPE)
    found = await _ask_any(servers, find, FIND_COORDINATOR_VERSION, FindCoordinatorResponse, timeout_s)
    if found.error_code != ErrorCode.NONE:
        return ErrorCode(found.error_code)
    request = EndTxnRequest(
        transactional_id=transaction.transactional_id,
        producer_id=transaction.producer_id,
        producer_epoch=transaction.producer_epoch,
        committed=commit,
    )
    ended = await _ask(found.host, found.port, request, END_TXN_VERSION, EndTxnResponse, timeout_s)
    return ErrorCode(ended.error_code)


async def _ask_any(
    servers: Sequence[tuple[str, int]], body: Message, version: int, expect: type[_M], timeout_s: float
) -> _M:
    """The first answer from the bootstrap servers, tried in order (as a client does when one is down)."""
    failure: Exception = ConnectionError("no bootstrap servers")
    for host, port in servers:
        try:
            return await _ask(host, port, body, version, expect, timeout_s)
        except (ConnectionError, TimeoutError) as exc:
            failure = exc
    raise failure


async def _ask(host: str, port: int, body: Message, version: int, expect: type[_M], timeout_s: float) -> _M:
    client = BrokerClient(host, port, CLIENT_ID)
    try:
        return await client.request(body, version, timeout_s, expect)
    finally:
        await client.close()
