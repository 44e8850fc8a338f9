"""Message classes by API key, imported on first use: a broker loads only the APIs it is asked for."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from importlib import import_module

from kafkette.broker.protocol.types import Message


class LazyMessages(Mapping[int, type[Message]]):
    """API key → message class; each class's module is imported the first time it is looked up."""

    def __init__(self, package: str, locations: Mapping[int, tuple[str, str]]) -> None:
        self._package = package
        self._locations = dict(locations)  # api key → (module, class name)
        self._loaded: dict[int, type[Message]] = {}

    def __getitem__(self, api_key: int) -> type[Message]:
        found = self._loaded.get(api_key)
        if found is None:
            module, name = self._locations[api_key]
            found = getattr(import_module(f"{self._package}.{module}"), name)
            self._loaded[api_key] = found
        return found

    def __iter__(self) -> Iterator[int]:
        return iter(self._locations)

    def __len__(self) -> int:
        return len(self._locations)
