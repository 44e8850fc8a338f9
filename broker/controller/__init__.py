"""KRaft-style controller quorum: Raft over the metadata log, and the metadata image."""
