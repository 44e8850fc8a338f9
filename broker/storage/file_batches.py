"""Walk the batches of a segment file with positioned reads, a chunk at a time."""

from __future__ import annotations

import os
from collections.abc import Iterator

from ..protocol.batch import (
    HEADER_SIZE,
    BatchHeader,
    CorruptBatchError,
    parse_header,
    peek_length,
    validate_batch,
)

# Header walks touch 61 bytes per batch, so small reads suffice; validation needs whole batches.
_HEADER_CHUNK = 16 * 1024
_VALIDATE_CHUNK = 1024 * 1024


def iter_file_batches(fd: int, start: int, end: int, validate: bool) -> Iterator[tuple[int, BatchHeader]]:
    """(position, header) of each batch in ``[start, end)`` of the file.

    ``start`` must be a batch boundary. Raises CorruptBatchError at the first
    batch that is torn (runs past ``end``) or, when ``validate``, fails its CRC;
    everything yielded before that is whole.
    """
    chunk = _VALIDATE_CHUNK if validate else _HEADER_CHUNK
    buf = b""
    buf_start = start
    position = start
    while position < end:
        offset = position - buf_start
        prefix = peek_length(buf, offset)
        if prefix is None or len(buf) - offset < HEADER_SIZE:
            buf = os.pread(fd, min(chunk, end - position), position)
            buf_start, offset = position, 0
            prefix = peek_length(buf, 0)
            if prefix is None:
                raise CorruptBatchError(f"torn batch at position {position}: {end - position} bytes left")
        size = prefix[1]
        if size < HEADER_SIZE or position + size > end:
            raise CorruptBatchError(f"torn batch at position {position}: declares {size} bytes")
        if validate and len(buf) - offset < size:
            buf = os.pread(fd, min(max(chunk, size), end - position), position)
            buf_start, offset = position, 0
        header = validate_batch(buf, offset) if validate else parse_header(buf, offset)
        yield position, header
        position += size
