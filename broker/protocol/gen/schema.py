"""Kafka's JSON message definitions, parsed into a small typed model for the code emitter."""

from __future__ import annotations

import json
import keyword
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafkette.broker.protocol.types import NO_VERSIONS, VERSION_MAX, Versions

PRIMITIVES = frozenset(
    {
        "bool",
        "int8",
        "int16",
        "int32",
        "int64",
        "uint16",
        "uint32",
        "float64",
        "string",
        "bytes",
        "records",
        "uuid",
    }
)


def parse_versions(text: str | None) -> Versions:
    """'3+' → (3, max), '1-4' → (1, 4), '2' → (2, 2), 'none' → the empty range."""
    if text is None or text == "none":
        return NO_VERSIONS
    text = text.strip()
    if text.endswith("+"):
        return int(text[:-1]), VERSION_MAX
    if "-" in text:
        low, high = text.split("-")
        return int(low), int(high)
    return int(text), int(text)


def snake_case(name: str) -> str:
    words = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()
    return f"{words}_" if keyword.iskeyword(words) else words


@dataclass(frozen=True)
class FieldSpec:
    name: str
    type: str
    versions: Versions
    nullable: Versions | None
    tag: int | None
    tagged: Versions | None
    default: str | None
    flexible: Versions | None
    about: str

    @property
    def py_name(self) -> str:
        return snake_case(self.name)

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def base_type(self) -> str:
        return self.type[2:] if self.is_array else self.type

    @property
    def is_struct(self) -> bool:
        return self.base_type not in PRIMITIVES


@dataclass
class StructSpec:
    name: str
    fields: list[FieldSpec]
    about: str = ""


@dataclass
class MessageSpec:
    name: str
    kind: str
    api_key: int | None
    valid: Versions
    flexible: Versions
    latest_unstable: bool
    source: str
    root: StructSpec
    # Nested and common structs, each before any struct that uses it.
    structs: list[StructSpec] = field(default_factory=list)

    @property
    def module_name(self) -> str:
        return snake_case(self.name)


def _strip_comments(text: str) -> str:
    return re.sub(r"^\s*//.*$", "", text, flags=re.MULTILINE)


def _field(raw: dict[str, Any], structs: list[StructSpec]) -> FieldSpec:
    if "fields" in raw:
        inner = [_field(child, structs) for child in raw["fields"]]
        structs.append(StructSpec(raw["type"].removeprefix("[]"), inner, raw.get("about", "")))
    tag = raw.get("tag")
    return FieldSpec(
        name=raw["name"],
        type=raw["type"],
        versions=parse_versions(raw["versions"]),
        nullable=parse_versions(raw["nullableVersions"]) if "nullableVersions" in raw else None,
        tag=int(tag) if tag is not None else None,
        tagged=parse_versions(raw["taggedVersions"]) if "taggedVersions" in raw else None,
        default=str(raw["default"]) if "default" in raw else None,
        flexible=parse_versions(raw["flexibleVersions"]) if "flexibleVersions" in raw else None,
        about=raw.get("about", ""),
    )


def load_message(path: Path) -> MessageSpec:
    raw = json.loads(_strip_comments(path.read_text()))
    structs: list[StructSpec] = []
    for common in raw.get("commonStructs", []):
        fields = [_field(child, structs) for child in common["fields"]]
        structs.append(StructSpec(common["name"], fields, common.get("about", "")))
    root_fields = [_field(child, structs) for child in raw.get("fields", [])]
    return MessageSpec(
        name=raw["name"],
        kind=raw["type"],
        api_key=raw.get("apiKey"),
        valid=parse_versions(raw["validVersions"]),
        flexible=parse_versions(raw.get("flexibleVersions", "none")),
        latest_unstable=bool(raw.get("latestVersionUnstable", False)),
        source=path.name,
        root=StructSpec(raw["name"], root_fields),
        structs=structs,
    )


def load_all(spec_dir: Path) -> list[MessageSpec]:
    return [load_message(path) for path in sorted(spec_dir.glob("*.json"))]
