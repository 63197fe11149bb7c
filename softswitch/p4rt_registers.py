"""P4Runtime ``RegisterEntry`` reads and writes, and the cells BMv2's Thrift register calls name.

Registers are the program's data-plane state (``register.read``/``write`` in
actions, :class:`softswitch.bm.actions.Register`); this module is how the
control plane sees them. P4Runtime 1.4.1's rules: ``register_id`` 0 reads
every register, an unset ``index`` every cell; cells read back as canonical
``P4Data.bitstring``s. A write is MODIFY only (INSERT/DELETE are
INVALID_ARGUMENT, there is nothing to create), an unset index writes every cell
and an unset ``data`` writes 0 (as a counter write without data resets it).
BMv2 1.15.1's P4Runtime server answers register Reads and Writes with
UNIMPLEMENTED; its Thrift ``bm_register_*`` calls (simple_switch_CLI's
``register_read``/``register_write``/``register_reset``) are served by
:mod:`softswitch.runtime` from the same cells.

Cells are plain ints in a list that the packet thread updates without a lock;
a read takes each cell's value as it is at that instant, as BMv2's does.
"""

from __future__ import annotations

from finsy.proto import p4r

from p4client.p4info import encode
from softswitch.bm.pipeline import Pipeline, RegisterInfo
from softswitch.errors import InvalidArgument
from softswitch.p4rt_codec import by_id, cell_ranges, decode_bytes


def register_cells(pl: Pipeline, re: p4r.RegisterEntry) -> list[tuple[RegisterInfo, range]]:
    """The cells an entry names, as an index range per register (a wildcard builds nothing)."""
    if re.register_id == 0:
        infos = list(pl.register_infos.values())
    else:
        infos = [by_id(pl.register_infos, "register_id", re.register_id)]
    index = re.index.index if re.HasField("index") else None
    return cell_ranges(infos, lambda ri: ri.name, lambda ri: ri.register.size, index)


def register_entry(info: RegisterInfo, index: int) -> p4r.RegisterEntry:
    re = p4r.RegisterEntry(register_id=info.id)
    re.index.index = index
    re.data.bitstring = encode(info.register.cells[index], info.bitwidth, info.name)
    return re


def write_register(pl: Pipeline, kind: int, re: p4r.RegisterEntry) -> None:
    """A MODIFY of register cells (see the module docstring for the rules)."""
    if kind != p4r.Update.MODIFY:
        raise InvalidArgument("register_entry", "registers only support MODIFY")
    if re.register_id == 0:
        raise InvalidArgument("register_entry.register_id", "a write needs a register id")
    info = by_id(pl.register_infos, "register_id", re.register_id)
    value = 0
    if re.HasField("data"):
        if re.data.WhichOneof("data") != "bitstring":
            raise InvalidArgument(f"{info.name}.data", "a register cell is a bitstring")
        value = decode_bytes(f"{info.name}.data", re.data.bitstring, info.bitwidth)
    for _info, cells in register_cells(pl, re):
        for i in cells:
            info.register.cells[i] = value
