"""Pieces every `kafkette` subcommand shares: its failure type and argument parsers."""

from __future__ import annotations

import argparse
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
