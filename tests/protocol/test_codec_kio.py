"""Differential tests against kio, an independent codec generated from Kafka 4.x schemas.

For each (message, version) both codecs define, our encoding of a random
instance is read by kio and written back by kio, and the bytes must be
identical; in the other direction, kio's encoding of a hypothesis-built kio
entity is decoded and re-encoded by us. kio may come from a newer Kafka than
our definitions, so a pair whose field layout differs (names, tags, types,
nullability, nesting) is skipped with the difference as the reason.
"""

from __future__ import annotations

import io
import random
from dataclasses import Field as KioField
from dataclasses import dataclass, fields
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from kio.schema.index import schema_name_map
from kio.serial import entity_reader, entity_writer
from kio.serial._introspect import EntityField, EntityTupleField, classify_field, get_field_tag, is_optional
from kio.static.constants import EntityType
from kio.static.primitive import Records
from message_factory import MessageFactory, ValueMaker, every_message_class, random_int, versions_of

from kafkette.broker.protocol.types import Field, Message, in_range

INSTANCES_PER_PAIR = 4
ERROR_CODES = sorted(code.value for code in ErrorCode)
# kio turns these into timedeltas and timezone-aware datetimes (which must not be before the epoch):
# stay well inside what Python can represent.
TIMEDELTA_MS = 2**46
DATETIME_MS = (0, 2**46)

# kio types that are our primitive types with a narrower range or a different name.
KIO_TYPES = {"error_code": "int16", "timedelta_i32": "int32", "timedelta_i64": "int64", "datetime_i64": "int64"}
KIO_RENAMED = {"timedelta_i32", "timedelta_i64", "datetime_i64"}  # kio drops the "_ms" suffix of these
NONE_AS_SENTINEL = {"uuid", "datetime_i64"}


def _error_code(rng: random.Random) -> int:
    return rng.choice(ERROR_CODES)


def _timedelta_i64(rng: random.Random) -> int:
    return random_int(rng, -TIMEDELTA_MS, TIMEDELTA_MS)


def _datetime(rng: random.Random) -> int:
    return random_int(rng, *DATETIME_MS)


def _nullable_datetime(rng: random.Random) -> int:
    return -1 if rng.random() < 0.2 else _datetime(rng)


class LayoutMismatch(Exception):
    """Our definition and kio's differ for this version: the pair cannot be compared."""


@dataclass(frozen=True)
class Pair:
    cls: type[Message]
    version: int
    kio_cls: type

    def __str__(self) -> str:
        return f"{self.cls.NAME}-v{self.version}"


def _kio_entity(cls: type[Message]) -> tuple[str, EntityType]:
    stem = cls.__module__.rsplit(".", 1)[1]
    if cls.API_KEY is None:
        return stem, EntityType.header if stem.endswith("_header") else EntityType.data
    if stem.endswith("_request"):
        return stem.removesuffix("_request"), EntityType.request
    return stem.removesuffix("_response"), EntityType.response


def _all_pairs() -> list[Pair]:
    pairs = []
    for cls in every_message_class():
        name, entity_type = _kio_entity(cls)
        kio_versions = schema_name_map.get(name, {})
        for version in versions_of(cls):
            path = kio_versions.get(version, {}).get(entity_type)
            if path is not None:
                module, _, attribute = path.partition(":")
                kio_cls = getattr(__import__(module, fromlist=[attribute]), attribute)
                pairs.append(Pair(cls, version, kio_cls))
    return pairs


