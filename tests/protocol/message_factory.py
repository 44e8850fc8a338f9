"""Random instances of the generated protocol messages, for round-trip and differential tests.

A :class:`MessageFactory` fills every field that exists in the requested
version from the field's ``FIELDS`` description: integers across their whole
range (with the boundaries favoured), non-ASCII strings, random bytes and
records, nullable values sometimes ``None``, arrays of 0-3 elements, and
tagged fields sometimes left at their default so that both the "omitted" and
the "written" paths of the tagged-field section are exercised. Fields absent
from the version keep their constructor defaults, which is what a decoder
produces for them.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from typing import Any, TypeVar
from uuid import UUID

from kafkette.broker.protocol import messages
from kafkette.broker.protocol.types import ZERO_UUID, Field, Message, Struct, in_range

S = TypeVar("S", bound=Struct)

ValueMaker = Callable[[random.Random], Any]

INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1),
}

# ASCII, Latin-1, Cyrillic, CJK and an astral-plane emoji: 1- to 4-byte UTF-8 sequences.
TEXT_ALPHABET = "abcXYZ019-_. éüßжЖ漢字🙂"

MAX_ARRAY = 3


def every_message_class() -> list[type[Message]]:
    """Every generated message: requests, responses, headers and data schemas."""
    found = (getattr(messages, name) for name in messages.__all__)
    return sorted(
        (item for item in found if isinstance(item, type) and issubclass(item, Message)),
        key=lambda cls: cls.NAME,
    )


def versions_of(cls: type[Message]) -> range:
    low, high = cls.VALID_VERSIONS
    return range(low, high + 1)


class MessageFactory:
    """Builds random instances; ``overrides`` maps ``(struct class, field name)`` to a value maker."""

    def __init__(self, rng: random.Random, overrides: Mapping[tuple[type, str], ValueMaker] | None = None) -> None:
        self.rng = rng
        self.overrides = overrides or {}

    def build(self, cls: type[S], version: int) -> S:
        obj = cls()
        for field in cls.FIELDS:
            if not in_range(version, field.versions):
                continue
            if in_range(version, field.tagged) and self.rng.random() < 0.5:
                continue  # a tagged field left at its default is not written at all
            setattr(obj, field.name, self.field_value(cls, field, version))
        return obj

    def field_value(self, cls: type, field: Field, version: int) -> Any:
        override = self.overrides.get((cls, field.name))
        if override is not None:
            return override(self.rng)
        if in_range(version, field.nullable) and self.rng.random() < 0.2:
            return None
        if field.kind == "array":
            count = self.rng.randint(0, MAX_ARRAY)
            return [self._value(field.element, version) for _ in range(count)]
        if field.kind == "struct":
            return self.build(field.element, version)
        return self._value(field.kind, version)

    def _value(self, kind: Any, version: int) -> Any:
        if isinstance(kind, type):
            return self.build(kind, version)
        rng = self.rng
        if kind in INT_RANGES:
            return random_int(rng, *INT_RANGES[kind])
        if kind == "bool":
            return rng.random() < 0.5
        if kind == "float64":
            return rng.choice((0.0, -1.5, 1e300, rng.uniform(-1e9, 1e9)))
        if kind == "string":
            return "".join(rng.choice(TEXT_ALPHABET) for _ in range(rng.randint(0, 8)))
        if kind in ("bytes", "records"):
            return rng.randbytes(rng.randint(0, 24))
        if kind == "uuid":
            return ZERO_UUID if rng.random() < 0.2 else UUID(int=rng.getrandbits(128))
        raise TypeError(f"no random values for {kind!r}")


def random_int(rng: random.Random, low: int, high: int) -> int:
    """An integer in ``[low, high]``, the boundaries and small values being as likely as the rest."""
    pick = rng.random()
    if pick < 0.15:
        return rng.choice((low, high))
    if pick < 0.4:
        return max(low, min(high, rng.randint(-2, 300)))
    return rng.randint(low, high)
