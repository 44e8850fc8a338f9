"""Regenerate the message classes: ``python -m kafkette.broker.protocol.gen [SPEC_DIR] [OUT_DIR]``."""

from __future__ import annotations

import sys
from pathlib import Path

from kafkette.broker.protocol.gen import generate

REPO = Path(__file__).resolve().parents[3]
DEFAULT_SPEC_DIR = REPO.parent / "shared" / "kafka-protocol" / "message"
DEFAULT_OUT_DIR = REPO / "broker" / "protocol" / "messages"
# The key/value schemas of the records the group coordinator writes to __consumer_offsets.
GROUP_RECORDS_SPEC_DIR = REPO.parent / "shared" / "kafka-protocol" / "group-coordinator"
GROUP_RECORDS_OUT_DIR = REPO / "broker" / "group" / "records"
# The records of the KRaft metadata log, and the controller quorum's persisted election state.
METADATA_RECORDS_SPEC_DIR = REPO.parent / "shared" / "kafka-protocol" / "metadata"
METADATA_RECORDS_OUT_DIR = REPO / "broker" / "controller" / "records"
RAFT_STATE_SPEC_DIR = REPO.parent / "shared" / "kafka-protocol" / "raft"
RAFT_STATE_OUT_DIR = REPO / "broker" / "controller" / "raft_state"


def main(argv: list[str]) -> int:
    spec_dir = Path(argv[0]) if argv else DEFAULT_SPEC_DIR
    out_dir = Path(argv[1]) if len(argv) > 1 else DEFAULT_OUT_DIR
    written = generate(spec_dir, out_dir)
    print(f"wrote {written} modules to {out_dir}")
    if not argv:
        written = generate(GROUP_RECORDS_SPEC_DIR, GROUP_RECORDS_OUT_DIR)
        print(f"wrote {written} modules to {GROUP_RECORDS_OUT_DIR}")
        for spec_dir, extra_out_dir in (
            (METADATA_RECORDS_SPEC_DIR, METADATA_RECORDS_OUT_DIR),
            (RAFT_STATE_SPEC_DIR, RAFT_STATE_OUT_DIR),
        ):
            written = generate(spec_dir, extra_out_dir)
            print(f"wrote {written} modules to {extra_out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
