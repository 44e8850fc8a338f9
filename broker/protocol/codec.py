"""Readers and writers for generated structs, compiled per (class, version) on first use.

Each struct version gets a straight-line Python function built from its
``FIELDS``: consecutive fixed-width fields are packed with one precompiled
``struct.Struct``, compact (flexible) encodings use unsigned varints, and
tagged fields are written only when they differ from their defaults.

Readers take a memoryview and return ``(object, new_position)``; the
``records`` type comes back as a memoryview slice of the input (no copy).
Writers append to a bytearray; a ``records`` value that is a
:class:`~kafkette.broker.protocol.types.FileRegion` is not copied but noted
as a *splice* ``(position, region)`` so the server sends it straight from the file.
An element of a struct array whose class is a subclass of the declared struct
keeps its own bytes: it is written by its ``encoded(version, flexible)``, which
:func:`encode_struct` serves (a Metadata entry sent unchanged to many clients).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any, TypeVar
from uuid import UUID

from kafkette.broker.protocol.types import EMPTY, Field, Message, Struct, in_range
from kafkette.broker.protocol.varint import encode_uvarint as uvarint

T = TypeVar("T", bound=Message)

Splices = list[tuple[int, Any]]
Reader = Callable[[memoryview, int], tuple[Any, int]]
Writer = Callable[[Any, bytearray, Splices], None]

FIXED = {
    "bool": ("?", 1),
    "int8": ("b", 1),
    "int16": ("h", 2),
    "int32": ("i", 4),
    "int64": ("q", 8),
    "uint16": ("H", 2),
    "uint32": ("I", 4),
    "float64": ("d", 8),
}

INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")
INT8 = struct.Struct(">b")
NULL16 = INT16.pack(-1)
NULL32 = INT32.pack(-1)


class DecodeError(ValueError):
    """Bytes that do not form a valid message of the expected type and version."""


def read_uvarint(buf: memoryview, pos: int) -> tuple[int, int]:
    byte = buf[pos]
    if byte < 0x80:
        return byte, pos + 1
    value = byte & 0x7F
    shift = 7
    while True:
        pos += 1
        byte = buf[pos]
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos + 1
        shift += 7
        if shift > 28:
            raise DecodeError("unsigned varint longer than 5 bytes")


def _read_uuid(buf: memoryview, pos: int) -> UUID:
    raw = bytes(buf[pos : pos + 16])
    if len(raw) != 16:
        raise DecodeError("truncated uuid")
    return UUID(bytes=raw)


def _check_end(buf: memoryview, end: int) -> int:
    if end > len(buf):
        raise DecodeError(f"field runs {end - len(buf)} bytes past the end of the message")
    return end


def _check_count(buf: memoryview, pos: int, count: int) -> int:
    if count > len(buf) - pos:
        raise DecodeError(f"array of {count} elements cannot fit in {len(buf) - pos} bytes")
    return count


_RUNTIME = {
    "DecodeError": DecodeError,
    "read_uvarint": read_uvarint,
    "uvarint": uvarint,
    "_read_uuid": _read_uuid,
    "_check_end": _check_end,
    "_check_count": _check_count,
    "INT16": INT16,
    "INT32": INT32,
    "INT8": INT8,
    "NULL16": NULL16,
    "NULL32": NULL32,
    "struct": struct,
    "UUID": UUID,
    "EMPTY": EMPTY,
}

_readers: dict[tuple[type[Struct], int, bool], Reader] = {}
_writers: dict[tuple[type[Struct], int, bool], Writer] = {}


def _flexible_for(field: Field, version: int, flexible: bool) -> bool:
    return in_range(version, field.flexible) if field.flexible is not None else flexible


def _is_tagged(field: Field, version: int, flexible: bool) -> bool:
    return flexible and field.tag is not None and in_range(version, field.tagged)


def _tag_number(field: Field) -> int:
    if field.tag is None:
        raise ValueError(f"{field.name} is not a tagged field")
    return field.tag


class _Source:
    """Accumulates the lines of one compiled function and the names it refers to."""

    def __init__(self, prefix: str) -> None:
        self.lines: list[str] = []
        self.names: dict[str, Any] = dict(_RUNTIME)
        self._prefix = prefix
        self._counter = 0

    def emit(self, indent: int, line: str) -> None:
        self.lines.append("    " * indent + line)

    def name(self, value: Any, hint: str) -> str:
        self._counter += 1
        key = f"{self._prefix}_{hint}_{self._counter}"
        self.names[key] = value
        return key

    def fresh(self, hint: str) -> str:
        self._counter += 1
        return f"{hint}{self._counter}"

    def compile(self, function_name: str) -> Callable[..., Any]:
        namespace = dict(self.names)
        exec("\n".join(self.lines), namespace)
        compiled: Callable[..., Any] = namespace[function_name]
        return compiled


def _default_expr(src: _Source, field: Field) -> str:
    if field.kind == "array":
        return "[]" if field.default == EMPTY else "None"
    if field.kind == "struct":
        return f"{src.name(field.element, 'cls')}()" if field.default == EMPTY else "None"
    if isinstance(field.default, (UUID, bytes, str, int, float, bool)) or field.default is None:
        return src.name(field.default, "default")
    raise TypeError(f"unexpected default {field.default!r} for {field.name}")


# ---------------------------------------------------------------------------
# Readers


def reader(cls: type[Struct], version: int, flexible: bool) -> Reader:
    key = (cls, version, flexible)
    found = _readers.get(key)
    if found is None:
        found = _compile_reader(cls, version, flexible)
        _readers[key] = found
    return found


def _read_length(src: _Source, indent: int, target: str, compact: bool, wide: bool) -> None:
    """Set ``target`` to a length or count (-1 for null)."""
    if compact:
        src.emit(indent, f"{target}, pos = read_uvarint(buf, pos)")
        src.emit(indent, f"{target} -= 1")
    else:
        packer = "INT32" if wide else "INT16"
        src.emit(indent, f"{target} = {packer}.unpack_from(buf, pos)[0]")
        src.emit(indent, f"pos += {4 if wide else 2}")


def _read_value(src: _Source, indent: int, target: str, field: Field, kind: Any, version: int, compact: bool) -> None:
    """Emit code reading one value of ``kind`` (a primitive name or struct class) into ``target``."""
    nullable = in_range(version, field.nullable)
    if isinstance(kind, type):
        sub = src.name(reader(kind, version, compact), "read")
        src.emit(indent, f"{target}, pos = {sub}(buf, pos)")
    elif kind in FIXED:
        fmt, size = FIXED[kind]
        packer = src.name(struct.Struct(">" + fmt), "fixed")
        src.emit(indent, f"{target} = {packer}.unpack_from(buf, pos)[0]")
        src.emit(indent, f"pos += {size}")
    elif kind == "uuid":
        src.emit(indent, f"{target} = _read_uuid(buf, pos)")
        src.emit(indent, "pos += 16")
    elif kind in ("string", "bytes", "records"):
        length = src.fresh("n")
        _read_length(src, indent, length, compact, wide=kind != "string")
        src.emit(indent, f"if {length} < 0:")
        if nullable:
            src.emit(indent + 1, f"{target} = None")
        else:
            src.emit(indent + 1, f"raise DecodeError('non-nullable field {field.name} is null')")
        src.emit(indent, "else:")
        src.emit(indent + 1, f"end = _check_end(buf, pos + {length})")
        conversion = {
            "string": "str(buf[pos:end], 'utf-8')",
            "bytes": "bytes(buf[pos:end])",
            "records": "buf[pos:end]",
        }
        src.emit(indent + 1, f"{target} = {conversion[kind]}")
        src.emit(indent + 1, "pos = end")
    else:
        raise TypeError(f"unknown kind {kind!r}")


def _read_field(src: _Source, indent: int, target: str, field: Field, version: int, flexible: bool) -> None:
    compact = _flexible_for(field, version, flexible)
    if field.kind == "array":
        count = src.fresh("count")
        _read_length(src, indent, count, compact, wide=True)
        src.emit(indent, f"if {count} < 0:")
        if in_range(version, field.nullable):
            src.emit(indent + 1, f"{target} = None")
        else:
            src.emit(indent + 1, f"raise DecodeError('non-nullable array {field.name} is null')")
        src.emit(indent, "else:")
        src.emit(indent + 1, f"_check_count(buf, pos, {count})")
        element = field.element
        if isinstance(element, str) and element in FIXED:
            fmt, size = FIXED[element]
            src.emit(indent + 1, f"{target} = list(struct.unpack_from('>%d{fmt}' % {count}, buf, pos))")
            src.emit(indent + 1, f"pos += {size} * {count}")
        else:
            src.emit(indent + 1, f"{target} = []")
            src.emit(indent + 1, f"append = {target}.append")
            src.emit(indent + 1, f"for _ in range({count}):")
            item = src.fresh("item")
            _read_value(src, indent + 2, item, field, element, version, compact)
            src.emit(indent + 2, f"append({item})")
    elif field.kind == "struct" and in_range(version, field.nullable):
        src.emit(indent, "marker = INT8.unpack_from(buf, pos)[0]")
        src.emit(indent, "pos += 1")
        src.emit(indent, "if marker < 0:")
        src.emit(indent + 1, f"{target} = None")
        src.emit(indent, "else:")
        _read_value(src, indent + 1, target, field, field.element, version, compact)
    else:
        _read_value(
            src,
            indent,
            target,
            field,
            field.element if field.kind == "struct" else field.kind,
            version,
            compact,
        )


def _compile_reader(cls: type[Struct], version: int, flexible: bool) -> Reader:
    src = _Source("r")
    cls_name = src.name(cls, "cls")
    src.emit(0, "def read(buf, pos):")
    src.emit(1, f"obj = {cls_name}.__new__({cls_name})")
    regular: list[Field] = []
    tagged: list[Field] = []
    for field in cls.FIELDS:
        if _is_tagged(field, version, flexible):
            tagged.append(field)
        elif in_range(version, field.versions):
            regular.append(field)
    index = 0
    while index < len(regular):
        field = regular[index]
        run = _fixed_run(regular, index, version)
        if len(run) > 1:
            fmt = "".join(FIXED[item.kind][0] for item in run)
            packer = src.name(struct.Struct(">" + fmt), "fixed")
            targets = ", ".join(f"obj.{item.name}" for item in run)
            src.emit(1, f"({targets},) = {packer}.unpack_from(buf, pos)")
            src.emit(1, f"pos += {packer}.size")
            index += len(run)
            continue
        _read_field(src, 1, f"obj.{field.name}", field, version, flexible)
        index += 1
    for field in cls.FIELDS:
        if field not in regular:
            src.emit(1, f"obj.{field.name} = {_default_expr(src, field)}")
    if flexible:
        src.emit(1, "tag_count, pos = read_uvarint(buf, pos)")
        src.emit(1, "for _ in range(tag_count):")
        src.emit(2, "tag, pos = read_uvarint(buf, pos)")
        src.emit(2, "size, pos = read_uvarint(buf, pos)")
        src.emit(2, "tag_end = _check_end(buf, pos + size)")
        for position, field in enumerate(tagged):
            src.emit(2, f"{'if' if position == 0 else 'elif'} tag == {field.tag}:")
            _read_field(src, 3, f"obj.{field.name}", field, version, flexible)
        src.emit(2, "pos = tag_end")
    src.emit(1, "return obj, pos")
    return src.compile("read")


def _fixed_run(fields: list[Field], start: int, version: int) -> list[Field]:
    run = []
    for field in fields[start:]:
        if field.kind not in FIXED or field.flexible is not None:
            break
        run.append(field)
    return run


# ---------------------------------------------------------------------------
# Writers


def writer(cls: type[Struct], version: int, flexible: bool) -> Writer:
    key = (cls, version, flexible)
    found = _writers.get(key)
    if found is None:
        found = _compile_writer(cls, version, flexible)
        _writers[key] = found
    return found


def _write_length(src: _Source, indent: int, expr: str, compact: bool, wide: bool) -> None:
    if compact:
        src.emit(indent, f"out += uvarint({expr} + 1)")
    else:
        src.emit(indent, f"out += {'INT32' if wide else 'INT16'}.pack({expr})")


def _write_null(src: _Source, indent: int, compact: bool, wide: bool) -> None:
    null = "b'\\x00'" if compact else ("NULL32" if wide else "NULL16")
    src.emit(indent, f"out += {null}")


def _write_value(src: _Source, indent: int, value: str, field: Field, kind: Any, version: int, compact: bool) -> None:
    nullable = in_range(version, field.nullable)
    if isinstance(kind, type):
        sub = src.name(writer(kind, version, compact), "write")
        src.emit(indent, f"{sub}({value}, out, splices)")
    elif kind in FIXED:
        packer = src.name(struct.Struct(">" + FIXED[kind][0]), "fixed")
        src.emit(indent, f"out += {packer}.pack({value})")
    elif kind == "uuid":
        src.emit(indent, f"out += {value}.bytes")
    elif kind in ("string", "bytes", "records"):
        wide = kind != "string"
        src.emit(indent, f"if {value} is None:")
        if nullable:
            _write_null(src, indent + 1, compact, wide)
        else:
            src.emit(indent + 1, f"raise ValueError('non-nullable field {field.name} is None')")
        if kind == "string":
            src.emit(indent, "else:")
            encoded = src.fresh("encoded")
            src.emit(indent + 1, f"{encoded} = {value}.encode('utf-8')")
            _write_length(src, indent + 1, f"len({encoded})", compact, wide)
            src.emit(indent + 1, f"out += {encoded}")
        elif kind == "bytes":
            src.emit(indent, "else:")
            _write_length(src, indent + 1, f"len({value})", compact, wide)
            src.emit(indent + 1, f"out += {value}")
        else:
            src.emit(indent, f"elif hasattr({value}, 'file'):")
            _write_length(src, indent + 1, f"{value}.size", compact, wide)
            src.emit(indent + 1, f"splices.append((len(out), {value}))")
            src.emit(indent, "else:")
            _write_length(src, indent + 1, f"len({value})", compact, wide)
            src.emit(indent + 1, f"out += {value}")
    else:
        raise TypeError(f"unknown kind {kind!r}")


def _write_field(src: _Source, indent: int, value: str, field: Field, version: int, flexible: bool) -> None:
    compact = _flexible_for(field, version, flexible)
    if field.kind == "array":
        src.emit(indent, f"if {value} is None:")
        if in_range(version, field.nullable):
            _write_null(src, indent + 1, compact, wide=True)
        else:
            src.emit(indent + 1, f"raise ValueError('non-nullable array {field.name} is None')")
        src.emit(indent, "else:")
        _write_length(src, indent + 1, f"len({value})", compact, wide=True)
        element = field.element
        if isinstance(element, str) and element in FIXED:
            fmt = FIXED[element][0]
            src.emit(indent + 1, f"out += struct.pack('>%d{fmt}' % len({value}), *{value})")
        else:
            item = src.fresh("item")
            src.emit(indent + 1, f"for {item} in {value}:")
            if isinstance(element, type):
                src.emit(indent + 2, f"if {item}.__class__ is not {src.name(element, 'cls')}:")
                src.emit(indent + 3, f"out += {item}.encoded({version}, {compact})")
                src.emit(indent + 3, "continue")
            _write_value(src, indent + 2, item, field, element, version, compact)
    elif field.kind == "struct" and in_range(version, field.nullable):
        src.emit(indent, f"if {value} is None:")
        src.emit(indent + 1, "out += b'\\xff'")
        src.emit(indent, "else:")
        src.emit(indent + 1, "out += b'\\x01'")
        _write_value(src, indent + 1, value, field, field.element, version, compact)
    else:
        _write_value(
            src,
            indent,
            value,
            field,
            field.element if field.kind == "struct" else field.kind,
            version,
            compact,
        )


def _compile_writer(cls: type[Struct], version: int, flexible: bool) -> Writer:
    src = _Source("w")
    src.emit(0, "def write(obj, out, splices):")
    regular = [f for f in cls.FIELDS if in_range(version, f.versions) and not _is_tagged(f, version, flexible)]
    tagged = sorted((f for f in cls.FIELDS if _is_tagged(f, version, flexible)), key=_tag_number)
    index = 0
    while index < len(regular):
        field = regular[index]
        run = _fixed_run(regular, index, version)
        if len(run) > 1:
            packer = src.name(struct.Struct(">" + "".join(FIXED[item.kind][0] for item in run)), "fixed")
            values = ", ".join(f"obj.{item.name}" for item in run)
            src.emit(1, f"out += {packer}.pack({values})")
            index += len(run)
            continue
        _write_field(src, 1, f"obj.{field.name}", field, version, flexible)
        index += 1
    if flexible:
        if not tagged:
            src.emit(1, "out += b'\\x00'")
        else:
            src.emit(1, "tags = []")
            for field in tagged:
                src.emit(1, f"if {_differs_from_default(src, field, f'obj.{field.name}')}:")
                src.emit(2, "outer, out = out, bytearray()")
                _write_field(src, 2, f"obj.{field.name}", field, version, flexible)
                src.emit(2, f"tags.append(({field.tag}, out))")
                src.emit(2, "out = outer")
            src.emit(1, "out += uvarint(len(tags))")
            src.emit(1, "for tag, data in tags:")
            src.emit(2, "out += uvarint(tag)")
            src.emit(2, "out += uvarint(len(data))")
            src.emit(2, "out += data")
    if len(src.lines) == 1:
        src.emit(1, "pass")
    return src.compile("write")


_default_checkers: dict[type[Struct], Callable[[Any], bool]] = {}


def _differs_from_default(src: _Source, field: Field, value: str) -> str:
    """An expression true when ``value`` differs from the field's default (decides if a tagged field is written)."""
    if field.default is None:
        return f"{value} is not None"
    if field.kind == "array":
        return f"({value} is None or len({value}) > 0)"
    if field.kind == "struct":
        checker = src.name(default_checker(field.element), "is_default")
        return f"({value} is None or not {checker}({value}))"
    return f"{value} != {src.name(field.default, 'default')}"


