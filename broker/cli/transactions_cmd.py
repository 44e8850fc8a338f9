"""`kafkette transactions`: list and describe transactions, like kafka-transactions.sh.

ListTransactions goes to every broker (each lists the transactional ids it coordinates); DescribeTransactions
to the coordinator FindCoordinator names. Plain Kafka requests (confluent-kafka's AdminClient has neither),
so it works against any Kafka-compatible cluster.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Sequence
from typing import TypeVar

from kafkette.broker.cli.common import CommandError, admin_verbs, bootstrap_of
from kafkette.broker.net.client import BrokerClient
from kafkette.broker.protocol.errors import ErrorCode
from kafkette.broker.protocol.messages.describe_transactions_request import DescribeTransactionsRequest
from kafkette.broker.protocol.messages.describe_transactions_response import DescribeTransactionsResponse
from kafkette.broker.protocol.messages.find_coordinator_request import FindCoordinatorRequest
from kafkette.broker.protocol.messages.find_coordinator_response import FindCoordinatorResponse
from kafkette.broker.protocol.messages.list_transactions_request import ListTransactionsRequest
from kafkette.broker.protocol.messages.list_transactions_response import ListTransactionsResponse
from kafkette.broker.protocol.messages.metadata_request import MetadataRequest
from kafkette.broker.protocol.messages.metadata_response import MetadataResponse
from kafkette.broker.protocol.types import Message

DEFAULT_TIMEOUT = 30.0
TRANSACTION_KEY_TYPE = 1
CLIENT_ID = "kafkette-transactions"
_M = TypeVar("_M", bound=Message)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    command = subparsers.add_parser("transactions", help="transactions and their state (like kafka-transactions.sh)")
    actions, connection_options = admin_verbs(command, DEFAULT_TIMEOUT)
    listing = actions.add_parser("list", help="every transactional id, its coordinator, producer id and state")
    listing.set_defaults(run=_list)
    describe = actions.add_parser("describe", help="one transactional id's producer, state and partitions")
    describe.add_argument("--transactional-id", required=True, metavar="ID")
    describe.set_defaults(run=_describe)
    connection_options()


def table(rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows]


async def _ask(host: str, port: int, body: Message, version: int, expect: type[_M], timeout: float) -> _M:
    client = BrokerClient(host, port, CLIENT_ID)
    try:
        return await client.request(body, version, timeout, expect)
    except (OSError, TimeoutError) as exc:
        raise CommandError(f"{host}:{port} did not answer {type(body).__name__}: {exc}") from exc
    finally:
        await client.close()


def _first_address(args: argparse.Namespace) -> tuple[str, int]:
    host, _, port = bootstrap_of(args).split(",")[0].rpartition(":")
    return host, int(port)


async def _brokers(args: argparse.Namespace) -> dict[int, tuple[str, int]]:
    metadata = await _ask(*_first_address(args), MetadataRequest(topics=[]), 12, MetadataResponse, args.timeout)
    return {b.node_id: (b.host, b.port) for b in metadata.brokers}


async def _list_all(args: argparse.Namespace) -> list[tuple[str, str, str, str]]:
    brokers = await _brokers(args)
    rows = []
    for node_id, (host, port) in sorted(brokers.items()):
        listed = await _ask(host, port, ListTransactionsRequest(), 0, ListTransactionsResponse, args.timeout)
        if listed.error_code != ErrorCode.NONE:
            raise CommandError(f"broker {node_id} cannot list transactions: {ErrorCode(listed.error_code).name}")
        rows += [
            (t.transactional_id, str(node_id), str(t.producer_id), t.transaction_state)
            for t in listed.transaction_states
        ]
    return sorted(rows)


def _list(args: argparse.Namespace) -> int:
    rows = asyncio.run(_list_all(args))
    print("\n".join(table([("TransactionalId", "Coordinator", "ProducerId", "TransactionState"), *rows])))
    return 0


async def _describe_one(args: argparse.Namespace) -> list[str]:
    transactional_id = args.transactional_id
    found = await _ask(
        *_first_address(args),
        FindCoordinatorRequest(key=transactional_id, key_type=TRANSACTION_KEY_TYPE),
        3,
        FindCoordinatorResponse,
        args.timeout,
    )
    if found.error_code != ErrorCode.NONE:
        raise CommandError(f"no coordinator for {transactional_id!r}: {ErrorCode(found.error_code).name}")
    described = await _ask(
        found.host,
        found.port,
        DescribeTransactionsRequest(transactional_ids=[transactional_id]),
        0,
        DescribeTransactionsResponse,
        args.timeout,
    )
    state = described.transaction_states[0]
    if state.error_code != ErrorCode.NONE:
        raise CommandError(f"cannot describe {transactional_id!r}: {ErrorCode(state.error_code).name}")
    started = state.transaction_start_time_ms
    duration = str(int(time.time() * 1000) - started) if started >= 0 else "None"
    partitions = ",".join(f"{t.topic}-{p}" for t in state.topics for p in t.partitions)
    header = (
        "CoordinatorId",
        "TransactionalId",
        "ProducerId",
        "ProducerEpoch",
        "TransactionState",
        "TransactionTimeoutMs",
        "CurrentTransactionStartTimeMs",
        "TransactionDurationMs",
        "TopicPartitions",
    )
    row = (
        str(found.node_id),
        transactional_id,
        str(state.producer_id),
        str(state.producer_epoch),
        state.transaction_state,
        str(state.transaction_timeout_ms),
        str(started) if started >= 0 else "None",
        duration,
        partitions,
    )
    return table([header, row])


def _describe(args: argparse.Namespace) -> int:
    print("\n".join(asyncio.run(_describe_one(args))))
    return 0
