"""The ``quorum-state`` file: Kafka's QuorumStateData, replaced atomically on every change."""

from __future__ import annotations

import struct
from pathlib import Path

from kafkette.broker.controller.log import ElectionState
from kafkette.broker.controller.raft_state.quorum_state_data import QuorumStateData, Voter
from kafkette.broker.storage.files import atomic_write

_VERSION = struct.Struct(">h")
# Version 0 also carries the static voter set, which a later reconfiguration (KIP-853) will drop.
STATE_VERSION = 0


class FileElectionStore:
    def __init__(self, path: Path, cluster_id: str, voters: frozenset[int]) -> None:
        self.path = path
        self._cluster_id = cluster_id
        self._voters = voters

    def load(self) -> ElectionState:
        if not self.path.exists():
            return ElectionState()
        data = self.path.read_bytes()
        (version,) = _VERSION.unpack_from(data)
        saved = QuorumStateData.decode(memoryview(data)[2:], version)
        return ElectionState(
            saved.leader_epoch if saved.leader_epoch >= 0 else 0,
            saved.voted_id if saved.voted_id >= 0 else None,
            saved.leader_id if saved.leader_id >= 0 else None,
        )

    def save(self, state: ElectionState) -> None:
        data = QuorumStateData(
            cluster_id=self._cluster_id,
            leader_id=-1 if state.leader_id is None else state.leader_id,
            leader_epoch=state.epoch,
            voted_id=-1 if state.voted_id is None else state.voted_id,
            current_voters=[Voter(voter_id=v) for v in sorted(self._voters)],
        )
        atomic_write(self.path, _VERSION.pack(STATE_VERSION) + bytes(data.encode(STATE_VERSION)))