def default_checker(cls: type[Struct]) -> Callable[[Any], bool]:
    """A compiled predicate: is this struct equal to a default instance? (No instance is built to compare.)"""
    found = _default_checkers.get(cls)
    if found is None:
        src = _Source("d")
        conditions = [f"not {_differs_from_default(src, field, f'obj.{field.name}')}" for field in cls.FIELDS]
        src.emit(0, "def is_default(obj):")
        src.emit(1, f"return {' and '.join(conditions) or 'True'}")
        found = _default_checkers[cls] = src.compile("is_default")
    return found


# ---------------------------------------------------------------------------
# Entry points


def decode(cls: type[T], buf: bytes | bytearray | memoryview, version: int, pos: int = 0) -> T:
    """Decode a whole message body of ``cls`` at ``version``."""
    obj, _ = decode_from(cls, memoryview(buf), pos, version)
    return obj


def decode_from(cls: type[T], buf: memoryview, pos: int, version: int) -> tuple[T, int]:
    """Decode ``cls`` starting at ``pos``; returns the object and the position after it."""
    read = reader(cls, version, cls.is_flexible(version))
    try:
        return read(buf, pos)
    except DecodeError:
        raise
    except (IndexError, struct.error, UnicodeDecodeError, ValueError) as exc:
        raise DecodeError(f"{cls.__name__} v{version}: {exc}") from exc


def encode_into(obj: Message, version: int, out: bytearray, splices: Splices) -> None:
    cls = type(obj)
    writer(cls, version, cls.is_flexible(version))(obj, out, splices)


def encode_struct(obj: Struct, cls: type[Struct], version: int, flexible: bool) -> bytes:
    """``obj`` written as the struct ``cls`` is inside a message of ``version``: the bytes a subclass that keeps
    them answers from ``encoded`` (see the module's docstring). File regions are not allowed here."""
    out = bytearray()
    splices: Splices = []
    writer(cls, version, flexible)(obj, out, splices)
    if splices:
        raise ValueError("encode_struct() cannot inline file regions")
    return bytes(out)


def encode(obj: Message, version: int) -> bytes:
    """Encode ``obj`` at ``version``; records given as file regions are not allowed here."""
    out = bytearray()
    splices: Splices = []
    encode_into(obj, version, out, splices)
    if splices:
        raise ValueError("encode() cannot inline file regions; use encode_into()")
    return bytes(out)
