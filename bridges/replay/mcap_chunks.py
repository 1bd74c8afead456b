"""Fast raw message iteration over an indexed MCAP file, in log-time order.

mcap's own reader builds a Python object for every record of a chunk (also for topics we
do not want) and orders messages through a heap with a Python ``__lt__``: for odometry
this costs about as much as decoding the messages. Here each decompressed chunk is
scanned with ``struct`` (only wanted channels become tuples) and sorted with
``list.sort``. That gives exact log-time order only when chunks do not overlap in time,
so :func:`iter_raw_messages` returns None otherwise and the caller uses mcap's reader.

A chunk is checked as mcap's reader checks it with ``validate_crcs=True`` (its CRC, when the
writer stored one) and every record must lie inside it: a damaged chunk raises (the caller
reports the recording as damaged, docs/replay.md) instead of yielding wrong data or silently
losing the rest of the chunk.
"""

from __future__ import annotations

import io
import itertools
import struct
from collections.abc import Iterator
from operator import itemgetter
from typing import Any, BinaryIO

from mcap.data_stream import ReadDataStream
from mcap.exceptions import McapError
from mcap.records import Chunk
from mcap.stream_reader import get_chunk_data_stream

__all__ = ["ChunkDamaged", "iter_raw_messages"]

_MESSAGE_OPCODE = 0x05
_RECORD_HEADER = struct.Struct("<BQ")  # opcode, length
_MESSAGE_FIXED = struct.Struct("<HIQQ")  # channel id, sequence, log time, publish time
_by_log_time = itemgetter(0)

RawMessage = tuple[int, int, bytes]  # (log_time, channel_id, data)


def iter_raw_messages(
    stream: BinaryIO, summary: Any, channel_ids: set[int], start: int | None, end: int | None
) -> Iterator[RawMessage] | None:
    """Messages of ``channel_ids`` with ``start <= log_time < end``; None when not applicable."""
    chunks = sorted(summary.chunk_indexes, key=lambda c: (c.message_start_time, c.chunk_start_offset))
    if not chunks or any(b.message_start_time < a.message_end_time for a, b in itertools.pairwise(chunks)):
        return None
    wanted = [c for c in chunks if (start is None or c.message_end_time >= start)
              and (end is None or c.message_start_time < end)]
    return _iterate(stream, wanted, channel_ids, start, end)


def _iterate(stream: BinaryIO, chunks: list[Any], channel_ids: set[int], start: int | None,
             end: int | None) -> Iterator[RawMessage]:
    for index in chunks:
        if index.message_index_offsets and not channel_ids.intersection(index.message_index_offsets):
            continue  # the chunk holds none of our channels
        stream.seek(index.chunk_start_offset + 1 + 8, io.SEEK_SET)
        data, length = get_chunk_data_stream(Chunk.read(ReadDataStream(stream)), validate_crc=True)
        messages = _scan(data.read(length), channel_ids, start, end, index.chunk_start_offset)
        messages.sort(key=_by_log_time)
        yield from messages


class ChunkDamaged(McapError):
    """A record inside a chunk does not fit in it (its header was overwritten)."""


def _scan(data: bytes, channel_ids: set[int], start: int | None, end: int | None,
          chunk_offset: int = 0) -> list[RawMessage]:
    low = -1 if start is None else start
    high = 1 << 64 if end is None else end
    found: list[RawMessage] = []
    offset, size = 0, len(data)
    unpack_header, unpack_message = _RECORD_HEADER.unpack_from, _MESSAGE_FIXED.unpack_from
    while offset < size:
        body = offset + 9
        if body > size:
            raise ChunkDamaged(f"the chunk at byte {chunk_offset} ends inside a record header (at byte {offset} "
                               f"of its {size} bytes)")
        opcode, length = unpack_header(data, offset)
        if length > size - body or (opcode == _MESSAGE_OPCODE and length < _MESSAGE_FIXED.size):
            raise ChunkDamaged(f"the chunk at byte {chunk_offset} holds a record (opcode {opcode:#04x}, at byte "
                               f"{offset} of its {size} bytes) whose length {length} does not fit in it")
        if opcode == _MESSAGE_OPCODE:
            channel_id, _sequence, log_time, _publish = unpack_message(data, body)
            if channel_id in channel_ids and low <= log_time < high:
                found.append((log_time, channel_id, data[body + 22 : body + length]))
        offset = body + length
    return found
