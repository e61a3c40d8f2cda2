"""A large event's state is stored zlib-compressed; a small one, and every old one, as is.

The node-appending events carry each text a session holds, as JSON: on the
bench's coding-agent workload they were 40% of the store's bytes (issue 29).
eventsourcing's mapper compresses a state after the transcoder made it and
decompresses it before decoding; this compressor leaves a state under
``COMPRESS_AT`` bytes alone (a claim, a session's start: compressing would
save nothing) and marks what it compressed with ``MAGIC``, so a state stored
before (JSON, or a payload stub, ``projections.pg_payloads``) reads as it was
written.  Level 6: on the bench's texts 14% smaller than level 1, for well
under a millisecond a turn, spent under the session's lock but not the
events table's, and zlib lets go of the interpreter lock while it works.
"""

from __future__ import annotations

import zlib

from eventsourcing.persistence import Compressor

# No JSON state starts with a NUL; a payload stub starts with two (pg_payloads.STUB).
MAGIC = b"\x00\x01ctxz"
COMPRESS_AT = 256  # bytes of JSON: a smaller state would save a few dozen at most
LEVEL = 6


class StateCompressor(Compressor):
    """zlib above ``COMPRESS_AT`` bytes, marked with ``MAGIC``; anything unmarked as is."""

    def compress(self, data: bytes) -> bytes:
        if len(data) < COMPRESS_AT:
            return data
        packed = MAGIC + zlib.compress(data, LEVEL)
        return packed if len(packed) < len(data) else data

    def decompress(self, data: bytes) -> bytes:
        return zlib.decompress(data[len(MAGIC) :]) if data.startswith(MAGIC) else data
