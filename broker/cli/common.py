"""Pieces every `kafkette` subcommand shares: its failure type, argument parsers and the admin verbs' options."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Protocol


class Subcommand(Protocol):
    """A subcommand module: it adds its parser, whose defaults carry `run`."""

    def register(self, subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None: ...


class CommandError(Exception):
    """Ends a command: `main` prints `error: <message>` to stderr and exits with `exit_code`."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def host_port(text: str) -> str:
    """argparse type for HOST:PORT (IPv6 hosts in brackets); returns the text unchanged once checked."""
    host, colon, port = text.rpartition(":")
    if not colon or not port.isdigit() or int(port) > 65535 or (":" in host and not host.startswith("[")):
        raise argparse.ArgumentTypeError(f"expected HOST:PORT with a port in 0..65535, got {text!r}")
    return text


def key_value(text: str) -> tuple[str, str]:
    """argparse type for KEY=VALUE (the value may contain '=' and may be empty)."""
    key, equals, value = text.partition("=")
    if not equals or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value


def admin_verbs(
    parser: argparse.ArgumentParser, default_timeout: float
) -> tuple[argparse._SubParsersAction[argparse.ArgumentParser], Callable[[], None]]:
    """The actions of an admin command (`topics`, `groups`), with the connection options before or after the action.

    Kafka's tools take options in any order, and their users type them anywhere: `--bootstrap` (Kafka's
    `--bootstrap-server` too) and `--timeout` go on the command and on each action. Call the returned function
    once every action is added. SUPPRESS keeps an action's parser from resetting a value given before it.
    """
    _connection_options(parser, None, default_timeout)
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")

    def each_action() -> None:
        for action in actions.choices.values():
            _connection_options(action, argparse.SUPPRESS, argparse.SUPPRESS)

    return actions, each_action


def _connection_options(parser: argparse.ArgumentParser, bootstrap: object, timeout: object) -> None:
    parser.add_argument("--bootstrap", "--bootstrap-server", dest="bootstrap", metavar="HOST:PORT", default=bootstrap)
    parser.add_argument("--timeout", type=float, metavar="SECONDS", default=timeout, help="per request")


def bootstrap_of(args: argparse.Namespace) -> str:
    """The --bootstrap given before or after the action; a usage error (exit 2) without one."""
    if not args.bootstrap:
        raise CommandError("--bootstrap HOST:PORT (or --bootstrap-server) is required", exit_code=2)
    return str(args.bootstrap)
