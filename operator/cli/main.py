"""The `kafkette` console entry point: the broker's subcommands composed with the local runtime's."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from kafkette.broker.cli import main as broker_main
from kafkette.broker.cli.common import Subcommand


def all_subcommands() -> tuple[Subcommand, ...]:
    # Imported on demand, as the broker's own are: building the parser stays cheap.
    from kafkette.operator.cli import cluster_cmd, demo_cmd, pipeline_cmd, reassign_cmd, roll_cmd, scale_cmd, top_cmd

    verbs = (demo_cmd, cluster_cmd, roll_cmd, scale_cmd, reassign_cmd, top_cmd, pipeline_cmd)
    return (*broker_main.broker_subcommands(), *verbs)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one `kafkette` command; returns its exit code."""
    return broker_main.main(argv, all_subcommands())


def build_parser() -> argparse.ArgumentParser:
    """The parser of every `kafkette` subcommand (what `main` parses with)."""
    return broker_main.build_parser(all_subcommands())
