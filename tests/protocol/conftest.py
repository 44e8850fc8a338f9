"""Lets the broker fuzz use the raw protocol client of the broker tests (tests/broker/raw_client.py)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "broker"))
