"""What the group and transaction coordinators share: a compacted state topic, partitioned by key, whose
partitions this broker leads it serves after replaying them (``__consumer_offsets``, ``__transaction_state``)."""
