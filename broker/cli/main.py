"""`kafkette COMMAND`: the parser of the given subcommands, and the dispatch to the chosen one."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from kafkette.broker.cli.common import CommandError, Subcommand


def broker_subcommands() -> tuple[Subcommand, ...]:
    """The broker's own verbs; the installed `kafkette` adds the cluster verbs (`kafkette.operator.cli.main`)."""
    # Imported on demand: a broker process (python -m kafkette.broker) needs only its own.
    from kafkette.broker.cli import broker_cmd, groups_cmd, topics_cmd, transactions_cmd

    return (broker_cmd, topics_cmd, groups_cmd, transactions_cmd)


def build_parser(subcommands: Sequence[Subcommand] | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kafkette", description="Kafkette: a Kafka-compatible broker.")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in subcommands or broker_subcommands():
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None, subcommands: Sequence[Subcommand] | None = None) -> int:
    """Run one `kafkette` command; returns its exit code (argparse exits 2 itself on bad usage)."""
    args = build_parser(subcommands).parse_args(argv)
    try:
        return int(args.run(args))
    except CommandError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
