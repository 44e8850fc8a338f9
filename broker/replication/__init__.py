"""Partition replicas: append validation, idempotent producers, and (later) followers and ISR."""
