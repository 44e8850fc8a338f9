"""Lets these tests drive the real clients' helpers of tests/clients (the Java harness, confluent_io)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "clients"))
