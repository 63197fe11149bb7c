"""Numbers shared by the data plane, the controller, the host agent and the simulator.

They mirror ``p4src/include/constants.p4`` and ``docs/wire-format.md``; a test
checks that both files agree.
"""

from typing import Final

#: UDP destination port that carries an echelon header (0xEC00).
ECHELON_UDP_PORT: Final = 0xEC00
#: The only echelon header version the switch accepts.
ECHELON_VERSION: Final = 1
#: IPv4 header length (32-bit words) without options; the switch drops IPv4 with options.
IPV4_IHL_MIN: Final = 5
#: Length of the echelon header in bytes.
ECHELON_HEADER_LEN: Final = 16

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

#: Indices of the ``special_pkts`` counter.
SPECIAL_PLAIN: Final = 0
SPECIAL_UNKNOWN: Final = 1
SPECIAL_SPOOFED: Final = 2
SPECIAL_MALFORMED: Final = 3
SPECIAL_NON_IPV4: Final = 4
SPECIAL_TTL_EXPIRED: Final = 5
SPECIAL_IPV4_OPTIONS: Final = 6
SPECIAL_COUNT: Final = 8


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
