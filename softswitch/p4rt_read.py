"""Building P4Runtime Read answers outside the service lock.

Under the lock :class:`softswitch.p4rt_server.P4RuntimeService` takes only
references: stored table entries (replaced, never mutated) and counter or
register cells as index ranges (a wildcard is one range, not a tuple per
cell). :func:`chunks` then builds the entities while gRPC sends them, a
response at a time, reading each cell's value as its entity is built.
"""

from __future__ import annotations

from collections.abc import Iterator

from finsy.proto import p4r

from softswitch import p4rt_codec as codec
from softswitch.bm.pipeline import CounterInfo, RegisterInfo
from softswitch.grpc_limits import READ_CHUNK_BYTES

#: Entities per ReadResponse at most (and at most READ_CHUNK_BYTES of them).
READ_CHUNK = 1000


class CounterCells(list[tuple[CounterInfo, range]]):
    """Counter cells to read, as ranges per counter (a wildcard is one range, not
    1,024 tuples); their values are read when the chunk is built."""


class RegisterCells(list[tuple[RegisterInfo, range]]):
    """Register cells to read, as ranges per register; values are read when built."""


Part = list[p4r.TableEntry] | CounterCells | RegisterCells


def entities(part: Part) -> Iterator[p4r.Entity]:
    if isinstance(part, CounterCells):
        for ci, cells in part:
            for i in cells:
                yield p4r.Entity(counter_entry=codec.counter_entry(ci, i))
    elif isinstance(part, RegisterCells):
        for ri, rcells in part:
            for i in rcells:
                yield p4r.Entity(register_entry=codec.register_entry(ri, i))
    else:
        for te in part:
            yield p4r.Entity(table_entry=te)


def chunks(parts: list[Part]) -> Iterator[p4r.ReadResponse]:
    """ReadResponses of at most READ_CHUNK entities and READ_CHUNK_BYTES each, built
    one at a time as gRPC sends them (at least one response, maybe empty)."""
    resp = p4r.ReadResponse()
    size = 0
    sent = False
    for part in parts:
        for ent in entities(part):
            n = ent.ByteSize()
            if resp.entities and (len(resp.entities) >= READ_CHUNK or size + n > READ_CHUNK_BYTES):
                yield resp
                sent = True
                resp, size = p4r.ReadResponse(), 0
            resp.entities.append(ent)
            size += n
    if resp.entities or not sent:
        yield resp
