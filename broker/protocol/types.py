"""Runtime building blocks of the generated message classes.

Generated modules (``kafkette.broker.protocol.messages``) declare one class
per struct with ``__slots__`` and a ``FIELDS`` tuple of :class:`Field`; the
codec (:mod:`kafkette.broker.protocol.codec`) compiles readers and writers
from those descriptions per version.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, TypeVar, runtime_checkable
from uuid import UUID

ZERO_UUID = UUID(int=0)
VERSION_MAX = 0x7FFF
NO_VERSIONS = (1, 0)

# Marks an array or struct whose default is a fresh empty list or a fresh default instance.
EMPTY = "EMPTY"

Versions = tuple[int, int]


class Unset:
    """The type of UNSET: "argument not given" where None is a meaningful value."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "UNSET"


UNSET = Unset()

M = TypeVar("M", bound="Message")


def in_range(version: int, versions: Versions | None) -> bool:
    return versions is not None and versions[0] <= version <= versions[1]


@dataclass(frozen=True, slots=True)
class Field:
    """One field of a struct, as declared in Kafka's JSON message definitions.

    ``kind`` is a primitive type name (``int32``, ``string``, ``records``, ...),
    ``"array"`` or ``"struct"``; for arrays ``element`` is the element's kind or
    struct class, for structs it is the struct class.
    """

    name: str
    kind: str
    versions: Versions
    element: Any = None
    nullable: Versions | None = None
    tag: int | None = None
    tagged: Versions | None = None
    default: Any = None
    flexible: Versions | None = None  # a per-field override of the message's flexibleVersions


@runtime_checkable
class FileRegion(Protocol):
    """Bytes of an open file, sent by the connection straight from the file instead of being decoded."""

    @property
    def file(self) -> Any: ...

    @property
    def position(self) -> int: ...

    @property
    def size(self) -> int: ...


RecordsValue = bytes | bytearray | memoryview | FileRegion


class Struct:
    """Base of every generated struct: equality, repr and dict conversion over ``__slots__``."""

    __slots__: tuple[str, ...] = ()
    FIELDS: ClassVar[tuple[Field, ...]] = ()

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(_same(getattr(self, name), getattr(other, name)) for name in self.__slots__)

    def __repr__(self) -> str:
        inner = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"{type(self).__name__}({inner})"

    def to_dict(self) -> dict[str, Any]:
        return {name: _plain(getattr(self, name)) for name in self.__slots__}


def _same(a: object, b: object) -> bool:
    if isinstance(a, memoryview) or isinstance(b, memoryview):
        if isinstance(a, bytes | bytearray | memoryview) and isinstance(b, bytes | bytearray | memoryview):
            return bytes(a) == bytes(b)
        return a is b
    return a == b


def _plain(value: Any) -> Any:
    if isinstance(value, Struct):
        return value.to_dict()
    if isinstance(value, list):
        return [_plain(item) for item in value]
    if isinstance(value, memoryview):
        return bytes(value)
    return value


class Message(Struct):
    """A top-level message: a request, a response, a header or a data schema."""

    __slots__ = ()
    NAME: ClassVar[str] = ""
    API_KEY: ClassVar[int | None] = None
    VALID_VERSIONS: ClassVar[Versions] = (0, 0)
    FLEXIBLE_VERSIONS: ClassVar[Versions] = NO_VERSIONS
    LATEST_VERSION_UNSTABLE: ClassVar[bool] = False

    @classmethod
    def is_flexible(cls, version: int) -> bool:
        return in_range(version, cls.FLEXIBLE_VERSIONS)

    @classmethod
    def decode(cls: type[M], buf: bytes | bytearray | memoryview, version: int) -> M:
        from kafkette.broker.protocol.codec import decode

        return decode(cls, buf, version)

    def encode(self, version: int) -> bytes:
        from kafkette.broker.protocol.codec import encode

        return encode(self, version)
