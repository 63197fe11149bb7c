"""The echelon header as a scapy layer, shared by tests, the host agent and users.

Layout (16 bytes, network byte order; see docs/wire-format.md)::

    0               1               2               3
    +-------+-------+---------------+-------------------------------+
    |version| flags |   reserved0   |          echelon_id           |
    +-------+-------+---------------+-------------------------------+
    |                         deadline_us                           |
    +-------------------------------+-------------------------------+
    |          flow_index           |           reserved1           |
    +-------------------------------+-------------------------------+
    |                              seq                              |
    +---------------------------------------------------------------+

Importing this module binds the layer to UDP destination port
``ECHELON_UDP_PORT`` so that ``Ether(raw_bytes)`` decodes it by name.
"""

from __future__ import annotations

import struct

from scapy.fields import BitField, IntField, ShortField, XByteField
from scapy.layers.inet import UDP
from scapy.packet import Packet, bind_layers

from echelon.constants import ECHELON_HEADER_LEN, ECHELON_UDP_PORT, ECHELON_VERSION

_STRUCT = struct.Struct("!BBHIHHI")
assert _STRUCT.size == ECHELON_HEADER_LEN


class Echelon(Packet):  # type: ignore[misc]
    """Echelon header: which EchelonFlow a packet belongs to and its ideal-finish offset."""

    name = "Echelon"
    fields_desc = [  # noqa: RUF012 (scapy reads this class attribute)
        BitField("version", ECHELON_VERSION, 4),
        BitField("flags", 0, 4),
        XByteField("reserved0", 0),
        ShortField("echelon_id", 0),
        IntField("deadline_us", 0),
        ShortField("flow_index", 0),
        ShortField("reserved1", 0),
        IntField("seq", 0),
    ]


bind_layers(UDP, Echelon, dport=ECHELON_UDP_PORT)


def pack_header(
    echelon_id: int, deadline_us: int, flow_index: int, seq: int, flags: int = 0
) -> bytes:
    """Encode a header without scapy: the host agent's hot path sends many packets."""
    return _STRUCT.pack(
        (ECHELON_VERSION << 4) | (flags & 0xF), 0, echelon_id, deadline_us, flow_index, 0, seq
    )


def unpack_header(data: bytes) -> tuple[int, int, int, int, int]:
    """Decode ``(version, echelon_id, deadline_us, flow_index, seq)`` from a UDP payload.

    Raises ``ValueError`` if ``data`` is shorter than the header.
    """
    if len(data) < ECHELON_HEADER_LEN:
        raise ValueError(f"echelon header needs {ECHELON_HEADER_LEN} bytes, got {len(data)}")
    vf, _, eid, deadline, index, _, seq = _STRUCT.unpack_from(data)
    return vf >> 4, eid, deadline, index, seq
