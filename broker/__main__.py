"""`python -m kafkette.broker ARGS` is `kafkette broker ARGS`: how tools start a broker process."""

import sys

from kafkette.broker.cli import main

sys.exit(main(["broker", *sys.argv[1:]]))
