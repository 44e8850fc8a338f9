"""Read a metrics endpoint back: what `kafkette top` shows and what tests assert on."""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families


@dataclass(frozen=True, slots=True)
class Sample:
    name: str
    labels: dict[str, str]
    value: float


class Scrape:
    """One scrape's samples, looked up by sample name (``_total``, ``_bucket`` included) and labels."""

    def __init__(self, text: str) -> None:
        self.samples = [
            Sample(s.name, dict(s.labels), s.value)
            for family in text_string_to_metric_families(text)
            for s in family.samples
        ]

    def matching(self, name: str, **labels: str) -> Iterator[Sample]:
        for sample in self.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                yield sample

    def total(self, name: str, **labels: str) -> float:
        """The sum over every sample of ``name`` with these labels (0 when there is none)."""
        return sum(sample.value for sample in self.matching(name, **labels))


def scrape(host: str, port: int, timeout: float = 5.0) -> Scrape:
    """GET the metrics; OSError when nothing answers."""
    with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=timeout) as response:
        return Scrape(response.read().decode())
