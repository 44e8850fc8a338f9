"""The `kafkette` command line: one subcommand per module, each registering its own parser."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from kafkette.broker.cli import broker_cmd, demo_cmd, groups_cmd, topics_cmd
from kafkette.broker.cli.common import CommandError

SUBCOMMANDS = (broker_cmd, topics_cmd, groups_cmd, demo_cmd)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kafkette", description="Kafkette: a Kafka-compatible broker.")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in SUBCOMMANDS:
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one `kafkette` command; returns its exit code (argparse exits 2 itself on bad usage)."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.run(args))
    except CommandError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
