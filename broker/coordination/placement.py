"""Which partition of a state topic (and so which coordinator) owns a key (a group, a transactional id): Kafka's
own hash."""

from __future__ import annotations

_INT_MASK = 0xFFFFFFFF
_INT_MIN = -(2**31)


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode``: 31-based over UTF-16 code units, wrapped to a signed 32-bit int."""
    value = 0
    encoded = text.encode("utf-16-be")
    for index in range(0, len(encoded), 2):
        value = (value * 31 + (encoded[index] << 8 | encoded[index + 1])) & _INT_MASK
    return value - 2**32 if value & 0x80000000 else value


def partition_for(key: str, partitions: int) -> int:
    """Kafka's ``Utils.abs(key.hashCode()) % partitions``, where abs(Integer.MIN_VALUE) is 0."""
    code = java_string_hash(key)
    return (0 if code == _INT_MIN else abs(code)) % partitions
