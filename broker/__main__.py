"""`python -m kafkette.broker ARGS` is `kafkette broker ARGS`: how tools start a broker process.

Only the `broker` subcommand is loaded, so a broker process does not import client libraries.
"""

import sys

from kafkette.broker.cli import broker_cmd
from kafkette.broker.cli.main import main

sys.exit(main(["broker", *sys.argv[1:]], subcommands=(broker_cmd,)))