def _align_field(ours: Field, theirs: KioField, version: int, overrides: dict, owner: type) -> None:
    where = f"{owner.__name__}.{ours.name}"
    tag = ours.tag if in_range(version, ours.tagged) else None
    if tag != get_field_tag(theirs):
        raise LayoutMismatch(f"{where}: tag {tag} vs kio {get_field_tag(theirs)}")
    shape = classify_field(theirs)
    if (ours.kind == "array") != shape.is_array:
        raise LayoutMismatch(f"{where}: array vs not")
    nullable = in_range(version, ours.nullable)
    kio_type = theirs.metadata.get("kafka_type")
    # kio reads a zero uuid and a timestamp of -1 as None: its Optional says nothing about the schema.
    if tag is None and kio_type not in NONE_AS_SENTINEL and nullable != is_optional(theirs):
        raise LayoutMismatch(f"{where}: nullable {nullable} vs kio {is_optional(theirs)}")
    element = ours.element if ours.kind in ("array", "struct") else ours.kind
    if isinstance(shape, EntityField | EntityTupleField):
        if not isinstance(element, type):
            raise LayoutMismatch(f"{where}: {element} vs kio struct {shape.type_.__name__}")
        _align_struct(element, shape.type_, version, overrides)
        return
    if isinstance(element, type) or element != KIO_TYPES.get(kio_type, kio_type):
        raise LayoutMismatch(f"{where}: {element} vs kio {kio_type}")
    maker = _value_maker(kio_type, is_optional(theirs))
    if maker is not None:
        if shape.is_array:
            raise LayoutMismatch(f"{where}: array of kio {kio_type} not generated")
        overrides[(owner, ours.name)] = maker


def _value_maker(kio_type: str, optional: bool) -> ValueMaker | None:
    if kio_type == "error_code":
        return _error_code
    if kio_type == "timedelta_i64":
        return _timedelta_i64
    if kio_type == "datetime_i64":
        return _nullable_datetime if optional else _datetime
    return None


def _our_name(field: KioField) -> str:
    """kio's field name as we spell it: no "_" appended to builtins, "_ms" kept on durations and times."""
    name = field.name.removesuffix("_")
    return name + "_ms" if field.metadata.get("kafka_type") in KIO_RENAMED else name


def _align_struct(cls: type, kio_cls: type, version: int, overrides: dict) -> None:
    ours = [field for field in cls.FIELDS if in_range(version, field.versions)]
    theirs = list(fields(kio_cls))
    ours_names = [field.name for field in ours]
    kio_names = [_our_name(field) for field in theirs]
    if ours_names != kio_names:
        missing, extra = set(ours_names) - set(kio_names), set(kio_names) - set(ours_names)
        raise LayoutMismatch(f"{cls.__name__}: only ours {sorted(missing)}, only kio {sorted(extra)}")
    for mine, other in zip(ours, theirs, strict=True):
        _align_field(mine, other, version, overrides, cls)


def _alignment(pair: Pair) -> dict[tuple[type, str], ValueMaker]:
    """Value makers keeping our random values valid for kio; raises LayoutMismatch."""
    overrides: dict[tuple[type, str], ValueMaker] = {}
    _align_struct(pair.cls, pair.kio_cls, pair.version, overrides)
    return overrides


def _kio_encode(kio_cls: type, entity: Any) -> bytes:
    buffer = io.BytesIO()
    entity_writer(kio_cls)(buffer, entity)
    return buffer.getvalue()


# kio declares no hypothesis strategy for its records type.
st.register_type_strategy(Records, st.binary(max_size=64).map(Records))

PAIRS = _all_pairs()
COMPARABLE = []
for _pair in PAIRS:
    try:
        _alignment(_pair)
    except LayoutMismatch:
        continue
    COMPARABLE.append(_pair)


def test_most_shared_pairs_are_comparable() -> None:
    # Guards against the differential test silently skipping everything.
    assert len(PAIRS) > 550
    assert len(COMPARABLE) > 0.9 * len(PAIRS)


@pytest.mark.parametrize("pair", PAIRS, ids=str)
def test_kio_reads_and_rewrites_our_encoding(pair: Pair) -> None:
    try:
        overrides = _alignment(pair)
    except LayoutMismatch as mismatch:
        pytest.skip(f"kio's schema differs: {mismatch}")
    factory = MessageFactory(random.Random(f"kio-{pair}"), overrides)
    read = entity_reader(pair.kio_cls)
    for _ in range(INSTANCES_PER_PAIR):
        encoded = factory.build(pair.cls, pair.version).encode(pair.version)
        entity, size = read(encoded, 0)
        assert size == len(encoded)
        assert _kio_encode(pair.kio_cls, entity) == encoded


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_we_read_and_rewrite_kio_encoding(data: st.DataObject) -> None:
    pair = data.draw(st.sampled_from(COMPARABLE), label="pair")
    entity = data.draw(st.from_type(pair.kio_cls), label="kio entity")
    encoded = _kio_encode(pair.kio_cls, entity)
    assert pair.cls.decode(encoded, pair.version).encode(pair.version) == encoded
