"""`kafkette broker`: run one broker in the foreground until SIGTERM or Ctrl-C."""

from __future__ import annotations

import argparse
from pathlib import Path

from kafkette.broker.cli.common import CommandError, host_port, key_value
from kafkette.broker.config import BrokerConfig, ConfigError, parse_properties_file


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "broker",
        help="run a broker in the foreground",
        description="Run a broker until SIGTERM or Ctrl-C. Settings apply in this order, later winning: "
        "--config file, --set, then the dedicated flags.",
    )
    parser.add_argument("--data-dir", type=Path, metavar="DIR", help="where partitions are stored (log.dirs)")
    parser.add_argument(
        "--listen", type=host_port, metavar="HOST:PORT", help="the PLAINTEXT listener (first); port 0 picks one"
    )
    parser.add_argument("--node-id", type=int, metavar="N", help="this broker's node.id")
    parser.add_argument("--advertise", type=host_port, metavar="HOST:PORT", help="address given to clients")
    parser.add_argument("--config", type=Path, metavar="FILE", help="a server.properties file")
    parser.add_argument(
        "--set",
        type=key_value,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="any broker config key",
    )
    parser.set_defaults(run=run)


def broker_config(args: argparse.Namespace) -> BrokerConfig:
    """The configuration the arguments describe; ConfigError or OSError when it cannot be built."""
    props = parse_properties_file(args.config) if args.config else {}
    props.update(args.set)
    if args.data_dir is not None:
        props.pop("log.dir", None)
        props["log.dirs"] = str(args.data_dir)
    if args.listen is not None:
        # The flag sets the PLAINTEXT listener; other listeners (SSL, SASL_SSL, CONTROLLER, ...) stay, after it.
        others = [
            x for x in props.get("listeners", "").split(",") if x.strip() and not x.strip().startswith("PLAINTEXT:")
        ]
        props["listeners"] = ",".join([f"PLAINTEXT://{args.listen}", *others])
    if args.advertise is not None:
        props["advertised.listeners"] = f"PLAINTEXT://{args.advertise}"
    if args.node_id is not None:
        props.pop("broker.id", None)  # the flag replaces the old spelling too, not only node.id
        props["node.id"] = str(args.node_id)
    return BrokerConfig.from_properties(props)


def run(args: argparse.Namespace) -> int:
    try:
        config = broker_config(args)
    except ConfigError as exc:
        raise CommandError(str(exc), exit_code=2) from exc
    except OSError as exc:
        raise CommandError(f"cannot read {exc.filename}: {exc.strerror}", exit_code=2) from exc
    # Imported here so that the other subcommands work without loading the server.
    from kafkette.broker.server.app import run as run_server

    run_server(config)
    return 0
