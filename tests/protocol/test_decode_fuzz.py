"""Decoder fuzz: every request type at every version, fed broken frames, fails only with DecodeError.

A request frame comes from a stranger, so `decode_request` must turn every byte string into either a
request or the codec's own `DecodeError` (which the server answers by closing that one connection):
any other exception, or a decode that allocates or loops without bound, is a bug. Three sweeps:
every prefix of a valid frame of every (request, version), an oversized length or array count or a
bad varint written at every position of one, and hypothesis mutations (`fuzz_frames.py`) of random
valid frames, plus random bodies behind any header. ``make fuzz`` runs many more hypothesis cases
through KAFKETTE_FUZZ_CASES. The same frames against a real broker: `test_frame_fuzz.py`.
"""

from __future__ import annotations

import contextlib
import os
import struct

import pytest
from fuzz_frames import HEADER_BYTES, PATCHES, broken_frames, every_request_version, valid_frame
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkette.broker.protocol.codec import DecodeError
from kafkette.broker.protocol.framing import decode_request
from kafkette.broker.protocol.messages import REQUESTS
from kafkette.broker.protocol.types import Message

CASES = int(os.environ.get("KAFKETTE_FUZZ_CASES", "300"))
REQUEST_VERSIONS = every_request_version()


def decodes_or_refuses(frame: bytes) -> None:
    """The property: a request or DecodeError, nothing else."""
    with contextlib.suppress(DecodeError):
        decode_request(memoryview(frame))


@pytest.mark.parametrize(("cls", "version"), REQUEST_VERSIONS, ids=lambda item: getattr(item, "NAME", str(item)))
def test_every_prefix_and_every_oversized_length(cls: type[Message], version: int) -> None:
    frame = valid_frame(cls, version, seed=version)
    decode_request(memoryview(frame))  # the untouched frame decodes
    for end in range(len(frame)):
        decodes_or_refuses(frame[:end])
    for position in range(HEADER_BYTES, len(frame)):
        for patch in PATCHES:
            decodes_or_refuses(frame[:position] + patch + frame[position + len(patch) :])


@settings(max_examples=CASES, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None)
@given(broken_frames(REQUEST_VERSIONS))
def test_mutated_frames_decode_or_raise_decode_error(frame: bytes) -> None:
    decodes_or_refuses(frame)


@settings(max_examples=CASES, deadline=None, database=None)
@given(st.sampled_from(sorted(REQUESTS)), st.integers(-1, 20), st.binary(max_size=128))
def test_random_bodies_decode_or_raise_decode_error(api_key: int, version: int, body: bytes) -> None:
    decodes_or_refuses(struct.pack(">hhi", api_key, version, 7) + body)
