"""The group coordinator: classic consumer groups and committed offsets, kept in ``__consumer_offsets``."""
