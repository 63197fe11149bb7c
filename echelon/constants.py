"""Numbers shared by the data plane, the controller, the host agent and the simulator.

They mirror ``p4src/include/constants.p4`` and ``docs/wire-format.md``; a test
checks that both files agree.
"""

from typing import Final

#: UDP destination port that carries an echelon header (0xEC00).
ECHELON_UDP_PORT: Final = 0xEC00
#: The only echelon header version the switch accepts.
ECHELON_VERSION: Final = 1
#: IPv4 header length (32-bit words) without options; the switch drops any other IHL.
IPV4_IHL_MIN: Final = 5
#: The IP version the switch forwards; other versions in an IPv4 ethertype are dropped.
IPV4_VERSION: Final = 4
#: Length of the echelon header in bytes.
ECHELON_HEADER_LEN: Final = 16
#: Header lengths (bytes) in front of it: Ethernet II without a VLAN tag, IPv4 without
#: options (the only IHL the switch forwards), UDP.
ETHERNET_HEADER_LEN: Final = 14
IPV4_HEADER_LEN: Final = IPV4_IHL_MIN * 4
UDP_HEADER_LEN: Final = 8
#: MTU of every emulated link (jumbo frames): the hosts' agents may send one packet of up to
#: this less the IPv4 and UDP headers, and the emulation's queue disciplines take it whole.
LINK_MTU: Final = 9000
#: Header bytes of every echelon packet (58), as tc/htb counts it: what the wire carries
#: besides the flow's data.
PACKET_HEADER_LEN: Final = (
    ETHERNET_HEADER_LEN + IPV4_HEADER_LEN + UDP_HEADER_LEN + ECHELON_HEADER_LEN
)

#: Strict-priority levels as simple_switch numbers them: 7 is served first, 0 last.
NUM_PRIORITIES: Final = 8
PRIO_BEST_EFFORT: Final = 0
PRIO_MAX: Final = 7
#: Levels available to registered echelons (best-effort keeps level 0).
ECHELON_LEVELS: Final = tuple(range(1, PRIO_MAX + 1))

#: Field widths of the echelon header (bits) and data-plane keys.
ECHELON_ID_BITS: Final = 16
DEADLINE_BITS: Final = 32
MAX_ECHELON_ID: Final = (1 << ECHELON_ID_BITS) - 1
MAX_DEADLINE_US: Final = (1 << DEADLINE_BITS) - 1

#: Slots of the ``unprioritized_pkts`` counter: every packet that gets no echelon
#: priority is counted in exactly one, named after why. ``UNPRIO_DROP_*`` slots
#: count packets the switch drops; the others are forwarded at best effort.
UNPRIO_PLAIN: Final = 0  # IPv4 without an echelon header (incl. non-first fragments)
UNPRIO_UNKNOWN_ID: Final = 1  # echelon ID nobody registered
UNPRIO_SPOOFED_SOURCE: Final = 2  # echelon ID registered, not for this source
UNPRIO_MALFORMED_ECHELON: Final = 3  # truncated or bad-version echelon header
UNPRIO_DROP_NOT_IPV4: Final = 4  # no (complete) IPv4 header
UNPRIO_DROP_TTL_EXPIRED: Final = 5  # TTL <= 1 on arrival
UNPRIO_DROP_IHL_NOT_5: Final = 6  # IHL != 5: options, or an invalid IHL < 5
UNPRIO_DROP_IPV4_VERSION: Final = 7  # IPv4 version field != 4
UNPRIO_DROP_IPV4_CHECKSUM: Final = 8  # wrong incoming IPv4 header checksum
#: Size of the counter (slots beyond the last reason stay zero).
UNPRIO_COUNT: Final = 16
#: Slot names in index order, as the controller reports them.
UNPRIO_NAMES: Final = (
    "plain",
    "unknown_id",
    "spoofed_source",
    "malformed_echelon",
    "drop_not_ipv4",
    "drop_ttl_expired",
    "drop_ihl_not_5",
    "drop_ipv4_version",
    "drop_ipv4_checksum",
)

#: Per-echelon counter slots: ``class_id`` is exactly CLASS_ID_BITS wide in the P4
#: program, so a slot can never index past the ``echelon_pkts`` counter.
CLASS_ID_BITS: Final = 10
ECHELON_CLASSES: Final = 1 << CLASS_ID_BITS

#: Queue telemetry registers of the egress (p4src/include/ingress.p4): one cell per
#: (egress port, priority) at ``port * NUM_PRIORITIES + priority``, ports below
#: ``QUEUE_TELEMETRY_PORTS``. Depths in packets, sojourn in microseconds.
QUEUE_TELEMETRY_PORTS: Final = 64
QUEUE_TELEMETRY_CELLS: Final = QUEUE_TELEMETRY_PORTS * NUM_PRIORITIES
REG_QUEUE_DEPTH: Final = "EchelonEgress.queue_depth"
REG_QUEUE_DEPTH_MAX: Final = "EchelonEgress.queue_depth_max"
REG_QUEUE_SOJOURN: Final = "EchelonEgress.queue_sojourn_us"


def dscp_for_priority(prio: int) -> int:
    """DSCP the switch writes for a priority level: class selector CS<prio> (prio << 3)."""
    if not 0 <= prio <= PRIO_MAX:
        raise ValueError(f"priority {prio} outside 0..{PRIO_MAX}")
    return prio << 3


def priority_for_dscp(dscp: int) -> int:
    """Inverse of :func:`dscp_for_priority`, for reading decisions off egress packets."""
    if dscp & 0b111 or not 0 <= dscp < 64:
        raise ValueError(f"DSCP {dscp} is not a class selector the switch writes")
    return dscp >> 3
