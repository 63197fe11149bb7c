"""P4Runtime writes of entities other than table entries: counters, registers, meters,
clone sessions.

Counter entries are MODIFY only (no index = every cell, no data = reset). Register
entries too (INSERT/DELETE are INVALID_ARGUMENT, there is nothing to create; no index
= every cell, no ``data`` = 0). Registers are the program's data-plane state
(``register.read``/``write`` in actions, :class:`softswitch.bm.actions.Register`):
P4Runtime 1.4.1's rules, ``register_id`` 0 reads every register, an unset ``index``
every cell, cells read back as canonical ``P4Data.bitstring``s
(:func:`softswitch.p4rt_codec.register_entry`). BMv2 1.15.1's P4Runtime server
answers register Reads and Writes with UNIMPLEMENTED; its Thrift ``bm_register_*``
calls (simple_switch_CLI's ``register_read``/``register_write``/``register_reset``)
are served by :mod:`softswitch.runtime` from the same cells. Cells are plain ints in
a list that the packet thread updates without a lock; a read takes each cell's value
as it is at that instant, as BMv2's does. Meter
entries too (no index = every cell, no config = unconfigured, all GREEN), and direct
meter entries (the cell of an existing table entry); a config's
``cir``/``pir`` are units per second and become BMv2's units per µs as
simple_switch_grpc converts them (``/ 1e6``), bursts as they are.

simple_switch_grpc maps a ``CloneSessionEntry`` to a BMv2 mirroring session; the
soft switch keeps its sessions in :attr:`Pipeline.mirroring` (session id -> egress
port), which clones read (:mod:`softswitch.bm.packet`) and Thrift's
``mirroring_session_add`` also writes. A session sends to one port: sessions with
several replicas (BMv2 makes a multicast group of them), truncation
(``packet_length_bytes``) and multicast group entries are UNIMPLEMENTED, by name.
Session ids are BMv2's: 0..32767.
"""

from __future__ import annotations

from finsy.proto import p4r

from softswitch import p4rt_codec as codec
from softswitch.bm.pipeline import Pipeline
from softswitch.errors import AlreadyExists, InvalidArgument, NotFound, Unimplemented

MAX_SESSION = (1 << 15) - 1


def _modify_only(kind: int, what: str, object_id: int) -> None:
    """A counter or register write: a MODIFY (there is nothing to create or delete) of
    one named object."""
    if kind != p4r.Update.MODIFY:
        raise InvalidArgument(f"{what}_entry", f"{what}s only support MODIFY")
    if object_id == 0:
        raise InvalidArgument(f"{what}_entry.{what}_id", f"a write needs a {what} id")


def write_counter(pl: Pipeline, kind: int, ce: p4r.CounterEntry) -> None:
    """Set the counter cells ``ce`` names (a MODIFY; the Thrift counter calls use it too)."""
    _modify_only(kind, "counter", ce.counter_id)
    packets = ce.data.packet_count if ce.HasField("data") else 0
    nbytes = ce.data.byte_count if ce.HasField("data") else 0
    for ci, cells in codec.entry_cells(pl.counters, "counter_id", ce):
        for idx in cells:
            ci.counter.set(idx, packets, nbytes)


def write_register(pl: Pipeline, kind: int, re: p4r.RegisterEntry) -> None:
    """Set the register cells ``re`` names (see the module docstring for the rules)."""
    _modify_only(kind, "register", re.register_id)
    info = codec.by_id(pl.register_infos, "register_id", re.register_id)
    value = 0
    if re.HasField("data"):
        if re.data.WhichOneof("data") != "bitstring":
            raise InvalidArgument(f"{info.name}.data", "a register cell is a bitstring")
        value = codec.decode_bytes(f"{info.name}.data", re.data.bitstring, info.bitwidth)
    for _info, cells in codec.entry_cells(pl.register_infos, "register_id", re):
        for i in cells:
            info.register.cells[i] = value


def write_meter(dec: codec.Decoder, kind: int, entity: p4r.Entity) -> None:
    """Configure (or reset) the meter cells a ``meter_entry`` or ``direct_meter_entry``
    names (a direct meter's cell: its table entry's, which must exist)."""
    if kind != p4r.Update.MODIFY:
        raise InvalidArgument(str(entity.WhichOneof("entity")), "meters only support MODIFY")
    pl = dec.pipeline
    if entity.WhichOneof("entity") == "direct_meter_entry":
        dme = entity.direct_meter_entry
        d = dec.table_entry(dme.table_entry, needs_action=False)
        dm = next((m for m in pl.direct_meters.values() if m.table == d.info.name), None)
        if dm is None:
            raise InvalidArgument(d.info.name, "the table has no direct meter")
        cell = dm.index.get((d.key, d.priority))
        if cell is None:
            raise NotFound(d.info.name, "no entry with this match key")
        array, cells, config = dm.array, range(cell, cell + 1), dme
    else:
        me = entity.meter_entry
        found = pl.meters.get(me.meter_id)
        if found is None:
            raise InvalidArgument("meter_entry.meter_id", f"unknown meter id {me.meter_id}")
        array, config = found, me
        if me.HasField("index"):
            if not 0 <= me.index.index < array.size:
                raise InvalidArgument(f"{array.name}.index", f"{me.index.index} out of range")
            cells = range(me.index.index, me.index.index + 1)
        else:
            cells = range(array.size)
    rates = None
    if config.HasField("config"):
        c = config.config
        if min(c.cir, c.cburst, c.pir, c.pburst) < 0:
            raise InvalidArgument(f"{array.name}.config", "negative rate or burst")
        rates = [(c.cir / 1e6, c.cburst), (c.pir / 1e6, c.pburst)]
    for i in cells:
        array.set_rates(i, rates)


def write_pre(pl: Pipeline, kind: int, pre: p4r.PacketReplicationEngineEntry) -> None:
    """Apply one INSERT/MODIFY/DELETE of a clone session to ``pl``'s sessions."""
    which = pre.WhichOneof("type")
    if which != "clone_session_entry":
        raise Unimplemented(f"packet_replication_engine_entry.{which}", "not supported")
    cs = pre.clone_session_entry
    where = f"clone_session_entry[{cs.session_id}]"
    if cs.session_id > MAX_SESSION:
        raise InvalidArgument(f"{where}.session_id", f"BMv2 sessions are 0..{MAX_SESSION}")
    sessions = pl.mirroring
    if kind == p4r.Update.DELETE:
        if sessions.pop(cs.session_id, None) is None:
            raise NotFound(where, "no such clone session")
        return
    if len(cs.replicas) != 1:
        raise Unimplemented(f"{where}.replicas", "a clone session sends to exactly one port")
    if cs.packet_length_bytes:
        raise Unimplemented(f"{where}.packet_length_bytes", "truncating clones")
    port = cs.replicas[0].egress_port
    if not 0 <= port < 511:
        raise InvalidArgument(f"{where}.replicas.egress_port", f"{port} is not a port")
    exists = cs.session_id in sessions
    if kind == p4r.Update.INSERT and exists:
        raise AlreadyExists(where, "clone session exists")
    if kind == p4r.Update.MODIFY and not exists:
        raise NotFound(where, "no such clone session")
    sessions[cs.session_id] = port
